"""The runs of a labelling counted as segments (compute/segments.py) against a loop over each
sequence's items."""

import numpy as np
import pytest

from mixfold.compute.segments import label_runs


def _runs_by_loop(labels, offsets, weights, s, d):
    initial, transitions, durations = np.zeros(s), np.zeros((s, s)), np.zeros((s, d))
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        runs = []  # (label, length, weight of its first item)
        for t in range(lo, hi):
            if runs and labels[t] == runs[-1][0] and t > lo:
                runs[-1][1] += 1
            else:
                runs.append([labels[t], 1, weights[t]])
        for i, (label, length, w) in enumerate(runs):
            if i == 0:
                initial[label] += w
            else:
                transitions[runs[i - 1][0], label] += w
            durations[label, min(length, d) - 1] += w
    return initial, transitions, durations


@pytest.mark.parametrize("seed", range(5))
def test_label_runs_equal_a_loop_over_the_items(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 12, size=20)  # empty sequences among them
    offsets = np.concatenate([[0], np.cumsum(counts)])
    labels = rng.integers(0, 3, size=offsets[-1])
    weights = rng.random(offsets[-1])
    got = label_runs(labels, offsets, weights, 3, 4)
    for mine, want in zip(got, _runs_by_loop(labels, offsets, weights, 3, 4)):
        np.testing.assert_allclose(mine, want, rtol=1e-12, atol=1e-12)


def test_a_run_does_not_cross_into_the_next_sequence():
    runs = label_runs(np.array([1, 1, 1]), np.array([0, 2, 3]), np.ones(3), 2, 5)
    assert runs.initial.tolist() == [0.0, 2.0]
    assert runs.transitions.sum() == 0.0
    assert runs.durations[1].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
