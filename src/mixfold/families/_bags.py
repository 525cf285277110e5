"""Bags of levels (bag-of-words rows) read as counts over a vocabulary fixed at encode time:
each row a list of tokens, a ``{level: count}`` mapping, a row of a count matrix (scipy sparse
or 2-D NumPy: :mod:`mixfold.families._sparse`) or a Spark ML vector; sparse rows stay sparse
(``BagOfWordsEncoded``)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError
from mixfold.families._levels import CategoricalEncoder
from mixfold.families._protocol import ArrayEncoded, Encoder
from mixfold.families._sparse import (is_count_matrix, spark_rows_as_mappings,
                                      spark_vector_width)
from mixfold.families._bag_of_words import BagOfWordsEncoded, counts_as_bags

__all__ = ["MultinomialEncoder"]


def _bag(row: Any, i: int) -> tuple[list, list]:
    """(levels, counts) of one row: a mapping level -> count, or a list of tokens."""
    if isinstance(row, Mapping):
        levels, counts = list(row.keys()), list(row.values())
        for level, c in zip(levels, counts):
            ok = isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, bool)
            if not (ok and np.isfinite(c) and c >= 0 and c == int(c)):
                raise DataError(f"expected a count (an integer >= 0) for level {level!r}, got "
                                f"{c!r}", row=i)
        return levels, counts
    if isinstance(row, (str, bytes)) or not isinstance(row, (Sequence, np.ndarray)):
        raise DataTypeError(f"expected a list of tokens or a {{level: count}} mapping, got "
                            f"{row!r:.60} ({type(row).__name__})", row=i)
    return list(row), [1] * len(row)


def _flatten(values: Any) -> tuple[list, np.ndarray, np.ndarray]:
    """Every row's levels in one list, their counts, and each entry's row."""
    levels: list = []
    counts: list = []
    rows: list = []
    for i, row in enumerate(values):
        lv, ct = _bag(row, i)
        levels += lv
        counts += ct
        rows += [i] * len(lv)
    return levels, np.asarray(counts, dtype=np.float64), np.asarray(rows, dtype=np.int64)


def _in_row(err: DataError, rows: np.ndarray) -> DataError:
    """A token's error, with the row the token came from."""
    return err if err.row is None else err.within(row=int(rows[err.row]))


class MultinomialEncoder(Encoder):
    """Encodes bags of levels into counts of shape (n_rows, V) for a fixed tuple of levels
    (learnt by ``fit`` as a categorical's are). A ``scipy.sparse`` matrix of counts (n_rows, V)
    is read as CSR rows (``BagOfWordsEncoded``), never densified: its columns are the levels
    (``levels`` of length V, else ``0 .. V-1``); so are a 2-D numeric NumPy array's (counts,
    not tokens) and Spark ML vectors (a DataFrame's vector column), row by row.

    >>> enc = MultinomialEncoder().fit([["b", "a", "b"], {"c": 2}])
    >>> enc.levels
    ('a', 'b', 'c')
    >>> enc.encode([["b", "a", "b"], {"c": 2}]).values.tolist()
    [[1.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
    """

    def __init__(self, levels: Sequence[Hashable] | None = None):
        self.levels = CategoricalEncoder(levels).levels

    def fit(self, values: Any) -> MultinomialEncoder:
        if self.levels is not None:
            return self
        if is_count_matrix(values):  # a matrix of counts: the levels are its columns
            return MultinomialEncoder(range(values.shape[1]))
        width = spark_vector_width(values)
        if width is not None:  # Spark vectors of counts: the levels are their columns
            return MultinomialEncoder(range(width))
        levels, _, rows = _flatten(values)
        try:
            fitted = CategoricalEncoder().fit(levels)
        except DataError as err:
            raise _in_row(err, rows) from None
        return self if fitted.levels is None else MultinomialEncoder(fitted.levels)

    def merge(self, other: Encoder) -> MultinomialEncoder:
        if not isinstance(other, MultinomialEncoder):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        merged = CategoricalEncoder(self.levels).merge(CategoricalEncoder(other.levels))
        return MultinomialEncoder(merged.levels)

    def encode(self, values: Any) -> ArrayEncoded | BagOfWordsEncoded:
        if self.levels is None:
            raise DataError("no tokens to learn the multinomial levels from: give the levels "
                            "(MultinomialEstimator(levels=...)) or data with tokens")
        if is_count_matrix(values):
            return counts_as_bags(values, len(self.levels), True, "level")
        values = spark_rows_as_mappings(values, self.levels)
        levels, counts, rows = _flatten(values)
        out = np.zeros((len(values), len(self.levels)))
        if levels:
            try:
                codes = CategoricalEncoder(self.levels).encode(levels).values
            except DataError as err:
                raise _in_row(err, rows) from None
            np.add.at(out, (rows, codes), counts)
        return ArrayEncoded(out)

    def __repr__(self) -> str:
        return f"MultinomialEncoder({self.levels!r})"
