"""Data-parallel backends behind one interface (:class:`EncodedDataHandle`).

``optimize(..., backend=...)`` takes a name from :data:`BACKENDS`, or an engine object the user
already has: a SparkSession or SparkContext, a Dask ``Client``, an MPI communicator; one dispatch,
:func:`mixfold.dispatch.open_backend`, opens it. Engines are imported only when their backend is
opened.
"""

from __future__ import annotations

from typing import Any

from mixfold.backends._interface import EncodedDataHandle
from mixfold.backends._shard import MissingEngineError
from mixfold.backends.local import LocalEncodedData
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, FoldResult

__all__ = ["EncodedDataHandle", "FoldResult", "LocalEncodedData", "BACKENDS", "MissingEngineError",
           "backend_name", "DEFAULT_CHUNK_ROWS"]

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
