"""First-order Markov chain over levels: a sequence's first level, then one transition per step.

Rows are variable-length sequences of levels (clickstreams, page paths, event codes). The chain
is observed, so its sufficient statistics are counts: the first levels (L,) and the pairs of
consecutive levels (L, L), and the M-step is their row-normalisation. An optional length law
(any family over integers >= 0) models the sequence length, as :class:`SequenceDistribution`'s
does.

Missing values follow the other families: a missing level inside a sequence is a
:class:`~mixfold.DataError` naming the row and the position; a whole sequence may be missing
when the field is wrapped in :class:`~mixfold.OptionalEstimator`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._coordinates import ParametersByCoordinates
from mixfold.families._length_law import LengthLaw, bound_length, length_encoder
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoder,
                                        Estimator, InitRandom, family)
from mixfold.families._sequence_encoding import SequenceEncoded, SequenceEncoder
from mixfold.families.categorical import (CategoricalEncoder, level_from_json, level_to_json)
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["MarkovChainDistribution", "MarkovChainEstimator", "MarkovChainAccumulator",
           "ChainCounts", "chain_counts", "stochastic"]


class ChainCounts(NamedTuple):
    """A chain's statistics: weighted first-level counts (L,) and transition counts (L, L)."""

    initial: np.ndarray
    transitions: np.ndarray


def chain_counts(enc: SequenceEncoded, weights: np.ndarray, n_levels: int) -> ChainCounts:
    """The weighted :class:`ChainCounts` of encoded level sequences.

    >>> enc = SequenceEncoder(CategoricalEncoder(["a", "b"])).encode([["a", "b", "b"], ["b"]])
    >>> first, pairs = chain_counts(enc, np.ones(2), 2)
    >>> first.tolist(), pairs.tolist()
    ([1.0, 1.0], [[0.0, 1.0], [0.0, 1.0]])
    """
    codes = enc.items.values
    running, firsts = enc.firsts()
    first = np.bincount(codes[firsts], weights=weights[running],
                        minlength=n_levels).astype(np.float64)
    src, dst, rows = enc.steps()
    pairs = np.bincount(codes[src] * n_levels + codes[dst], weights=weights[rows],
                        minlength=n_levels * n_levels).astype(np.float64)
    return ChainCounts(first, pairs.reshape(n_levels, n_levels))


def stochastic(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as probabilities of ``shape`` that sum to 1 (along each row of a matrix); a
    negative, non-finite or unnormalised entry raises a ParameterError naming ``name``."""
    p = np.array(value, dtype=np.float64)
    if p.shape != shape:
        raise ParameterError(f"{name} must have shape {shape}, got {p.shape}")
    if not (np.isfinite(p).all() and (p >= 0).all()):
        raise ParameterError(f"{name} must be finite and >= 0, got {p.tolist()}")
    sums = np.atleast_1d(p.sum(axis=-1))
    if not (np.abs(sums - 1.0) < 1e-9).all():
        raise ParameterError(f"{name} must sum to 1{' along each row' if p.ndim > 1 else ''}, "
                             f"got sums {sums.tolist()}")
    return p


class _LevelsAndLength:
    """What a chain's distribution and estimator share: the optional ``length`` node (its only
    part) and the encoder of rows of ``levels`` and lengths."""

    levels: tuple[Hashable, ...] | None
    length: Any

    def parts(self) -> tuple[Any, ...]:
        return () if self.length is None else (self.length,)

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(CategoricalEncoder(self.levels), length_encoder(self.length))


@family("MarkovChain")
class MarkovChainDistribution(_LevelsAndLength, LengthLaw, ParametersByCoordinates,
                              Distribution):
    """A first-order Markov chain over ``levels``, with an optional ``length`` law.

    ``initial`` (L,) is the law of the first level, ``transitions`` (L, L) the row-stochastic
    matrix ``P(next = j | current = i)``, ``levels`` the L level values (default ``0..L-1``)::

        log p(x_1..x_T) = log initial[x_1] + sum_t log transitions[x_{t-1}, x_t]
                          + log p_length(T)

    Without ``length`` the chain is the law of the levels given the length (an empty sequence
    has log-density 0).

    >>> chain = MarkovChainDistribution([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]],
    ...                                 levels=["home", "cart"])
    >>> round(chain.log_density(["home", "home", "cart"]), 6)  # log(0.5 * 0.9 * 0.1)
    -3.101093
    >>> chain.sampler(0, sample_length=4).sample(2)
    [['home', 'home', 'home', 'home'], ['home', 'cart', 'cart', 'cart']]
    """

    parameter_coordinates = {"levels": "fixed", "initial": "simplex", "transitions": "simplex",
                             "length": "part"}

    def __init__(self, initial: Sequence[float], transitions: Sequence[Sequence[float]],
                 levels: Sequence[Hashable] | None = None, length: Distribution | None = None):
        k = len(initial)
        if k == 0:
            raise ParameterError("a Markov chain needs at least one level")
        self.levels = tuple(range(k)) if levels is None else tuple(levels)
        if len(self.levels) != k or len(set(self.levels)) != k:
            raise ParameterError(f"levels must be {k} distinct values, got {list(self.levels)}")
        self.initial = stochastic("initial", initial, (k,))
        self.transitions = stochastic("transitions", transitions, (k, k))
        if length is not None and not isinstance(length, Distribution):
            raise ParameterError(f"length must be None or a Distribution over integers >= 0, "
                                 f"got {type(length).__name__}")
        self.length = length
        with np.errstate(divide="ignore"):
            self._log_initial = np.log(self.initial)
            self._log_transitions = np.log(self.transitions)

    @property
    def num_levels(self) -> int:
        return len(self.levels)

    def seq_log_density(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        codes = enc.items.values
        out = np.zeros(enc.n_rows)
        running, firsts = enc.firsts()
        out[running] = self._log_initial[codes[firsts]]
        src, dst, rows = enc.steps()
        out += np.bincount(rows, weights=self._log_transitions[codes[src], codes[dst]],
                           minlength=enc.n_rows)
        if self.length is not None:
            out += self.length.seq_log_density(enc.lengths, precision)
        return out

    def estimator(self, **options: Any) -> MarkovChainEstimator:
        length = None if self.length is None else self.length.estimator()
        return MarkovChainEstimator(self.levels, length, **options)

    def _rows(self, counts: np.ndarray, rng: np.random.Generator) -> list[list]:
        """``len(counts)`` walks, walk i of ``counts[i]`` steps, as levels; all walks move one
        step per round."""
        k, longest = self.num_levels, int(counts.max()) if counts.size else 0
        cum_init, cum_step = np.cumsum(self.initial), np.cumsum(self.transitions, axis=1)
        path = np.zeros((counts.size, longest), dtype=np.int64)
        state = np.minimum((rng.random(counts.size)[:, None] >= cum_init).sum(axis=1), k - 1)
        for t in range(longest):
            if t:
                u = rng.random(counts.size)
                state = np.minimum((u[:, None] >= cum_step[state]).sum(axis=1), k - 1)
            path[:, t] = state
        return [[self.levels[c] for c in path[i, :n].tolist()]
                for i, n in enumerate(counts.tolist())]

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "levels": [level_to_json(v) for v in self.levels]}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> MarkovChainDistribution:
        return super()._from_params({**p, "levels": [level_from_json(v) for v in p["levels"]]})

    def decomposition(self) -> Decomposition:
        """Atomic: two table lookups per item; the length law, when there is one, is costed
        once per row."""
        shared = () if self.length is None else (self.length,)
        return Decomposition.atomic(row_work=2.0, shared_children=shared,
                                    param_bytes=2 * (self.initial.nbytes
                                                     + self.transitions.nbytes))


class MarkovChainAccumulator(Accumulator):
    """Statistics: the weighted :class:`ChainCounts`, and the length law's accumulator."""

    def __init__(self, n_levels: int, length: Accumulator | None = None,
                 keys: str | None = None):
        self.initial = np.zeros(n_levels)
        self.transitions = np.zeros((n_levels, n_levels))
        self.length = length
        self.keys = keys

    def own_arrays(self) -> list[np.ndarray]:
        return [self.initial, self.transitions]

    def children(self) -> tuple[Accumulator, ...]:
        return () if self.length is None else (self.length,)

    def seq_update(self, enc: SequenceEncoded, weights: np.ndarray,
                   model: MarkovChainDistribution, precision: Precision = FLOAT64) -> np.ndarray:
        self._add(enc, weights)
        if self.length is not None:
            self.length.seq_update(enc.lengths, weights, model.length, precision)
        return model.seq_log_density(enc, precision)

    def _add(self, enc: SequenceEncoded, weights: np.ndarray) -> None:
        first, pairs = chain_counts(enc, weights, self.initial.size)
        self.initial += first
        self.transitions += pairs

    def seq_initialize(self, enc: SequenceEncoded, weights: np.ndarray, rng: InitRandom) -> None:
        self._add(enc, weights)  # nothing latent: the counts themselves
        if self.length is not None:
            self.length.seq_initialize(enc.lengths, weights, rng.child("length"))


class MarkovChainEstimator(_LevelsAndLength, Estimator):
    """Estimator of a first-order Markov chain over levels (closed form: normalised counts).

    ``levels=None`` learns the levels from the data when it is encoded; ``length``, optional,
    estimates the law of the sequence length; ``pseudo_count`` is added to every first-level and
    transition count (a symmetric Dirichlet prior), so a transition never seen keeps a positive
    probability.

    >>> import mixfold
    >>> truth = MarkovChainDistribution([0.7, 0.3], [[0.9, 0.1], [0.4, 0.6]], levels=["a", "b"])
    >>> rows = truth.sampler(0, sample_length=30).sample(400)
    >>> fit = mixfold.optimize(rows, MarkovChainEstimator(), progress=False)
    >>> fit.transitions.round(1).tolist()
    [[0.9, 0.1], [0.4, 0.6]]
    """

    option_rules = {"pseudo_count": number(0)}

    def __init__(self, levels: Sequence[Hashable] | None = None,
                 length: Estimator | None = None, pseudo_count: float = 0.0,
                 keys: str | None = None):
        if length is not None and not isinstance(length, Estimator):
            raise TypeError(f"length must be None or an Estimator, got {type(length).__name__}")
        self.check_options(pseudo_count=pseudo_count)
        self.levels = None if levels is None else tuple(levels)
        self.length = length
        self.pseudo_count = float(pseudo_count)
        self.keys = keys

    def bind(self, encoder: Encoder) -> MarkovChainEstimator:
        if not isinstance(encoder, SequenceEncoder) or \
                not isinstance(encoder.item, CategoricalEncoder) or encoder.item.levels is None:
            raise ValueError(f"a Markov chain estimator needs a SequenceEncoder of a fitted "
                             f"CategoricalEncoder, got {encoder!r}")
        return MarkovChainEstimator(encoder.item.levels, bound_length(self.length, encoder.length),
                                    self.pseudo_count, self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        if self.levels is None:
            raise ValueError("MarkovChainEstimator has no levels: give levels= or let optimize "
                             "learn them when it encodes the data")
        n, keys = len(self.levels), self.keys
        length = None if self.length is None else self.length.accumulator_factory()
        return AccumulatorFactory(lambda: MarkovChainAccumulator(
            n, None if length is None else length.make(), keys))

    def estimate(self, nobs: float, stats: Any) -> MarkovChainDistribution:
        own, kids = stats
        counts = ChainCounts(*own)
        return self._normalised(counts.initial + self.pseudo_count,
                                counts.transitions + self.pseudo_count,
                                None if self.length is None
                                else self.length.estimate(nobs, kids[0]))

    def _normalised(self, first: np.ndarray, pairs: np.ndarray,
                    length: Distribution | None) -> MarkovChainDistribution:
        """The chain of these counts; a level never seen (no count) is uniform."""
        k = first.size
        initial = first / first.sum() if first.sum() > 0 else np.full(k, 1.0 / k)
        totals = pairs.sum(axis=1, keepdims=True)
        transitions = np.where(totals > 0, pairs / np.where(totals > 0, totals, 1.0), 1.0 / k)
        return MarkovChainDistribution(initial, transitions, self.levels, length)

    def initial_guess(self, sample: SequenceEncoded, weights: np.ndarray,
                      rng: InitRandom) -> MarkovChainDistribution:
        """The sample's counts, smoothed towards uniform (no transition starts impossible)."""
        acc = self.accumulator_factory().make()  # (refuses an estimator without levels)
        acc.seq_initialize(sample, weights, rng)
        first, pairs = ChainCounts(*acc.value().own)
        smooth = 0.01 * max(float(weights.sum()), 1.0) / first.size
        length = None if self.length is None else \
            self.length.initial_guess(sample.lengths, weights, rng.child("length"))
        return self._normalised(first + smooth, pairs + smooth, length)

    def __repr__(self) -> str:
        opts = f", pseudo_count={self.pseudo_count!r}" if self.pseudo_count else ""
        opts += f", keys={self.keys!r}" if self.keys is not None else ""
        return f"MarkovChainEstimator({self.levels!r}, {self.length!r}{opts})"
