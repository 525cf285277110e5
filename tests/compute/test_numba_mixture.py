"""The compiled small-mixture E-steps (diagonal, tied) against a brute-force float64 E-step
written from the Gaussian density: the centre, every row's log-density and the posteriors' sums
about it."""

import numpy as np
import pytest
from scipy.special import logsumexp

import mixfold.compute.kernels as kernels
from mixfold.compute.linear import gaussian_centre

pytestmark = pytest.mark.skipif(not kernels.kernels_available(), reason="numba not installed")


def _case(n, d, k, offset=0.0, seed=0):
    rng = np.random.default_rng(seed)
    mu = offset + rng.normal(0, 3, (k, d))
    s2 = rng.uniform(0.3, 2.0, (k, d))
    x = mu[rng.integers(0, k, n)] + rng.normal(size=(n, d)) * np.sqrt(s2[0])
    w = rng.uniform(0.2, 2.0, n)
    log_w = np.log(rng.dirichlet(np.ones(k) * 3))
    return x, w, mu, s2, log_w


def _reference(x, w, mu, s2, log_w, centre):
    scores = log_w - 0.5 * (((x[:, None, :] - mu) ** 2 / s2).sum(axis=2)
                            + np.log(2 * np.pi * s2).sum(axis=1))
    lse = logsumexp(scores, axis=1)
    resp = np.exp(scores - lse[:, None]) * w[:, None]
    xc = x - centre
    return lse, np.hstack([resp.T @ (xc * xc), resp.T @ xc, resp.sum(axis=0)[:, None]])


def _run(x, w, mu, s2, log_w):
    k, d = mu.shape
    centre, sums, lse = np.empty(d), np.empty((k, 2 * d + 1)), np.empty(len(x))
    ok = kernels.mixture_kernels()["diagonal_estep"](x, w, mu, s2, log_w, centre, sums, lse)
    return ok, centre, sums, lse


@pytest.mark.parametrize("n, d, k, offset", [(150, 4, 3, 0.0), (1797, 64, 10, 0.0),
                                             (300, 3, 2, 1e6), (1, 1, 1, 0.0)])
def test_compiled_estep_is_the_float64_estep(n, d, k, offset):
    x, w, mu, s2, log_w = _case(n, d, k, offset)
    ok, centre, sums, lse = _run(x, w, mu, s2, log_w)
    assert ok
    np.testing.assert_array_equal(centre, gaussian_centre(mu, s2))
    ref_lse, ref_sums = _reference(x, w, mu, s2, log_w, centre)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-12, atol=1e-12 * np.abs(ref_lse).max())
    scale = np.abs(ref_sums).max(axis=0)  # a sum about the centre may cancel: its terms' scale
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-12, atol=1e-12 * scale.max())


def test_read_only_inputs_and_rows_no_component_scores():
    x, w, mu, s2, log_w = _case(50, 3, 2)
    for a in (x, w, mu, s2, log_w):
        a.setflags(write=False)
    assert _run(x, w, mu, s2, log_w)[0]
    for bad in (np.inf, np.nan, 1e200):  # a NaN score, an overflowing square
        y = x.copy()
        y[7, 1] = bad
        assert not _run(y, w, mu, s2, log_w)[0]


def _tied_case(n, d, k, offset=0.0, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d))
    cov = a @ a.T + d * np.eye(d)
    mu = offset + rng.normal(0, 3, (k, d))
    x = mu[rng.integers(0, k, n)] + rng.normal(size=(n, d)) @ np.linalg.cholesky(cov).T
    u = np.ascontiguousarray(np.linalg.inv(np.linalg.cholesky(cov)).T)  # upper: U U^T = cov^-1
    return x, rng.uniform(0.2, 2.0, n), mu, cov, u, np.log(rng.dirichlet(np.ones(k) * 3))


def _tied_run(x, w, mu, cov, u, log_w):
    k, d = mu.shape
    s2 = np.repeat(np.diagonal(cov)[None], k, axis=0)
    const = log_w + np.log(np.diagonal(u)).sum() - 0.5 * d * np.log(2 * np.pi)
    centre, sums, lse = np.empty(d), np.empty((k, d + 1)), np.empty(len(x))
    compiled = kernels.mixture_kernels()
    compiled["stack_centre"](mu, s2, centre)
    with np.errstate(over="ignore", invalid="ignore"):  # (the rows no component scores)
        xc = x - centre
        white, offsets = xc @ u, (mu - centre) @ u
    ok = compiled["tied_estep"](xc, white, w, offsets, const, sums, lse)
    return ok, centre, sums, lse


@pytest.mark.parametrize("n, d, k, offset", [(150, 4, 3, 0.0), (569, 30, 2, 0.0),
                                             (300, 3, 2, 1e6), (1, 1, 1, 0.0)])
def test_compiled_tied_estep_is_the_float64_estep(n, d, k, offset):
    x, w, mu, cov, u, log_w = _tied_case(n, d, k, offset)
    ok, centre, sums, lse = _tied_run(x, w, mu, cov, u, log_w)
    assert ok
    np.testing.assert_array_equal(centre, gaussian_centre(mu, np.repeat(
        np.diagonal(cov)[None], k, axis=0)))
    diff = x[:, None, :] - mu  # (n, K, D): the Mahalanobis distances by a solve, not by U
    maha = np.einsum("nkd,nkd->nk", diff, np.linalg.solve(cov, diff.reshape(-1, d).T).T
                     .reshape(diff.shape))
    scores = log_w - 0.5 * (maha + np.linalg.slogdet(2 * np.pi * cov)[1])
    ref_lse = logsumexp(scores, axis=1)
    resp = np.exp(scores - ref_lse[:, None]) * w[:, None]
    ref_sums = np.hstack([resp.T @ (x - centre), resp.sum(axis=0)[:, None]])
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-11, atol=1e-11 * np.abs(ref_lse).max())
    np.testing.assert_allclose(sums, ref_sums, rtol=1e-11,
                               atol=1e-11 * np.abs(ref_sums).max())


def test_tied_read_only_inputs_and_rows_no_component_scores():
    x, w, mu, cov, u, log_w = _tied_case(50, 3, 2)
    for a in (x, w, mu, cov, u, log_w):
        a.setflags(write=False)
    assert _tied_run(x, w, mu, cov, u, log_w)[0]
    for bad in (np.inf, np.nan, 1e200):  # a NaN score, an overflowing square
        y = x.copy()
        y[7, 1] = bad
        assert not _tied_run(y, w, mu, cov, u, log_w)[0]
