"""families/_full_gaussian_moments.py: a block's full-covariance sums, compiled or by NumPy's
passes, agree; and a mixture fit on data hard for the method (means 1e6 from the origin,
covariances of condition number 1e8, well separated components, wide rows) with the compiled
passes equals the fit with NumPy's passes and scikit-learn's EM from the same start."""

import warnings

import numpy as np
import pytest

import mixfold
from mixfold import (MixtureDistribution, MixtureEstimator, MultivariateGaussianEstimator)
from mixfold.compute.kernels import kernels_available
from mixfold.families import _full_gaussian_moments as moments
from tests.families.hard_full_gaussians import OFFSET, hard_full_rows
from tests.families.sklearn_em import max_relative_difference, sklearn_trajectory



def _numpy_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(moments, "full_gaussian_kernels", lambda: None)


def _hard(n: int, d: int, k: int = 3, seed: int = 0):
    """(rows, start): means 1.5 sd apart along the long axis (where they overlap: EM has work); the
    start's means moved along it."""
    return hard_full_rows(n, d, k, seed, spacing=150.0, start_shift=50.0)


def test_compiled_and_numpy_block_sums_agree(monkeypatch):
    x, _ = _hard(9000, 5)
    point = x.mean(axis=0)
    resp = np.ascontiguousarray(np.random.default_rng(1).dirichlet(np.ones(3), len(x)).T)
    compiled = moments.block_moments(x, point, resp, 10, 8990)
    _numpy_passes(monkeypatch)
    plain = moments.block_moments(x, point, resp, 10, 8990)
    for a, b in ((compiled.mass, plain.mass), (compiled.sum_x, plain.sum_x),
                 (compiled.sum_xx, plain.sum_xx)):
        assert max_relative_difference(a, b) < 1e-13


@pytest.mark.skipif(not kernels_available(), reason="no compiled passes (numba disabled)")
def test_wide_rows_take_numpy_s_passes():
    assert moments.compiled_passes(moments.COMPILED_MAX_DIM) is not None
    assert moments.compiled_passes(moments.COMPILED_MAX_DIM + 1) is None
    assert moments.compiled_passes(moments.COMPILED_SCORES_MAX_DIM, scores=True) is not None
    assert moments.compiled_passes(moments.COMPILED_SCORES_MAX_DIM + 1, scores=True) is None


def _fit(x, start, k, iterations=8):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixfold.fit(x, MixtureEstimator([MultivariateGaussianEstimator()] * k),
                           init=start, max_iter=iterations, tol=0.0, progress=False)


def _distance(a: MixtureDistribution, b) -> np.ndarray:
    """Largest relative differences of (weights, means less the offset, covariances) of a fit
    ``a`` and a scikit-learn or mixfold ``b``."""
    if isinstance(b, MixtureDistribution):
        b_parts = (b.weights, [c.mu - OFFSET for c in b.components], [c.cov for c in b.components])
    else:
        b_parts = (b.weights_, b.means_, b.covariances_)
    a_parts = (a.weights, [c.mu - OFFSET for c in a.components], [c.cov for c in a.components])
    return np.array([max_relative_difference(x, y) for x, y in zip(a_parts, b_parts)])


@pytest.mark.parametrize("n, d", [(20_000, 4), (40_000, 3), (12_000, 12)])
def test_the_fit_on_hard_data_is_numpy_s_and_scikit_learn_s(monkeypatch, n, d):
    x, start = _hard(n, d)
    fit = _fit(x, start, 3)
    with monkeypatch.context() as m:
        _numpy_passes(m)
        plain = _fit(x, start, 3)
    ll, plain_ll = np.array(fit.log_likelihood), np.array(plain.log_likelihood)
    assert len(ll) == 8 and ll[-1] - ll[0] > 0.05  # EM moved
    # the same EM map, rounded differently: 8 iterations on these data amplify round-off to
    # ~1e-10 in the log-likelihood and ~1e-9 in the parameters (measured)
    np.testing.assert_allclose(ll, plain_ll, rtol=1e-10)
    assert (_distance(fit.model, plain.model) < [1e-8, 1e-8, 1e-7]).all()
    # scikit-learn on the rows moved to the origin (exactly: they are within 2x of 1e6): the
    # compiled passes are no further from it than NumPy's
    comps = start.components
    ref, gm = sklearn_trajectory(x - OFFSET, "full", start.weights,
                                 np.array([c.mu for c in comps]) - OFFSET,
                                 np.array([np.linalg.inv(c.cov) for c in comps]), 8)
    assert np.abs(ll - ref).max() <= 1.5 * np.abs(plain_ll - ref).max() + 1e-9
    assert (_distance(fit.model, gm) <= 1.5 * _distance(plain.model, gm) + 1e-8).all()
    assert (_distance(fit.model, gm) < 1e-3).all()


def test_the_stacked_update_has_the_same_bits_on_one_and_two_threads(monkeypatch):
    x, start = _hard(60_000, 4)  # several row blocks
    enc = start.components[0].encoder().encode(x)
    resp = np.asfortranarray(np.random.default_rng(3).dirichlet(np.ones(3), len(x)))
    factory = MultivariateGaussianEstimator(dim=4).accumulator_factory()
    arrays = []
    for threads in ("1", "2"):
        monkeypatch.setenv("MIXFOLD_NUM_THREADS", threads)
        accs = [factory.make() for _ in range(3)]
        for acc in accs:
            acc.set_reference(x[0])
        type(accs[0]).stack_update(accs, enc, resp)
        arrays.append([a for acc in accs for a in acc.arrays()])
    assert all(np.array_equal(a, b) for a, b in zip(*arrays))
    assert arrays[0][0] == pytest.approx(resp[:, 0].sum(), rel=1e-14)
