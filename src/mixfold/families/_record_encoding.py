"""How Composite and Record rows are read: tuple rows (or a 2-D array's columns) and named
fields (dict rows, a mapping of columns, a pandas DataFrame) split into one column per factor,
each encoded by its factor's encoder into :class:`FactorEncoded`.

>>> from mixfold import GaussianDistribution, PoissonDistribution
>>> enc = CompositeEncoder([GaussianDistribution(0, 1).encoder(),
...                         PoissonDistribution(1.0).encoder()]).encode([(0.5, 2), (1.5, 0)])
>>> enc.n_rows, len(enc.children)
(2, 2)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError
from mixfold.families._protocol import Encoded, Encoder

__all__ = ["FactorEncoded", "CompositeEncoder", "RecordEncoder"]

#: where these classes are public (and were defined before this module): pickles, reprs and a
#: checkpoint's fingerprint name them there
PUBLIC_HOME = "mixfold.families.composite"


class FactorEncoded(Encoded):
    """One child encoding per factor, all with the same rows."""

    __module__ = PUBLIC_HOME
    __slots__ = ("children", "n_rows", "start")

    def __init__(self, children: Sequence[Encoded], n_rows: int, start: int = 0):
        self.children = tuple(children)
        self.n_rows = int(n_rows)
        self.start = int(start)

    def rows(self, begin: int, end: int) -> FactorEncoded:
        end = min(end, self.n_rows)
        return FactorEncoded([c.rows(begin, end) for c in self.children], end - begin,
                             self.start + begin)

    def take(self, indices: np.ndarray) -> FactorEncoded:
        return FactorEncoded([c.take(indices) for c in self.children], len(indices))

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.children)

    def node_sizes(self) -> list[int]:
        return [self.n_rows] + [s for c in self.children for s in c.node_sizes()]

    def with_starts(self, starts: Iterator[int]) -> FactorEncoded:
        start = next(starts)
        return FactorEncoded([c.with_starts(starts) for c in self.children], self.n_rows, start)

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> FactorEncoded:
        children = [type(kids[0]).concat(kids) for kids in zip(*(p.children for p in parts))]
        return FactorEncoded(children, sum(p.n_rows for p in parts), parts[0].start)


def _per_column(step: str, encoders: Sequence[Encoder], columns: Sequence[Any],
                names: Sequence[Any]) -> list[Any]:
    """Each encoder's ``fit`` or ``encode`` of its column; a bad column's error names it."""
    out = []
    for enc, col, name in zip(encoders, columns, names):
        try:
            out.append(getattr(enc, step)(col))
        except DataError as err:
            raise err.within(path_prefix=(name,)) from None
    return out


class CompositeEncoder(Encoder):
    """Splits tuple rows (or a 2-D array) into one column per factor."""

    __module__ = PUBLIC_HOME

    def __init__(self, encoders: Sequence[Encoder]):
        self.encoders = tuple(encoders)

    def columns(self, values: Any) -> tuple[list[Any], int]:
        width = len(self.encoders)
        if isinstance(values, np.ndarray) and values.ndim == 2:
            if values.shape[1] != width:
                raise DataTypeError(f"expected rows of {width} fields, got an array of shape "
                                    f"{values.shape}")
            return [values[:, i] for i in range(width)], values.shape[0]
        rows = list(values)
        if not rows:
            return [[] for _ in range(width)], 0
        for i, r in enumerate(rows):
            if not isinstance(r, (tuple, list, np.ndarray)) or len(r) != width:
                got = f"{len(r)} fields" if isinstance(r, (tuple, list, np.ndarray)) else \
                    f"a {type(r).__name__}"
                raise DataTypeError(f"expected a tuple of {width} fields, got {got}", row=i)
        return [list(col) for col in zip(*rows)], len(rows)

    def fit(self, values: Any) -> CompositeEncoder:
        cols, _ = self.columns(values)
        return CompositeEncoder(_per_column("fit", self.encoders, cols, range(len(self.encoders))))

    def encode(self, values: Any) -> FactorEncoded:
        cols, n = self.columns(values)
        return FactorEncoded(_per_column("encode", self.encoders, cols, range(len(self.encoders))),
                             n)

    def merge(self, other: Encoder) -> CompositeEncoder:
        if not isinstance(other, CompositeEncoder) or len(other.encoders) != len(self.encoders):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return CompositeEncoder([a.merge(b) for a, b in zip(self.encoders, other.encoders)])

    def __repr__(self) -> str:
        return f"CompositeEncoder({list(self.encoders)!r})"


class RecordEncoder(Encoder):
    """Reads named fields from dict rows, a mapping of columns, or a pandas DataFrame."""

    __module__ = PUBLIC_HOME

    def __init__(self, encoders: Mapping[str, Encoder]):
        self.encoders = dict(encoders)

    def columns(self, values: Any) -> tuple[list[Any], int]:
        names = list(self.encoders)
        if hasattr(values, "columns") and hasattr(values, "__getitem__"):  # a DataFrame
            missing = [n for n in names if n not in values.columns]
            if missing:
                raise DataError(f"column missing from the DataFrame (has {list(values.columns)})",
                                path=(missing[0],))
            return [values[n].to_numpy() for n in names], len(values)
        if isinstance(values, Mapping):  # columnar: {name: array}
            missing = [n for n in names if n not in values]
            if missing:
                raise DataError(f"column missing (has {list(values)})", path=(missing[0],))
            cols = [values[n] for n in names]
            for name, col in zip(names, cols):
                if isinstance(col, (str, bytes, Mapping)) or not hasattr(col, "__len__") \
                        or getattr(col, "ndim", 1) == 0:
                    raise DataTypeError(
                        f"a mapping is read as columns {{field: values}}, but this field holds "
                        f"one {type(col).__name__} ({col!r:.40}), not a column; for one row "
                        f"pass a list of one dict: [{{...}}]", path=(name,))
            lengths = {len(c) for c in cols}
            if len(lengths) > 1:
                raise DataTypeError(f"columns have different lengths {sorted(lengths)}")
            return cols, lengths.pop() if lengths else 0
        rows = values if isinstance(values, list) else list(values)
        for i, r in enumerate(rows):
            if not isinstance(r, Mapping):
                raise DataTypeError(f"expected a dict with fields {names}, got a "
                                    f"{type(r).__name__}", row=i)
        cols = []
        for name in names:
            try:
                cols.append([r[name] for r in rows])
            except KeyError:
                row = next(i for i, r in enumerate(rows) if name not in r)
                raise DataError("field missing from the row", row=row, path=(name,)) from None
        return cols, len(rows)

    def fit(self, values: Any) -> RecordEncoder:
        cols, _ = self.columns(values)
        names = list(self.encoders)
        return RecordEncoder(dict(zip(names, _per_column("fit", list(self.encoders.values()), cols,
                                                            names))))

    def encode(self, values: Any) -> FactorEncoded:
        cols, n = self.columns(values)
        return FactorEncoded(_per_column("encode", list(self.encoders.values()), cols,
                                         list(self.encoders)), n)

    def merge(self, other: Encoder) -> RecordEncoder:
        if not isinstance(other, RecordEncoder) or list(other.encoders) != list(self.encoders):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return RecordEncoder({n: e.merge(other.encoders[n]) for n, e in self.encoders.items()})

    def __repr__(self) -> str:
        return f"RecordEncoder({self.encoders!r})"
