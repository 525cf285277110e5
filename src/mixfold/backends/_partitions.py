"""Shards encoded where an engine keeps them: a Dask collection's partitions, a Ray dataset's
blocks. The driver never holds the rows.

Every step runs on the workers through two calls an engine supplies (:class:`RemoteCalls`):
each partition fits its vocabularies (:meth:`PartitionEncoding.fit`), the fitted encoders merge
through a binary tree of small remote tasks (only the merged encoder reaches the driver, to bind
the estimator), each partition encodes its rows, the driver adds every partition's node sizes
into global row starts (prefix sums, as on Spark and MPI) and each partition re-bases its rows
on them. Each shard stays on its worker as an ``(Encoded, weights)`` pair: the seeded start and
every fold equal the local backend's on the same rows in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from mixfold.backends._row_faults import RowFault, caught, raise_at
from mixfold.backends._shard import ShardedEncodedData
from mixfold.compute.encoded import Encoded, as_weights
from mixfold.compute.fold import fold_rows, init_sample_mask
from mixfold.compute.tree import tree_reduce
from mixfold.errors import DataError, NumericalError
from mixfold.families._protocol import Distribution, Encoder
from mixfold.io.readers import reads_named_fields, table_rows
from mixfold.precision.bands import Precision

__all__ = ["RemoteCalls", "PartitionEncoding", "EncodedOnWorkers", "encode_partitions",
           "row_starts", "sample_shard", "first_bad_row"]


class RemoteCalls(Protocol):
    """What an engine supplies: run a function on a worker, and fetch results to the driver."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A reference to ``fn(*args)`` computed on a worker (arguments may be references)."""

    def gather(self, refs: Sequence[Any]) -> list[Any]:
        """The values of ``refs`` in the driver (a bounded wait)."""


@dataclass(frozen=True)
class PartitionEncoding:
    """How one partition (a pandas DataFrame, an Arrow table, a NumPy array) becomes encoded
    rows: the encoder to fit, the layout its rows take, and the weight column, if any."""

    base: Encoder
    weight_column: str | None = None

    def rows(self, block: Any) -> tuple[Any, np.ndarray | None]:
        """(raw rows in the encoder's layout, the weight column's values or None)."""
        weights = None
        if self.weight_column is not None:
            names = list(getattr(block, "column_names", None) or getattr(block, "columns", []))
            if self.weight_column not in names:
                raise DataError(f"weight column {self.weight_column!r} is not among the "
                                f"columns {names}")
            weights = np.asarray(_column(block, self.weight_column), dtype=np.float64)
            block = block.drop(columns=[self.weight_column]) if hasattr(block, "iloc") \
                else block.drop_columns([self.weight_column])
        layout = "frame" if reads_named_fields(self.base) else "array"
        return table_rows(block, layout), weights

    def fit(self, block: Any) -> Encoder | None:
        """The vocabularies of one partition (None for an empty one)."""
        rows, _ = self.rows(block)
        return self.base.fit(rows) if len(rows) else None

    def encode(self, block: Any, encoder: Encoder) -> tuple[Encoded, np.ndarray] | None:
        """One partition's rows encoded with the merged ``encoder`` (None for an empty one)."""
        rows, weights = self.rows(block)
        if not len(rows):
            return None
        enc = encoder.encode(rows)
        return enc, as_weights(weights, enc.n_rows)


def _column(block: Any, name: str) -> Any:
    column = block[name] if hasattr(block, "iloc") else block.column(name)
    return column.to_numpy() if hasattr(column, "to_numpy") else column


def merge_encoders(*encoders: Encoder | None) -> Encoder | None:
    """One encoder whose vocabularies are the union of ``encoders`` (empty partitions skipped)."""
    present = [e for e in encoders if e is not None]
    if not present:
        return None
    merged = present[0]
    for e in present[1:]:
        merged = merged.merge(e)
    return merged


class _PartitionFault(NamedTuple):
    """A partition's :class:`~mixfold.backends._row_faults.RowFault` met fitting its
    vocabularies, and the partition's index."""

    index: int
    fault: RowFault


def _fit_or_fault(encoding: PartitionEncoding, block: Any, index: int
                  ) -> Encoder | _PartitionFault | None:
    fitted = caught(encoding.fit, block)
    return _PartitionFault(index, fitted) if isinstance(fitted, RowFault) else fitted


def _merged_or_fault(*parts: Encoder | _PartitionFault | None
                     ) -> Encoder | _PartitionFault | None:
    """:func:`merge_encoders`, or the first partition's fault among ``parts``."""
    faults = [p for p in parts if isinstance(p, _PartitionFault)]
    return min(faults) if faults else merge_encoders(*parts)


def _row_count(encoding: PartitionEncoding, block: Any) -> int:
    return len(encoding.rows(block)[0])


def shard_sizes(shard: tuple[Encoded, np.ndarray] | RowFault | None
                ) -> tuple[list[int], float] | RowFault | None:
    """(rows at every node of the encoding tree, total weight) of one shard (its fault where
    its rows could not be encoded)."""
    if shard is None or isinstance(shard, RowFault):
        return shard
    return shard[0].node_sizes(), float(shard[1].sum())


def rebased(shard: tuple[Encoded, np.ndarray] | None,
            starts: list[int] | None) -> tuple[Encoded, np.ndarray] | None:
    """The shard with its nodes' global start indices set (so seeded draws match local)."""
    if shard is None:
        return None
    return shard[0].with_starts(iter(starts)), shard[1]


def row_starts(sizes: Sequence[tuple[list[int], float] | None]
               ) -> tuple[list[list[int] | None], list[tuple[int, int]], float]:
    """(every shard's node starts, its row bounds, the total weight) from every shard's node
    sizes: an exclusive prefix sum per node, in partition order; an empty shard gets ``(s, s)``.

    >>> starts, bounds, total = row_starts([([3], 3.0), None, ([2], 1.5)])
    >>> starts, bounds, total
    ([[0], None, [3]], [(0, 3), (3, 3), (3, 5)], 4.5)
    """
    present = [s for s in sizes if s is not None]
    if not present:
        raise DataError("the data has no rows")
    running = np.zeros(len(present[0][0]), dtype=np.int64)
    starts: list[list[int] | None] = []
    bounds = []
    for s in sizes:
        first = int(running[0])
        if s is None:
            starts.append(None)
        else:
            starts.append([int(v) for v in running])
            running += np.asarray(s[0], dtype=np.int64)
        bounds.append((first, int(running[0])))
    return starts, bounds, float(sum(s[1] for s in present))


def encode_partitions(calls: RemoteCalls, blocks: Sequence[Any], encoding: PartitionEncoding,
                      encoder: Encoder | None = None
                      ) -> tuple[list[Any], Encoder, list[tuple[int, int]], float]:
    """Encode every partition where it lives: (references to the shards, the merged encoder,
    every shard's row bounds, the total weight). With ``encoder`` (an initial model's), its
    vocabularies are used as they are."""
    if encoder is None:
        fitted = [calls.submit(_fit_or_fault, encoding, b, i) for i, b in enumerate(blocks)]
        root = tree_reduce(fitted, lambda *parts: calls.submit(_merged_or_fault, *parts), 2)
        encoder = calls.gather([root])[0]
        if isinstance(encoder, _PartitionFault):
            raise_at(encoder.fault, sum(calls.gather(
                [calls.submit(_row_count, encoding, b) for b in blocks[:encoder.index]])))
        if encoder is None:
            raise DataError("the data has no rows")
        del fitted, root
    encoded = [calls.submit(caught, PartitionEncoding.encode, encoding, b, encoder)
               for b in blocks]
    sizes = calls.gather([calls.submit(shard_sizes, e) for e in encoded])
    for i, s in enumerate(sizes):  # the first bad row in partition order, counted from row 0
        if isinstance(s, RowFault):
            raise_at(s, sum(int(t[0][0]) for t in sizes[:i] if t is not None))
    starts, bounds, total = row_starts(sizes)
    kept = [i for i, s in enumerate(starts) if s is not None]  # an empty partition folds nothing
    shards = [calls.submit(rebased, encoded[i], starts[i]) for i in kept]
    return shards, encoder, [bounds[i] for i in kept], total


def sample_shard(shard: tuple[Encoded, np.ndarray], seed: int,
                 n_total: int) -> tuple[Encoded, np.ndarray]:
    """The rows of one shard that belong to the initialisation sample (chosen by their global
    index, as the local backend chooses them)."""
    enc, weights = shard
    idx = np.flatnonzero(init_sample_mask(enc, seed, n_total) & (weights > 0))
    return enc.take(idx), weights[idx]


def first_bad_row(shard: tuple[Encoded, np.ndarray], model: Distribution,
                  precision: Precision, chunk_rows: int) -> str | None:
    """The message naming the first row of ``shard`` whose log-density is not finite."""
    try:
        fold_rows(None, shard[0], shard[1], model, precision, chunk_rows)
    except NumericalError as err:
        return str(err)
    return None


class EncodedOnWorkers(ShardedEncodedData):
    """The sharded base for shards that were encoded on the workers and never reach the
    driver: ``self.shards`` holds a reference per (non-empty) shard, ``self.calls`` the
    engine's :class:`RemoteCalls`; sampling and naming a bad row run there."""

    shards: list[Any]
    calls: RemoteCalls

    def shard(self, i: int) -> tuple[Encoded, np.ndarray]:
        raise ValueError(f"shard {i} was encoded on a {self.name} worker and lives there, "
                         f"not in the driver")

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        n = self.n_rows
        pieces = self.calls.gather([self.calls.submit(sample_shard, s, seed, n)
                                    for s in self.shards])
        kept = [p for p in pieces if p[0].n_rows] or pieces[:1]
        encs = [p[0] for p in kept]
        return type(encs[0]).concat(encs), np.concatenate([p[1] for p in kept])

    def _name_bad_row(self, model: Distribution, precisions: list[str]) -> None:
        found = self.calls.gather([self.calls.submit(first_bad_row, s, model, p, self.chunk_rows)
                                   for s, p in zip(self.shards, precisions)])
        found = [m for m in found if m is not None]
        raise NumericalError(found[0] if found else "the log-likelihood is not finite")
