"""Hidden semi-Markov (explicit-duration) model: hidden states that last a duration of their own
law, one emission law per state.

A sequence is cut into segments; each segment's state is drawn from ``initial`` (the first) or
from ``transitions`` (the next, given the last), lasts d steps with d drawn from that state's
duration law truncated to 1..``max_duration``, and emits its d items from that state's emission
law. The last segment is cut by the end of the sequence: it scores P(duration >= d), as the
length is not modelled (the law of the items given the length, as a hidden Markov model
without a terminal law). An empty sequence has log-density 0.

The E-step is the segment forward-backward in log space, O(T * S * D) per sequence (compiled:
:func:`mixfold.compute.kernels.hsmm_forward_backward`; NumPy reference:
:mod:`mixfold.compute.semi_markov`). The item posteriors go to the emission accumulators as row
weights; the expected durations go to the duration accumulators as weights of the values they
read, so any family over integers fits them: a count family (Poisson, NegativeBinomial,
Geometric...) models the steps after the first, d - 1 >= 0 (a shifted law, as pyhsmm's), and a
Categorical's levels are the durations 1..D themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.compute.kernels import (hsmm_forward_backward, hsmm_log_likelihood,
                                     kernels_available)
from mixfold.compute.segments import label_runs
from mixfold.compute.semi_markov import (SegmentStatistics, segment_forward_backward,
                                         segment_laws, segment_log_likelihood, segment_viterbi)
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import ParameterError
from mixfold.families._coordinates import ParametersByCoordinates
from mixfold.families._durations import (DEFAULT_MAX_DURATION, LARGEST_MAX_DURATION,
                                         bound_durations, duration_log_probabilities,
                                         encoded_durations)
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, family)
from mixfold.families._states import (EmissionEstimators, EmissionStates, StatesFold,
                                      bind_emissions)
from mixfold.families.markov_chain import stochastic
from mixfold.families.mixture import MixtureEstimator
from mixfold.families.sequence import SequenceEncoded
from mixfold.families.units import UnitAccumulators, Units, encoding_slots, seeded_posteriors
from mixfold.options import integer, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["HiddenSemiMarkovDistribution", "HiddenSemiMarkovEstimator",
           "HiddenSemiMarkovAccumulator", "duration_log_probabilities"]


class _StatesAndDurations:
    """What the model and its estimator share: one emission and one duration node per state,
    its parts in that order."""

    emissions: tuple[Any, ...]
    durations: tuple[Any, ...]

    def parts(self) -> tuple[Any, ...]:
        return self.emissions + self.durations


@family("HiddenSemiMarkov")
class HiddenSemiMarkovDistribution(_StatesAndDurations, EmissionStates, ParametersByCoordinates,
                                   Distribution):
    """Explicit-duration hidden Markov model: ``emissions[s]`` is the law of an item in state s,
    ``durations[s]`` the law of how many steps state s lasts, truncated to 1..``max_duration``.

    ``initial`` (S,) are the probabilities of the first segment's state and ``transitions``
    (S, S) the row-stochastic matrix from a segment's state to the next one's (explicit
    durations make self-moves redundant; the estimator keeps the diagonal at zero when S > 1).
    A duration law is any family over integers: a count law (``PoissonDistribution(5.0)``,
    ``NegativeBinomialDistribution``) is the law of d - 1, the steps after the first; a
    ``CategoricalDistribution``'s levels are the durations 1..D. Either is truncated to
    1..D and renormalised (``duration_log_probabilities``).

    >>> from mixfold import GaussianDistribution, PoissonDistribution
    >>> hsmm = HiddenSemiMarkovDistribution(
    ...     [GaussianDistribution(-1, 1), GaussianDistribution(1, 1)],
    ...     [PoissonDistribution(4.0), PoissonDistribution(2.0)],
    ...     [0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]], max_duration=10)
    >>> x = [-1.0, -1.2, -0.8, 1.1, 0.9]
    >>> round(hsmm.log_density(x), 6)
    -7.079371
    >>> hsmm.viterbi(x).tolist()
    [0, 0, 0, 1, 1]
    >>> hsmm.posterior(x).round(2)[:, 0].tolist()
    [0.99, 1.0, 0.94, 0.19, 0.08]
    """

    parameter_coordinates = {"emissions": "parts", "durations": "parts", "initial": "simplex",
                             "transitions": "simplex", "max_duration": "fixed"}

    class Statistics(NamedTuple):
        """Its own statistics: expected initial-state counts (S,), transition counts (S, S)
        and state occupancies (S,) (the emissions' weights)."""

        initial: np.ndarray
        transitions: np.ndarray
        occupancy: np.ndarray

    def __init__(self, emissions: Sequence[Distribution], durations: Sequence[Distribution],
                 initial: Sequence[float], transitions: Sequence[Sequence[float]],
                 max_duration: int = DEFAULT_MAX_DURATION):
        self.emissions, self.durations = tuple(emissions), tuple(durations)
        s = len(self.emissions)
        if s == 0:
            raise ParameterError("a hidden semi-Markov model needs at least one state")
        if len(self.durations) != s:
            raise ParameterError(f"durations must be one law per state ({s}), got "
                                 f"{len(self.durations)}")
        bad = [type(e).__name__ for e in self.emissions + self.durations
               if not isinstance(e, Distribution)]
        if bad:
            raise ParameterError(f"emissions and durations must be Distributions, got a "
                                 f"{bad[0]}")
        if not isinstance(max_duration, (int, np.integer)) or \
                not 1 <= max_duration <= LARGEST_MAX_DURATION:
            raise ParameterError(f"max_duration must be an integer in [1, "
                                 f"{LARGEST_MAX_DURATION}], got {max_duration!r}")
        self.max_duration = int(max_duration)
        self.initial = stochastic("initial", initial, (s,))
        self.transitions = stochastic("transitions", transitions, (s, s))
        self.duration_table = np.array([duration_log_probabilities(d, self.max_duration)
                                        for d in self.durations])
        self._laws = segment_laws(self.initial, self.transitions, self.duration_table)
        self.units = Units(self.emissions)

    def emission_log_densities(self, items: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        """log e_s(x) of every flat item under every state, array of shape (n_items, S), in C
        order: the segment recursion reads each item's S scores together."""
        scores = np.empty((items.n_rows, self.num_states))
        self.emission_columns(items, precision, 0, self.num_states, scores)
        return scores

    def log_density_from_columns(self, enc: SequenceEncoded, scores: np.ndarray) -> np.ndarray:
        """The forward pass alone over the emissions' log-densities (n_items, S)."""
        if kernels_available():
            return hsmm_log_likelihood(scores, enc.offsets, self._laws)
        return segment_log_likelihood(scores, enc.offsets, self._laws)

    def lattice(self, scores: np.ndarray, offsets: np.ndarray,
                weights: np.ndarray) -> SegmentStatistics:
        """The forward-backward results of emission log-densities ``scores`` (n_items, S) of
        the sequences cut by ``offsets``: compiled where the kernels run, else NumPy."""
        if kernels_available():
            return hsmm_forward_backward(scores, offsets, self._laws, weights)
        return segment_forward_backward(scores, offsets, self._laws, weights)

    def seq_log_density(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.log_density_from_columns(enc, self.emission_log_densities(enc.items,
                                                                              precision))

    def seq_posterior(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        """Posterior state probabilities of every flat item, array of shape (n_items, S)."""
        return self.lattice(self.emission_log_densities(enc.items, precision), enc.offsets,
                            np.ones(enc.n_rows)).gamma

    def seq_viterbi(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        """The state of every flat item in the most probable segmentation: int64 (n_items,)."""
        return segment_viterbi(self.emission_log_densities(enc.items, precision), enc.offsets,
                               self._laws)

    def estimator(self, **options: Any) -> HiddenSemiMarkovEstimator:
        options.setdefault("max_duration", self.max_duration)
        return HiddenSemiMarkovEstimator([e.estimator() for e in self.emissions],
                                         [d.estimator() for d in self.durations], **options)

    def _states(self, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
        """The hidden state of each item of n rows of ``length`` items, row-major, segment by
        segment for all rows at once."""
        s = self.num_states
        cum_init, cum_step = np.cumsum(self.initial), np.cumsum(self.transitions, axis=1)
        cum_dur = np.cumsum(np.exp(self.duration_table), axis=1)
        filled, states = np.zeros(n, dtype=np.int64), np.zeros((n, length), dtype=np.int64)
        state = np.minimum((rng.random(n)[:, None] >= cum_init).sum(axis=1), s - 1)
        while (filled < length).any():
            d = 1 + np.minimum((rng.random(n)[:, None] >= cum_dur[state]).sum(axis=1),
                               self.max_duration - 1)
            stop = np.minimum(filled + d, length)
            t = np.arange(length)[None, :]
            inside = (t >= filled[:, None]) & (t < stop[:, None])
            states[inside] = np.broadcast_to(state[:, None], (n, length))[inside]
            filled = stop
            state = np.minimum((rng.random(n)[:, None] >= cum_step[state]).sum(axis=1), s - 1)
        return states.reshape(-1)

    def _draw(self, n: int, rng: np.random.Generator, length: int) -> list[list]:
        state_of = self._states(n, length, rng)
        items = self.draw_items(state_of, rng)
        return [items[i * length:(i + 1) * length] for i in range(n)]

    def n_parameters(self) -> int:
        s = self.num_states
        moves = s * (s - 2) if s > 1 else 0  # the diagonal is not free
        return s - 1 + moves + sum(d.n_parameters() for d in self.parts())

    def decomposition(self) -> Decomposition:
        """STATE: the emissions are the units, each scoring every item; the segment recursion
        (S * D per item, three passes) runs centrally, and the duration laws and the chain are
        held whole by every worker."""
        s, d = self.num_states, self.max_duration
        own = [self.initial, self.transitions, self.duration_table, *self._laws]
        return Decomposition(DecompAxis.STATE, ReductionOp.LOGSUMEXP_RESPONSIBILITY,
                             units=self.emissions, shared_children=self.durations,
                             child_roles=tuple(f"state_{k}" for k in range(s))
                             + tuple(f"duration_{k}" for k in range(s)),
                             fused=self.units.stack is not None, unit_rows=1.0,
                             row_work=3.0 * s * d + s * s,
                             param_bytes=sum(a.nbytes for a in own))


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


class HiddenSemiMarkovAccumulator(StatesFold, Accumulator):
    """Statistics: ``HiddenSemiMarkovDistribution.Statistics`` (expected initial-state,
    transition and occupancy counts), one accumulator per state emission and one per duration
    law (fed the values 1..D weighted by their expected counts)."""

    def __init__(self, emissions: Sequence[Accumulator], durations: Sequence[Accumulator],
                 duration_values: Sequence[Encoded], slots: tuple[int, ...] | None,
                 keys: str | None = None):
        self.emissions, self.durations = list(emissions), list(durations)
        self.duration_values = duration_values
        self.keys = keys
        s = len(self.emissions)
        self.initial, self.transitions = np.zeros(s), np.zeros((s, s))
        self.occupancy = np.zeros(s)
        self.units = UnitAccumulators(self.emissions, slots)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.initial, self.transitions, self.occupancy]

    def children(self) -> Sequence[Accumulator]:
        return self.emissions + self.durations

    def posteriors_from_columns(self, enc: SequenceEncoded, weights: np.ndarray,
                                model: HiddenSemiMarkovDistribution,
                                scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The segment forward-backward: adds the chain's and the durations' expected counts;
        returns (row-weighted item posteriors (n_items, S), per-row log-likelihood)."""
        stats = model.lattice(scores, enc.offsets, weights)
        self.initial += stats.initial
        self.transitions += stats.transitions
        self.occupancy += stats.gamma.sum(axis=0)
        for k, acc in enumerate(self.durations):
            acc.seq_update(self.duration_values[k], stats.durations[k], model.durations[k])
        return stats.gamma, stats.log_likelihood

    def seq_initialize(self, enc: SequenceEncoded, weights: np.ndarray, rng: InitRandom) -> None:
        # Dirichlet(1) state posteriors per item; segments of one step each
        resp = seeded_posteriors(enc.items, len(self.emissions), rng)
        weighted = resp * np.repeat(weights, enc.counts())[:, None]
        self.occupancy += weighted.sum(axis=0)
        self.initial += weighted[enc.firsts()[1]].sum(axis=0)
        self.units.initialize(enc.items, weighted, rng)
        for k, (acc, values) in enumerate(zip(self.durations, self.duration_values)):
            spread = np.full(values.n_rows, weighted[:, k].sum() / values.n_rows)
            acc.seq_initialize(values, spread, rng.child(f"duration {k}"))


class HiddenSemiMarkovEstimator(_StatesAndDurations, EmissionEstimators, Estimator):
    """Estimator of an explicit-duration hidden Markov model: one state per emission estimator,
    each with its duration estimator (any family over integers).

    ``max_duration`` (D) bounds every duration (the E-step costs O(T * S * D)); ``pseudo_count``
    is added to every expected initial and (off-diagonal) transition count. The transitions
    between distinct states are fitted (the diagonal stays zero when S > 1: a state's stay is
    its duration). A duration family other than a Categorical over 1..D is fitted to the
    expected durations by its own M-step, which does not see the truncation to 1..D: choose D
    past the durations' tail.

    >>> import mixfold
    >>> from mixfold import GaussianDistribution, GaussianEstimator, PoissonDistribution
    >>> from mixfold import PoissonEstimator
    >>> truth = HiddenSemiMarkovDistribution(
    ...     [GaussianDistribution(-2, 1), GaussianDistribution(2, 1)],
    ...     [PoissonDistribution(8.0), PoissonDistribution(3.0)],
    ...     [0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]], max_duration=30)
    >>> rows = truth.sampler(0, sample_length=60).sample(100)
    >>> est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 2, [PoissonEstimator()] * 2,
    ...                                 max_duration=30)
    >>> fit = mixfold.optimize(rows, est, progress=False)
    >>> order = np.argsort([e.mu for e in fit.emissions])
    >>> [round(fit.emissions[k].mu) for k in order], [round(fit.durations[k].lam) for k in order]
    ([-2, 2], [8, 3])
    """

    option_rules = {"pseudo_count": number(0), "max_duration": integer(1, LARGEST_MAX_DURATION)}

    def __init__(self, emissions: Sequence[Estimator], durations: Sequence[Estimator],
                 max_duration: int = DEFAULT_MAX_DURATION, pseudo_count: float = 0.0,
                 keys: str | None = None):
        self.emissions, self.durations = tuple(emissions), tuple(durations)
        if not self.emissions:
            raise ValueError("a hidden semi-Markov model needs at least one emission estimator")
        if len(self.durations) != len(self.emissions):
            raise ValueError(f"durations must be one estimator per state "
                             f"({len(self.emissions)}), got {len(self.durations)}")
        bad = [type(e).__name__ for e in self.emissions + self.durations
               if not isinstance(e, Estimator)]
        if bad:
            raise TypeError(f"emissions and durations must be Estimators, got a {bad[0]}")
        self.check_options(pseudo_count=pseudo_count, max_duration=max_duration)
        self.max_duration = int(max_duration)
        self.pseudo_count = float(pseudo_count)
        self.keys = keys

    def bind(self, encoder: Encoder) -> HiddenSemiMarkovEstimator:
        return HiddenSemiMarkovEstimator(bind_emissions(self.emissions, encoder,
                                                        "hidden semi-Markov"),
                                         bound_durations(self.durations, self.max_duration),
                                         self.max_duration, self.pseudo_count, self.keys)

    def _make(self) -> HiddenSemiMarkovAccumulator:
        return HiddenSemiMarkovAccumulator(
            [e.accumulator_factory().make() for e in self.emissions],
            [d.accumulator_factory().make() for d in self.durations],
            [encoded_durations(d, self.max_duration) for d in self.durations],
            encoding_slots(self.encoder().item), self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        return AccumulatorFactory(self._make)

    def estimate(self, nobs: float, stats: Any) -> HiddenSemiMarkovDistribution:
        own, kids = stats
        counts = HiddenSemiMarkovDistribution.Statistics(*own)
        s = self.num_states
        emission_stats, duration_stats = kids[:s], kids[s:]
        initial, transitions = self._chain(counts.initial, counts.transitions)
        emissions = [est.estimate(float(counts.occupancy[k]), emission_stats[k])
                     for k, est in enumerate(self.emissions)]
        # every segment is a first one or the end of a move
        segments = counts.initial + counts.transitions.sum(axis=0)
        durations = [est.estimate(float(segments[k]), duration_stats[k])
                     for k, est in enumerate(self.durations)]
        return HiddenSemiMarkovDistribution(emissions, durations, initial, transitions,
                                            self.max_duration)

    def _chain(self, initial_counts: np.ndarray,
               transition_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(initial, transitions) from expected counts plus ``pseudo_count`` (a state with no
        moves out leaves uniformly to the others)."""
        s, pc = self.num_states, self.pseudo_count
        mass = initial_counts + pc
        initial = mass / mass.sum() if mass.sum() > 0 else np.full(s, 1.0 / s)
        if s == 1:
            return initial, np.ones((1, 1))
        off = 1.0 - np.eye(s)
        rows = (transition_counts + pc) * off
        totals = rows.sum(axis=1, keepdims=True)
        transitions = np.where(totals > 0, rows / np.where(totals > 0, totals, 1.0),
                               off / (s - 1))
        return initial, transitions

    def initial_guess(self, sample: SequenceEncoded, weights: np.ndarray,
                      rng: InitRandom) -> HiddenSemiMarkovDistribution:
        """Seed the emissions as a mixture of the sample's items would be (k-means++ for
        Gaussian families); then the chain and the durations from the runs of the mixture's
        most probable states, smoothed so that no state, move or duration starts impossible.
        """
        item_weights = np.repeat(weights, sample.counts())
        mixture = MixtureEstimator(self.emissions).initial_guess(sample.items, item_weights,
                                                                 rng.child("emissions"))
        labels = mixture.seq_posterior(sample.items).argmax(axis=1)
        s, d = self.num_states, self.max_duration
        runs = label_runs(labels, sample.offsets, item_weights, s, d)
        smooth = 0.01 * max(float(item_weights.sum()), 1.0) / s
        initial, transitions = self._chain(runs.initial + smooth, runs.transitions + smooth)
        durations = [est.initial_guess(encoded_durations(est, d), runs.durations[k] + smooth / d,
                                       rng.child(f"duration {k}"))
                     for k, est in enumerate(self.durations)]
        return HiddenSemiMarkovDistribution(mixture.components, durations, initial, transitions,
                                            self.max_duration)

    def __repr__(self) -> str:
        opts = f", max_duration={self.max_duration}"
        opts += f", pseudo_count={self.pseudo_count!r}" if self.pseudo_count else ""
        opts += f", keys={self.keys!r}" if self.keys is not None else ""
        return (f"HiddenSemiMarkovEstimator({list(self.emissions)!r}, "
                f"{list(self.durations)!r}{opts})")
