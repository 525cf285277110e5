"""The embedded default backend: rows resident in this process, folded chunk by chunk."""

from __future__ import annotations

import time

import numpy as np

from mixfold.backends._interface import EncodedDataHandle
from mixfold.backends.worker_records import FoldTimes, WorkerRecord, this_process
from mixfold.capabilities import ChunkStatistics
from mixfold.compute.encoded import Encoded, as_weights
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.fold import (DEFAULT_CHUNK_ROWS, FoldResult, fold_rows, init_sample_mask,
                                  weighted_total)
from mixfold.families._protocol import Distribution, Estimator
from mixfold.precision.doubledouble import DD, dd_sum_rows
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["LocalEncodedData", "DEFAULT_CHUNK_ROWS"]

class LocalEncodedData(EncodedDataHandle):
    """Encoded rows held in this process.

    The rows stay resident, so the fused E-step keeps their feature rows from one fold to the
    next within the ``MIXFOLD_FEATURE_CACHE`` budget (:mod:`mixfold.compute.feature_cache`),
    released at :meth:`close`; the rows must not change in place while the handle is open.

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
        self.fold_times = FoldTimes(1)

    def fold(self, estimator: Estimator, model: Distribution,
             precision: Precision = FLOAT64) -> FoldResult:
        acc = estimator.accumulator_factory().make()
        start = time.perf_counter()
        with self.features.active():
            total = fold_rows(acc, self.enc, self.weights, model, precision, self.chunk_rows)
        self.fold_times.add(np.array([time.perf_counter() - start]),
                            [precision])
        weight = self.total_weight
        if precision.compensated:
            weight = float(dd_sum_rows(DD(self.weights, np.zeros_like(self.weights))).hi)
        return FoldResult(self.n_rows, weight, total, acc)

    def estimate(self, estimator: Estimator, model: Distribution,
                 precision: Precision = FLOAT64) -> tuple[Distribution, FoldResult]:
        """One EM iteration; rows that fit one chunk of an estimator that makes their
        statistics without accumulators (:class:`~mixfold.capabilities.ChunkStatistics`: a
        small mixture) skip them -- the same numbers, without a small fit's per-fold objects."""
        if isinstance(estimator, ChunkStatistics) and self.n_rows <= self.chunk_rows:
            start = time.perf_counter()
            with self.features.active():  # (a tied mixture keeps its pooled scatter there)
                found = estimator.chunk_statistics(model, self.enc, self.weights, precision)
            if found is not None:
                stats, ll = found
                total = weighted_total(self.weights, ll, 0)
                self.fold_times.add(np.array([time.perf_counter() - start]), [precision])
                fold = FoldResult(self.n_rows, self.total_weight, total, stats)
                return estimator.estimate(self.total_weight, stats), fold
        return super().estimate(estimator, model, precision)

    def worker_records(self) -> tuple[WorkerRecord, ...]:
        return self.fold_times.records([(0, self.n_rows)], [this_process()], ["cpu"])

    def log_density_sum(self, model: Distribution,
                        precision: Precision = FLOAT64) -> tuple[int, float]:
        return self.n_rows, fold_rows(None, self.enc, self.weights, model, precision,
                                      self.chunk_rows)

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        mask = init_sample_mask(self.enc, seed, self.n_rows)
        idx = np.flatnonzero(mask & (self.weights > 0))
        return self.enc.take(idx), self.weights[idx]

    def close(self) -> None:
        self.features.clear()
