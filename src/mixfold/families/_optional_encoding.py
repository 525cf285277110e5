"""How a value that may be missing is read: a presence mask over the rows, and the inner
family's encoding of the present values only (:class:`OptionalEncoded`), made by
:class:`OptionalEncoder`.

>>> from mixfold.families._encoders import NumericEncoder
>>> e = OptionalEncoder(NumericEncoder("real")).encode([1.5, None, float("nan"), 2.0])
>>> e.present.tolist(), e.inner.values.tolist()
([True, False, False, True], [1.5, 2.0])
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from mixfold.errors import DataError
from mixfold.families._missing_markers import DEFAULT_MISSING, MissingMarkers
from mixfold.families._protocol import Encoded, Encoder

__all__ = ["OptionalEncoded", "OptionalEncoder"]

#: where these classes are public (and were defined before this module): pickles, reprs and a
#: checkpoint's fingerprint name them there
PUBLIC_HOME = "mixfold.families.optional"


class OptionalEncoded(Encoded):
    """A ``present`` mask of shape (n_rows,) and the inner encoding of the present rows, in order.

    ``before[i] - before[0]`` is the number of present rows among rows ``[0, i)``
    (shape (n_rows + 1,)); slices are views of it, so cutting rows copies nothing, and
    ``inner.start`` stays the global index among present values.
    """

    __module__ = PUBLIC_HOME
    __slots__ = ("present", "inner", "before", "n_rows", "start")

    def __init__(self, present: np.ndarray, inner: Encoded, before: np.ndarray | None = None,
                 start: int = 0):
        self.present = present
        self.inner = inner
        if before is None:
            before = np.zeros(present.shape[0] + 1, dtype=np.int64)
            np.cumsum(present, out=before[1:])
        self.before = before
        self.n_rows = int(present.shape[0])
        self.start = int(start)

    def rows(self, begin: int, end: int) -> OptionalEncoded:
        end = min(end, self.n_rows)
        base = int(self.before[0])
        inner = self.inner.rows(int(self.before[begin]) - base, int(self.before[end]) - base)
        return OptionalEncoded(self.present[begin:end], inner, self.before[begin:end + 1],
                               self.start + begin)

    def take(self, indices: np.ndarray) -> OptionalEncoded:
        indices = np.asarray(indices, dtype=np.int64)
        present = self.present[indices]
        inner_index = self.before[indices[present]] - self.before[0]
        return OptionalEncoded(present, self.inner.take(inner_index))

    @property
    def nbytes(self) -> int:
        return int(self.present.nbytes + self.before.nbytes) + self.inner.nbytes

    def node_sizes(self) -> list[int]:
        return [self.n_rows] + self.inner.node_sizes()

    def with_starts(self, starts: Iterator[int]) -> OptionalEncoded:
        start = next(starts)
        return OptionalEncoded(self.present, self.inner.with_starts(starts), self.before, start)

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> OptionalEncoded:
        present = np.concatenate([p.present for p in parts])
        inner = type(parts[0].inner).concat([p.inner for p in parts])
        return OptionalEncoded(present, inner, start=parts[0].start)

    def __repr__(self) -> str:
        return f"OptionalEncoded(n_rows={self.n_rows}, present={self.inner.n_rows})"


class OptionalEncoder(Encoder):
    """Marks the missing rows and encodes the present values with the inner encoder."""

    __module__ = PUBLIC_HOME

    def __init__(self, inner: Encoder, missing: MissingMarkers | Sequence[Any] = DEFAULT_MISSING):
        self.inner = inner
        self.missing = missing if isinstance(missing, MissingMarkers) else MissingMarkers(missing)

    def split(self, values: Any) -> tuple[np.ndarray, Any]:
        """(present mask, the present values in row order)."""
        if not hasattr(values, "__len__"):
            values = list(values)
        present = ~self.missing.mask(values)
        if isinstance(values, np.ndarray):
            return present, values[present]
        return present, [v for v, keep in zip(values, present) if keep]

    def fit(self, values: Any) -> OptionalEncoder:
        """Learn the inner vocabulary from the present values.

        With no value present the inner encoder stays unfitted, so that fits of shards
        :meth:`merge` into the fit of their union.
        """
        present, inner_values = self.split(values)
        if not present.any():
            return self
        try:
            return OptionalEncoder(self.inner.fit(inner_values), self.missing)
        except DataError as err:
            raise _inner_error(err, present) from None

    def merge(self, other: Encoder) -> OptionalEncoder:
        if not isinstance(other, OptionalEncoder) or other.missing != self.missing:
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return OptionalEncoder(self.inner.merge(other.inner), self.missing)

    def encode(self, values: Any) -> OptionalEncoded:
        present, inner_values = self.split(values)
        try:
            inner = self.inner.encode(inner_values)
        except DataError as err:
            raise _inner_error(err, present) from None
        return OptionalEncoded(present, inner)

    def __repr__(self) -> str:
        return f"OptionalEncoder({self.inner!r}, {self.missing!r})"


def _inner_error(err: DataError, present: np.ndarray) -> DataError:
    """An inner value's error, with the row index of the original data."""
    if err.row is None:
        return err
    return err.within(row=int(np.flatnonzero(present)[err.row]))
