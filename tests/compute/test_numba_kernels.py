"""compute/numba_kernels.py: the compiled forward-backward against brute force over every
state path (float64 log-space, scipy's logsumexp): log-likelihoods, weighted posteriors,
initial, transition and terminal counts, for emissions far from 0, impossible states,
sequences no path scores, and sequences of length 0 and 1."""

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

pytest.importorskip("numba")

from mixfold.compute.kernels import HMM_SERIAL_WORK, hmm_forward_backward  # noqa: E402


def _brute(scores, offsets, initial, step, end, weights):
    """Every path of every sequence enumerated: the same five results."""
    s = step.shape[0]
    with np.errstate(divide="ignore"):
        li, lt, le = np.log(initial), np.log(step), np.log(end)
    gamma = np.zeros(scores.shape)
    ll = np.zeros(len(offsets) - 1)
    init, trans, term = np.zeros(s), np.zeros((s, s)), np.zeros(s)
    for r in range(len(offsets) - 1):
        lo, hi = offsets[r], offsets[r + 1]
        if hi == lo:
            continue
        paths = np.array(list(itertools.product(range(s), repeat=hi - lo)))
        t = np.arange(hi - lo)
        logp = li[paths[:, 0]] + scores[lo + t, paths].sum(axis=1) + le[paths[:, -1]]
        logp += lt[paths[:, :-1], paths[:, 1:]].sum(axis=1)
        ll[r] = logsumexp(logp)
        if not np.isfinite(ll[r]):
            continue
        p = np.exp(logp - ll[r]) * weights[r]
        for i in range(hi - lo):
            gamma[lo + i] = np.bincount(paths[:, i], weights=p, minlength=s)
        for i in range(hi - lo - 1):
            np.add.at(trans, (paths[:, i], paths[:, i + 1]), p)
        init += gamma[lo]
        term += gamma[hi - 1]
    return gamma, ll, init, trans, term


def _problem(lengths, s=3, seed=0, terminal=True):
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    scores = rng.normal(0, 3, (offsets[-1], s)) - rng.choice([0.0, 700.0, 5000.0],
                                                              (offsets[-1], 1))
    initial = rng.dirichlet(np.ones(s))
    step = rng.dirichlet(np.ones(s), s) * 0.9  # continue-and-move: rows sum to 1 - stop
    end = np.full(s, 0.1) if terminal else np.ones(s)
    weights = rng.uniform(0.2, 3.0, len(lengths))
    return scores, offsets, initial, step, end, weights


def _check(args):
    got = hmm_forward_backward(*args)
    want = _brute(*args)
    names = ["posteriors", "log-likelihood", "initial", "transitions", "terminal"]
    for name, g, w in zip(names, got, want):
        live = np.isfinite(w)
        assert np.array_equal(np.isfinite(g), live), name
        np.testing.assert_allclose(g[live], w[live], rtol=1e-11, atol=1e-12, err_msg=name)
    return got


@pytest.mark.parametrize("terminal", [True, False])
def test_forward_backward_equals_every_path(terminal):
    _check(_problem([1, 2, 5, 3, 4, 6, 1], terminal=terminal))


def test_lengths_zero_and_one():
    got = _check(_problem([0, 1, 0, 3, 0]))
    assert got[1][0] == 0.0 and got[1][2] == 0.0 and got[1][4] == 0.0


def test_impossible_states_and_a_sequence_no_path_scores():
    scores, offsets, initial, step, end, weights = _problem([4, 3, 5], seed=1)
    scores[1, [0, 2]] = -np.inf  # item 1 only in state 1
    step[1, 1] = 0.0              # and state 1 cannot stay
    scores[offsets[1] + 1] = -np.inf  # no state emits this item: the sequence is ruled out
    got = _check((scores, offsets, initial, step, end, weights))
    assert got[1][1] == -np.inf
    assert (got[0][offsets[1]:offsets[2]] == 0).all()  # and adds nothing


def test_many_sequences_on_the_row_threads_equal_brute_force(monkeypatch):
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "2")
    lengths = np.random.default_rng(5).integers(0, 7, 4500)
    args = _problem(lengths, s=3, seed=6)
    assert args[0].size * 3 > HMM_SERIAL_WORK  # enough work for the row-block threads
    _check(args)


def test_scores_in_any_layout():
    scores, *rest = _problem([3, 4, 2], seed=7)
    fortran = np.asfortranarray(scores)
    strided = np.repeat(scores, 2, axis=1)[:, ::2]
    want = hmm_forward_backward(scores, *rest)
    for layout in (fortran, strided):
        for a, b in zip(hmm_forward_backward(layout, *rest), want):
            np.testing.assert_array_equal(a, b)
