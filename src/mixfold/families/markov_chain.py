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
from typing import Any

import numpy as np

from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoder,
                                        Estimator, InitRandom, Sampler, family)
from mixfold.families.categorical import (CategoricalDistribution, CategoricalEncoder,
                                          level_from_json, level_to_json)
from mixfold.families.sequence import SequenceEncoded, SequenceEncoder
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["MarkovChainDistribution", "MarkovChainEstimator", "MarkovChainAccumulator",
           "chain_counts", "stochastic"]


def chain_counts(enc: SequenceEncoded, weights: np.ndarray,
                 n_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Weighted (first-level counts (L,), transition counts (L, L)) of encoded level sequences.

    >>> enc = SequenceEncoder(CategoricalEncoder(["a", "b"])).encode([["a", "b", "b"], ["b"]])
    >>> first, pairs = chain_counts(enc, np.ones(2), 2)
    >>> first.tolist(), pairs.tolist()
    ([1.0, 1.0], [[0.0, 1.0], [0.0, 1.0]])
    """
    codes, offsets = enc.items.values, enc.offsets
    running = offsets[1:] > offsets[:-1]
    first = np.bincount(codes[offsets[:-1][running]], weights=weights[running],
                        minlength=n_levels).astype(np.float64)
    src, dst, rows = _pairs(enc)
    pairs = np.bincount(codes[src] * n_levels + codes[dst], weights=weights[rows],
                        minlength=n_levels * n_levels).astype(np.float64)
    return first, pairs.reshape(n_levels, n_levels)


def _pairs(enc: SequenceEncoded) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat index of each step's source item, of its target item, the step's row)."""
    rows = enc.item_rows()
    src = np.flatnonzero(rows[:-1] == rows[1:]) if rows.size > 1 else np.zeros(0, np.int64)
    return src, src + 1, rows[src]


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


@family("MarkovChain")
class MarkovChainDistribution(Distribution):
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
        codes, offsets = enc.items.values, enc.offsets
        out = np.zeros(enc.n_rows)
        running = offsets[1:] > offsets[:-1]
        out[running] = self._log_initial[codes[offsets[:-1][running]]]
        src, dst, rows = _pairs(enc)
        out += np.bincount(rows, weights=self._log_transitions[codes[src], codes[dst]],
                           minlength=enc.n_rows)
        if self.length is not None:
            out += self.length.seq_log_density(enc.lengths, precision)
        return out

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(CategoricalEncoder(self.levels),
                               None if self.length is None else self.length.encoder())

    def estimator(self, **options: Any) -> MarkovChainEstimator:
        length = None if self.length is None else self.length.estimator()
        return MarkovChainEstimator(self.levels, length, **options)

    def sampler(self, seed: int | np.random.Generator | None = None, *,
                sample_length: int | None = None) -> Sampler:
        """A seeded sampler; ``sample_length`` fixes every row's length (overriding the law)."""
        if sample_length is None:
            return Sampler(self, seed)
        if not isinstance(sample_length, (int, np.integer)) or sample_length < 0:
            raise ValueError(f"sample_length must be an integer >= 0, got {sample_length!r}")
        fixed = CategoricalDistribution([1.0], levels=[int(sample_length)])
        return Sampler(MarkovChainDistribution(self.initial, self.transitions, self.levels,
                                               fixed), seed)

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        if self.length is None:
            raise ValueError("this MarkovChainDistribution has no length law to draw lengths "
                             "from: give it one or use sampler(seed, sample_length=L)")
        lengths = np.asarray(self.length._sample(n, rng))
        counts = lengths.astype(np.int64) if lengths.dtype.kind in "iuf" else None
        if counts is None or counts.shape != (n,) or (counts != lengths).any() or \
                (counts < 0).any():
            raise ValueError(f"the length law {self.length!r} must draw integers >= 0, got "
                             f"{lengths[:5].tolist()}")
        codes = self._walk(counts, rng)
        return [[self.levels[c] for c in row] for row in codes]

    def _walk(self, counts: np.ndarray, rng: np.random.Generator) -> list[list[int]]:
        """The level codes of ``len(counts)`` walks, walk i of ``counts[i]`` steps; all walks
        move one step per round."""
        k, longest = self.num_levels, int(counts.max()) if counts.size else 0
        cum_init, cum_step = np.cumsum(self.initial), np.cumsum(self.transitions, axis=1)
        path = np.zeros((counts.size, longest), dtype=np.int64)
        state = np.minimum((rng.random(counts.size)[:, None] >= cum_init).sum(axis=1), k - 1)
        for t in range(longest):
            if t:
                u = rng.random(counts.size)
                state = np.minimum((u[:, None] >= cum_step[state]).sum(axis=1), k - 1)
            path[:, t] = state
        return [path[i, :c].tolist() for i, c in enumerate(counts.tolist())]

    def parts(self) -> tuple[Distribution, ...]:
        return () if self.length is None else (self.length,)

    def n_parameters(self) -> int:
        k = self.num_levels
        return k - 1 + k * (k - 1) + sum(d.n_parameters() for d in self.parts())

    def _params(self) -> dict[str, Any]:
        return {"levels": [level_to_json(v) for v in self.levels],
                "initial": self.initial.tolist(), "transitions": self.transitions.tolist(),
                "length": None if self.length is None else self.length.to_dict()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> MarkovChainDistribution:
        length = p.get("length")
        return cls(p["initial"], p["transitions"], [level_from_json(v) for v in p["levels"]],
                   None if length is None else Distribution.from_dict(length))

    def decomposition(self) -> Decomposition:
        """Atomic: two table lookups per item; the length law, when there is one, is costed
        once per row."""
        shared = () if self.length is None else (self.length,)
        return Decomposition.atomic(row_work=2.0, shared_children=shared,
                                    param_bytes=2 * (self.initial.nbytes
                                                     + self.transitions.nbytes))


class MarkovChainAccumulator(Accumulator):
    """Statistics: weighted first-level counts (L,), transition counts (L, L), and the length
    law's accumulator."""

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


class MarkovChainEstimator(Estimator):
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

    def parts(self) -> tuple[Estimator, ...]:
        return () if self.length is None else (self.length,)

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(CategoricalEncoder(self.levels),
                               None if self.length is None else self.length.encoder())

    def bind(self, encoder: Encoder) -> MarkovChainEstimator:
        if not isinstance(encoder, SequenceEncoder) or \
                not isinstance(encoder.item, CategoricalEncoder) or encoder.item.levels is None:
            raise ValueError(f"a Markov chain estimator needs a SequenceEncoder of a fitted "
                             f"CategoricalEncoder, got {encoder!r}")
        if (self.length is None) != (encoder.length is None):
            raise ValueError("the encoder and the estimator disagree on whether the sequence "
                             "length is modelled")
        length = None if self.length is None else self.length.bind(encoder.length)
        return MarkovChainEstimator(encoder.item.levels, length, self.pseudo_count, self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        if self.levels is None:
            raise ValueError("MarkovChainEstimator has no levels: give levels= or let optimize "
                             "learn them when it encodes the data")
        n, keys = len(self.levels), self.keys
        length = None if self.length is None else self.length.accumulator_factory()
        return AccumulatorFactory(lambda: MarkovChainAccumulator(
            n, None if length is None else length.make(), keys))

    def estimate(self, nobs: float, stats: Any) -> MarkovChainDistribution:
        (first, pairs), kids = stats
        return self._normalised(first + self.pseudo_count, pairs + self.pseudo_count,
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
        acc = self.accumulator_factory().make()
        acc.seq_initialize(sample, weights, rng)
        (first, pairs), kids = acc.value()
        smooth = 0.01 * max(float(weights.sum()), 1.0) / first.size
        length = None if self.length is None else \
            self.length.initial_guess(sample.lengths, weights, rng.child("length"))
        return self._normalised(first + smooth, pairs + smooth, length)

    def __repr__(self) -> str:
        opts = f", pseudo_count={self.pseudo_count!r}" if self.pseudo_count else ""
        opts += f", keys={self.keys!r}" if self.keys is not None else ""
        return f"MarkovChainEstimator({self.levels!r}, {self.length!r}{opts})"
