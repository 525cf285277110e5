"""The leaves in the short form written by leaves2 stay short: the methods each family file
writes (every ``def`` in its classes' bodies; module-level helpers are not counted) stay at or
below the count reached, and each declares its statistics as a named record.

What each needs beyond the contract's eight, and why:

- Categorical (11): ``prob`` (public), ``decomposition`` (the model-parallel planner's cost),
  ``stack_log_density`` (one gather for K components: the fast path of records, P4) and
  ``initial_guess`` (a smoothed start: a level the sample lacks does not start at 0).
- NegativeBinomial (10): ``mean`` (public), ``decomposition``, ``stack_points`` (k-means++
  seeding on the log scale), and an accumulator of two methods (statistics under the current
  model: the latent rate's posterior).
- VonMises (12): ``stack_points``, and its statistics centred on a reference direction (the
  accumulator's ``_add``, ``_moved``, ``_rows_point``, ``stack_reference``).
- Dirichlet (11): ``dim`` (public), ``decomposition``, ``stack_log_density`` (one GEMM), and
  an accumulator of three (statistics added K at once and by the fused E-step).
- Multinomial (17): ``levels``, ``probs`` and ``log_probs`` (properties over the
  ``CategoricalDistribution`` it holds, which ``ExpectedMultinomial`` overrides),
  ``seq_log_density`` (sparse rows have no dense values), ``decomposition``,
  ``stack_log_density`` (one sparse product), ``initial_guess``, and an accumulator of five
  (sparse rows added through their nonzeros, K at once and by the fused E-step).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mixfold
from mixfold.families import categorical, dirichlet, multinomial, negative_binomial, von_mises

#: family module -> (its distribution, the most methods its file may write)
LIMITS = {
    categorical: (mixfold.CategoricalDistribution, 11),
    negative_binomial: (mixfold.NegativeBinomialDistribution, 10),
    von_mises: (mixfold.VonMisesDistribution, 12),
    dirichlet: (mixfold.DirichletDistribution, 11),
    multinomial: (mixfold.MultinomialDistribution, 17),
}


def written_methods(path: Path) -> dict[str, int]:
    """Class name -> the methods its body defines, for every class of the file."""
    tree = ast.parse(path.read_text())
    return {node.name: sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                           for n in node.body)
            for node in tree.body if isinstance(node, ast.ClassDef)}


@pytest.mark.parametrize("module", LIMITS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_leaf_file_writes_no_more_methods_than_it_reached(module):
    dist, limit = LIMITS[module]
    per_class = written_methods(Path(module.__file__))
    assert sum(per_class.values()) <= limit, per_class


@pytest.mark.parametrize("module", LIMITS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_leaf_names_its_statistics(module):
    dist, _ = LIMITS[module]
    record = dist.Statistics
    assert issubclass(record, tuple) and record._fields and record.__module__ == module.__name__
    assert dist.estimator_class.from_statistics is not mixfold.families.contract.LeafEstimator\
        .from_statistics  # the M-step reads the named record


def test_the_count_counts_methods_of_classes_only(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def helper():\n    pass\n\n\nclass A:\n    x = 1\n\n    def f(self):\n"
                   "        def inner():\n            pass\n\n    @property\n    def g(self):\n"
                   "        return 1\n")
    assert written_methods(src) == {"A": 2}
