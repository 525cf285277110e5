"""Out-of-core rows: a block source read once per pass, each block encoded, folded and dropped.

``optimize(RowBlocks.parquet(path), estimator)`` runs on this handle. Nothing stays resident
but the encoder: each fold is one pass over the source in which every block is encoded, given
its global row indices, folded into the pass's accumulator and dropped, so memory is bounded by
one block (plus the fixed-size statistics). The blocks play the part of a sequence of MPI ranks:

- vocabularies are a fold too: the first pass fits the encoder on each block and merges the
  fits (categorical levels that appear only in later blocks are learnt), and counts the rows;
- every block's encoding is re-based on the running per-node row counts
  (``node_sizes()`` / ``with_starts()``), so the global row indices, hence the seeded
  initialisation sample (``init_sample_mask``), are the ones an in-memory fit of the same rows
  uses, whatever the block sizes;
- the fitted model therefore equals the in-memory fit to round-off (the sums run in a
  different order).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mixfold.backends._interface import EncodedDataHandle
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, FoldResult, fold_rows, init_sample_mask
from mixfold.errors import DataError
from mixfold.families._protocol import Distribution, Encoded, Encoder, Estimator
from mixfold.io.readers import RowBlocks
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["StreamEncodedData", "GlobalRows", "learn_encoder", "sized_blocks"]


def _at_row(err: DataError, first_row: int) -> DataError:
    """``err`` raised inside a block, with the row index counted from the start of the data."""
    return err if err.row is None else err.within(row=first_row + err.row)


class GlobalRows:
    """Running row counts of every encoding node: gives consecutive blocks their global starts.

    What an exclusive prefix sum over MPI ranks does, one block at a time.
    """

    def __init__(self) -> None:
        self.offsets: np.ndarray | None = None

    def place(self, enc: Encoded) -> Encoded:
        """``enc`` re-based after every block placed before it."""
        sizes = np.asarray(enc.node_sizes(), dtype=np.int64)
        if self.offsets is None:
            self.offsets = np.zeros_like(sizes)
        placed = enc.with_starts(iter(self.offsets.tolist()))
        self.offsets += sizes
        return placed


def sized_blocks(source: RowBlocks, encoder: Encoder | None = None) -> Iterator[tuple[int, Any]]:
    """(index of the block's first row, raw rows) for each non-empty block of one pass."""
    first_row = 0
    for rows in source.blocks(encoder):
        if not hasattr(rows, "__len__"):
            rows = list(rows)
        n = len(rows)
        if n:
            yield first_row, rows
            first_row += n
        del rows


def learn_encoder(source: RowBlocks, base: Encoder) -> tuple[Encoder, int]:
    """One pass: ``base`` fitted on every block and the fits merged; and the number of rows."""
    encoder, n_rows = None, 0
    for first_row, rows in sized_blocks(source, base):
        try:
            fitted = base.fit(rows)
            encoder = fitted if encoder is None else encoder.merge(fitted)
        except DataError as err:
            raise _at_row(err, first_row) from None
        except ValueError as err:
            raise DataError(f"the block of rows from {first_row} does not fit with the rows "
                            f"before it: {err}") from None
        n_rows = first_row + len(rows)
        del rows
    if encoder is None:
        raise DataError(f"the data has no rows ({source!r} yielded none)")
    if source.n_rows is not None and source.n_rows != n_rows:
        raise DataError(f"{source!r} announced {source.n_rows} rows but yielded {n_rows}")
    return encoder, n_rows


class StreamEncodedData(EncodedDataHandle):
    """Rows of a :class:`~mixfold.io.readers.RowBlocks` source, folded one pass per call.

    ``encoder`` is fitted (vocabularies fixed) and ``n_rows`` counted beforehand (see
    :meth:`open`). Row weights are all one.

    >>> import numpy as np
    >>> from mixfold import GaussianDistribution, GaussianEstimator, RowBlocks
    >>> source = RowBlocks.from_array(np.zeros(5), block_rows=2)
    >>> h, est = StreamEncodedData.open(source, GaussianEstimator(), init=None)
    >>> n, total = h.log_density_sum(GaussianDistribution(0.0, 1.0))
    >>> n, round(total, 6)
    (5, -4.594693)
    """

    name = "stream"

    def __init__(self, source: RowBlocks, encoder: Encoder, n_rows: int,
                 chunk_rows: int | None = None):
        self.source = source
        self.encoder = encoder
        self.n_rows = int(n_rows)
        self.total_weight = float(n_rows)
        self.chunk_rows = int(chunk_rows or DEFAULT_CHUNK_ROWS)
        self._ones = np.ones(0)

    @classmethod
    def open(cls, source: RowBlocks, estimator: Estimator, *, init: Distribution | None,
             chunk_rows: int | None = None) -> tuple[StreamEncodedData, Estimator]:
        """A first pass learns the vocabularies (unless ``init`` fixes them) and counts the rows;
        returns the handle and the estimator bound to the learnt encoder."""
        base = init.encoder() if init is not None else estimator.encoder()
        encoder, n_rows = learn_encoder(source, base)
        return cls(source, encoder, n_rows, chunk_rows), estimator.bind(encoder)

    def encoded_blocks(self) -> Iterator[Encoded]:
        """One pass: each block encoded, with the global start indices of all its nodes."""
        rows_so_far = GlobalRows()
        n_rows = 0
        for first_row, rows in sized_blocks(self.source, self.encoder):
            try:
                enc = self.encoder.encode(rows)
            except DataError as err:
                raise _at_row(err, first_row) from None
            del rows
            enc = rows_so_far.place(enc)
            n_rows = first_row + enc.n_rows
            yield enc
            del enc  # the consumer holds the only reference: the block is freed when it is done
        if n_rows != self.n_rows:
            raise DataError(f"{self.source!r} yielded {n_rows} rows in this pass but "
                            f"{self.n_rows} in the first: a block source must yield the same rows "
                            f"on every pass")

    def _weights(self, n: int) -> np.ndarray:
        if self._ones.size < n:
            self._ones = np.ones(n)
        return self._ones[:n]

    def fold(self, estimator: Estimator, model: Distribution,
             precision: Precision = FLOAT64) -> FoldResult:
        acc = estimator.accumulator_factory().make()
        total = 0.0
        for enc in self.encoded_blocks():
            total += fold_rows(acc, enc, self._weights(enc.n_rows), model, precision,
                               self.chunk_rows)
            del enc
        return FoldResult(self.n_rows, self.total_weight, total, acc)

    def log_density_sum(self, model: Distribution,
                        precision: Precision = FLOAT64) -> tuple[int, float]:
        total = 0.0
        for enc in self.encoded_blocks():
            total += fold_rows(None, enc, self._weights(enc.n_rows), model, precision,
                               self.chunk_rows)
            del enc
        return self.n_rows, total

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        pieces = []
        for enc in self.encoded_blocks():
            idx = np.flatnonzero(init_sample_mask(enc, seed, self.n_rows))
            if idx.size:
                pieces.append(enc.take(idx))
            del enc
        if not pieces:
            raise DataError("the initialisation sample is empty")
        sample = type(pieces[0]).concat(pieces)
        return sample, np.ones(sample.n_rows)
