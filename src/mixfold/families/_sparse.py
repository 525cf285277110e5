"""Rows given as a ``scipy.sparse`` matrix (bag-of-words counts, one-hot features) or as Spark
ML vectors (a DataFrame's vector column): read as CSR arrays or ``{column: count}`` rows, never
densified, for the families whose rows are counts over a fixed set of columns
(:mod:`~mixfold.families.multinomial`, :mod:`~mixfold.families.lda`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.errors import DataError

__all__ = ["is_sparse_matrix", "is_count_matrix", "SparseCounts", "sparse_counts",
           "is_spark_vector", "spark_vector_counts", "spark_vector_width", "spark_rows_as_mappings"]


def is_sparse_matrix(values: Any) -> bool:
    """Whether ``values`` is a scipy sparse matrix or array (scipy is not imported).

    >>> import scipy.sparse
    >>> is_sparse_matrix(scipy.sparse.eye(2, format="csr")), is_sparse_matrix(np.eye(2))
    (True, False)
    """
    return type(values).__module__.startswith("scipy.sparse") and hasattr(values, "tocsr")


def is_count_matrix(values: Any) -> bool:
    """Whether ``values`` is a matrix of counts (n_rows, n_columns): a scipy sparse matrix or a
    2-D numeric NumPy array, read the same way (a densified document-term matrix must not turn
    into rows of tokens).

    >>> is_count_matrix(np.eye(2)), is_count_matrix(np.array([["a", "b"]])), is_count_matrix([[1]])
    (True, False, False)
    """
    return is_sparse_matrix(values) or (isinstance(values, np.ndarray) and values.ndim == 2
                                        and values.dtype.kind in "biuf")


class SparseCounts(NamedTuple):
    """CSR arrays of counts: row ``i`` holds columns ``columns[offsets[i]:offsets[i + 1]]``
    (distinct, increasing) with positive ``counts`` (float64) at the same places."""

    offsets: np.ndarray
    columns: np.ndarray
    counts: np.ndarray
    n_columns: int


def sparse_counts(values: Any, n_columns: int | None, integral: bool, what: str
                  ) -> SparseCounts:
    """The rows of a sparse matrix as :class:`SparseCounts`: duplicates summed, explicit zeros
    dropped, each stored count checked (finite, >= 0, an integer when ``integral``); a count
    that is not, or a width other than ``n_columns``, raises a DataError naming the row.

    >>> import scipy.sparse
    >>> m = scipy.sparse.csr_matrix(np.array([[0, 2, 0], [1, 0, 0]]))
    >>> sparse_counts(m, 3, True, "levels").offsets.tolist()
    [0, 1, 2]
    >>> sparse_counts(np.array([[0, 2, 0], [1, 0, 0]]), 3, True, "levels").columns.tolist()
    [1, 0]
    """
    if isinstance(values, np.ndarray):
        return _dense_counts(values, n_columns, integral, what)
    m = values.tocsr()
    if len(m.shape) != 2:
        raise DataError(f"expected a 2-D sparse matrix of counts, got shape {m.shape}")
    if n_columns is not None and m.shape[1] != n_columns:
        raise DataError(f"expected a sparse matrix with one column per {what} ({n_columns}), "
                        f"got {m.shape[1]} columns")
    if not m.has_canonical_format:  # duplicates summed and columns sorted, on a copy
        m = m.copy()
        m.sum_duplicates()
    counts = np.asarray(m.data, dtype=np.float64)
    ok = np.isfinite(counts) & (counts >= 0)
    if integral:
        ok &= np.floor(counts) == counts
    if not ok.all():
        at = int(np.flatnonzero(~ok)[0])
        row = int(np.searchsorted(m.indptr, at, side="right") - 1)
        expected = "an integer count >= 0" if integral else "a finite count >= 0"
        raise DataError(f"expected {expected} in column {int(m.indices[at])}, got "
                        f"{float(counts[at])!r}", row=row)
    offsets = np.asarray(m.indptr, dtype=np.int64)
    columns = np.asarray(m.indices, dtype=np.int64)
    stored = counts > 0
    if not stored.all():  # explicit zeros: not a nonzero of any row
        n = len(offsets) - 1
        row = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(row[stored], minlength=n), out=offsets[1:])
        columns, counts = columns[stored], counts[stored]
    return SparseCounts(offsets, columns, counts, int(m.shape[1]))


def _dense_counts(values: np.ndarray, n_columns: int | None, integral: bool,
                  what: str) -> SparseCounts:
    """A dense matrix of counts as :class:`SparseCounts`, checked as the sparse rows are."""
    x = np.asarray(values, dtype=np.float64)
    if n_columns is not None and x.shape[1] != n_columns:
        raise DataError(f"expected a matrix of counts with one column per {what} "
                        f"({n_columns}), got {x.shape[1]} columns")
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(x) & (x >= 0))
        if integral:
            bad |= np.floor(x) != x
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        expected = "an integer count >= 0" if integral else "a finite count >= 0"
        raise DataError(f"expected {expected} in column {col}, got {float(x[row, col])!r}",
                        row=row)
    rows, columns = np.nonzero(x)
    offsets = np.zeros(x.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=x.shape[0]), out=offsets[1:])
    return SparseCounts(offsets, columns.astype(np.int64), x[rows, columns], int(x.shape[1]))


#: The fields of a Spark ML vector as Arrow hands it over (its SQL type: a struct whose ``type``
#: is 0 for a sparse vector, 1 for a dense one), as a DataFrame read through Arrow batches has it.
_VECTOR_FIELDS = frozenset({"type", "size", "indices", "values"})


def is_spark_vector(row: Any) -> bool:
    """Whether ``row`` is a Spark ML (or MLlib) ``SparseVector`` or ``DenseVector`` (pyspark is
    not imported), or such a vector's Arrow struct."""
    if isinstance(row, dict):
        return row.keys() == _VECTOR_FIELDS
    module = type(row).__module__
    return module.startswith(("pyspark.ml.linalg", "pyspark.mllib.linalg")) and \
        hasattr(row, "toArray")


def _vector_size(row: Any) -> int:
    if isinstance(row, dict):
        return int(row["size"]) if row["type"] == 0 else len(row["values"])
    return int(row.size)


def spark_vector_counts(row: Any) -> dict[int, float]:
    """A Spark vector's nonzero entries as ``{column: value}``."""
    if isinstance(row, dict):  # its Arrow struct: sparse (type 0) or dense
        indices = row["indices"] if row["type"] == 0 else range(len(row["values"]))
        return {int(i): float(v) for i, v in zip(indices, row["values"]) if v != 0}
    if hasattr(row, "indices"):  # a SparseVector: its stored entries only
        return {int(i): float(v) for i, v in zip(row.indices, row.values) if v != 0}
    dense = np.asarray(row.toArray())
    return {int(i): float(dense[i]) for i in np.flatnonzero(dense)}


def spark_vector_width(values: Any) -> int | None:
    """The common length of rows that are Spark vectors (``None`` when the first row is not
    one, or there is none); rows of other lengths raise a DataError naming the row."""
    size = None
    for i, row in enumerate(values):
        if not is_spark_vector(row):
            if i == 0:
                return None
            continue
        width = _vector_size(row)
        if size is None:
            size = width
        elif width != size:
            raise DataError(f"expected a vector of length {size}, got one of length {width}",
                            row=i)
    return size


def spark_rows_as_mappings(values: Any, names: Sequence[Any]) -> Any:
    """``values`` with each Spark vector row as ``{names[column]: count}`` (``names`` the
    levels or words, one per column); ``values`` itself when its rows are not Spark vectors."""
    width = spark_vector_width(values)
    if width is None:
        return values
    if width != len(names):
        raise DataError(f"expected vectors with one column per level or word ({len(names)}), "
                        f"got vectors of length {width}")
    return [{names[j]: c for j, c in spark_vector_counts(r).items()} if is_spark_vector(r)
            else r for r in values]
