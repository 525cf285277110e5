"""A labelling's segments: the runs of equal labels of a batch of sequences counted as a
semi-Markov chain's segments (what a seeded start reads its chain and durations from, beside
the lattice of :mod:`mixfold.compute.semi_markov`).

>>> import numpy as np
>>> runs = label_runs(np.array([0, 0, 1, 1, 1, 0]), np.array([0, 4, 6]), np.ones(6), 2, 3)
>>> runs.initial.tolist(), runs.transitions.tolist()  # sequences 0 0 1 1 and 1 0
([1.0, 1.0], [[0.0, 1.0], [1.0, 0.0]])
>>> runs.durations.tolist()  # state 0: runs of 2 and 1 items; state 1: 2 and 1
[[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["RunCounts", "label_runs"]


class RunCounts(NamedTuple):
    """Weighted counts of the runs of equal labels: first labels (S,), moves between runs
    (S, S), run lengths (S, D) (column d - 1: a run of d items; a run longer than D counted at
    D)."""

    initial: np.ndarray
    transitions: np.ndarray
    durations: np.ndarray


def label_runs(labels: np.ndarray, offsets: np.ndarray, item_weights: np.ndarray, s: int,
               d: int) -> RunCounts:
    """The :class:`RunCounts` of ``labels`` (one of ``s`` per flat item) of the sequences cut
    by ``offsets``, each run weighted by its first item's weight; a run ends where its
    sequence does."""
    n = labels.size
    row_start = np.zeros(n, dtype=bool)
    row_start[offsets[:-1][offsets[:-1] < n]] = True
    begins = row_start.copy()
    begins[1:] |= labels[1:] != labels[:-1]
    first = np.flatnonzero(begins)
    lengths = np.diff(np.append(first, n))
    w = item_weights[first]
    initial = np.bincount(labels[first[row_start[first]]], weights=w[row_start[first]],
                          minlength=s).astype(np.float64)
    moves = np.flatnonzero(~row_start[first[1:]])  # run i + 1 follows run i in its row
    transitions = np.zeros((s, s))
    np.add.at(transitions, (labels[first[moves]], labels[first[moves + 1]]), w[moves + 1])
    durations = np.zeros((s, d))
    np.add.at(durations, (labels[first], np.minimum(lengths, d) - 1), w)
    return RunCounts(initial, transitions, durations)
