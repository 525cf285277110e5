"""The compiled small-mixture E-step against a brute-force float64 E-step written from the
Gaussian density: the centre, every row's log-density and the posteriors' sums about it."""

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
