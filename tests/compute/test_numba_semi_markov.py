"""The compiled explicit-duration kernels (compute/numba_semi_markov.py, called through
compute/kernels.py) against the NumPy lattice, itself checked against brute force in
test_semi_markov.py."""

import numpy as np
import pytest

from mixfold.compute.kernels import (hsmm_forward_backward, hsmm_log_likelihood,
                                     kernels_available)
from mixfold.compute.semi_markov import segment_forward_backward

from tests.compute.test_semi_markov import S, _laws


@pytest.mark.skipif(not kernels_available(), reason="numba kernels disabled")
def test_the_compiled_kernels_equal_the_numpy_lattice():
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 40, 50)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    scores = rng.normal(-2, 4, (offsets[-1], S))
    scores[3, :] = -np.inf  # an item no state emits: its row's likelihood is 0
    laws = _laws(3)
    weights = rng.uniform(0.5, 2, lengths.size)
    want = segment_forward_backward(scores, offsets, laws, weights)
    got = hsmm_forward_backward(scores, offsets, laws, weights)
    np.testing.assert_allclose(got.log_likelihood, want.log_likelihood, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hsmm_log_likelihood(scores, offsets, laws), want.log_likelihood,
                               rtol=1e-12, atol=1e-12)
    for name in ("gamma", "initial", "transitions", "durations"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
