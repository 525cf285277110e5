"""The batched forward-backward recursion and Viterbi path against enumeration of every state
path of short sequences."""

import itertools

import numpy as np
import pytest

from mixfold.compute.forward_backward import (Chain, Lattice, TimeMajor, chain_posteriors,
                                              expected_length, independent_counts,
                                              viterbi_paths)


def path_log_probabilities(chain, scores):
    """log p(path, items) of every state path of one sequence's ``scores`` (T, S)."""
    t, s = scores.shape
    out = {}
    for path in itertools.product(range(s), repeat=t):
        p = np.log(chain.initial[path[0]]) + scores[0, path[0]]
        for a, b, x in zip(path, path[1:], scores[1:]):
            p += np.log(chain.step[a, b]) + x[b]
        if chain.terminal is not None:
            p += np.log(chain.terminal[path[-1]])
        out[path] = p
    return out


def make_chain(rng, terminal):
    s = 3
    trans = rng.dirichlet(np.ones(s), size=s)
    tau = rng.uniform(0.1, 0.4, s) if terminal else None
    keep = np.ones(s) if tau is None else 1 - tau
    return Chain(rng.dirichlet(np.ones(s)), keep[:, None] * trans, tau)


@pytest.mark.parametrize("terminal", [False, True])
def test_lattice_and_viterbi_equal_enumeration(terminal):
    rng = np.random.default_rng(0)
    chain = make_chain(rng, terminal)
    lengths = [3, 0, 1, 4, 2]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    scores = rng.normal(size=(offsets[-1], 3))
    lattice = Lattice(chain, scores, offsets)
    post = lattice.tm.flat(lattice.posteriors())
    paths = viterbi_paths(chain, scores, offsets)
    for i, n in enumerate(lengths):
        lo, hi = offsets[i], offsets[i + 1]
        if n == 0:
            assert lattice.log_likelihood[i] == (-np.inf if terminal else 0.0)
            continue
        joint = path_log_probabilities(chain, scores[lo:hi])
        logs = np.array(list(joint.values()))
        total = np.logaddexp.reduce(logs)
        np.testing.assert_allclose(lattice.log_likelihood[i], total, rtol=1e-12)
        want = np.zeros((n, 3))
        for path, p in joint.items():
            want[np.arange(n), path] += np.exp(p - total)
        np.testing.assert_allclose(post[lo:hi], want, atol=1e-12)
        assert tuple(paths[lo:hi]) == max(joint, key=joint.get)


def test_expected_counts_equal_enumeration_and_the_compiled_path():
    rng = np.random.default_rng(1)
    chain = make_chain(rng, True)
    offsets = np.array([0, 2, 5])
    scores = rng.normal(size=(5, 3))
    weights = np.array([1.0, 2.5])
    counts = [np.zeros(3), np.zeros((3, 3)), np.zeros(3)]
    gamma, ll = chain_posteriors(chain, scores, offsets, weights, counts)
    want = [np.zeros(3), np.zeros((3, 3)), np.zeros(3)]
    for i in range(2):
        joint = path_log_probabilities(chain, scores[offsets[i]:offsets[i + 1]])
        total = np.logaddexp.reduce(np.array(list(joint.values())))
        for path, p in joint.items():
            w = weights[i] * np.exp(p - total)
            want[0][path[0]] += w
            for a, b in zip(path, path[1:]):
                want[1][a, b] += w
            want[2][path[-1]] += w
    for got, exp in zip(counts, want):
        np.testing.assert_allclose(got, exp, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gamma.sum(axis=1), np.repeat(weights, [2, 3]), rtol=1e-12)


def test_time_major_layout_puts_running_sequences_first():
    tm = TimeMajor(np.array([0, 2, 2, 5]))  # lengths 2, 0, 3
    assert tm.n_steps == 3
    assert tm.rows.tolist() == [2, 0, 2, 0, 2]
    assert tm.perm.tolist() == [2, 0, 3, 1, 4]
    assert tm.block(1) == (2, 4, 1)
    np.testing.assert_array_equal(tm.flat(np.arange(5)), [1, 3, 0, 2, 4])


def test_independent_counts_treat_consecutive_items_as_independent():
    resp = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    initial, transitions, terminal = independent_counts(np.array([0, 2, 3]), resp, 2 * resp)
    assert initial.tolist() == [3.0, 1.0]  # first items: rows 0 and 2
    assert transitions.tolist() == [[0.0, 2.0], [0.0, 0.0]]  # only item 0 -> item 1
    assert terminal.tolist() == [1.0, 3.0]


def test_expected_length_of_a_geometric_stay():
    tau = 0.25
    chain = Chain(np.array([1.0]), np.array([[1 - tau]]), np.array([tau]))
    assert expected_length(chain) == pytest.approx(1 / tau)
    assert expected_length(Chain(np.array([1.0]), np.array([[1.0]]), None)) == 1.0
