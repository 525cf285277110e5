"""Variable-length sequences of iid items, with an optional law over the sequence length."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import ParameterError
from mixfold.families._coordinates import ParametersByCoordinates
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     ScoreChildren, ScoresChildren, fold_serially,
                                     score_serially)
from mixfold.families._length_law import (LengthLaw, bound_length, expected_length,
                                          length_encoder)
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoder,
                                        Estimator, InitRandom, family)
from mixfold.families._sequence_encoding import SequenceEncoded, SequenceEncoder, flatten_rows
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["SequenceDistribution", "SequenceEstimator", "SequenceAccumulator", "SequenceEncoder",
           "SequenceEncoded", "flatten_rows"]


class _ItemsAndLength:
    """What a sequence's distribution and estimator share: the ``item`` node and the optional
    ``length`` node, its parts in that order, and the encoder of rows of items and lengths."""

    item: Any
    length: Any

    def parts(self) -> tuple[Any, ...]:
        return (self.item,) if self.length is None else (self.item, self.length)

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(self.item.encoder(), length_encoder(self.length))


# ---------------------------------------------------------------------------------------------
# Distribution


@family("Sequence")
class SequenceDistribution(_ItemsAndLength, LengthLaw, ParametersByCoordinates, ScoresChildren,
                           Distribution):
    """A sequence of iid ``item`` values whose length follows ``length`` (``None``: not modelled).

    log p(row) = sum_j log p_item(row[j]) + log p_length(len(row)). The length law is any family
    over integers >= 0 (a Categorical over lengths, a Poisson...); an empty row scores
    log p_length(0).

    Sampling draws the lengths from the length law. Without one, ``sampler(seed,
    sample_length=L)`` draws rows of exactly ``L`` items; ``sampler(seed).sample(n)`` raises
    ``ValueError``.

    >>> from mixfold import CategoricalDistribution
    >>> d = SequenceDistribution(CategoricalDistribution({"a": 0.25, "b": 0.75}),
    ...                          CategoricalDistribution({0: 0.5, 2: 0.5}))
    >>> round(d.log_density(["a", "b"]), 6), round(d.log_density([]), 6)
    (-2.367124, -0.693147)
    >>> rows = d.sampler(0).sample(4)
    >>> {len(r) for r in rows} <= {0, 2}
    True
    >>> [len(r) for r in SequenceDistribution(d.item).sampler(0, sample_length=3).sample(2)]
    [3, 3]
    """

    parameter_coordinates = {"item": "part", "length": "part"}

    class Statistics(NamedTuple):
        """Its own statistics: the weighted count of items (1,) (the item law's weight)."""

        item_weight: np.ndarray

    def __init__(self, item: Distribution, length: Distribution | None = None):
        if not isinstance(item, Distribution):
            raise ParameterError(f"item must be a Distribution, got {type(item).__name__}")
        if length is not None and not isinstance(length, Distribution):
            raise ParameterError(f"length must be None or a Distribution over integers >= 0, "
                                 f"got {type(length).__name__}")
        self.item = item
        self.length = length

    def seq_log_density(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.score_children(enc, precision, score_serially)

    def score_children(self, enc: SequenceEncoded, precision: Precision,
                       score: ScoreChildren) -> np.ndarray:
        """The items' log-densities (from ``score``) summed per row, plus the length's."""
        out = enc.row_sums(score([ChildScore(0, self.item, enc.items)], precision)[0])
        if self.length is not None:
            out += self.length.seq_log_density(enc.lengths, precision)
        return out

    def estimator(self, **options: Any) -> SequenceEstimator:
        length = None if self.length is None else self.length.estimator()
        return SequenceEstimator(self.item.estimator(), length, **options)

    def _rows(self, counts: np.ndarray, rng: np.random.Generator) -> list[list]:
        items = self.item._sample(int(counts.sum()), rng)
        if isinstance(items, np.ndarray):
            items = items.tolist()  # rows of Python scalars, as a user would write them
        ends = np.cumsum(counts).tolist()
        return [items[e - c:e] for e, c in zip(ends, counts.tolist())]

    def decomposition(self) -> Decomposition:
        """SEQUENCE: the items of every row are rows of ``item`` (recursed into, not split); the
        length law scores one length per row and is held whole by every worker.

        ``unit_rows`` is the expected length: exact for a Categorical length law, else the mean
        of 1024 seeded draws; without a length law the item count is unknown and each row is
        costed as one item.
        """
        items = expected_length(self.length)
        shared = () if self.length is None else (self.length,)
        roles = ("item",) if self.length is None else ("item", "length")
        return Decomposition(DecompAxis.SEQUENCE, ReductionOp.REPLICATE, units=(self.item,),
                             shared_children=shared, child_roles=roles, unit_rows=items,
                             row_work=items)


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


class SequenceAccumulator(FoldsChildren, Accumulator):
    """Statistics: the weighted item count (``SequenceDistribution.Statistics``), the item
    accumulator and the length accumulator.

    Every item carries its row's weight.
    """

    def __init__(self, items: Accumulator, length: Accumulator | None = None,
                 keys: str | None = None):
        self.items = items
        self.length = length
        self.keys = keys
        self.item_weight = np.zeros(1)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.item_weight]

    def children(self) -> tuple[Accumulator, ...]:
        return (self.items,) if self.length is None else (self.items, self.length)

    def seq_update(self, enc: SequenceEncoded, weights: np.ndarray, model: SequenceDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        return self.fold_children(enc, weights, model, precision, fold_serially)

    def fold_children(self, enc: SequenceEncoded, weights: np.ndarray,
                      model: SequenceDistribution, precision: Precision,
                      fold: FoldChildren) -> np.ndarray | None:
        """The items folded by ``fold`` (each with its row's weight), the length law serially;
        the items' log-densities summed per row plus the length's."""
        counts = enc.counts()
        self.item_weight += weights @ counts
        item_weights = np.repeat(weights, counts)
        item_ll = fold([ChildFold(0, self.items, enc.items, item_weights, model.item)],
                       precision)[0]
        length_ll = None
        if self.length is not None:
            length_ll = self.length.seq_update(enc.lengths, weights, model.length, precision)
        if item_ll is None:
            return None
        out = enc.row_sums(item_ll)
        if self.length is not None:
            if length_ll is None:
                length_ll = model.length.seq_log_density(enc.lengths, precision)
            out += length_ll
        return out

    def seq_initialize(self, enc: SequenceEncoded, weights: np.ndarray, rng: InitRandom) -> None:
        counts = enc.counts()
        self.item_weight += weights @ counts
        self.items.seq_initialize(enc.items, np.repeat(weights, counts), rng.child("items"))
        if self.length is not None:
            self.length.seq_initialize(enc.lengths, weights, rng.child("length"))


class SequenceEstimator(_ItemsAndLength, Estimator):
    """Estimator of a sequence of iid items (``item``) and, optionally, of its ``length`` law.

    >>> import mixfold
    >>> from mixfold import CategoricalDistribution, CategoricalEstimator
    >>> truth = SequenceDistribution(CategoricalDistribution({"home": 0.6, "cart": 0.4}),
    ...                              CategoricalDistribution({0: 0.2, 1: 0.3, 3: 0.5}))
    >>> rows = truth.sampler(0).sample(4000)
    >>> est = SequenceEstimator(CategoricalEstimator(), CategoricalEstimator())
    >>> fit = mixfold.optimize(rows, est, progress=False)
    >>> round(fit.item.prob("home"), 2), fit.length.levels
    (0.6, (0, 1, 3))
    """

    def __init__(self, item: Estimator, length: Estimator | None = None, keys: str | None = None):
        if not isinstance(item, Estimator):
            raise TypeError(f"item must be an Estimator, got {type(item).__name__}")
        if length is not None and not isinstance(length, Estimator):
            raise TypeError(f"length must be None or an Estimator, got {type(length).__name__}")
        self.item = item
        self.length = length
        self.keys = keys

    def bind(self, encoder: Encoder) -> SequenceEstimator:
        if not isinstance(encoder, SequenceEncoder):
            raise ValueError(f"a sequence estimator needs a SequenceEncoder, got {encoder!r}")
        return SequenceEstimator(self.item.bind(encoder.item),
                                 bound_length(self.length, encoder.length), self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        items = self.item.accumulator_factory()
        length = None if self.length is None else self.length.accumulator_factory()
        keys = self.keys
        return AccumulatorFactory(lambda: SequenceAccumulator(
            items.make(), None if length is None else length.make(), keys))

    def estimate(self, nobs: float, stats: Any) -> SequenceDistribution:
        own, kids = stats
        counts = SequenceDistribution.Statistics(*own)
        item = self.item.estimate(float(counts.item_weight[0]), kids[0])
        length = None if self.length is None else self.length.estimate(nobs, kids[1])
        return SequenceDistribution(item, length)

    def initial_guess(self, sample: SequenceEncoded, weights: np.ndarray,
                      rng: InitRandom) -> SequenceDistribution:
        item = self.item.initial_guess(sample.items, np.repeat(weights, sample.counts()),
                                       rng.child("items"))
        length = None
        if self.length is not None:
            length = self.length.initial_guess(sample.lengths, weights, rng.child("length"))
        return SequenceDistribution(item, length)

    def __repr__(self) -> str:
        return f"SequenceEstimator({self.item!r}, {self.length!r})"
