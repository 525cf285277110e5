"""Variable-length sequences of iid items, with an optional law over the sequence length."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence as AbcSequence
from typing import Any

import numpy as np

from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import DataError, DataTypeError, ParameterError
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     ScoreChildren, ScoresChildren, fold_serially,
                                     score_serially)
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, Sampler,
                                        family)
from mixfold.families.categorical import CategoricalDistribution
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["SequenceDistribution", "SequenceEstimator", "SequenceAccumulator", "SequenceEncoder",
           "SequenceEncoded", "flatten_rows"]


# ---------------------------------------------------------------------------------------------
# Encoding: one flat encoding of all items, row boundaries as offsets


class SequenceEncoded(Encoded):
    """Ragged rows: the items of all rows in one flat encoding, cut by ``offsets``.

    ``offsets`` has shape (n_rows + 1,), int64, with ``offsets[0] == 0``: row ``i`` holds flat
    items ``offsets[i]:offsets[i + 1]``. ``items.start`` is the global flat index of the first
    item, so seeded per-item randomness does not depend on chunking. ``lengths`` is the encoding
    of the row lengths for the length law (``None`` without one).
    """

    __slots__ = ("offsets", "items", "lengths", "n_rows", "start")

    def __init__(self, offsets: np.ndarray, items: Encoded, lengths: Encoded | None,
                 start: int = 0):
        self.offsets = offsets
        self.items = items
        self.lengths = lengths
        self.n_rows = int(offsets.shape[0]) - 1
        self.start = int(start)

    def counts(self) -> np.ndarray:
        """The number of items of every row, int64 array of shape (n_rows,)."""
        return np.diff(self.offsets)

    def item_rows(self) -> np.ndarray:
        """The row of every flat item, int64 array of shape (items.n_rows,)."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), self.counts())

    def rows(self, begin: int, end: int) -> SequenceEncoded:
        end = min(end, self.n_rows)
        cut = self.offsets[begin:end + 1]
        items = self.items.rows(int(cut[0]), int(cut[-1]))
        lengths = None if self.lengths is None else self.lengths.rows(begin, end)
        return SequenceEncoded(cut - cut[0], items, lengths, self.start + begin)

    def take(self, indices: np.ndarray) -> SequenceEncoded:
        indices = np.asarray(indices, dtype=np.int64)
        counts = self.counts()[indices]
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        # flat item index = old row start + position within the row
        shift = np.repeat(self.offsets[indices] - offsets[:-1], counts)
        items = self.items.take(np.arange(offsets[-1], dtype=np.int64) + shift)
        lengths = None if self.lengths is None else self.lengths.take(indices)
        return SequenceEncoded(offsets, items, lengths)

    @property
    def nbytes(self) -> int:
        extra = 0 if self.lengths is None else self.lengths.nbytes
        return int(self.offsets.nbytes) + self.items.nbytes + extra

    def node_sizes(self) -> list[int]:
        sizes = [self.n_rows] + self.items.node_sizes()
        return sizes if self.lengths is None else sizes + self.lengths.node_sizes()

    def with_starts(self, starts: Iterator[int]) -> SequenceEncoded:
        start = next(starts)
        items = self.items.with_starts(starts)
        lengths = None if self.lengths is None else self.lengths.with_starts(starts)
        return SequenceEncoded(self.offsets, items, lengths, start)

    @classmethod
    def concat(cls, parts: AbcSequence[Encoded]) -> SequenceEncoded:
        counts = np.concatenate([p.counts() for p in parts])
        offsets = np.zeros(counts.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        items = type(parts[0].items).concat([p.items for p in parts])
        lengths = None if parts[0].lengths is None else \
            type(parts[0].lengths).concat([p.lengths for p in parts])
        return SequenceEncoded(offsets, items, lengths, parts[0].start)

    def __repr__(self) -> str:
        return f"SequenceEncoded(n_rows={self.n_rows}, n_items={self.items.n_rows})"


def _is_sequence_row(r: Any) -> bool:
    if isinstance(r, np.ndarray):
        return r.ndim >= 1
    return isinstance(r, AbcSequence) and not isinstance(r, (str, bytes, bytearray))


def _describe(r: Any) -> str:
    r = r.item() if isinstance(r, np.generic) else r
    return f"a {type(r).__name__} {r!r}" if not isinstance(r, np.ndarray) else \
        f"an array of shape {r.shape}"


def flatten_rows(values: Any) -> tuple[Any, np.ndarray]:
    """(all items of all rows in row order, offsets of shape (n_rows + 1,)).

    A non-sequence row (a scalar, a string, None) raises :class:`DataTypeError` with its row.
    """
    if isinstance(values, np.ndarray) and values.ndim >= 2 and values.dtype.kind != "O":
        n, width = values.shape[:2]
        flat = values.reshape((n * width,) + values.shape[2:])
        return flat, np.arange(n + 1, dtype=np.int64) * width
    rows = values if isinstance(values, (list, np.ndarray)) else list(values)
    for i, r in enumerate(rows):
        if not _is_sequence_row(r):
            raise DataTypeError(f"expected a sequence (list, tuple or 1-D array) of items, got "
                                f"{_describe(r)}", row=i)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows)),
              out=offsets[1:])
    return [x for r in rows for x in r], offsets


def _item_error(err: DataError, offsets: np.ndarray) -> DataError:
    """An item's error seen from the sequence: the sequence's row, the item's position first."""
    if err.row is None:
        return err
    row = int(np.searchsorted(offsets, err.row, side="right")) - 1
    return err.within(path_prefix=(int(err.row - offsets[row]),), row=row)


def _length_error(err: DataError) -> DataError:
    return type(err)(f"sequence length: {err.message}", row=err.row, path=err.path)


class SequenceEncoder(Encoder):
    """Flattens sequence rows once: the items go to ``item``, the lengths to ``length``.

    >>> from mixfold.families.categorical import CategoricalEncoder
    >>> enc = SequenceEncoder(CategoricalEncoder()).fit([["b", "a"], [], ["b"]])
    >>> e = enc.encode([["b", "a"], [], ["b"]])
    >>> e.offsets.tolist(), e.items.values.tolist()
    ([0, 2, 2, 3], [1, 0, 1])
    """

    def __init__(self, item: Encoder, length: Encoder | None = None):
        self.item = item
        self.length = length

    def fit(self, values: Any) -> SequenceEncoder:
        """Learn the item vocabulary from all items and the length vocabulary from all lengths.

        A child with nothing to learn from (no items, no rows) stays unfitted, so that fits of
        shards :meth:`merge` into the fit of their union.
        """
        flat, offsets = flatten_rows(values)
        item = self.item
        if len(flat):
            try:
                item = self.item.fit(flat)
            except DataError as err:
                raise _item_error(err, offsets) from None
        length = self.length
        if self.length is not None and len(offsets) > 1:
            try:
                length = self.length.fit(np.diff(offsets))
            except DataError as err:
                raise _length_error(err) from None
        return SequenceEncoder(item, length)

    def merge(self, other: Encoder) -> SequenceEncoder:
        if not isinstance(other, SequenceEncoder) or (self.length is None) != \
                (other.length is None):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        length = None if self.length is None else self.length.merge(other.length)
        return SequenceEncoder(self.item.merge(other.item), length)

    def encode(self, values: Any) -> SequenceEncoded:
        flat, offsets = flatten_rows(values)
        try:
            items = self.item.encode(flat)
        except DataError as err:
            raise _item_error(err, offsets) from None
        lengths = None
        if self.length is not None:
            try:
                lengths = self.length.encode(np.diff(offsets))
            except DataError as err:
                raise _length_error(err) from None
        return SequenceEncoded(offsets, items, lengths)

    def __repr__(self) -> str:
        return f"SequenceEncoder({self.item!r}, {self.length!r})"


# ---------------------------------------------------------------------------------------------
# Distribution


def _row_sums(enc: SequenceEncoded, item_ll: np.ndarray) -> np.ndarray:
    # bincount, not reduceat: reduceat gives an empty row its neighbour's item
    sums = np.bincount(enc.item_rows(), weights=item_ll, minlength=enc.n_rows)
    return sums.astype(np.float64, copy=False)  # bincount of no items is int64


@family("Sequence")
class SequenceDistribution(ScoresChildren, Distribution):
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
        out = _row_sums(enc, score([ChildScore(0, self.item, enc.items)], precision)[0])
        if self.length is not None:
            out += self.length.seq_log_density(enc.lengths, precision)
        return out

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(self.item.encoder(),
                               None if self.length is None else self.length.encoder())

    def estimator(self, **options: Any) -> SequenceEstimator:
        length = None if self.length is None else self.length.estimator()
        return SequenceEstimator(self.item.estimator(), length, **options)

    def sampler(self, seed: int | np.random.Generator | None = None, *,
                sample_length: int | None = None) -> Sampler:
        """A seeded sampler; ``sample_length`` fixes every row's length (overriding the law)."""
        if sample_length is None:
            return Sampler(self, seed)
        if not isinstance(sample_length, (int, np.integer)) or sample_length < 0:
            raise ValueError(f"sample_length must be an integer >= 0, got {sample_length!r}")
        fixed = CategoricalDistribution([1.0], levels=[int(sample_length)])
        return Sampler(SequenceDistribution(self.item, fixed), seed)

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        if self.length is None:
            raise ValueError("this SequenceDistribution has no length law to draw lengths from: "
                             "give it one (e.g. a CategoricalDistribution over lengths) or use "
                             "sampler(seed, sample_length=L)")
        drawn = np.asarray(self.length._sample(n, rng))
        counts = drawn.astype(np.int64) if drawn.dtype.kind in "iuf" else None
        if counts is None or drawn.shape != (n,) or not (counts == drawn).all() or \
                (counts < 0).any():
            raise ValueError(f"the length law {self.length!r} must draw integers >= 0, got "
                             f"{drawn[:5].tolist()}")
        items = self.item._sample(int(counts.sum()), rng)
        if isinstance(items, np.ndarray):
            items = items.tolist()  # rows of Python scalars, as a user would write them
        ends = np.cumsum(counts).tolist()
        return [items[e - c:e] for e, c in zip(ends, counts.tolist())]

    def parts(self) -> tuple[Distribution, ...]:
        return (self.item,) if self.length is None else (self.item, self.length)

    def n_parameters(self) -> int:
        return sum(d.n_parameters() for d in self.parts())

    def _params(self) -> dict[str, Any]:
        return {"item": self.item.to_dict(),
                "length": None if self.length is None else self.length.to_dict()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> SequenceDistribution:
        length = p.get("length")
        return cls(Distribution.from_dict(p["item"]),
                   None if length is None else Distribution.from_dict(length))

    def decomposition(self) -> Decomposition:
        """SEQUENCE: the items of every row are rows of ``item`` (recursed into, not split); the
        length law scores one length per row and is held whole by every worker.

        ``unit_rows`` is the expected length: exact for a Categorical length law, else the mean
        of 1024 seeded draws; without a length law the item count is unknown and each row is
        costed as one item.
        """
        items = self.expected_length()
        shared = () if self.length is None else (self.length,)
        roles = ("item",) if self.length is None else ("item", "length")
        return Decomposition(DecompAxis.SEQUENCE, ReductionOp.REPLICATE, units=(self.item,),
                             shared_children=shared, child_roles=roles, unit_rows=items,
                             row_work=items)

    def expected_length(self) -> float:
        """The mean number of items per row under the length law (1 without one)."""
        law = self.length
        if law is None:
            return 1.0
        if isinstance(law, CategoricalDistribution) and \
                all(isinstance(v, (int, float)) for v in law.levels):
            return float(law.probs @ np.asarray(law.levels, dtype=np.float64))
        return float(np.mean(np.asarray(law._sample(1024, np.random.default_rng(0)),
                                        dtype=np.float64)))


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


class SequenceAccumulator(FoldsChildren, Accumulator):
    """Statistics: the weighted item count, the item accumulator and the length accumulator.

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
        out = _row_sums(enc, item_ll)
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


class SequenceEstimator(Estimator):
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

    def parts(self) -> tuple[Estimator, ...]:
        return (self.item,) if self.length is None else (self.item, self.length)

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(self.item.encoder(),
                               None if self.length is None else self.length.encoder())

    def bind(self, encoder: Encoder) -> SequenceEstimator:
        if not isinstance(encoder, SequenceEncoder):
            raise ValueError(f"a sequence estimator needs a SequenceEncoder, got {encoder!r}")
        if (self.length is None) != (encoder.length is None):
            raise ValueError("the encoder and the estimator disagree on whether the sequence "
                             "length is modelled")
        length = None if self.length is None else self.length.bind(encoder.length)
        return SequenceEstimator(self.item.bind(encoder.item), length, self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        items = self.item.accumulator_factory()
        length = None if self.length is None else self.length.accumulator_factory()
        keys = self.keys
        return AccumulatorFactory(lambda: SequenceAccumulator(
            items.make(), None if length is None else length.make(), keys))

    def estimate(self, nobs: float, stats: Any) -> SequenceDistribution:
        (item_weight,), kids = stats
        item = self.item.estimate(float(item_weight[0]), kids[0])
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

