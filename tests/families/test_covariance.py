"""families/_covariance.py: covariances up to COMPILED_FACTOR_MAX_DIM factored by one compiled
call for a stack (the constructor and the M-step alike), their factors LAPACK's to round-off;
wider ones, or without numba, LAPACK's own bits; a covariance that is not positive definite
refused with the constructor's words."""

import numpy as np
import pytest
from scipy.linalg.lapack import dpotrf, dtrtrs

from mixfold import MultivariateGaussianDistribution
from mixfold.errors import ParameterError
from mixfold.families import _covariance

pytest.importorskip("numba")


def _covs(d: int, k: int = 3, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for j in range(k):
        basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
        out.append(basis @ np.diag(np.logspace(2, -2 - 2 * j, d)) @ basis.T)
    return np.array([0.5 * (c + c.T) for c in out])


def _lapack(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    low = dpotrf(cov, lower=1, clean=1)[0]
    up = dtrtrs(low, np.eye(len(cov)), lower=1)[0].T
    return low, up, float(np.log(up.diagonal()).sum())


@pytest.mark.parametrize("d", [1, 2, 5, 30, _covariance.COMPILED_FACTOR_MAX_DIM])
def test_compiled_factors_are_lapack_s_to_round_off(d):
    covs = _covs(d)
    mu = np.zeros((3, d))
    stacked = MultivariateGaussianDistribution.stack_of(mu.copy(), covs.copy())
    for dist, cov in zip(stacked, covs):
        one = MultivariateGaussianDistribution(np.zeros(d), cov)
        # the constructor and the M-step's stack: one factorisation, the same bits
        for name in ("cov", "cov_cholesky", "precision_cholesky"):
            assert np.array_equal(getattr(one, name), getattr(dist, name))
            assert not getattr(dist, name).flags.writeable
        assert one.log_det_precision_cholesky == dist.log_det_precision_cholesky
        low, up, log_det = _lapack(cov)
        cond = np.linalg.cond(cov)
        assert np.abs(dist.cov_cholesky - low).max() <= 1e-15 * d * cond * np.abs(low).max()
        assert np.abs(dist.precision_cholesky - up).max() <= 1e-15 * d * cond * np.abs(up).max()
        assert dist.log_det_precision_cholesky == pytest.approx(log_det, rel=1e-14 * d * cond)


@pytest.mark.parametrize("d", [_covariance.COMPILED_FACTOR_MAX_DIM + 1])
def test_wider_covariances_are_lapack_s_own_bits(d):
    cov = _covs(d, k=1)[0]
    dist = MultivariateGaussianDistribution(np.zeros(d), cov)
    low, up, log_det = _lapack(cov)
    assert np.array_equal(dist.cov_cholesky, low) and np.array_equal(dist.precision_cholesky, up)
    assert dist.log_det_precision_cholesky == log_det


def test_without_numba_every_width_is_lapack_s(monkeypatch):
    monkeypatch.setattr(_covariance, "full_gaussian_kernels", lambda: None)
    covs = _covs(4)
    for dist, cov in zip(MultivariateGaussianDistribution.stack_of(np.zeros((3, 4)), covs),
                         covs):
        low, up, _ = _lapack(cov)
        assert np.array_equal(dist.cov_cholesky, low)
        assert np.array_equal(dist.precision_cholesky, up)


def test_a_tied_stack_shares_one_factorisation():
    cov = _covs(6, k=1)
    a, b = MultivariateGaussianDistribution.stack_of(np.arange(12.0).reshape(2, 6), cov)
    assert a.precision_cholesky is b.precision_cholesky and a.cov is b.cov
    assert b.mu.tolist() == list(np.arange(6.0, 12.0))


@pytest.mark.parametrize("bad", [np.diag([1.0, -1.0, 2.0]), np.zeros((3, 3))])
def test_a_covariance_not_positive_definite_is_refused_in_the_constructor_s_words(bad):
    with pytest.raises(ParameterError, match="cov must be positive definite"):
        MultivariateGaussianDistribution(np.zeros(3), bad)
    with pytest.raises(ParameterError, match="cov must be positive definite"):
        MultivariateGaussianDistribution.stack_of(np.zeros((2, 3)), np.array([np.eye(3), bad]))
