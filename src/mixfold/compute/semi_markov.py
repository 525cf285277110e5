"""The explicit-duration (semi-Markov) lattice in NumPy: forward-backward and Viterbi over the
segments of a batch of sequences, in log space, O(T * S * D) per sequence.

A sequence of n items is cut into segments; a segment of state s lasts d steps (1 <= d <= D)
with probability ``exp(log_dur[s, d - 1])``, its items are emitted by state s, and the next
segment's state follows ``log_trans``. The last segment is cut by the end of the sequence
(right-censored): it counts ``exp(log_surv[s, d - 1])`` = P(duration >= d). Boundaries are
indexed 0..n: a segment [t, t + d) starts after boundary t.

This is the reference path beside the compiled kernel
(:mod:`mixfold.compute.numba_semi_markov`): the sequences of a chunk are padded to the
longest, and every step is one NumPy call over all of them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["SegmentLaws", "SegmentStatistics", "segment_laws", "segment_forward_backward",
           "segment_log_likelihood", "segment_viterbi", "padded"]


class SegmentLaws(NamedTuple):
    """The chain's log-probabilities: ``log_init`` (S,), ``log_trans`` (S, S), ``log_dur`` and
    ``log_surv`` (S, D): P(duration = d) and P(duration >= d) at column d - 1."""

    log_init: np.ndarray
    log_trans: np.ndarray
    log_dur: np.ndarray
    log_surv: np.ndarray


def segment_laws(initial: np.ndarray, transitions: np.ndarray, log_dur: np.ndarray) -> SegmentLaws:
    """The :class:`SegmentLaws` of a chain's ``initial`` (S,) and ``transitions`` (S, S)
    probabilities and its durations' log-probabilities ``log_dur`` (S, D), each row summing to
    one: the survival P(duration >= d) is the sum of the tail."""
    surv = np.cumsum(np.exp(log_dur)[:, ::-1], axis=1)[:, ::-1]
    with np.errstate(divide="ignore"):
        return SegmentLaws(np.log(initial), np.log(transitions), log_dur, np.log(surv))


class SegmentStatistics(NamedTuple):
    """A fold's results: row-weighted item posteriors (n_items, S) in flat order, per-row
    log-likelihood (n_rows,), and the weighted expected initial (S,), transition (S, S) and
    duration (S, D) counts (a censored last segment spread over the durations it allows)."""

    gamma: np.ndarray
    log_likelihood: np.ndarray
    initial: np.ndarray
    transitions: np.ndarray
    durations: np.ndarray


def padded(scores: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores padded to (n_rows, longest, S) with zeros, mask (n_rows, longest) of items)."""
    lengths = np.diff(offsets)
    longest = int(lengths.max()) if lengths.size else 0
    mask = np.arange(longest)[None, :] < lengths[:, None]
    out = np.zeros((lengths.size, longest, scores.shape[1]))
    out[mask] = scores  # row-major mask order is flat item order
    return out, mask


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    top = a.max(axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - top).sum(axis=axis)) + np.squeeze(top, axis)


def _forward(x: np.ndarray, lengths: np.ndarray, laws: SegmentLaws,
             combine: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(log start (n, T + 1, S), log segment end (n, T + 1, S), log censored last segment
    (n, S), best durations): ``combine`` "sum" is the forward pass (best durations ``None``),
    "max" the Viterbi pass, whose best durations are (the best d of a segment of s ending at
    boundary t (n, T + 1, S), that of the last segment (n, S)).
    """
    n, longest, s = x.shape
    dmax = laws.log_dur.shape[1]
    start = np.full((n, longest + 1, s), -np.inf)
    start[:, 0] = laws.log_init
    ends = np.full((n, longest + 1, s), -np.inf)
    final = np.full((n, s), -np.inf)
    best_d = np.zeros((n, longest + 1, s), dtype=np.int64) if combine == "max" else None
    best_final = np.zeros((n, s), dtype=np.int64)
    for t in range(1, longest + 1):
        seg = np.zeros((n, s))
        inner, last = np.full((n, s), -np.inf), np.full((n, s), -np.inf)
        last_d = np.zeros((n, s), dtype=np.int64)
        for d in range(1, min(dmax, t) + 1):
            seg += x[:, t - d]
            base = start[:, t - d] + seg
            p, q = base + laws.log_dur[:, d - 1], base + laws.log_surv[:, d - 1]
            if best_d is None:
                inner, last = np.logaddexp(inner, p), np.logaddexp(last, q)
            else:
                better, better_last = p > inner, q > last
                inner, last = np.where(better, p, inner), np.where(better_last, q, last)
                best_d[:, t] = np.where(better, d, best_d[:, t])
                last_d = np.where(better_last, d, last_d)
        ends[:, t] = inner
        done = lengths == t
        final[done] = last[done]
        best_final[done] = last_d[done]
        moved = inner[:, :, None] + laws.log_trans[None]
        start[:, t] = _logsumexp(moved, 1) if best_d is None else moved.max(axis=1)
    return start, ends, final, best_d if best_d is None else (best_d, best_final)


def segment_log_likelihood(scores: np.ndarray, offsets: np.ndarray,
                           laws: SegmentLaws) -> np.ndarray:
    """The per-row log-likelihood of :func:`segment_forward_backward`, forward pass only."""
    x, _ = padded(scores, offsets)
    lengths = np.diff(offsets)
    final = _forward(x, lengths, laws, "sum")[2]
    return np.where(lengths > 0, _logsumexp(final, 1), 0.0)


def segment_forward_backward(scores: np.ndarray, offsets: np.ndarray, laws: SegmentLaws,
                             weights: np.ndarray) -> SegmentStatistics:
    """Forward-backward of every sequence (rows cut by ``offsets``) of emission log-densities
    ``scores`` (n_items, S). Rows without items get log-likelihood 0 and add nothing."""
    x, mask = padded(scores, offsets)
    n, longest, s = x.shape
    dmax = laws.log_dur.shape[1]
    lengths = np.diff(offsets)
    start, ends, final, _ = _forward(x, lengths, laws, "sum")
    ll = np.where(lengths > 0, _logsumexp(final, 1), 0.0)  # as segment_log_likelihood
    alive = np.isfinite(ll) & (lengths > 0)
    w = np.where(alive, weights, 0.0)
    norm = np.where(alive, ll, 0.0)[:, None]
    after = np.full((n, longest + 1, s), -np.inf)  # P(rest | segment of s starts at t)
    gone = np.full((n, longest + 1, s), -np.inf)  # P(rest | segment of s ended at t)
    for t in range(longest - 1, -1, -1):
        seg, acc = np.zeros((n, s)), np.full((n, s), -np.inf)
        for d in range(1, min(dmax, longest - t) + 1):
            seg += x[:, t + d - 1]
            e = t + d
            inside = (e < lengths)[:, None]
            term = np.where(inside, laws.log_dur[:, d - 1] + seg + gone[:, e],
                            np.where((e == lengths)[:, None], laws.log_surv[:, d - 1] + seg,
                                     -np.inf))
            acc = np.logaddexp(acc, term)
        after[:, t] = acc
        if t:
            gone[:, t] = _logsumexp(laws.log_trans[None] + acc[:, None, :], 2)
    diff = np.zeros((n, longest + 1, s))
    durations, censored = np.zeros((s, dmax)), np.zeros((s, dmax))
    with np.errstate(invalid="ignore"):
        for t in range(longest):
            seg = np.zeros((n, s))
            for d in range(1, min(dmax, longest - t) + 1):
                seg += x[:, t + d - 1]
                e = t + d
                base = start[:, t] + seg - norm
                inside = (e < lengths)[:, None]
                xi = np.where(inside, np.exp(base + laws.log_dur[:, d - 1]
                                             + gone[:, e]), 0.0)
                cut = np.where((e == lengths)[:, None], np.exp(base), 0.0)
                both = xi + cut * np.exp(laws.log_surv[:, d - 1])
                diff[:, t] += both
                diff[:, e] -= both
                durations[:, d - 1] += w @ xi
                censored[:, d - 1] += w @ cut
    durations += np.exp(laws.log_dur) * np.cumsum(censored, axis=1)
    gamma = np.cumsum(diff, axis=1)[:, :longest] * w[:, None, None]
    with np.errstate(invalid="ignore"):
        initial = w @ np.exp(laws.log_init + after[:, 0] - norm)
        moves = ends[:, 1:longest, :, None] + laws.log_trans + after[:, 1:longest, None, :]
        inner = (np.arange(1, longest)[None, :] < lengths[:, None])[:, :, None, None]
        trans = np.where(inner, np.exp(moves - norm[:, :, None, None]), 0.0)
    transitions = np.einsum("b,btij->ij", w, trans)
    return SegmentStatistics(gamma[mask], ll, initial, transitions, durations)


def segment_viterbi(scores: np.ndarray, offsets: np.ndarray, laws: SegmentLaws) -> np.ndarray:
    """The most probable segmentation's state of every flat item, int64 (n_items,)."""
    x, mask = padded(scores, offsets)
    n, longest, s = x.shape
    lengths = np.diff(offsets)
    start, ends, final, (best_d, best_final) = _forward(x, lengths, laws, "max")
    previous = (ends[:, :, :, None] + laws.log_trans[None, None]).argmax(axis=2)
    rows = np.arange(n)
    state = final.argmax(axis=1)
    dur = best_final[rows, state]
    t = lengths.copy()
    labels = np.full((n, longest + 1), -1, dtype=np.int64)
    active = t > 0
    while active.any():
        b = rows[active]
        first = t[b] - dur[b]  # the segment [first, t) of state state[b]
        labels[b, first] = state[b]
        t[b] = first
        going = t[b] > 0
        b = b[going]
        state[b] = previous[b, t[b], state[b]]
        dur[b] = best_d[b, t[b], state[b]]
        active = t > 0
    # every item takes the state of the last segment start at or before it
    marks = np.where(labels >= 0, np.arange(longest + 1)[None, :], 0)
    np.maximum.accumulate(marks, axis=1, out=marks)
    states = np.take_along_axis(labels, marks, axis=1)[:, :longest]
    return states[mask]
