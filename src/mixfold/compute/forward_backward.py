"""A hidden Markov chain over the items of a chunk's sequences: the scaled forward-backward
recursion (Rabiner's scaling) and the Viterbi path, batched over all the sequences at once --
one (B x S) @ (S x S) product per time step over a time-major layout of the items.

The recursion reads only the emission log-densities of the flat items (n_items, S) and the
chain (:class:`Chain`); :func:`chain_posteriors` runs it compiled (sequence by sequence on all
cores, :func:`~mixfold.compute.kernels.hmm_forward_backward`) or, without numba, in NumPy
(:class:`Lattice`, its reference).

>>> chain = Chain(np.array([0.5, 0.5]), np.array([[0.9, 0.1], [0.1, 0.9]]), None)
>>> scores = np.log([[0.8, 0.1], [0.7, 0.2], [0.01, 0.9]])  # one sequence of three items
>>> lattice = Lattice(chain, scores, np.array([0, 3]))
>>> lattice.log_likelihood.round(6).tolist()
[-3.242106]
>>> viterbi_paths(chain, scores, np.array([0, 3])).tolist()
[0, 0, 1]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mixfold.compute.kernels import hmm_forward_backward, kernels_available

__all__ = ["Chain", "TimeMajor", "Lattice", "chain_posteriors", "viterbi_paths",
           "independent_counts", "expected_length", "safe_divisor"]


class Chain(NamedTuple):
    """What the recursion reads of a hidden Markov chain over S states: ``initial`` (S,),
    ``step`` (S, S) the continue-and-move matrix ``P(go on from i, then move to j)``, and
    ``terminal`` (S,) the probability of ending after state i (``None``: the length is not
    modelled)."""

    initial: np.ndarray
    step: np.ndarray
    terminal: np.ndarray | None

    @property
    def num_states(self) -> int:
        return int(self.initial.size)


def safe_divisor(c: np.ndarray) -> np.ndarray:
    """Divisors with zeros replaced by one: an impossible sequence stays at zero, never NaN."""
    return np.where(c > 0, c, 1.0)


class TimeMajor:
    """The items of a chunk's sequences laid out time step by time step.

    Sequences are sorted by decreasing length, so those still running at step t are a prefix of
    those running at step t-1: step t is the contiguous block ``bounds[t]:bounds[t + 1]`` of
    ``active[t]`` positions, and one matrix product moves the whole block one step on.
    ``perm[p]`` is the flat item index and ``rows[p]`` the row of time-major position ``p``;
    ``last[b]`` is the position of the last item of the ``b``-th longest non-empty sequence,
    which is row ``last_rows[b]``.
    """

    __slots__ = ("n_rows", "lengths", "active", "bounds", "perm", "rows", "last", "last_rows")

    def __init__(self, offsets: np.ndarray):
        lengths = np.diff(offsets)
        self.n_rows = int(lengths.size)
        self.lengths = lengths
        order = np.argsort(-lengths, kind="stable")
        t_max = int(lengths.max()) if lengths.size else 0
        # active[t]: sequences longer than t; active[t_max] = 0 closes the last block
        self.active = self.n_rows - np.cumsum(np.bincount(lengths, minlength=t_max + 1))
        self.bounds = np.zeros(t_max + 1, dtype=np.int64)
        np.cumsum(self.active[:t_max], out=self.bounds[1:])
        n_items = int(self.bounds[-1])
        step = np.repeat(np.arange(t_max, dtype=np.int64), self.active[:t_max])
        rank = np.arange(n_items, dtype=np.int64) - np.repeat(self.bounds[:-1],
                                                               self.active[:t_max])
        self.rows = order[rank]
        self.perm = offsets[:-1][self.rows] + step
        sorted_lengths = lengths[order]
        running = np.flatnonzero(sorted_lengths > 0)
        self.last = self.bounds[sorted_lengths[running] - 1] + running
        self.last_rows = order[running]

    @property
    def n_steps(self) -> int:
        return int(self.bounds.size) - 1

    def block(self, t: int) -> tuple[int, int, int]:
        """(first position, end position, number continuing to step t + 1) of step ``t``."""
        return int(self.bounds[t]), int(self.bounds[t + 1]), int(self.active[t + 1])

    def flat(self, time_major: np.ndarray) -> np.ndarray:
        """A time-major per-item array back in flat item order."""
        out = np.empty_like(time_major)
        out[self.perm] = time_major
        return out


class Lattice:
    """The scaled forward-backward recursion of one chunk.

    ``scores`` are the emission log-densities of the flat items (n_items, S). The forward pass
    runs at construction and gives ``log_likelihood`` (n_rows,); :meth:`posteriors` runs the
    backward pass and, given row weights, sums the initial, transition and terminal statistics.
    """

    def __init__(self, chain: Chain, scores: np.ndarray, offsets: np.ndarray):
        self.chain = chain
        self.tm = tm = TimeMajor(offsets)
        logs = scores[tm.perm]
        top = logs.max(axis=1)
        top[np.isinf(top)] = 0.0  # an item no state can emit: exp(-inf) = 0 below, not NaN
        logs -= top[:, None]
        self.emis = np.exp(logs, out=logs)  # emission likelihoods scaled per item
        self.alpha = np.empty_like(self.emis)
        self.scale = np.empty(self.emis.shape[0])
        for t in range(tm.n_steps):
            lo, hi, _ = tm.block(t)
            if t == 0:
                a = self.emis[lo:hi] * chain.initial
            else:
                prev = int(tm.bounds[t - 1])
                a = self.alpha[prev:prev + hi - lo] @ chain.step
                a *= self.emis[lo:hi]
            c = a.sum(axis=1)
            self.scale[lo:hi] = c
            a /= safe_divisor(c)[:, None]
            self.alpha[lo:hi] = a
        ending = self.alpha[tm.last]
        self.end_norm = ending.sum(axis=1) if chain.terminal is None else ending @ chain.terminal
        with np.errstate(divide="ignore"):
            per_item = np.log(self.scale) + top
            ll = np.bincount(tm.rows, weights=per_item, minlength=tm.n_rows).astype(np.float64)
            ll[tm.last_rows] += np.log(self.end_norm)
        if chain.terminal is not None:
            ll[tm.lengths == 0] = -np.inf
        self.log_likelihood = ll

    def posteriors(self, weights: np.ndarray | None = None,
                   counts: list[np.ndarray] | None = None) -> np.ndarray:
        """Posterior state probabilities of the items, time-major (n_items, S).

        With ``counts`` = [initial (S,), transitions (S, S), terminal (S,) or absent], adds the
        ``weights``-weighted expected counts of the chunk into them. Overwrites the forward
        variables; call once.
        """
        chain, tm, s = self.chain, self.tm, self.chain.num_states
        step = chain.step
        end_factor = np.ones(s) if chain.terminal is None else chain.terminal
        w = None if weights is None else weights[tm.rows]
        trans = np.zeros_like(step) if counts is not None else None
        beta_next = np.zeros((0, s))
        for t in range(tm.n_steps - 1, -1, -1):
            lo, hi, going_on = tm.block(t)
            beta = np.empty((hi - lo, s))
            beta[going_on:] = end_factor / safe_divisor(self.end_norm[going_on:hi - lo])[:, None]
            if going_on:
                nxt = int(tm.bounds[t + 1])
                g = self.emis[nxt:nxt + going_on] * beta_next
                g /= safe_divisor(self.scale[nxt:nxt + going_on])[:, None]
                beta[:going_on] = g @ step.T
                if trans is not None:
                    trans += (self.alpha[lo:lo + going_on] * w[lo:lo + going_on, None]).T @ g
            self.alpha[lo:hi] *= beta  # now the posterior of step t
            beta_next = beta
        gamma = self.alpha
        dead = ~np.isfinite(self.log_likelihood)
        if dead.any():
            gamma[dead[tm.rows]] = 0.0
        if counts is not None:
            if tm.n_steps:
                lo, hi, _ = tm.block(0)
                counts[0] += w[lo:hi] @ gamma[lo:hi]
            counts[1] += trans * step
            if len(counts) > 2:
                counts[2] += w[tm.last] @ gamma[tm.last]
        return gamma


def chain_posteriors(chain: Chain, scores: np.ndarray, offsets: np.ndarray,
                     weights: np.ndarray,
                     counts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The forward-backward step of rows cut by ``offsets`` with emission log-densities
    ``scores`` (n_items, S): adds the ``weights``-weighted expected counts into ``counts``
    ([initial, transitions, terminal when fitted]) and returns (row-weighted item posteriors
    (n_items, S) in flat order, per-row log-likelihood)."""
    if not kernels_available():
        lattice = Lattice(chain, scores, offsets)
        gamma = lattice.posteriors(weights, counts)
        gamma *= weights[lattice.tm.rows][:, None]
        return lattice.tm.flat(gamma), lattice.log_likelihood
    # the compiled recursion, sequence by sequence on all cores
    end = np.ones(chain.num_states) if chain.terminal is None else chain.terminal
    gamma, ll, initial, transitions, terminal = hmm_forward_backward(
        scores, offsets, chain.initial, chain.step, end, weights)
    counts[0] += initial
    counts[1] += transitions
    if len(counts) > 2:
        counts[2] += terminal
        ll[np.diff(offsets) == 0] = -np.inf  # the chain always emits at least one item
    return gamma, ll


def viterbi_paths(chain: Chain, scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The most probable state of every flat item, int64 array (n_items,); batched like
    :class:`Lattice`, in log space, with back-pointers per time-major position."""
    tm = TimeMajor(offsets)
    logs = scores[tm.perm]
    with np.errstate(divide="ignore"):
        log_step = np.log(chain.step)
        log_init = np.log(chain.initial)
        log_end = np.zeros(chain.num_states) if chain.terminal is None \
            else np.log(chain.terminal)
    delta = np.empty_like(logs)
    back = np.zeros(logs.shape, dtype=np.int64)
    for t in range(tm.n_steps):
        lo, hi, _ = tm.block(t)
        if t == 0:
            delta[lo:hi] = log_init + logs[lo:hi]
            continue
        prev = int(tm.bounds[t - 1])
        cand = delta[prev:prev + hi - lo, :, None] + log_step[None, :, :]
        back[lo:hi] = cand.argmax(axis=1)
        delta[lo:hi] = np.take_along_axis(cand, back[lo:hi, None, :], axis=1)[:, 0, :]
        delta[lo:hi] += logs[lo:hi]
    states = np.empty(logs.shape[0], dtype=np.int64)
    state_next = np.zeros(0, dtype=np.int64)
    for t in range(tm.n_steps - 1, -1, -1):
        lo, hi, going_on = tm.block(t)
        nxt = int(tm.bounds[t + 1])
        states[lo + going_on:hi] = (delta[lo + going_on:hi] + log_end).argmax(axis=1)
        states[lo:lo + going_on] = back[nxt + np.arange(going_on), state_next]
        state_next = states[lo:hi]
    return tm.flat(states)


def independent_counts(offsets: np.ndarray, resp: np.ndarray,
                       weighted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(initial, transition, terminal) counts from per-item state probabilities that ignore the
    chain (random or mixture posteriors), consecutive items taken as independent.

    ``resp`` (n_items, S) are the probabilities, ``weighted`` the same times the item weights.
    """
    starts, stops = offsets[:-1], offsets[1:]
    running = stops > starts
    initial = weighted[starts[running]].sum(axis=0)
    terminal = weighted[stops[running] - 1].sum(axis=0)
    follows = np.ones(resp.shape[0], dtype=bool)  # item j + 1 is in the same row as item j
    follows[stops[running] - 1] = False
    pairs = np.flatnonzero(follows)
    transitions = weighted[pairs].T @ resp[pairs + 1]
    return initial, transitions, terminal


def expected_length(chain: Chain) -> float:
    """The mean number of items per sequence under the terminal law (1 without one).

    ``initial @ (I - step)^-1 @ 1``; a chain that may never stop counts as 1 too (the length
    is then not a property of the model).
    """
    if chain.terminal is None:
        return 1.0
    s = chain.num_states
    try:
        visits = np.linalg.solve(np.eye(s) - chain.step, np.ones(s))
    except np.linalg.LinAlgError:
        return 1.0
    length = float(chain.initial @ visits)
    return length if np.isfinite(length) and length >= 1.0 else 1.0
