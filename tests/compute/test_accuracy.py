"""compute/accuracy.py: the measured accuracy of a band -- statistics of one E-step against a
brute-force E-step, raw moments about the origin, normwise errors recomputed by hand, the
distance of two models against scipy, and the op count's documented formula."""

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from mixfold import (DiagonalGaussianDistribution, GaussianDistribution, MixtureDistribution,
                     MultivariateGaussianDistribution)
from mixfold.compute.accuracy import (StepError, density_distance, estep_op_count,
                                      fold_statistics, statistics_relative_error, step_error)
from mixfold.compute.encoded import ArrayEncoded


@pytest.fixture(scope="module")
def problem():
    model = MixtureDistribution([GaussianDistribution(5e4 - 1.0, 1.0),
                                 GaussianDistribution(5e4 + 2.0, 0.5)], [0.4, 0.6])
    x = 5e4 + np.random.default_rng(0).normal(0.5, 1.5, 800)
    w = np.random.default_rng(1).uniform(0, 2, 800)
    return model, model.encoder().encode(list(x)), x, w


def _raw_moments(model, x, w):
    """Per component (mass, sum r x, sum r x^2) of one float64 E-step."""
    s = np.stack([norm.logpdf(x, c.mu, np.sqrt(c.sigma2)) for c in model.components], 1)
    s += np.log(model.weights)
    r = np.exp(s - logsumexp(s, axis=1, keepdims=True)) * w[:, None]
    return r.sum(axis=0), r.T @ x, r.T @ (x * x)


@pytest.mark.parametrize("precision, rtol", [("float64", 1e-10), ("dd", 1e-10),
                                             ("float32", 1e-5)])
def test_raw_statistics_equal_brute_force(problem, precision, rtol):
    model, enc, x, w = problem
    got = fold_statistics(model, enc, precision, weights=w, raw=True)
    mass, sx, sxx = _raw_moments(model, x, w)
    flat = np.concatenate([g.ravel() for g in got])
    # the mixture's counts, then each component's weight, sum x, sum x^2 (about 0) and mass at 0
    np.testing.assert_allclose(flat[:2], mass, rtol=rtol)
    for k in range(2):
        comp = flat[2 + 4 * k: 6 + 4 * k]
        np.testing.assert_allclose(comp[:3], [mass[k], sx[k], sxx[k]], rtol=rtol)
        assert comp[3] == 0.0


def test_statistics_are_copies(problem):
    model, enc, _, w = problem
    a = fold_statistics(model, enc, "float64", weights=w)
    a[0][:] = -1.0
    assert (fold_statistics(model, enc, "float64", weights=w)[0] != -1.0).all()


def test_relative_error_is_the_normwise_error_of_the_worst_buffer(problem):
    model, enc, _, w = problem
    got = statistics_relative_error(model, enc, "float32", "dd", weights=w)
    band = fold_statistics(model, enc, "float32", weights=w, raw=True)
    ref = fold_statistics(model, enc, "dd", weights=w, raw=True)
    want = max(np.abs(b - r).max() / (np.abs(r).max() or 1.0) for b, r in zip(band, ref))
    assert got == pytest.approx(want, rel=1e-12)
    assert 0 < got < 1e-5
    assert statistics_relative_error(model, enc, "float64", "float64", weights=w) == 0.0


def test_step_error_of_a_band_against_itself_is_zero(problem):
    model, enc, _, w = problem
    assert step_error(model, enc, "float64", "float64", weights=w) == StepError(0.0, 0.0)
    e = step_error(model, enc, "float32", "float64", weights=w)
    assert 0 <= e.log_likelihood < 1e-6 and 0 <= e.density < 1e-6
    assert e.error == max(e.log_likelihood, e.density)


def test_density_distance_equals_scipy():
    a = GaussianDistribution(0.0, 1.0)
    b = GaussianDistribution(0.5, 2.0)
    x = np.random.default_rng(2).normal(0, 2, 500)
    w = np.random.default_rng(3).uniform(0, 1, 500)
    enc = ArrayEncoded(x)
    want = np.sum(w * np.abs(norm.logpdf(x, 0, 1) - norm.logpdf(x, 0.5, np.sqrt(2)))) / w.sum()
    assert density_distance(a, b, enc, w) == pytest.approx(want, rel=1e-13)
    assert density_distance(a, a, enc) == 0.0


def test_rows_both_models_rule_out_are_no_difference():
    a = GaussianDistribution(0.0, 1.0)
    enc = ArrayEncoded(np.array([0.0, 1e200]))  # log-density -inf under both
    with np.errstate(all="ignore"):
        got = density_distance(a, GaussianDistribution(0.0, 1.0), enc)
    assert got == 0.0


@pytest.mark.parametrize("model, ops", [
    (GaussianDistribution(0, 1), 6),
    (DiagonalGaussianDistribution([0.0] * 4, [1.0] * 4), 15),
    (MultivariateGaussianDistribution([0.0] * 3, np.eye(3)), 21),
    (MixtureDistribution([GaussianDistribution(0, 1)] * 3, [0.2, 0.3, 0.5]), 14),
    (MixtureDistribution([MixtureDistribution([GaussianDistribution(0, 1)] * 3, [0.2, 0.3, 0.5]),
                          DiagonalGaussianDistribution([0.0] * 2, [1.0] * 2)], [0.5, 0.5]), 21),
])
def test_op_count_follows_the_documented_formula(model, ops):
    # a D-dimensional leaf: 3D + 3 (D^2 + 3D + 3 with a full covariance); a mixture of K adds
    # K + 5 to its components' longest chain
    assert estep_op_count(model) == ops
