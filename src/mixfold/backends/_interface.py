"""The one interface every data backend implements: resident encoded shards and a fold over them.

A backend holds the encoded rows where they are processed (in-process, in worker processes, in
Spark partitions, on MPI ranks...) for the whole fit. Per iteration the fit loop asks it for
:meth:`EncodedDataHandle.fold`: run the E-step of the model over every resident row, reduce the
fixed-size statistics, and hand back one accumulator. Everything else (initialisation, scoring,
one EM step, streaming statistics) is built on ``fold`` and ``init_sample`` here, once.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod

import numpy as np

from mixfold.backends.worker_records import WorkerRecord
from mixfold.errors import DegenerateFitWarning
from mixfold.compute.encoded import Encoded, InitRandom
from mixfold.compute.fold import FoldResult
from mixfold.families._protocol import Accumulator, Distribution, Estimator
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["EncodedDataHandle", "FoldResult"]

class EncodedDataHandle(ABC):
    """Encoded rows resident on a backend, and the fold that runs over them."""

    #: The backend's name, as given to ``optimize(backend=...)``.
    name: str = ""
    n_rows: int
    total_weight: float

    @abstractmethod
    def fold(self, estimator: Estimator, model: Distribution,
             precision: Precision = FLOAT64) -> FoldResult:
        """E-step of ``model`` over all resident rows into ``estimator``'s accumulators, reduced.

        ``precision``: what every row runs in (a name or a resolved
        :class:`~mixfold.precision.Precision`); a handle built from a heterogeneous plan also
        takes the plan itself, each shard then running its worker's band. The estimator (not a
        factory) is what travels to remote workers: it pickles.
        """

    @abstractmethod
    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        """The initialisation sample (rows chosen by :func:`init_sample_mask`) and its weights."""

    def worker_records(self) -> tuple[WorkerRecord, ...]:
        """One :class:`~mixfold.backends.worker_records.WorkerRecord` per shard of the rows
        (none for a handle that does not hold them in shards, such as a stream)."""
        return ()

    def close(self) -> None:  # noqa: B027 - holding nothing is a valid backend
        """Release what the backend holds (processes, cached partitions); idempotent."""

    def estimate(self, estimator: Estimator, model: Distribution,
                 precision: Precision = FLOAT64) -> tuple[Distribution, FoldResult]:
        """One EM iteration: fold (E-step + reduce), tie keys, M-step in float64."""
        result = self.fold(estimator, model, precision)
        result.stats.tie_keys()
        return estimator.estimate(result.weight, result.stats.value()), result

    def initialize(self, estimator: Estimator, seed: int,
                   precision: Precision = FLOAT64) -> Distribution:
        """The seeded starting model: a guess from the sample, then one full EM step (in
        ``precision``: a ``dd`` fit starts from a ``dd`` step, so that its start, too, does not
        depend on the sharding)."""
        sample, weights = self.init_sample(seed)
        with warnings.catch_warnings():
            # a guess from a small sample may be degenerate; the full EM step after it is judged
            warnings.simplefilter("ignore", DegenerateFitWarning)
            guess = estimator.initial_guess(sample, weights, InitRandom(seed))
        return self.estimate(estimator, guess, precision)[0]

    @abstractmethod
    def log_density_sum(self, model: Distribution,
                        precision: Precision = FLOAT64) -> tuple[int, float]:
        """(number of rows, total weighted log-density of the rows under ``model``)."""

    def stream_accumulate(self, estimator: Estimator, model: Distribution,
                          precision: Precision = FLOAT64) -> tuple[float, Accumulator]:
        """(total row weight, folded statistics) for streaming or incremental EM."""
        result = self.fold(estimator, model, precision)
        return result.weight, result.stats

    def __enter__(self) -> EncodedDataHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
