"""One backend dispatch: encode the rows once and place them where the fold runs.

:func:`open_backend` is the only place that turns a backend name (or an engine object the user
already has) into an opened :class:`~mixfold.backends.EncodedDataHandle`, with or without a
heterogeneous plan (:class:`~mixfold.parallel.heterogeneous.PlanRequest`): each backend class
takes the plan and places every worker's planned rows itself. Engines (pyspark, mpi4py, dask,
ray) are imported by their backend module only when it is opened.

>>> import numpy as np
>>> from mixfold import GaussianEstimator
>>> handle, bound, plan = open_backend("local", np.zeros(3), GaussianEstimator())
>>> type(handle).__name__, handle.n_rows, plan
('LocalEncodedData', 3, None)
>>> handle.close()
"""

from __future__ import annotations

from typing import Any

from mixfold.backends import BACKENDS, EncodedDataHandle, LocalEncodedData, backend_name
from mixfold.backends.dask import DaskEncodedData, DaskPartitionedData
from mixfold.backends.mp import MPEncodedData
from mixfold.backends.mpi import MPIEncodedData
from mixfold.backends.ray import RayEncodedData, RayPartitionedData
from mixfold.backends.spark import SparkEncodedData
from mixfold.backends.stream import StreamEncodedData
from mixfold.compute.encoded import Encoded
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS
from mixfold.errors import DataError
from mixfold.families._labels import with_labels
from mixfold.families._protocol import Distribution, Estimator
from mixfold.io.kinds import Kind, kind_of
from mixfold.io.readers import RowBlocks
from mixfold.io.tables import collect_rows
from mixfold.backends.planned import PlannedLocalEncodedData
from mixfold.parallel.heterogeneous import HeterogeneousPlan, PlanRequest
from mixfold.parallel.model_parallel import ModelParallelEncodedData

__all__ = ["open_backend", "encode_data", "BACKENDS"]


def _row_count(data: Any) -> int | None:
    """Rows of raw data: an array's (or a sparse matrix's, whose length is ambiguous) first
    dimension, else its length; ``None`` when it has neither."""
    shape = getattr(data, "shape", None)
    if isinstance(shape, tuple) and shape:
        return int(shape[0])
    return len(data) if hasattr(data, "__len__") else None


def encode_data(data: Any, estimator: Estimator, init: Distribution | None = None,
                kind: Kind | None = None) -> tuple[Encoded, Estimator]:
    """Encode raw rows once for ``estimator``; returns the encoding and the bound estimator.

    Vocabularies (categorical levels) come from ``init`` when given, else from the data.
    ``kind``: the data's :class:`~mixfold.io.kinds.Kind` when already known.
    """
    if (kind_of(data) if kind is None else kind) is Kind.ENCODED:
        if data.n_rows == 0:
            raise DataError("the data has no rows")
        return data, estimator.bind(init.encoder()) if init is not None else estimator
    if data is None or _row_count(data) == 0:
        raise DataError("the data has no rows")
    encoder = (init.encoder() if init is not None else estimator.encoder()).fit(data)
    return encoder.encode(data), estimator.bind(encoder)


def open_backend(backend: Any, data: Any, estimator: Estimator, *,
                 init: Distribution | None = None, weights: Any = None,
                 chunk_rows: int | None = None, num_workers: int | None = None,
                 plan: PlanRequest | None = None, labels: Any = None, kind: Kind | None = None
                 ) -> tuple[EncodedDataHandle, Estimator, HeterogeneousPlan | None]:
    """Encode ``data`` once and place it on ``backend``: returns (handle, bound estimator, plan).

    Rows are encoded in the driver, except on MPI (each rank encodes its own rows), for a Spark
    DataFrame (encoded on the executors), a Dask DataFrame, Series or Array and a Ray dataset
    (encoded partition by partition on the workers; ``weights`` may name a column). With
    ``plan``, the rows are planned over its workers once their count is known, every worker gets
    its planned rows, and the handle runs every worker's band when folded with the plan in
    place of one precision. ``labels`` (the top latent node's, :mod:`mixfold.families._labels`)
    ride with the rows encoded in the driver. ``kind``: the data's
    :class:`~mixfold.io.kinds.Kind` when already known (rows, not a path or a table: see
    :func:`mixfold.io.tables.prepared_input`).
    """
    name = backend_name(backend)
    engine = None if isinstance(backend, str) else backend
    chunk = chunk_rows or DEFAULT_CHUNK_ROWS
    kind = kind_of(data) if kind is None else kind  # the one look at the data's type
    if labels is not None:
        return _open_labelled(name, engine, data, kind, estimator, init, weights, chunk,
                              num_workers, plan, labels)
    if plan is not None:
        return _open_planned(name, engine, data, kind, estimator, init, weights, chunk,
                             num_workers, plan)
    if kind is Kind.ROW_BLOCKS:  # out of core: one pass over the source per fold
        handle, bound = _open_stream(name, data, estimator, init, weights, chunk, num_workers)
        return handle, bound, None
    if kind is Kind.SPARK:
        if name != "spark":
            raise ValueError(f"a Spark DataFrame is fitted on the spark backend, not {name!r}")
        handle, bound = SparkEncodedData.from_dataframe(data, estimator, init=init,
                                                        weight_column=weights, chunk_rows=chunk)
        return handle, bound, None
    if kind.on_engine:
        handle, bound = _open_engine_collection(name, engine, data, kind, estimator, init,
                                                weights, chunk, num_workers)
        return handle, bound, None
    if name == "mpi":
        handle, bound = MPIEncodedData.from_rows(data, estimator, init=init, weights=weights,
                                                 chunk_rows=chunk, comm=engine)
        return handle, bound, None
    enc, bound = encode_data(data, estimator, init, kind)
    if name == "local":
        if num_workers not in (None, 1):
            raise ValueError(f"the local backend runs one worker, got num_workers={num_workers}")
        return LocalEncodedData(enc, weights, chunk), bound, None
    if name == "model_parallel":
        return ModelParallelEncodedData(enc, weights, chunk, num_workers), bound, None
    return _sharded(name, engine, enc, weights, chunk, num_workers, None), bound, None


def _open_labelled(name: str, engine: Any, data: Any, kind: Kind, estimator: Estimator,
                   init: Distribution | None, weights: Any, chunk: int, num_workers: int | None,
                   plan: PlanRequest | None, labels: Any
                   ) -> tuple[EncodedDataHandle, Estimator, None]:
    """Rows encoded in the driver with their labels, placed on the backend."""
    if plan is not None or name in ("mpi", "model_parallel") or kind is Kind.ROW_BLOCKS \
            or kind.on_engine:
        raise ValueError(f"labels= ride with rows encoded in the driver: not with a plan, a "
                         f"RowBlocks source, an engine's collection (Spark, Dask, Ray) or "
                         f"backend {name!r}")
    enc, bound = encode_data(data, estimator, init, kind)
    enc = with_labels(enc, bound, labels)
    if name == "local":
        return LocalEncodedData(enc, weights, chunk), bound, None
    return _sharded(name, engine, enc, weights, chunk, num_workers, None), bound, None


def _open_planned(name: str, engine: Any, data: Any, kind: Kind, estimator: Estimator,
                  init: Distribution | None, weights: Any, chunk: int, num_workers: int | None,
                  request: PlanRequest
                  ) -> tuple[EncodedDataHandle, Estimator, HeterogeneousPlan]:
    if name == "model_parallel":
        raise ValueError("a heterogeneous plan shards rows over workers; backend "
                         "'model_parallel' threads the model instead: pick one")
    if kind.on_engine:
        raise ValueError(f"a heterogeneous plan places rows encoded in the driver (or on MPI "
                         f"ranks): pass the rows, not a {type(data).__name__} of an engine")
    if kind is Kind.ROW_BLOCKS:  # a plan places every row: the source is read into memory
        data = collect_rows(data, (init.encoder() if init is not None else estimator.encoder()))
        kind = Kind.ROWS
    if name == "mpi":
        handle, bound = MPIEncodedData.from_rows(data, estimator, init=init, weights=weights,
                                                 chunk_rows=chunk, comm=engine)
        plan = request.plan_for(handle.n_rows, name, engine, num_workers)
        handle.apply_plan(plan)
        return handle, bound, plan
    enc, bound = encode_data(data, estimator, init, kind)
    plan = request.plan_for(enc.n_rows, name, engine, num_workers)
    if name == "local":
        return PlannedLocalEncodedData(enc, weights, chunk, plan), bound, plan
    return _sharded(name, engine, enc, weights, chunk, num_workers, plan), bound, plan


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
    return StreamEncodedData.open(source, estimator, init=init, chunk_rows=chunk)


def _open_engine_collection(name: str, engine: Any, data: Any, kind: Kind, estimator: Estimator,
                            init: Distribution | None, weights: Any, chunk: int,
                            num_workers: int | None) -> tuple[EncodedDataHandle, Estimator]:
    """A Dask collection or a Ray dataset encoded on its engine's workers."""
    engine_name = kind.value  # the backend's name
    if name != engine_name:
        raise ValueError(f"a {engine_name} {type(data).__name__} is fitted on the {engine_name} "
                         f"backend (backend={engine_name!r}), not {name!r}")
    if weights is not None and not isinstance(weights, str):
        raise ValueError(f"weights of a {engine_name} {type(data).__name__} name one of its "
                         f"columns, got a {type(weights).__name__}")
    if kind is Kind.DASK:
        return DaskPartitionedData.from_collection(data, estimator, init=init,
                                                   weight_column=weights, chunk_rows=chunk,
                                                   client=engine, num_workers=num_workers)
    return RayPartitionedData.from_dataset(data, estimator, init=init, weight_column=weights,
                                           chunk_rows=chunk)


def _sharded(name: str, engine: Any, enc: Encoded, weights: Any, chunk: int,
             num_workers: int | None, plan: HeterogeneousPlan | None) -> EncodedDataHandle:
    """Rows encoded in the driver, sharded over an engine's workers (as planned, if planned)."""
    if name == "mp":
        return MPEncodedData(enc, weights, chunk, num_workers, plan=plan)
    if name == "spark":
        return SparkEncodedData.from_encoded(enc, weights, chunk, session=engine,
                                             num_workers=num_workers, plan=plan)
    if name == "dask":
        return DaskEncodedData(enc, weights, chunk, client=engine, num_workers=num_workers,
                               plan=plan)
    return RayEncodedData(enc, weights, chunk, num_workers=num_workers, plan=plan)
