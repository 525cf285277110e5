"""The embedded default backend: rows resident in this process, folded chunk by chunk."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from mixfold._feature_cache import FeatureCache
from mixfold.backends._interface import EncodedDataHandle, FoldResult, init_sample_mask
from mixfold.errors import NumericalError
from mixfold.families._protocol import Accumulator, Distribution, Encoded, Estimator, as_weights
from mixfold.precision import band_of, require_band
from mixfold.precision.doubledouble import DD, dd_add, dd_sum_rows, two_prod

__all__ = ["LocalEncodedData", "DEFAULT_CHUNK_ROWS", "fold_rows", "fold_rows_total"]

#: Rows per chunk: bounds the memory of a chunk's (rows x components) blocks (32 MB at K=16 for
#: the families scored component by component; stacked mixtures work in cache-sized row blocks
#: inside the chunk) while keeping the per-chunk costs negligible: Python calls, and the wait at
#: the end of each chunk for the last row block on the other cores (P1: 0.056 s/it at 65,536
#: rows per chunk, 0.052 at 262,144).
DEFAULT_CHUNK_ROWS = 262144


def fold_rows(acc: Accumulator | None, enc: Encoded, weights: np.ndarray, model: Distribution,
              precision: str, chunk_rows: int) -> float:
    """Fold ``enc`` into ``acc`` chunk by chunk; return the weighted log-density of the rows.

    With ``acc=None`` the rows are only scored. A precision the model cannot run raises
    :class:`~mixfold.precision.BandSupportError` before any row is folded.
    """
    if precision != "float64":
        require_band(model, precision)
        if band_of(precision) == "dd":
            return fold_rows_total(acc, enc, weights, model, precision, chunk_rows).hi
    total = 0.0
    for part, w, ll in _folded_chunks(acc, enc, weights, model, precision, chunk_rows):
        with np.errstate(invalid="ignore"):  # einsum: no temporary, and not BLAS (whose
            chunk_total = float(np.einsum("i,i->", w, ll))  # threads would change the bits)
        if not np.isfinite(chunk_total):
            chunk_total = _checked_total(ll, w, part.start)
        total += chunk_total
    return total


def _folded_chunks(acc: Accumulator | None, enc: Encoded, weights: np.ndarray,
                   model: Distribution, precision: str, chunk_rows: int
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


def fold_rows_total(acc: Accumulator | None, enc: Encoded, weights: np.ndarray,
                    model: Distribution, precision: str, chunk_rows: int) -> DD:
    """:func:`fold_rows` with the weighted log-density summed in double-double, as a pair.

    The ``dd`` band's fold: with it, the log-likelihood, like the statistics, does not depend on
    how the rows are chunked or sharded. Other precisions give ``DD(total, 0.0)``.
    """
    if band_of(precision) != "dd":
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


class LocalEncodedData(EncodedDataHandle):
    """Encoded rows held in this process.

    The rows stay resident, so the fused E-step keeps their feature rows from one fold to the
    next within the ``MIXFOLD_FEATURE_CACHE`` budget (:mod:`mixfold._feature_cache`), released
    at :meth:`close`; the rows must not change in place while the handle is open.

    >>> import numpy as np
    >>> from mixfold import GaussianDistribution, GaussianEstimator
    >>> d = GaussianDistribution(0.0, 1.0)
    >>> with LocalEncodedData(d.encoder().encode(np.zeros(4))) as h:
    ...     n, total = h.log_density_sum(d)
    >>> n, round(total, 6)
    (4, -3.675754)
    """

    name = "local"

    def __init__(self, enc: Encoded, weights: np.ndarray | None = None,
                 chunk_rows: int = DEFAULT_CHUNK_ROWS):
        self.enc = enc
        self.n_rows = enc.n_rows
        self.weights = as_weights(weights, enc.n_rows)
        self.total_weight = float(self.weights.sum())
        self.chunk_rows = int(chunk_rows)
        self.features = FeatureCache.for_rows(enc.nbytes)

    def fold(self, estimator: Estimator, model: Distribution,
             precision: str = "float64") -> FoldResult:
        acc = estimator.accumulator_factory().make()
        with self.features.active():
            total = fold_rows(acc, self.enc, self.weights, model, precision, self.chunk_rows)
        weight = self.total_weight
        if precision != "float64" and band_of(precision) == "dd":
            weight = float(dd_sum_rows(DD(self.weights, np.zeros_like(self.weights))).hi)
        return FoldResult(self.n_rows, weight, total, acc)

    def log_density_sum(self, model: Distribution, precision: str = "float64") -> tuple[int, float]:
        return self.n_rows, fold_rows(None, self.enc, self.weights, model, precision,
                                      self.chunk_rows)

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        mask = init_sample_mask(self.enc, seed, self.n_rows)
        idx = np.flatnonzero(mask & (self.weights > 0))
        return self.enc.take(idx), self.weights[idx]

    def close(self) -> None:
        self.features.clear()
