"""Data-parallel backends behind one interface (:class:`EncodedDataHandle`).

``optimize(..., backend=...)`` takes a name from :data:`BACKENDS`, or an engine object the user
already has: a SparkSession or SparkContext, a Dask ``Client``, an MPI communicator. Engines are
imported only when their backend is opened.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.backends._interface import EncodedDataHandle, FoldResult
from mixfold.backends._shard import MissingEngineError
from mixfold.backends.local import DEFAULT_CHUNK_ROWS, LocalEncodedData
from mixfold.families._protocol import Distribution, Encoded, Estimator
from mixfold.io.readers import RowBlocks

__all__ = ["EncodedDataHandle", "FoldResult", "LocalEncodedData", "open_backend", "BACKENDS",
           "MissingEngineError", "backend_name"]

#: Backend names ``optimize(backend=...)`` accepts ("model_parallel": rows in this process, the
#: model threaded, :mod:`mixfold.parallel.model_parallel`).
BACKENDS = ("local", "mp", "spark", "dask", "ray", "mpi", "model_parallel")


def backend_name(backend: Any) -> str:
    """The backend a name or an engine object stands for."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)} or an engine object, got "
                             f"{backend!r}")
        return backend
    cls = type(backend)
    module = cls.__module__.split(".")[0]
    if module == "pyspark" and cls.__name__ in ("SparkSession", "SparkContext"):
        return "spark"
    if module == "distributed" and cls.__name__ == "Client":
        return "dask"
    if module == "mpi4py":
        return "mpi"
    raise ValueError(f"backend must be one of {list(BACKENDS)} or a SparkSession, Dask Client or "
                     f"MPI communicator, got a {cls.__name__}")


def open_backend(backend: Any, data: Any, estimator: Estimator, *, init: Distribution | None,
                 weights: Any, chunk_rows: int | None, num_workers: int | None,
                 encode: Any) -> tuple[EncodedDataHandle, Estimator]:
    """Encode ``data`` once and place it on ``backend``; returns the handle and bound estimator.

    ``encode(data, estimator, init) -> (Encoded, Estimator)`` encodes in the driver; the MPI
    backend instead encodes each rank's own rows where they are.
    """
    name = backend_name(backend)
    engine = None if isinstance(backend, str) else backend
    chunk = chunk_rows or DEFAULT_CHUNK_ROWS
    if isinstance(data, RowBlocks):  # out of core: one pass over the source per fold
        return _open_stream(name, data, estimator, init, weights, chunk, num_workers)
    if _is_spark_dataframe(data):
        if name != "spark":
            raise ValueError(f"a Spark DataFrame is fitted on the spark backend, not {name!r}")
        from mixfold.backends.spark import SparkEncodedData

        return SparkEncodedData.from_dataframe(data, estimator, init=init,
                                               weight_column=weights, chunk_rows=chunk)
    if name == "mpi":
        from mixfold.backends.mpi import MPIEncodedData

        return MPIEncodedData.from_rows(data, estimator, init=init, weights=weights,
                                        chunk_rows=chunk, comm=engine)
    enc, estimator = encode(data, estimator, init)
    if name == "local":
        if num_workers not in (None, 1):
            raise ValueError(f"the local backend runs one worker, got num_workers={num_workers}")
        return LocalEncodedData(enc, weights, chunk), estimator
    if name == "model_parallel":
        from mixfold.parallel.model_parallel import ModelParallelEncodedData

        return ModelParallelEncodedData(enc, weights, chunk, num_workers), estimator
    return _driver_encoded(name, engine, enc, weights, chunk, num_workers), estimator


def _open_stream(name: str, source: RowBlocks, estimator: Estimator, init: Distribution | None,
                 weights: Any, chunk: int, num_workers: int | None
                 ) -> tuple[EncodedDataHandle, Estimator]:
    if name != "local":
        raise ValueError(f"a RowBlocks source is fitted on the local backend, not {name!r}")
    if num_workers not in (None, 1):
        raise ValueError(f"the local backend runs one worker, got num_workers={num_workers}")
    if weights is not None:
        raise ValueError("row weights are not supported with a RowBlocks source (every row "
                         "weighs 1); got weights")
    from mixfold.backends.stream import StreamEncodedData

    return StreamEncodedData.open(source, estimator, init=init, chunk_rows=chunk)


def _is_spark_dataframe(data: Any) -> bool:
    cls = type(data)
    return cls.__module__.startswith("pyspark.sql") and cls.__name__ == "DataFrame"


def _driver_encoded(name: str, engine: Any, enc: Encoded, weights: np.ndarray | None, chunk: int,
                    num_workers: int | None) -> EncodedDataHandle:
    if name == "mp":
        from mixfold.backends.mp import MPEncodedData

        return MPEncodedData(enc, weights, chunk, num_workers)
    if name == "spark":
        from mixfold.backends.spark import SparkEncodedData

        return SparkEncodedData.from_encoded(enc, weights, chunk, session=engine,
                                             num_workers=num_workers)
    if name == "dask":
        from mixfold.backends.dask import DaskEncodedData

        return DaskEncodedData(enc, weights, chunk, client=engine, num_workers=num_workers)
    from mixfold.backends.ray import RayEncodedData

    return RayEncodedData(enc, weights, chunk, num_workers=num_workers)
