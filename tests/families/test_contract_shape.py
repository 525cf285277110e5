"""A leaf family is one short file: the methods a leaf written against
:mod:`mixfold.families.contract` writes (every ``def`` in its file's classes: distribution,
accumulator, estimator), at most :data:`MAX_METHODS` besides those of the opt-in capabilities
in :data:`CAPABILITY_METHODS`; the leaves not there yet hold their count (``CEILINGS``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mixfold.families
from mixfold.families.contract import LeafDistribution

FAMILIES = Path(mixfold.families.__file__).parent
MAX_METHODS = 8

#: What a family may do beyond the contract's core, each a capability's methods: censored and
#: truncated values (``IntervalLaw``), scoring in reduced bands (``RunsInBands``), scoring rows
#: far out relatively (``RelativeScoring``).
CAPABILITY_METHODS = frozenset({"scipy_law", "interval_points", "band_log_density",
                                "stack_relative_log_density", "stack_far_rows"})

#: The leaves in the short form (module -> its distribution's class name).
SHORT_LEAVES = {
    "poisson": "PoissonDistribution", "bernoulli": "BernoulliDistribution",
    "geometric": "GeometricDistribution", "weibull": "WeibullDistribution",
    "student_t": "StudentTDistribution", "gamma": "GammaDistribution",
    "log_gaussian": "LogGaussianDistribution",
}

#: Leaves on the contract that still write more, each at most its count today, and why.
CEILINGS = {
    "binomial": 9,  # its encoder is bounded by the trials n, declared by both roles
    "exponential": 11,  # statistics about a reference log scale, and closed-form interval means
    "beta": 11,  # its stacked paths are matrix products (the derived ones would sum otherwise)
    "gaussian": 12,  # the centred fused E-step, stacked update and double-double sums
}


def written_methods(module: str) -> list[str]:
    """The names of the methods the classes of ``families/<module>.py`` define."""
    tree = ast.parse((FAMILIES / f"{module}.py").read_text())
    return [f.name for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]


def core_methods(module: str) -> list[str]:
    return [m for m in written_methods(module) if m not in CAPABILITY_METHODS]


@pytest.mark.parametrize("module", sorted(SHORT_LEAVES))
def test_a_short_leaf_writes_at_most_eight_methods(module):
    core = core_methods(module)
    assert len(core) <= MAX_METHODS, f"families/{module}.py writes {len(core)}: {core}"


@pytest.mark.parametrize("module", sorted(CEILINGS))
def test_a_leaf_on_the_contract_writes_no_more_than_it_does(module):
    core = core_methods(module)
    assert len(core) <= CEILINGS[module], f"families/{module}.py writes {len(core)}: {core}"


@pytest.mark.parametrize("module, name", sorted(SHORT_LEAVES.items()))
def test_the_leaves_covered_are_on_the_contract(module, name):
    dist = getattr(mixfold.families, name)
    assert issubclass(dist, LeafDistribution) and dist.__module__.endswith(f".{module}")


def test_the_count_reads_the_classes_methods():
    assert written_methods("weibull") == [
        "__init__", "log_densities", "scipy_law", "_sample",  # the distribution
        "_add", "_add_model",  # its statistics: the start's, the E-step's under the model
        "__init__", "from_statistics"]  # the estimator
