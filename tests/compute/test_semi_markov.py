"""The explicit-duration lattice (compute/semi_markov.py, its NumPy path, and the compiled
kernels of compute/numba_semi_markov.py) against brute force: every segmentation of short
sequences enumerated in float64."""

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from mixfold.compute.semi_markov import (SegmentLaws, segment_forward_backward, segment_laws,
                                         segment_log_likelihood, segment_viterbi)

S, D = 2, 3


def _laws(seed):
    rng = np.random.default_rng(seed)
    trans = np.log(rng.dirichlet(np.ones(S), S))
    np.fill_diagonal(trans, -np.inf)  # a segment's state differs from the last one's
    dur = rng.dirichlet(np.ones(D), S)
    surv = np.cumsum(dur[:, ::-1], axis=1)[:, ::-1]  # P(duration >= d)
    return SegmentLaws(np.log(rng.dirichlet(np.ones(S))), trans, np.log(dur), np.log(surv))


def _segmentations(n):
    """Every (state, duration) list covering n items."""
    for k in range(1, n + 1):
        for durations in itertools.product(range(1, D + 1), repeat=k):
            if sum(durations) == n:
                for states in itertools.product(range(S), repeat=k):
                    yield list(zip(states, durations))


def _brute(x, laws):
    """(log-likelihood, posteriors (n, S), the best segmentation's states) of one sequence."""
    terms, paths = [], []
    for seg in _segmentations(len(x)):
        t, lp, path = 0, laws.log_init[seg[0][0]], []
        for i, (s, d) in enumerate(seg):
            if i:
                lp += laws.log_trans[seg[i - 1][0], s]
            lp += (laws.log_surv if i == len(seg) - 1 else laws.log_dur)[s, d - 1]
            lp += x[t:t + d, s].sum()
            path += [s] * d
            t += d
        terms.append(lp)
        paths.append(path)
    terms = np.array(terms)
    ll = logsumexp(terms)
    post = np.zeros((len(x), S))
    for lp, path in zip(terms, paths):
        post[np.arange(len(x)), path] += np.exp(lp - ll)
    return ll, post, paths[int(np.argmax(terms))]


@pytest.mark.parametrize("seed", range(4))
def test_the_lattice_equals_every_segmentation_summed(seed):
    rng = np.random.default_rng(seed)
    lengths = [1, 2, 5, 3, 0, 4]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    scores = rng.normal(-2, 3, (offsets[-1], S))
    laws = _laws(seed)
    weights = rng.uniform(0.5, 2, len(lengths))
    ll = segment_log_likelihood(scores, offsets, laws)
    stats = segment_forward_backward(scores, offsets, laws, weights)
    best = segment_viterbi(scores, offsets, laws)
    for r, n in enumerate(lengths):
        x = scores[offsets[r]:offsets[r + 1]]
        if n == 0:  # a row without items: log-likelihood 0, nothing added
            assert ll[r] == 0.0
            continue
        want_ll, want_post, want_path = _brute(x, laws)
        assert ll[r] == pytest.approx(want_ll, abs=1e-11)
        assert stats.log_likelihood[r] == pytest.approx(want_ll, abs=1e-11)
        np.testing.assert_allclose(stats.gamma[offsets[r]:offsets[r + 1]],
                                   weights[r] * want_post, atol=1e-11)
        assert best[offsets[r]:offsets[r + 1]].tolist() == want_path
    # every item's posteriors add to its row's weight
    row_of = np.repeat(np.arange(len(lengths)), lengths)
    np.testing.assert_allclose(stats.gamma.sum(axis=1), weights[row_of], rtol=1e-12)


def test_segment_laws_hold_the_logs_and_the_survival_of_the_durations():
    dur = np.array([[0.5, 0.3, 0.2], [0.0, 0.0, 1.0]])
    with np.errstate(divide="ignore"):
        laws = segment_laws(np.array([0.4, 0.6]), np.array([[0.0, 1.0], [1.0, 0.0]]), np.log(dur))
    np.testing.assert_allclose(np.exp(laws.log_surv), [[1.0, 0.5, 0.2], [1.0, 1.0, 1.0]])
    np.testing.assert_allclose(np.exp(laws.log_init), [0.4, 0.6])
    assert laws.log_trans[0, 0] == -np.inf
