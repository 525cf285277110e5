"""How sequence rows are read: ragged rows of items flattened once into one encoding of all
items (its children's), cut by offsets (:class:`SequenceEncoded`), the row lengths encoded for a
length law; an item's error named by its sequence's row and its position.

>>> from mixfold.families.categorical import CategoricalEncoder
>>> enc = SequenceEncoder(CategoricalEncoder()).fit([["b", "a"], [], ["b"]])
>>> e = enc.encode([["b", "a"], [], ["b"]])
>>> e.offsets.tolist(), e.counts().tolist(), e.steps()[0].tolist()
([0, 2, 2, 3], [2, 0, 1], [0])
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence as AbcSequence
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError
from mixfold.families._protocol import Encoded, Encoder

__all__ = ["SequenceEncoded", "SequenceEncoder", "flatten_rows"]

#: where these classes are public (and were defined before this module): pickles, reprs and a
#: checkpoint's fingerprint name them there
PUBLIC_HOME = "mixfold.families.sequence"



class SequenceEncoded(Encoded):
    """Ragged rows: the items of all rows in one flat encoding, cut by ``offsets``.

    ``offsets`` has shape (n_rows + 1,), int64, with ``offsets[0] == 0``: row ``i`` holds flat
    items ``offsets[i]:offsets[i + 1]``. ``items.start`` is the global flat index of the first
    item, so seeded per-item randomness does not depend on chunking. ``lengths`` is the encoding
    of the row lengths for the length law (``None`` without one).
    """

    __slots__ = ("offsets", "items", "lengths", "n_rows", "start")
    __module__ = PUBLIC_HOME

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

    def row_sums(self, item_values: np.ndarray) -> np.ndarray:
        """``item_values`` (one per flat item) summed per row, float64 (n_rows,): an empty row
        sums to 0."""
        # bincount, not reduceat: reduceat gives an empty row its neighbour's item
        sums = np.bincount(self.item_rows(), weights=item_values, minlength=self.n_rows)
        return sums.astype(np.float64, copy=False)  # bincount of no items is int64

    def firsts(self) -> tuple[np.ndarray, np.ndarray]:
        """(whether each row has items, bool (n_rows,); the flat index of the first item of
        each row that has)."""
        running = self.offsets[1:] > self.offsets[:-1]
        return running, self.offsets[:-1][running]

    def steps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The moves from one item to the next within a row: (flat index of each step's
        source item, of its target item, the step's row), int64 arrays."""
        rows = self.item_rows()
        src = np.flatnonzero(rows[:-1] == rows[1:]) if rows.size > 1 else np.zeros(0, np.int64)
        return src, src + 1, rows[src]

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

    __module__ = PUBLIC_HOME

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
