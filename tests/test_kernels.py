"""The compiled kernels give the statistics the NumPy reference path gives."""

import numpy as np
import pytest

import mixfold.compute.kernels as kernels

pytestmark = pytest.mark.skipif(not kernels.kernels_available(), reason="numba not installed")


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
