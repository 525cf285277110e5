"""Folding rows: the E-step of a model over encoded rows, chunk by chunk, into an accumulator.

This is the one loop every backend runs over the rows it holds (in-process, in a worker process,
in a Spark partition, on an MPI rank). It knows the fold only through the two calls the family
protocol defines: ``acc.seq_update(rows, weights, model, precision)`` (fold and score) and
``model.seq_log_density(rows, precision)`` (score only).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mixfold.capabilities import FoldsOnTorch
from mixfold.compute.encoded import Encoded, InitRandom
from mixfold.errors import NumericalError
from mixfold.precision.bands import Engine, Precision, require_resolved
from mixfold.precision.doubledouble import DD, dd_add, dd_sum_rows, two_prod
from mixfold.precision.support import require_band

__all__ = ["DEFAULT_CHUNK_ROWS", "FoldResult", "Folds", "Scores", "MakesAccumulators",
           "INIT_SAMPLE_ROWS", "fold_rows", "fold_rows_total", "init_sample_mask",
           "weighted_total"]


class Scores(Protocol):
    """A model as the fold sees it: per-row log-densities of encoded rows."""

    def seq_log_density(self, enc: Encoded, precision: Precision = ...) -> np.ndarray: ...


class Folds(Protocol):
    """An accumulator as the fold sees it (:class:`mixfold.families.Accumulator`)."""

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Any,
                   precision: Precision = ...) -> np.ndarray | None: ...

    def rows_per_chunk(self, model: Any, precision: Precision, chunk_rows: int) -> int: ...


class MakesAccumulators(Protocol):
    """An estimator as a shard's fold sees it: where its empty accumulators come from."""

    def accumulator_factory(self) -> Any: ...


#: Rows per chunk: bounds the memory of a chunk's (rows x components) blocks while keeping the
#: per-chunk costs (Python calls, the wait for the last row block on other cores) negligible.
DEFAULT_CHUNK_ROWS = 262144


def fold_rows(acc: Folds | None, enc: Encoded, weights: np.ndarray, model: Scores,
              precision: Precision, chunk_rows: int) -> float:
    """Fold ``enc`` into ``acc`` chunk by chunk; return the weighted log-density of the rows.

    With ``acc=None`` the rows are only scored. A precision the model cannot run raises
    :class:`~mixfold.precision.BandSupportError` before any row is folded.
    """
    require_resolved(precision)
    if not precision.native:
        if not (precision.engine is Engine.TORCH and isinstance(acc, FoldsOnTorch)
                and acc.folds_on_torch(model)):
            require_band(model, precision)
        if precision.compensated:
            return fold_rows_total(acc, enc, weights, model, precision, chunk_rows).hi
    total = 0.0
    for part, w, ll in _folded_chunks(acc, enc, weights, model, precision, chunk_rows):
        total += weighted_total(w, ll, part.start)
    return total


def weighted_total(w: np.ndarray, ll: np.ndarray, start: int) -> float:
    """One chunk's weighted log-density ``sum w * ll`` (its first row the global row ``start``);
    a row of positive weight with no finite log-density raises a NumericalError naming it."""
    with np.errstate(invalid="ignore"):  # einsum: no temporary, and not BLAS (whose threads
        total = float(np.einsum("i,i->", w, ll))  # would change the bits)
    return total if math.isfinite(total) else _checked_total(ll, w, start)


def _folded_chunks(acc: Folds | None, enc: Encoded, weights: np.ndarray,
                   model: Scores, precision: Precision, chunk_rows: int
                   ) -> Iterator[tuple[Encoded, np.ndarray, np.ndarray]]:
    """Fold ``enc`` into ``acc`` (or only score it) chunk by chunk; yield each chunk's rows,
    weights and per-row log-densities."""
    if acc is not None:
        chunk_rows = acc.rows_per_chunk(model, precision, chunk_rows)
    for begin in range(0, enc.n_rows, chunk_rows):
        end = min(begin + chunk_rows, enc.n_rows)
        part, w = enc.rows(begin, end), weights[begin:end]
        ll = None if acc is None else acc.seq_update(part, w, model, precision)
        yield part, w, model.seq_log_density(part, precision) if ll is None else ll


def fold_rows_total(acc: Folds | None, enc: Encoded, weights: np.ndarray,
                    model: Scores, precision: Precision, chunk_rows: int) -> DD:
    """:func:`fold_rows` with the weighted log-density summed in double-double, as a pair.

    The ``dd`` band's fold: with it, the log-likelihood, like the statistics, does not depend on
    how the rows are chunked or sharded. Other precisions give ``DD(total, 0.0)``.
    """
    require_resolved(precision)
    if not precision.compensated:
        return DD(fold_rows(acc, enc, weights, model, precision, chunk_rows), 0.0)
    require_band(model, precision)
    total = DD(0.0, 0.0)
    for part, w, ll in _folded_chunks(acc, enc, weights, model, precision, chunk_rows):
        live = w > 0  # a zero-weight row adds nothing, even where its log-density is -inf
        if not np.isfinite(ll[live]).all():
            _checked_total(ll, w, part.start)
        terms = two_prod(w[live], ll[live])
        total = dd_add(total, dd_sum_rows(terms))
    return DD(float(total.hi), float(total.lo))


def _checked_total(ll: np.ndarray, w: np.ndarray, start: int) -> float:
    bad = np.flatnonzero((w > 0) & ~np.isfinite(ll))
    if bad.size:
        i = int(bad[0])
        raise NumericalError(f"row {start + i} has log-density {ll[i]} under the current model "
                             f"({bad.size} such rows in its chunk): the model gives it zero "
                             f"density; add pseudo-counts or check the data")
    return float(np.multiply(w[w > 0], ll[w > 0]).sum())


#: Rows in the initialisation sample (k-means++ and other seeding runs on these).
INIT_SAMPLE_ROWS = 10_000


@dataclass
class FoldResult:
    """One E-step over all rows: row count, total row weight, weighted log-density, statistics."""

    n_rows: int
    weight: float
    log_density: float
    stats: Any

    @property
    def mean_log_density(self) -> float:
        return self.log_density / self.weight if self.weight > 0 else float("nan")


def init_sample_mask(enc: Encoded, seed: int, n_total: int,
                     size: int = INIT_SAMPLE_ROWS) -> np.ndarray:
    """Which rows of ``enc`` belong to the initialisation sample (a hash of the global row index).

    The same rows are chosen however the data is chunked or sharded.
    """
    if n_total <= size:
        return np.ones(enc.n_rows, dtype=bool)
    u = InitRandom(seed).child("init-sample").row_uniform(enc, 1)[:, 0]
    return u < size / n_total
