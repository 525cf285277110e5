"""The Gaussian families' conjugate prior (families/_gaussian_prior.py): the M-step of
MultivariateGaussianEstimator and DiagonalGaussianEstimator against the closed form of the
maximum a posteriori, written out here with NumPy."""

import numpy as np
import pytest

import mixfold
from mixfold import DiagonalGaussianEstimator, MultivariateGaussianEstimator
from mixfold.errors import ParameterError


def _rows():
    rng = np.random.default_rng(4)
    return rng.normal([1.0, -2.0, 0.5], [1.0, 2.0, 0.3], size=(40, 3))


def test_full_covariance_map_equals_the_closed_form():
    x = _rows()
    m0, lam = np.array([0.5, 0.0, -1.0]), 3.0
    psi = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])
    nu = 4.0
    fit = mixfold.optimize(x, MultivariateGaussianEstimator(
        reg_covar=0.0, mean_prior=m0, mean_weight=lam, covariance_prior=psi,
        covariance_weight=nu), progress=False)
    n = len(x)
    mu = (lam * m0 + x.sum(axis=0)) / (lam + n)
    scatter = (x - mu).T @ (x - mu) + lam * np.outer(mu - m0, mu - m0)
    np.testing.assert_allclose(fit.mu, mu, rtol=1e-13)
    np.testing.assert_allclose(fit.cov, (psi + scatter) / (n + nu), rtol=1e-12)


@pytest.mark.parametrize("spherical", [False, True])
def test_diagonal_map_equals_the_closed_form(spherical):
    x = _rows()
    m0, lam = np.array([0.5, 0.0, -1.0]), 2.0
    psi, nu = np.array([0.5, 1.0, 2.0]), np.array([1.0, 3.0, 0.5])
    fit = mixfold.optimize(x, DiagonalGaussianEstimator(
        reg_covar=0.0, spherical=spherical, mean_prior=m0, mean_weight=lam,
        covariance_prior=psi, covariance_weight=nu), progress=False)
    n = len(x)
    mu = (lam * m0 + x.sum(axis=0)) / (lam + n)
    var = (psi + ((x - mu) ** 2).sum(axis=0) + lam * (mu - m0) ** 2) / (n + nu)
    np.testing.assert_allclose(fit.mu, mu, rtol=1e-13)
    np.testing.assert_allclose(fit.sigma2, np.full(3, var.mean()) if spherical else var,
                               rtol=1e-12)


def test_a_flat_prior_is_the_maximum_likelihood_bit_for_bit():
    x = _rows()
    plain = mixfold.optimize(x, MultivariateGaussianEstimator(), progress=False)
    zero = mixfold.optimize(x, MultivariateGaussianEstimator(
        mean_prior=[1.0, 2.0, 3.0], covariance_prior=0.0), progress=False)
    assert np.array_equal(plain.mu, zero.mu) and np.array_equal(plain.cov, zero.cov)


def test_a_prior_alone_makes_an_empty_component():
    # no rows: the mean is the prior mean, the covariance the prior scatter over its weight
    est = MultivariateGaussianEstimator(dim=2, reg_covar=0.0, mean_prior=[1.0, 2.0],
                                        mean_weight=1.0, covariance_prior=3.0,
                                        covariance_weight=2.0)
    empty = est.accumulator_factory().make().value()
    d = est.estimate(0.0, empty)
    assert d.mu.tolist() == [1.0, 2.0]
    np.testing.assert_allclose(d.cov, 1.5 * np.eye(2), rtol=1e-11)  # (the round-off floor)


def test_bad_prior_options_name_the_option():
    with pytest.raises(ParameterError, match="covariance_weight must be a number"):
        MultivariateGaussianEstimator(covariance_weight=[1.0, 2.0])
    with pytest.raises(ParameterError, match="covariance_prior must be symmetric"):
        MultivariateGaussianEstimator(covariance_prior=[[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(ParameterError, match="mean_weight must be a finite number >= 0"):
        DiagonalGaussianEstimator(mean_weight=-1.0)
    with pytest.raises(ParameterError, match="cannot be combined with missing=True"):
        DiagonalGaussianEstimator(missing=True, spherical=True)
    with pytest.raises(ValueError, match="covariance_prior must be a number or have shape"):
        mixfold.optimize(_rows(), DiagonalGaussianEstimator(covariance_prior=[1.0, 2.0]),
                         progress=False)
