"""Hidden Markov model: a Markov chain of hidden states, one emission law per state.

Rows are variable-length sequences of items; every item is emitted by the hidden state of its
time step, from that state's emission distribution of any family (a leaf, a mixture, a record...).
The E-step is the scaled forward-backward recursion, batched over all the sequences of a chunk
(one (B x S) @ (S x S) product per time step); the posterior state probabilities of the items go
to the emission accumulators as ordinary row weights, as a mixture's responsibilities do.

Length-0 sequences: without a terminal law the model is a law of the items *given* the length,
so an empty sequence has probability one (log-density 0) and adds no statistics. With a terminal
law the chain always emits at least one item, so an empty sequence has log-density -inf (a fit
on data that contains one reports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.kernels import hmm_forward_backward, kernels_available
from mixfold.compute.labelled import Labelled
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import ParameterError
from mixfold.families._hooks import FoldChildren, FoldsColumns, ScoresColumns
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families._shared_covariance import estimate_children
from mixfold.families._states import EmissionStates, bind_emissions, emissions_encoder
from mixfold.families._protocol import (
    Accumulator,
    AccumulatorFactory,
    Distribution,
    Encoded,
    Encoder,
    Estimator,
    InitRandom,
    Sampler,
    family,
)
from mixfold.families.mixture import MixtureEstimator
from mixfold.families.units import UnitAccumulators, Units, encoding_slots, seeded_posteriors
from mixfold.families.sequence import SequenceEncoded, SequenceEncoder
from mixfold.options import flag, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["HiddenMarkovDistribution", "HiddenMarkovEstimator", "HiddenMarkovAccumulator"]


# ---------------------------------------------------------------------------------------------
# Encoding: rows are sequences, encoded as SequenceEncoded (offsets + one flat item encoding,
# items read by the emissions' shared encoder). Within a chunk, the recursion runs on a
# time-major layout of the items.


class _TimeMajor:
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


def _safe(c: np.ndarray) -> np.ndarray:
    """Divisors with zeros replaced by one: an impossible sequence stays at zero, never NaN."""
    return np.where(c > 0, c, 1.0)


class _Lattice:
    """The scaled forward-backward recursion of one chunk (Rabiner's scaling).

    ``scores`` are the emission log-densities of the flat items (n_items, S). The forward pass
    runs at construction and gives ``log_likelihood`` (n_rows,); :meth:`posteriors` runs the
    backward pass and, given row weights, sums the initial, transition and terminal statistics.
    """

    def __init__(self, model: HiddenMarkovDistribution, scores: np.ndarray, offsets: np.ndarray):
        self.model = model
        self.tm = tm = _TimeMajor(offsets)
        logs = scores[tm.perm]
        top = logs.max(axis=1)
        top[np.isinf(top)] = 0.0  # an item no state can emit: exp(-inf) = 0 below, not NaN
        logs -= top[:, None]
        self.emis = np.exp(logs, out=logs)  # emission likelihoods scaled per item
        self.alpha = np.empty_like(self.emis)
        self.scale = np.empty(self.emis.shape[0])
        step = model._continue_matrix
        for t in range(tm.n_steps):
            lo, hi, _ = tm.block(t)
            if t == 0:
                a = self.emis[lo:hi] * model.initial
            else:
                prev = int(tm.bounds[t - 1])
                a = self.alpha[prev:prev + hi - lo] @ step
                a *= self.emis[lo:hi]
            c = a.sum(axis=1)
            self.scale[lo:hi] = c
            a /= _safe(c)[:, None]
            self.alpha[lo:hi] = a
        ending = self.alpha[tm.last]
        self.end_norm = ending.sum(axis=1) if model.terminal is None else ending @ model.terminal
        with np.errstate(divide="ignore"):
            per_item = np.log(self.scale) + top
            ll = np.bincount(tm.rows, weights=per_item, minlength=tm.n_rows).astype(np.float64)
            ll[tm.last_rows] += np.log(self.end_norm)
        if model.terminal is not None:
            ll[tm.lengths == 0] = -np.inf
        self.log_likelihood = ll

    def posteriors(self, weights: np.ndarray | None = None,
                   counts: list[np.ndarray] | None = None) -> np.ndarray:
        """Posterior state probabilities of the items, time-major (n_items, S).

        With ``counts`` = [initial (S,), transitions (S, S), terminal (S,) or absent], adds the
        ``weights``-weighted expected counts of the chunk into them. Overwrites the forward
        variables; call once.
        """
        model, tm = self.model, self.tm
        step = model._continue_matrix
        end_factor = np.ones(model.num_states) if model.terminal is None else model.terminal
        w = None if weights is None else weights[tm.rows]
        trans = np.zeros_like(step) if counts is not None else None
        beta_next = np.zeros((0, model.num_states))
        for t in range(tm.n_steps - 1, -1, -1):
            lo, hi, going_on = tm.block(t)
            beta = np.empty((hi - lo, model.num_states))
            beta[going_on:] = end_factor / _safe(self.end_norm[going_on:hi - lo])[:, None]
            if going_on:
                nxt = int(tm.bounds[t + 1])
                g = self.emis[nxt:nxt + going_on] * beta_next
                g /= _safe(self.scale[nxt:nxt + going_on])[:, None]
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

    def flat(self, time_major: np.ndarray) -> np.ndarray:
        """A time-major per-item array back in flat item order."""
        out = np.empty_like(time_major)
        out[self.tm.perm] = time_major
        return out


def _viterbi_paths(model: HiddenMarkovDistribution, scores: np.ndarray,
                   offsets: np.ndarray) -> np.ndarray:
    """The most probable state of every flat item, int64 array (n_items,); batched like
    :class:`_Lattice`, in log space, with back-pointers per time-major position."""
    tm = _TimeMajor(offsets)
    logs = scores[tm.perm]
    s = model.num_states
    with np.errstate(divide="ignore"):
        log_step = np.log(model._continue_matrix)
        log_init = np.log(model.initial)
        log_end = np.zeros(s) if model.terminal is None else np.log(model.terminal)
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
    out = np.empty_like(states)
    out[tm.perm] = states
    return out


# ---------------------------------------------------------------------------------------------
# Distribution


def _probabilities(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    p = np.array(value, dtype=np.float64)
    if p.shape != shape:
        raise ParameterError(f"{name} must have shape {shape}, got {p.shape}")
    if not (np.isfinite(p).all() and (p >= 0).all()):
        raise ParameterError(f"{name} must be finite and >= 0, got {p.tolist()}")
    sums = p.sum(axis=-1)
    if not (np.abs(sums - 1.0) < 1e-9).all():
        raise ParameterError(f"{name} must sum to 1{' along each row' if p.ndim > 1 else ''}, "
                             f"got sums {np.atleast_1d(sums).tolist()}")
    return p


@family("HiddenMarkov")
class HiddenMarkovDistribution(EmissionStates, ScoresColumns, Distribution):
    """Hidden Markov model over sequences: ``emissions[s]`` is the law of an item in state s.

    The arguments follow :class:`MixtureDistribution`'s order (the state laws first, then the
    probabilities that choose among them): ``initial`` (S,) are the probabilities of the first
    state, ``transitions`` (S, S) the row-stochastic matrix ``P(next = j | state = i)``, and
    ``terminal`` (S,), optional, the probability that the sequence ends after an item emitted in
    state i (it continues with probability ``1 - terminal[i]``, then moves by ``transitions``)::

        p(x_1..x_T) = sum over paths of  initial[s_1] e_{s_1}(x_1)
                      * prod_t (1 - terminal[s_{t-1}]) transitions[s_{t-1}, s_t] e_{s_t}(x_t)
                      * terminal[s_T]

    Without ``terminal`` the terminal factors are dropped: the model is the law of the items
    given the length, and an empty sequence has log-density 0. With it the length is modelled
    (at least one item; an empty sequence has log-density -inf).

    >>> from mixfold import GaussianDistribution
    >>> hmm = HiddenMarkovDistribution([GaussianDistribution(-1, 1), GaussianDistribution(1, 1)],
    ...                                [0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]])
    >>> round(hmm.log_density([-1.0, -0.8, 1.2]), 6)
    -5.066696
    >>> hmm.viterbi([-1.0, -0.8, 1.2]).tolist()
    [0, 0, 1]
    >>> hmm.posterior([-1.0, 1.2]).round(3).tolist()
    [[0.596, 0.404], [0.272, 0.728]]
    >>> hmm.log_density([])
    0.0
    """

    parameter_coordinates = {"emissions": "parts", "initial": "simplex",
                             "transitions": "simplex", "terminal": "unit"}

    def __init__(self, emissions: Sequence[Distribution], initial: Sequence[float],
                 transitions: Sequence[Sequence[float]], terminal: Sequence[float] | None = None):
        self.emissions = tuple(emissions)
        s = len(self.emissions)
        if s == 0:
            raise ParameterError("a hidden Markov model needs at least one state (emission)")
        bad = [type(e).__name__ for e in self.emissions if not isinstance(e, Distribution)]
        if bad:
            raise ParameterError(f"emissions must be Distributions, got a {bad[0]}")
        self.initial = _probabilities("initial", initial, (s,))
        self.transitions = _probabilities("transitions", transitions, (s, s))
        self.terminal = None
        keep = np.ones(s)
        if terminal is not None:
            tau = np.array(terminal, dtype=np.float64)
            if tau.shape != (s,) or not (np.isfinite(tau).all() and (tau >= 0).all()
                                         and (tau <= 1).all()):
                raise ParameterError(f"terminal must be None or {s} probabilities in [0, 1], "
                                     f"got {tau.tolist()}")
            self.terminal = tau
            keep = 1.0 - tau
        # one step of the chain that continues: P(go on from i, then move to j)
        self._continue_matrix = keep[:, None] * self.transitions
        self.units = Units(self.emissions)

    def emission_log_densities(self, items: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        """log e_s(x) of every flat item under every state, array of shape (n_items, S).

        The per-state step of the E-step (one column per state, independent of the others);
        the recursion over time only reads this matrix.
        """
        return self.units.scores(items, precision)

    def log_density_from_columns(self, enc: SequenceEncoded, scores: np.ndarray) -> np.ndarray:
        return _Lattice(self, scores, enc.offsets).log_likelihood

    def _lattice(self, enc: SequenceEncoded, precision: Precision) -> _Lattice:
        enc, scores = self.labelled_scores(enc, precision)
        return _Lattice(self, scores, enc.offsets)

    def labelled_scores(self, enc: SequenceEncoded | Labelled,
                        precision: Precision) -> tuple[SequenceEncoded, np.ndarray]:
        """(the sequences, :meth:`emission_log_densities` of their items): with state labels
        riding along, each item's log prior added to its scores."""
        if not isinstance(enc, Labelled):
            return enc, self.emission_log_densities(enc.items, precision)
        scores = self.emission_log_densities(enc.inner.items, precision)
        scores += enc.log_prior()
        return enc.inner, scores

    def seq_log_density(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self._lattice(enc, precision).log_likelihood

    def seq_posterior(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        """Posterior state probabilities of every flat item, array of shape (n_items, S).

        Row ``j`` belongs to item ``j`` of ``enc.items``; sequence ``i`` holds the items
        ``enc.offsets[i]:enc.offsets[i + 1]``.
        """
        lattice = self._lattice(enc, precision)
        return lattice.flat(lattice.posteriors())

    def seq_viterbi(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        """The most probable state path, as the state of every flat item: int64 (n_items,)."""
        return _viterbi_paths(self, self.emission_log_densities(enc.items, precision),
                              enc.offsets)

    def estimator(self, **options: Any) -> HiddenMarkovEstimator:
        options.setdefault("terminal", self.terminal is not None)
        return HiddenMarkovEstimator([e.estimator() for e in self.emissions], **options)

    def sampler(self, seed: int | np.random.Generator | None = None, *,
                sample_length: int | None = None) -> Sampler:
        """A seeded sampler; ``sample_length`` runs the chain for exactly that many steps.

        Without a terminal law the sequence length is not modelled, so ``sample_length`` is
        required; with one, ``sample_length`` overrides it (the chain then moves by
        ``transitions`` at every step and never stops early).
        """
        if sample_length is None:
            return Sampler(self, seed)
        if not isinstance(sample_length, (int, np.integer)) or sample_length < 0:
            raise ValueError(f"sample_length must be an integer >= 0, got {sample_length!r}")
        return Sampler(_FixedLength(self, int(sample_length)), seed)

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        if self.terminal is None:
            raise ValueError("this HiddenMarkovDistribution has no terminal law to draw lengths "
                             "from: give it one or use sampler(seed, sample_length=L)")
        return self._draw(n, rng, None)

    def _draw(self, n: int, rng: np.random.Generator, length: int | None) -> list[list]:
        s = self.num_states
        cum_init, cum_step = np.cumsum(self.initial), np.cumsum(self.transitions, axis=1)
        rows, states = [], []
        alive = np.arange(n)
        state = np.minimum((rng.random(n)[:, None] >= cum_init).sum(axis=1), s - 1)
        while alive.size and (length is None or len(rows) < length):
            rows.append(alive)
            states.append(state)
            if length is None:
                going_on = rng.random(alive.size) >= self.terminal[state]
                alive, state = alive[going_on], state[going_on]
            u = rng.random(alive.size)
            state = np.minimum((u[:, None] >= cum_step[state]).sum(axis=1), s - 1)
        row_of = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        state_of = np.concatenate(states) if states else np.zeros(0, dtype=np.int64)
        state_of = state_of[np.argsort(row_of, kind="stable")]  # row-major, steps in order
        items = self.draw_items(state_of, rng)
        counts = np.bincount(row_of, minlength=n)
        ends = np.cumsum(counts).tolist()
        return [items[e - c:e] for e, c in zip(ends, counts.tolist())]

    def parts(self) -> tuple[Distribution, ...]:
        return self.emissions

    def n_parameters(self) -> int:
        s = self.num_states
        chain = s - 1 + s * (s - 1) + (0 if self.terminal is None else s)
        return chain + sum(d.n_parameters() for d in self.parts())

    def _params(self) -> dict[str, Any]:
        return {"emissions": [e.to_dict() for e in self.emissions],
                "initial": self.initial.tolist(), "transitions": self.transitions.tolist(),
                "terminal": None if self.terminal is None else self.terminal.tolist()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> HiddenMarkovDistribution:
        return cls([Distribution.from_dict(e) for e in p["emissions"]], p["initial"],
                   p["transitions"], p.get("terminal"))

    def decomposition(self) -> Decomposition:
        """STATE: the emissions are the units, each scoring every item; the chain couples them
        through the forward-backward recursion (S^2 per item, run centrally), and its initial,
        transition and terminal probabilities are held whole by every worker. Emissions of
        one stackable family are scored together (fused).
        """
        s, items = self.num_states, self.expected_length()
        own = [self.initial, self.transitions, self._continue_matrix]
        own += [] if self.terminal is None else [self.terminal]
        return Decomposition(DecompAxis.STATE, ReductionOp.LOGSUMEXP_RESPONSIBILITY,
                             units=self.emissions,
                             child_roles=tuple(f"state_{k}" for k in range(s)),
                             fused=self.units.stack is not None, unit_rows=items,
                             row_work=items * (s * s + s),
                             param_bytes=sum(a.nbytes for a in own))

    def expected_length(self) -> float:
        """The mean number of items per sequence under the terminal law (1 without one).

        ``initial @ (I - C)^-1 @ 1`` with ``C`` the continuing step; a chain that may never
        stop counts as 1 too (the length is then not a property of the model).
        """
        if self.terminal is None:
            return 1.0
        s = self.num_states
        try:
            visits = np.linalg.solve(np.eye(s) - self._continue_matrix, np.ones(s))
        except np.linalg.LinAlgError:
            return 1.0
        length = float(self.initial @ visits)
        return length if np.isfinite(length) and length >= 1.0 else 1.0


class _FixedLength:
    """What a :class:`Sampler` draws from for ``sampler(seed, sample_length=L)``."""

    def __init__(self, dist: HiddenMarkovDistribution, length: int):
        self.dist = dist
        self.length = length

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        return self.dist._draw(n, rng, self.length)


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


def _posterior_counts(offsets: np.ndarray, resp: np.ndarray,
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


class HiddenMarkovAccumulator(FoldsColumns, Accumulator):
    """Statistics: expected initial-state counts (S,), transition counts (S, S), terminal
    counts (S,) when the terminal law is fitted, and one accumulator per state emission."""

    def __init__(self, emissions: Sequence[Accumulator], slots: tuple[int, ...] | None,
                 terminal: bool = False, keys: str | None = None):
        self.emissions = list(emissions)
        self.keys = keys
        s = len(self.emissions)
        self.initial = np.zeros(s)
        self.transitions = np.zeros((s, s))
        self.terminal = np.zeros(s) if terminal else None
        self.units = UnitAccumulators(self.emissions, slots)

    def own_arrays(self) -> list[np.ndarray]:
        counts = [self.initial, self.transitions]
        return counts if self.terminal is None else counts + [self.terminal]

    def children(self) -> Sequence[Accumulator]:
        return self.emissions

    def seq_update(self, enc: SequenceEncoded, weights: np.ndarray,
                   model: HiddenMarkovDistribution, precision: Precision = FLOAT64) -> np.ndarray:
        enc, scores = model.labelled_scores(enc, precision)
        resp, ll = self.chain_update(enc, weights, model, scores)
        self.units.add(enc.items, resp, model.units, precision)
        return ll

    def chain_update(self, enc: SequenceEncoded, weights: np.ndarray,
                     model: HiddenMarkovDistribution,
                     scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The forward-backward step, between scoring the states' emissions (``scores``,
        (n_items, S)) and adding the items to them: adds the chain's expected counts and
        returns (row-weighted item posteriors (n_items, S) in flat order, per-row
        log-likelihood)."""
        if not kernels_available():
            lattice = _Lattice(model, scores, enc.offsets)
            gamma = lattice.posteriors(weights, self.own_arrays())
            gamma *= weights[lattice.tm.rows][:, None]
            return lattice.flat(gamma), lattice.log_likelihood
        # the compiled recursion, sequence by sequence on all cores
        end = np.ones(model.num_states) if model.terminal is None else model.terminal
        gamma, ll, initial, transitions, terminal = hmm_forward_backward(
            scores, enc.offsets, model.initial, model._continue_matrix, end, weights)
        self.initial += initial
        self.transitions += transitions
        if self.terminal is not None:
            self.terminal += terminal
            ll[enc.counts() == 0] = -np.inf  # the chain always emits at least one item
        return gamma, ll

    def posteriors_from_columns(self, enc: SequenceEncoded, weights: np.ndarray,
                                model: HiddenMarkovDistribution,
                                scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.chain_update(enc, weights, model, scores)

    def add_columns(self, rows: Encoded, resp: np.ndarray, model: HiddenMarkovDistribution,
                    precision: Precision, start: int, stop: int,
                    fold: FoldChildren | None = None) -> None:
        self.units.add(rows, resp, model.units, precision, start, stop, fold)

    def seq_initialize(self, enc: SequenceEncoded, weights: np.ndarray, rng: InitRandom) -> None:
        resp = seeded_posteriors(enc.items, len(self.emissions), rng)
        weighted = resp * np.repeat(weights, enc.counts())[:, None]
        initial, transitions, terminal = _posterior_counts(enc.offsets, resp, weighted)
        self.initial += initial
        self.transitions += transitions
        if self.terminal is not None:
            self.terminal += terminal
        self.units.initialize(enc.items, weighted, rng)


class HiddenMarkovEstimator(Estimator):
    """Estimator of a hidden Markov model with one state per emission estimator.

    ``pseudo_count`` is added to every expected initial, transition (and, with ``terminal``,
    stop and go-on) count before normalising (a symmetric Dirichlet prior). ``initial_prior``
    (a number or (S,)) and ``transition_prior`` (a number or (S, S), row i the prior of state
    i's transitions): Dirichlet concentrations instead, the estimate their maximum a posteriori
    ``max(counts + prior - 1, 0)`` normalised (hmmlearn's ``startprob_prior`` and
    ``transmat_prior``; :mod:`mixfold.families._dirichlet_prior`). ``terminal=True``
    also fits the probability of ending the sequence in each state. Emission estimators with the
    same ``keys`` share their parameters (tied states).

    >>> import mixfold
    >>> from mixfold import GaussianDistribution, GaussianEstimator
    >>> truth = HiddenMarkovDistribution([GaussianDistribution(-2, 1), GaussianDistribution(2, 1)],
    ...                                  [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
    >>> rows = truth.sampler(0, sample_length=20).sample(300)
    >>> fit = mixfold.optimize(rows, HiddenMarkovEstimator([GaussianEstimator()] * 2),
    ...                        progress=False)
    >>> order = np.argsort([e.mu for e in fit.emissions])
    >>> [round(fit.emissions[k].mu) for k in order]
    [-2, 2]
    >>> fit.transitions[np.ix_(order, order)].round(1).tolist()
    [[0.9, 0.1], [0.2, 0.8]]
    """

    option_rules = {"pseudo_count": number(0), "terminal": flag(),
                    "initial_prior": CONCENTRATION, "transition_prior": CONCENTRATION}

    def __init__(self, emissions: Sequence[Estimator], pseudo_count: float = 0.0,
                 terminal: bool = False, keys: str | None = None, *,
                 initial_prior: Any = None, transition_prior: Any = None):
        self.emissions = tuple(emissions)
        if not self.emissions:
            raise ValueError("a hidden Markov model needs at least one emission estimator")
        bad = [type(e).__name__ for e in self.emissions if not isinstance(e, Estimator)]
        if bad:
            raise TypeError(f"emissions must be Estimators, got a {bad[0]}")
        self.check_options(pseudo_count=pseudo_count, terminal=terminal,
                           initial_prior=initial_prior, transition_prior=transition_prior)
        self.pseudo_count = float(pseudo_count)
        self.terminal = bool(terminal)
        self.keys = keys
        self.initial_prior = initial_prior
        self.transition_prior = transition_prior

    @property
    def num_states(self) -> int:
        return len(self.emissions)

    def parts(self) -> tuple[Estimator, ...]:
        return self.emissions

    def encoder(self) -> SequenceEncoder:
        return emissions_encoder(self.emissions)

    def bind(self, encoder: Encoder) -> HiddenMarkovEstimator:
        emissions = bind_emissions(self.emissions, encoder, "hidden Markov")
        return HiddenMarkovEstimator(emissions, self.pseudo_count, self.terminal, self.keys,
                                     initial_prior=self.initial_prior,
                                     transition_prior=self.transition_prior)

    def _make(self) -> HiddenMarkovAccumulator:
        return HiddenMarkovAccumulator([e.accumulator_factory().make() for e in self.emissions],
                                       encoding_slots(self.encoder().item), self.terminal,
                                       self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        return AccumulatorFactory(self._make)

    def estimate(self, nobs: float, stats: Any) -> HiddenMarkovDistribution:
        own, emission_stats = stats
        initial_counts, transition_counts = own[0], own[1]
        pc, s = self.pseudo_count, self.num_states
        mass = dirichlet_mode(initial_counts, self.initial_prior, pc)
        initial = mass / mass.sum() if mass.sum() > 0 else np.full(s, 1.0 / s)
        rows = dirichlet_mode(transition_counts, self.transition_prior, pc)
        totals = rows.sum(axis=1, keepdims=True)
        transitions = np.where(totals > 0, rows / _safe(totals), 1.0 / s)
        terminal = None
        if self.terminal:
            stops = own[2] + pc
            trials = stops + transition_counts.sum(axis=1) + pc
            terminal = np.where(trials > 0, stops / _safe(trials), 0.5)
        # every visit of a state is a first step or the end of a transition
        visits = initial_counts + transition_counts.sum(axis=0)
        emissions = estimate_children(self.emissions, visits, emission_stats)
        return HiddenMarkovDistribution(emissions, initial, transitions, terminal)

    def initial_guess(self, sample: SequenceEncoded, weights: np.ndarray,
                      rng: InitRandom) -> HiddenMarkovDistribution:
        """Seed the emissions as a mixture of the sample's items would be (k-means++ for
        Gaussian families), then the chain from the mixture posteriors of consecutive items.

        The counts are smoothed towards uniform, so no initial state, transition or stop
        starts at probability zero.
        """
        labels = sample if isinstance(sample, Labelled) else None
        sample = sample if labels is None else labels.inner
        items = sample.items if labels is None else Labelled(sample.items, labels.prior)
        item_weights = np.repeat(weights, sample.counts())
        mixture = MixtureEstimator(self.emissions).initial_guess(items, item_weights,
                                                                 rng.child("emissions"))
        if _indistinct(mixture, sample.items):  # (one symbol an item: the items alone make
            return self._random_guess(sample, weights, rng)  # every state the marginal)
        resp = mixture.seq_posterior(items)
        initial, transitions, stops = _posterior_counts(sample.offsets, resp,
                                                        resp * item_weights[:, None])
        s = self.num_states
        smooth = 0.01 * max(float(item_weights.sum()), 1.0) / s
        initial = initial + smooth
        transitions = transitions + smooth
        terminal = None
        if self.terminal:
            visits = initial + transitions.sum(axis=0)
            terminal = np.clip((stops + smooth) / (visits + 2 * smooth), 1e-3, 1 - 1e-3)
        return HiddenMarkovDistribution(mixture.components, initial / initial.sum(),
                                        transitions / transitions.sum(axis=1, keepdims=True),
                                        terminal)

    def _random_guess(self, sample: SequenceEncoded, weights: np.ndarray,
                      rng: InitRandom) -> HiddenMarkovDistribution:
        """States seeded from seeded random posteriors of every item (Dirichlet(1)): distinct
        emissions where the items alone cannot tell the states apart, a saddle EM never
        leaves."""
        acc = self.accumulator_factory().make()
        acc.seq_initialize(sample, weights, rng.child("random states"))
        acc.tie_keys()
        return self.estimate(float(weights.sum()), acc.value())

    def __repr__(self) -> str:
        opts = f", pseudo_count={self.pseudo_count!r}" if self.pseudo_count else ""
        opts += ", terminal=True" if self.terminal else ""
        opts += "".join(f", {name}={getattr(self, name)!r}" for name in
                        ("initial_prior", "transition_prior") if getattr(self, name) is not None)
        opts += f", keys={self.keys!r}" if self.keys is not None else ""
        return f"HiddenMarkovEstimator({list(self.emissions)!r}{opts})"


def _indistinct(mixture: Any, items: Any) -> bool:
    """Whether two components of ``mixture`` score every item alike (states no chain can tell
    apart)."""
    scores = np.array([c.seq_log_density(items) for c in mixture.components])
    return any(np.allclose(scores[i], scores[j], rtol=0, atol=1e-9)
               for i in range(len(scores)) for j in range(i + 1, len(scores)))
