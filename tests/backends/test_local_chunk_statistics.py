"""The local backend's one-chunk iteration of a small Gaussian mixture, which makes the
components' statistics with no accumulator (``ChunkStatistics``), against the accumulators' fold
it replaces: the same model bit for bit, the same log-likelihood, the same warnings and errors,
for every option the two share; and the forms it declines fold into accumulators."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mixfold
import mixfold.sklearn
from mixfold import (DiagonalGaussianDistribution, DiagonalGaussianEstimator, MixtureDistribution,
                     MixtureEstimator, MultivariateGaussianEstimator, NumericalError)
from mixfold.backends._interface import EncodedDataHandle
from mixfold.backends.local import LocalEncodedData
from mixfold.families.competing_units import one_chunk_statistics
from mixfold.precision.bands import FLOAT64
from tests.reliability.models import assert_bit_identical

OPTIONS = {
    "full": ({"full": True}, {}),
    "full-weights-prior": ({"full": True}, {"weights_prior": 2.0}),
    "full-relative-floor": ({"full": True, "reg_covar_mode": "relative", "reg_covar": 1e-3},
                            {}),
    "tied": ({"covariance_keys": "c", "full": True}, {}),
    "tied-pseudo-count": ({"covariance_keys": "c", "full": True}, {"pseudo_count": 1.5}),
    "tied-relative-floor": ({"covariance_keys": "c", "full": True, "reg_covar_mode": "relative",
                             "reg_covar": 1e-3}, {}),
    "diag": ({}, {}),
    "spherical": ({"spherical": True}, {}),
    "tied-variances": ({"covariance_keys": "c"}, {}),
    "relative-floor": ({"reg_covar_mode": "relative", "reg_covar": 1e-3}, {}),
    "mean-prior": ({"mean_prior": 0.5, "mean_weight": 2.0}, {}),
    "pseudo-count": ({}, {"pseudo_count": 1.5}),
    "weights-prior": ({}, {"weights_prior": 3.0}),
}


def _rows(offset: float = 0.0, seed: int = 0) -> np.ndarray:
    """Three overlapping clusters, far from the origin where ``offset`` says."""
    rng = np.random.default_rng(seed)
    centres = np.array([[-1.0, 0.0, 0.5], [1.0, 0.5, -0.5], [0.0, 1.5, 1.0]])
    return offset + np.vstack([rng.normal(c, [1.0, 0.2, 3.0], (70, 3)) for c in centres])


def _estimator(component: dict, mixture: dict, k: int = 3) -> MixtureEstimator:
    options = {key: v for key, v in component.items() if key != "full"}
    family = MultivariateGaussianEstimator if component.get("full") else \
        DiagonalGaussianEstimator
    return MixtureEstimator([family(**options)] * k, **mixture)


def _accumulators_step(handle: LocalEncodedData, est: MixtureEstimator,
                       model: MixtureDistribution):
    """The iteration through accumulators (the base class's: fold, tie keys, ``value()``)."""
    return EncodedDataHandle.estimate(handle, est, model, FLOAT64)


def _start(est: MixtureEstimator, x: np.ndarray, weights: np.ndarray | None = None):
    """A bound estimator, its handle and a model a few iterations in."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = mixfold.fit(x, est, max_iter=3, tol=0.0, seed=1, weights=weights, progress=False)
    bound = est.bind(fit.model.encoder())
    return LocalEncodedData(fit.model.encoder().encode(x), weights), bound, fit.model


@pytest.mark.parametrize("name", sorted(OPTIONS))
@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_one_iteration_gives_the_accumulators_bits(name: str, offset: float) -> None:
    component, mixture = OPTIONS[name]
    x = _rows(offset)
    weights = np.random.default_rng(3).uniform(0.2, 2.0, len(x))
    handle, est, model = _start(_estimator(component, mixture), x, weights)
    for _ in range(3):
        fast, fast_fold = handle.estimate(est, model, FLOAT64)
        slow, slow_fold = _accumulators_step(handle, est, model)
        assert assert_bit_identical(fast, slow) > 0
        assert fast_fold.log_density == slow_fold.log_density
        assert fast_fold.weight == slow_fold.weight and fast_fold.n_rows == slow_fold.n_rows
        model = fast


def test_the_statistics_are_the_accumulators_values() -> None:
    handle, est, model = _start(_estimator({}, {}), _rows())
    stats, ll = one_chunk_statistics(est, model, handle.enc, handle.weights, FLOAT64)
    folded = handle.fold(est, model, FLOAT64)
    value = folded.stats.value()
    mine = [stats.own[0]] + [a for child in stats.children for a in child.own]
    theirs = [value.own[0]] + [a for child in value.children for a in child.own]
    assert len(mine) == len(theirs) == 1 + 3 * 4
    for a, b in zip(mine, theirs):
        assert a.shape == b.shape and np.array_equal(a, b)
        assert np.array_equal(np.signbit(a), np.signbit(b))  # (+0 where an accumulator has it)
    assert float(np.dot(handle.weights, ll)) == pytest.approx(folded.log_density, rel=1e-15)


def test_a_whole_fit_and_its_warnings_are_the_accumulators(monkeypatch) -> None:
    x = np.vstack([_rows(), np.full((5, 3), 40.0)])  # a lone far cluster: a variance collapses
    est = _estimator({}, {"pseudo_count": 0.5}, k=4)
    with warnings.catch_warnings(record=True) as fast_warnings:
        warnings.simplefilter("always")
        fast = mixfold.fit(x, est, max_iter=15, tol=0.0, seed=0, progress=False)
    monkeypatch.setattr(DiagonalGaussianEstimator, "stack_statistics",
                        staticmethod(lambda *a: None))
    with warnings.catch_warnings(record=True) as slow_warnings:
        warnings.simplefilter("always")
        slow = mixfold.fit(x, est, max_iter=15, tol=0.0, seed=0, progress=False)
    assert_bit_identical(fast.model, slow.model)
    assert fast.log_likelihood == slow.log_likelihood
    assert fast.warnings == slow.warnings
    assert [str(w.message) for w in fast_warnings] == [str(w.message) for w in slow_warnings]


def test_a_row_no_component_scores_is_named_as_the_fold_names_it() -> None:
    comps = [DiagonalGaussianDistribution([0.0, 0.0], [1e-3, 1e-3])] * 2
    model = MixtureDistribution(comps, [0.5, 0.5])
    x = np.zeros((20, 2))
    x[13] = 1e200  # its squared distance overflows under both components
    est = _estimator({}, {}, k=2).bind(model.encoder())
    handle = LocalEncodedData(model.encoder().encode(x))
    with pytest.raises(NumericalError, match="row 13") as fast:
        handle.estimate(est, model, FLOAT64)
    with pytest.raises(NumericalError, match="row 13") as slow:
        _accumulators_step(handle, est, model)
    assert str(fast.value) == str(slow.value)


@pytest.mark.parametrize("case", ["missing entries", "keyed components", "float32",
                                  "two chunks", "full covariances of 12 coordinates"])
def test_the_forms_it_declines_fold_into_accumulators(case: str) -> None:
    x = _rows()
    component = {"keys": "k"} if case == "keyed components" else {}
    if case.startswith("full"):  # wider than the fused pass takes
        noise = np.random.default_rng(5).normal(size=(len(x), 9))
        x, component = np.hstack([x, noise]), {"full": True}
    if case == "missing entries":
        x[4, 1] = np.nan
        component = {"missing": True}
    est = _estimator(component, {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = mixfold.fit(x, est, max_iter=2, tol=0.0, seed=0, progress=False)
    bound = est.bind(fit.model.encoder())
    enc = fit.model.encoder().encode(x)
    precision = mixfold.precision.resolve_precision("float32" if case == "float32" else
                                                    "float64")
    if case != "two chunks":
        assert one_chunk_statistics(bound, fit.model, enc, np.ones(len(x)), precision) is None
    handle = LocalEncodedData(enc, chunk_rows=100 if case == "two chunks" else 262144)
    made = []
    original = bound.accumulator_factory

    def counted():
        made.append(1)
        return original()

    bound.accumulator_factory = counted  # (an instance attribute: this estimator only)
    handle.estimate(bound, fit.model, precision)
    assert made, case


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_wide_full_covariances_give_the_accumulators_bits(offset: float) -> None:
    """30 coordinates: the whitened pass's statistics (BLAS's products, one row block)."""
    rng = np.random.default_rng(11)
    x = offset + np.vstack([rng.normal(c, 1.0, (100, 30)) for c in (-1.0, 0.5, 2.0)])
    weights = rng.uniform(0.5, 1.5, len(x))
    handle, est, model = _start(_estimator({"full": True}, {}), x, weights)
    assert one_chunk_statistics(est, model, handle.enc, handle.weights, FLOAT64) is not None
    for _ in range(2):
        fast, fast_fold = handle.estimate(est, model, FLOAT64)
        slow, slow_fold = _accumulators_step(handle, est, model)
        assert assert_bit_identical(fast, slow) > 0
        assert fast_fold.log_density == slow_fold.log_density
        model = fast


@pytest.mark.parametrize("kind", ["full", "tied", "diag", "spherical"])
@pytest.mark.parametrize("wrapper", ["GaussianMixture", "BayesianGaussianMixture"])
def test_the_scikit_learn_wrappers_fit_the_accumulators_bits(kind: str, wrapper: str,
                                                            monkeypatch) -> None:
    """The wrappers' whole fits (a variational mixture's expected log-weights included)."""
    cls = getattr(mixfold.sklearn, wrapper)
    x = _rows(offset=50.0)

    def fitted() -> dict:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = cls(n_components=3, covariance_type=kind, max_iter=12, random_state=0).fit(x)
        return {name: getattr(est, name) for name in ("weights_", "means_", "covariances_",
                                                      "lower_bound_")}

    fast = fitted()
    for family in (DiagonalGaussianEstimator, MultivariateGaussianEstimator):
        monkeypatch.setattr(family, "stack_statistics", staticmethod(lambda *a: None))
    slow = fitted()
    for name in fast:
        assert np.array_equal(np.asarray(fast[name]).view(np.uint64),
                              np.asarray(slow[name]).view(np.uint64)), name
