"""Encoded rows: the columnar arrays a fold runs over, their row weights, and seeded per-row
randomness that does not depend on how the rows are chunked or sharded."""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError

__all__ = ["Encoded", "ArrayEncoded", "InitRandom", "as_weights"]

# ---------------------------------------------------------------------------------------------
# Encoded data


class Encoded(ABC):
    """Rows of one model node, encoded as columnar arrays.

    ``n_rows`` is the number of rows; ``start`` the global index of the first row in the data the
    encoding came from (slices keep it, so seeded per-row randomness does not depend on how the
    data is chunked or sharded).
    """

    n_rows: int
    start: int

    @abstractmethod
    def rows(self, begin: int, end: int) -> Encoded:
        """The contiguous rows ``[begin, end)``, as views where the layout allows."""

    @abstractmethod
    def take(self, indices: np.ndarray) -> Encoded:
        """The rows at ``indices`` (sorted), copied; ``start`` of the result is 0."""

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes held by the encoded arrays."""

    # What distributed backends need when rows are encoded where they live (MPI ranks, Spark
    # partitions): the per-node row counts, re-basing global indices, and joining samples.

    def node_sizes(self) -> list[int]:
        """Rows at every node of the encoding tree, in a fixed tree order (parents first)."""
        raise NotImplementedError(f"{type(self).__name__} does not report node sizes")

    def with_starts(self, starts: Iterator[int]) -> Encoded:
        """A copy whose nodes' global start indices come from ``starts`` (tree order)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be re-based")

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> Encoded:
        """The rows of ``parts`` one after another (``start`` of the first part)."""
        raise NotImplementedError(f"{cls.__name__} cannot be concatenated")

    def __len__(self) -> int:
        return self.n_rows


class ArrayEncoded(Encoded):
    """Encoded rows held in one NumPy array whose first axis is the row axis."""

    __slots__ = ("values", "n_rows", "start")

    def __init__(self, values: np.ndarray, start: int = 0):
        self.values = values
        self.n_rows = int(values.shape[0])
        self.start = int(start)

    def rows(self, begin: int, end: int) -> ArrayEncoded:
        return ArrayEncoded(self.values[begin:end], self.start + begin)

    def take(self, indices: np.ndarray) -> ArrayEncoded:
        return ArrayEncoded(self.values[indices], 0)

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)

    def node_sizes(self) -> list[int]:
        return [self.n_rows]

    def with_starts(self, starts: Iterator[int]) -> ArrayEncoded:
        return ArrayEncoded(self.values, next(starts))

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> ArrayEncoded:
        return ArrayEncoded(np.concatenate([p.values for p in parts]), parts[0].start)

    def __repr__(self) -> str:
        return f"ArrayEncoded(shape={self.values.shape}, dtype={self.values.dtype})"


# ---------------------------------------------------------------------------------------------
# Seeded, chunk-independent randomness for initialisation

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class InitRandom:
    """Seeded randomness for initialisation that depends only on the seed, the node and the row.

    Each row's random numbers are a hash of (seed, node path, global row index), so the starting
    model is the same however the rows are chunked or sharded, on every backend.

    >>> r = InitRandom(7).child("weights")
    >>> enc = ArrayEncoded(np.zeros(6))
    >>> bool(np.array_equal(r.row_uniform(enc, 2)[4:], r.row_uniform(enc.rows(4, 6), 2)))
    True
    """

    __slots__ = ("seed", "salt")

    def __init__(self, seed: int, salt: int = 0):
        self.seed = int(seed)
        self.salt = int(salt) & 0xFFFFFFFFFFFFFFFF

    def child(self, name: object) -> InitRandom:
        """Randomness for a child node, independent of this node's and its siblings'."""
        tag = zlib.crc32(repr(name).encode())
        mixed = _splitmix64(np.array([self.salt ^ (tag << 20)], dtype=np.uint64))[0]
        return InitRandom(self.seed, int(mixed))

    def _base(self) -> np.uint64:
        key = np.array([(self.seed * 0x632BE59BD9B4E019 + self.salt) & 0xFFFFFFFFFFFFFFFF],
                       dtype=np.uint64)
        return _splitmix64(key)[0]

    def row_uniform(self, enc: Encoded, k: int = 1) -> np.ndarray:
        """Uniforms in [0, 1) of shape (enc.n_rows, k), one stream per global row index."""
        ids = (np.arange(enc.n_rows, dtype=np.uint64) + np.uint64(enc.start))[:, None]
        with np.errstate(over="ignore"):
            keys = ids * np.uint64(k) + np.arange(k, dtype=np.uint64)[None, :] + self._base()
        bits = _splitmix64(_splitmix64(keys))
        return (bits >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)

    def generator(self) -> np.random.Generator:
        """A NumPy generator for sample-based steps (k-means++ on an initialisation sample)."""
        words = [self.seed & 0xFFFFFFFF, self.seed >> 32, self.salt & 0xFFFFFFFF, self.salt >> 32]
        return np.random.default_rng(words)



def as_weights(weights: Any, n_rows: int) -> np.ndarray:
    """Row weights as a float64 array of shape (n_rows,): finite and non-negative."""
    if weights is None:
        return np.ones(n_rows)
    w = _numeric_weights(weights, n_rows)
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise DataError(f"weights must be finite and >= 0, got {w[bad[0]]!r}", row=int(bad[0]))
    with np.errstate(over="ignore"):
        total = w.sum()
    if not np.isfinite(total):  # every sum of weighted statistics would overflow too
        raise DataError(f"the weights sum past the largest float64 (the largest is "
                        f"{float(w.max())!r}): scale them down")
    return w


def _numeric_weights(weights: Any, n_rows: int) -> np.ndarray:
    """``weights`` as float64 of shape (n_rows,); strings, None, complex or nested values raise
    DataTypeError, another shape DataError."""
    try:
        raw = weights if isinstance(weights, np.ndarray) else np.asarray(weights)
    except (TypeError, ValueError, OverflowError):
        raw = _objects(weights)
    if raw.shape != (n_rows,):
        raise DataError(f"weights must have shape ({n_rows},), got {raw.shape}")
    if raw.dtype.kind in "iuf":
        return raw.astype(np.float64, copy=False)
    if not isinstance(weights, np.ndarray):  # the items as given: asarray made 1.0 a string
        raw = _objects(weights)  # or a complex, and the error would name the wrong row
    for i, v in enumerate(raw):
        v = v.item() if isinstance(v, np.generic) else v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise DataTypeError(f"weights must be numbers, got {v!r:.60} ({type(v).__name__})",
                                row=i)
    try:
        return raw.astype(np.float64)
    except (TypeError, ValueError, OverflowError) as err:
        raise DataTypeError(f"weights must be float64 numbers: {err}") from None


def _objects(weights: Any) -> np.ndarray:
    """``weights``' items as a 1-D object array, ragged entries kept whole."""
    items = list(weights) if np.iterable(weights) else [weights]
    raw = np.empty(len(items), dtype=object)
    for i, v in enumerate(items):
        raw[i] = v
    return raw
