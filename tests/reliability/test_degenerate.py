"""Degenerate fits end in a valid model, with a DegenerateFitWarning recorded in the FitResult."""

import math
import re
import warnings

import numpy as np
import pytest

import mixfold
from mixfold import (
    BernoulliEstimator,
    BinomialEstimator,
    CategoricalEstimator,
    DegenerateFitWarning,
    DiagonalGaussianEstimator,
    ExponentialEstimator,
    GammaEstimator,
    GaussianDistribution,
    GaussianEstimator,
    GeometricEstimator,
    LogGaussianEstimator,
    MixtureDistribution,
    MixtureEstimator,
    MultivariateGaussianEstimator,
    PoissonEstimator,
    RecordEstimator,
    VonMisesEstimator,
)

from .models import parameter_arrays


def assert_valid(result):
    """A finite model, a finite non-decreasing log-likelihood trace, a model that scores."""
    for path, values in parameter_arrays(result.model).items():
        assert np.isfinite(values).all(), path
    ll = np.asarray(result.log_likelihood)
    assert np.isfinite(ll).all()
    assert (np.diff(ll) >= -1e-9 * np.abs(ll[:-1]).clip(1.0)).all()
    assert result.stop_reason in ("converged", "max_iter")


def two_clusters(n=400):
    rng = np.random.default_rng(3)
    return np.concatenate([rng.normal(-4.0, 1.0, n // 2), rng.normal(4.0, 1.0, n // 2)])


def test_a_component_that_loses_all_its_rows_is_kept_with_weight_zero():
    x = two_clusters()
    init = MixtureDistribution([GaussianDistribution(-4, 1), GaussianDistribution(4, 1),
                                GaussianDistribution(1e4, 1.0)], [0.45, 0.45, 0.1])
    with pytest.warns(DegenerateFitWarning, match="mixture component 2 of 3 lost its rows"):
        res = mixfold.fit(x, MixtureEstimator([GaussianEstimator()] * 3), init=init,
                          progress=False)
    assert_valid(res)
    assert res.model.weights[2] == 0.0 and res.model.weights[:2].sum() == pytest.approx(1.0)
    lost = [w for w in res.warnings if "component 2 of 3 lost its rows" in w]
    assert len(lost) == 1 and lost[0].startswith("iteration 0:")  # recorded once, when it happened
    # the emptied component no longer changes the fit: same as the two-component fit
    two = mixfold.fit(x, MixtureEstimator([GaussianEstimator()] * 2),
                      init=MixtureDistribution(init.components[:2], [0.5, 0.5]), progress=False)
    assert res.log_likelihood[-1] == pytest.approx(two.log_likelihood[-1], rel=1e-9)


def test_with_a_pseudo_count_the_emptied_component_keeps_a_positive_weight():
    x = two_clusters()
    init = MixtureDistribution([GaussianDistribution(-4, 1), GaussianDistribution(4, 1),
                                GaussianDistribution(1e4, 1.0)], [0.45, 0.45, 0.1])
    est = MixtureEstimator([GaussianEstimator()] * 3, pseudo_count=1.0)
    with pytest.warns(DegenerateFitWarning, match="weight its pseudo-count gives it"):
        first = mixfold.fit(x, est, init=init, max_iter=1, progress=False)
    # no rows at all: the pseudo-count's weight, the family's default parameters
    assert first.model.weights[2] == 1.0 / (len(x) + 3.0)
    assert first.model.components[2] == GaussianDistribution(0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mixfold.fit(x, est, init=init, progress=False)
    # back in play: a valid model (MAP EM with a prior may stop on a likelihood decrease)
    assert res.stop_reason in ("converged", "max_iter", "decrease")
    assert all(np.isfinite(v).all() for v in parameter_arrays(res.model).values())
    assert (res.model.weights > 0).all()


def test_a_collapsing_variance_is_floored_and_reported():
    rng = np.random.default_rng(5)
    x = np.concatenate([np.full(40, 7.25), rng.normal(0.0, 1.0, 300)])  # 40 copies of one value
    init = MixtureDistribution([GaussianDistribution(7.25, 0.1), GaussianDistribution(0.0, 1.0)],
                               [0.1, 0.9])
    est = MixtureEstimator([GaussianEstimator(reg_covar=1e-6)] * 2)
    with pytest.warns(DegenerateFitWarning, match="variance collapsed"):
        res = mixfold.fit(x, est, init=init, progress=False)
    assert_valid(res)
    on_point = res.model.components[0]
    assert on_point.mu == pytest.approx(7.25) and on_point.sigma2 == pytest.approx(1e-6, rel=1e-6)
    assert any("variance collapsed" in w for w in res.warnings)


@pytest.mark.parametrize("est, collapsed", [
    (DiagonalGaussianEstimator(), "in dimension 1 (1 of 2)"),
    (MultivariateGaussianEstimator(), "in dimension 1 (1 of 2)"),
])
def test_a_constant_column_collapses_one_dimension(est, collapsed):
    x = np.column_stack([np.random.default_rng(1).normal(size=200), np.full(200, 3.0)])
    with pytest.warns(DegenerateFitWarning, match=re.escape(collapsed)):
        res = mixfold.fit(x, est, progress=False)
    assert_valid(res)


# every leaf family on identical rows, alone and as a 3-component mixture: a valid model
IDENTICAL = [
    ("Gaussian", [2.5] * 50, GaussianEstimator, True),
    ("LogGaussian", [2.5] * 50, LogGaussianEstimator, True),
    ("DiagonalGaussian", [[1.0, 2.0]] * 50, DiagonalGaussianEstimator, True),
    ("MultivariateGaussian", [[1.0, 2.0]] * 50, MultivariateGaussianEstimator, True),
    ("Poisson", [3] * 50, PoissonEstimator, False),
    ("Poisson at 0", [0] * 50, PoissonEstimator, False),
    ("Exponential", [2.0] * 50, ExponentialEstimator, False),
    ("Exponential at 0", [0.0] * 50, ExponentialEstimator, False),
    ("Gamma", [2.0] * 50, GammaEstimator, True),
    ("VonMises", [0.5] * 50, VonMisesEstimator, True),
    ("Categorical", ["a"] * 50, CategoricalEstimator, False),
    ("Bernoulli", [1] * 50, BernoulliEstimator, False),
    ("Binomial", [5] * 50, lambda: BinomialEstimator(5), False),
    ("Geometric", [1] * 50, GeometricEstimator, False),
]


@pytest.mark.parametrize("name, rows, make, warns", IDENTICAL, ids=[c[0] for c in IDENTICAL])
def test_all_rows_identical(name, rows, make, warns):
    for est in (make(), MixtureEstimator([make() for _ in range(3)])):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = mixfold.fit(rows, est, progress=False, max_iter=50)
        assert_valid(res)
        assert res.converged
        degenerate = [w for w in caught if issubclass(w.category, DegenerateFitWarning)]
        if warns:  # collapse onto one value: a floor or a cap binds and is reported
            assert degenerate and res.warnings
        assert math.isfinite(res.model.log_density(rows[0]))


@pytest.mark.parametrize("rows, make, k", [
    ([1.0, 2.0, 3.0], GaussianEstimator, 5),
    ([1.0], GaussianEstimator, 2),
    (np.random.default_rng(0).normal(size=(2, 3)), MultivariateGaussianEstimator, 4),
    (np.random.default_rng(0).normal(size=(2, 3)), DiagonalGaussianEstimator, 4),
    ([1, 4], PoissonEstimator, 3),
    (["a", "b"], CategoricalEstimator, 3),
    ([1.0, 4.0], GammaEstimator, 3),
    ([1.0, 2.0], VonMisesEstimator, 3),
    ([1.0, 2.0], ExponentialEstimator, 3),
    ([{"a": 1.0, "b": "x"}], lambda: RecordEstimator({"a": GaussianEstimator(),
                                                      "b": CategoricalEstimator()}), 3),
])
def test_more_components_than_rows(rows, make, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateFitWarning)
        res = mixfold.fit(rows, MixtureEstimator([make() for _ in range(k)]), progress=False,
                          max_iter=50)
    assert_valid(res)
    assert len(res.model.weights) == k and res.model.weights.sum() == pytest.approx(1.0)
    assert all(math.isfinite(res.model.log_density(r)) for r in rows)


def test_degenerate_warnings_do_not_fire_on_a_clean_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = mixfold.fit(two_clusters(), MixtureEstimator([GaussianEstimator()] * 2),
                          progress=False)
    assert res.warnings == []
