"""The compiled kernels give the statistics the NumPy reference path gives."""

import numpy as np
import pytest

import mixfold
import mixfold._kernels as kernels
from mixfold.families._protocol import ArrayEncoded
from mixfold.families.diagonal_gaussian import (DiagonalGaussianAccumulator,
                                                DiagonalGaussianDistribution)

pytestmark = pytest.mark.skipif(not kernels.kernels_available(), reason="numba not installed")


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_diag_mixture_kernel_equals_numpy_path(monkeypatch, precision):
    rng = np.random.default_rng(0)
    d, k, n = 7, 5, 10_001  # blocks that do not divide the rows
    comps = [DiagonalGaussianDistribution(rng.normal(0, 3, d), rng.uniform(0.5, 2, d))
             for _ in range(k)]
    log_w = np.log(rng.dirichlet(np.ones(k)))
    x = rng.normal(0, 4, size=(n, d)) + 100.0  # far from the origin: centring matters
    w = rng.uniform(0, 2, n)

    def fold():
        accs = [DiagonalGaussianAccumulator(d) for _ in range(k)]
        mass, lse = DiagonalGaussianAccumulator.stack_fold(accs, comps, log_w, ArrayEncoded(x),
                                                          w, precision)
        return mass, lse, np.concatenate([a.to_array() for a in accs])

    compiled = fold()
    monkeypatch.setattr(kernels, "_DISABLED", True)
    reference = fold()
    rtol = 1e-12 if precision == "float64" else 1e-5
    for got, want in zip(compiled, reference):
        np.testing.assert_allclose(got, want, rtol=rtol)


def test_fit_with_and_without_kernels_agree(monkeypatch):
    x = np.random.default_rng(1).normal(size=(3000, 3)) + np.repeat([[0, 0, 0], [5, 5, 5]], 1500,
                                                                    axis=0)
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 2)
    a = mixfold.fit(x, est, seed=0, max_iter=10, tol=0, progress=False)
    monkeypatch.setattr(kernels, "_DISABLED", True)
    b = mixfold.fit(x, est, seed=0, max_iter=10, tol=0, progress=False)
    m = min(len(a.log_likelihood), len(b.log_likelihood))  # tol=0 may stop one step apart
    np.testing.assert_allclose(a.log_likelihood[:m], b.log_likelihood[:m], rtol=1e-12)
    np.testing.assert_allclose(a.model.weights, b.model.weights, rtol=1e-9)


@pytest.mark.parametrize("terminal", [False, True])
def test_hmm_kernel_equals_numpy_lattice(monkeypatch, terminal):
    from mixfold import GaussianDistribution, GaussianEstimator, HiddenMarkovDistribution
    from mixfold import HiddenMarkovEstimator

    rng = np.random.default_rng(3)
    s = 3
    trans = rng.dirichlet(np.ones(s) * 3, size=s)
    model = HiddenMarkovDistribution([GaussianDistribution(m, 1.0) for m in (-2.0, 0.0, 2.5)],
                                     rng.dirichlet(np.ones(s)), trans,
                                     rng.uniform(0.05, 0.3, s) if terminal else None)
    rows = [rng.normal(0, 2, size=n).tolist() for n in rng.integers(0, 40, size=300)]
    rows[5] = []  # an empty sequence
    est = HiddenMarkovEstimator([GaussianEstimator()] * s, terminal=terminal)
    est = est.bind(est.encoder().fit(rows))
    enc = model.encoder().encode(rows)
    w = rng.uniform(0.5, 2.0, len(rows))

    def update():
        acc = est.accumulator_factory().make()
        ll = acc.seq_update(enc, w, model)
        return ll, acc.to_array()

    compiled = update()
    monkeypatch.setattr(kernels, "_DISABLED", True)
    reference = update()
    np.testing.assert_allclose(compiled[0], reference[0], rtol=1e-12)
    np.testing.assert_allclose(compiled[1], reference[1], rtol=1e-11, atol=1e-12)
