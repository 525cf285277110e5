"""``backend="spark"``: encoded shards cached as RDD partitions, held in long-lived Python tasks.

The rows are encoded once in the driver and shipped once into a cached RDD with one partition
per shard. The first fold starts one barrier stage that reads every shard from the cache once
into Python tasks that live for the whole fit (:mod:`mixfold.backends.spark_resident`); each
iteration sends them the estimator and model over a socket, gets one fixed-size payload per
shard back, and reduces the payloads through the sharded base's tree, as mp does. Where the
session cannot run that stage (dynamic allocation, too few slots to start it), or its conf sets
:data:`~mixfold.backends.spark_resident.RESIDENT_CONF` to ``false``, every iteration is a Spark
job instead: the estimator and model are broadcast, every partition folds its shard inside
``map``, and ``treeAggregate`` adds the payloads through a tree of the given depth. A Spark
DataFrame is encoded
on the executors instead, in one pass, from Arrow batches or, for a bare Parquet scan, from its
files read in the tasks (:meth:`SparkEncodedData.from_dataframe`). An existing
SparkSession (or SparkContext) is used as it is and left running; one mixfold starts itself is
bound to loopback and stopped, JVM included, at ``close()``.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import warnings
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, NamedTuple, TypeVar

import numpy as np

from mixfold.backends._row_faults import RowFault, caught, raise_at
from mixfold.backends._partitions import (PartitionEncoding, first_bad_row, merge_encoders,
                                          row_starts, sample_shard)
from mixfold.backends._recode import (Unmappable, batch_encoder, code_map, learns_in_pass,
                                      recoded)
from mixfold.backends._shard import ShardedEncodedData, checked_num_workers, require
from mixfold.backends._spark_parquet import parquet_scan, parquet_tables
from mixfold.backends.spark_resident import (RESIDENT_CONF, LostTask, ResidentStage,
                                             StageUnavailable, first_error_line,
                                             resident_enabled, task_slots)
from mixfold.backends.worker_records import Executor, timed_task
from mixfold.backends.worker_gpus import on_cuda_device, runs_on_cuda, spark_cuda_device
from mixfold.compute.tree import shard_bounds
from mixfold.errors import DataError, NumericalError
from mixfold.families._protocol import Distribution, Encoded, Encoder, Estimator, as_weights
from mixfold.precision import Precision

__all__ = ["SparkEncodedData", "local_spark_session", "stop_spark_session",
           "running_or_new_session", "retries_failed_tasks", "spark_job",
           "cached_partition_executors", "arrow_batches"]

T = TypeVar("T")

#: Restarts of the resident stage within one fold before the fit gives up (each after a lost
#: task: a worker that dies every time would otherwise loop).
RESIDENT_RESTARTS = 3


def local_spark_session(num_workers: int = 2, max_task_failures: int = 4) -> Any:
    """A ``local[num_workers,max_task_failures]`` SparkSession bound to 127.0.0.1, with no UI.

    A failed task is retried up to ``max_task_failures`` attempts in all, as on a cluster
    (``spark.task.maxFailures``); plain ``local[n]`` would fail the job at the first failure.
    """
    require("pyspark", "spark", "spark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(f"local[{num_workers},{max_task_failures}]")
            .appName("mixfold")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate())


def running_or_new_session(num_workers: int = 2) -> tuple[Any, bool]:
    """(session, whether mixfold owns it): this process's active SparkSession, left running when
    the fit ends (it is the user's), or a new local one that the fit stops."""
    require("pyspark", "spark", "spark")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    return local_spark_session(num_workers), True


def stop_spark_session(session: Any) -> None:
    """Stop ``session`` and its JVM (``stop()`` alone leaves the JVM alive until exit)."""
    sc = session.sparkContext
    gateway = sc._gateway
    session.stop()
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the gateway may already be gone
        pass
    if proc is not None:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            proc.kill()
    from pyspark import SparkContext

    SparkContext._gateway = None
    SparkContext._jvm = None


def retries_failed_tasks(sc: Any) -> bool:
    """Whether ``sc`` runs a failed task again: in local mode only a master ``local[N,F]`` with
    F >= 2 does (``spark.task.maxFailures`` is ignored there), elsewhere
    ``spark.task.maxFailures`` >= 2 (Spark's default is 4)."""
    master = sc.master
    local = re.fullmatch(r"local(?:\[\s*(\*|\d+)\s*(?:,\s*(\d+)\s*)?\])?", master)
    if local is not None:
        return local.group(2) is not None and int(local.group(2)) >= 2
    return int(sc.getConf().get("spark.task.maxFailures", "4")) >= 2


def spark_job(sc: Any, fold: int, job: Callable[[], T]) -> T:
    """``job()``, a Spark action; on a session that does not retry failed tasks, a failed task
    (a Python worker lost mid-fit) becomes one error line that says how to enable retries."""
    try:
        return job()
    except Exception as err:
        if type(err).__name__ != "Py4JJavaError" or retries_failed_tasks(sc):
            raise
        raise _without_retries(sc, f"a task failed in fold {fold}",
                               f"The task's error: {first_error_line(err)}") from None


def _without_retries(sc: Any, what: str, detail: str) -> RuntimeError:
    """The error of a task lost on a session that does not retry failed tasks."""
    return RuntimeError(
        f"spark: {what} of this fit, and this session (master {sc.master}) does not retry "
        f"failed tasks, so a Python worker lost mid-fit loses the fit: enable retries (master "
        f"'local[N,F]', e.g. 'local[2,4]', or spark.task.maxFailures >= 2 on a cluster). "
        f"{detail}")


def _run_partition(item: tuple, task: str, broadcast: Any) -> np.ndarray:
    index, shard, weights = item
    args = broadcast.value
    return _timed_on_task(task, len(args), index, shard, weights, args[index])


def _timed_on_task(task: str, n_slots: int, index: int, shard: Encoded, weights: np.ndarray,
                   args: tuple) -> np.ndarray:
    """Shard ``index``'s timed payload (:func:`timed_task`), on the task's GPU if it has one."""
    return timed_task(task, shard, weights, _on_task_gpu(args), index, n_slots)


def _sample_on_task(seed: int, n_rows: int, index: int, shard: Encoded, weights: np.ndarray,
                    _: None) -> tuple[Encoded, np.ndarray]:
    return sample_shard((shard, weights), seed, n_rows)


def _bad_row_on_task(model: Distribution, chunk_rows: int, index: int, shard: Encoded,
                     weights: np.ndarray, precision: Precision) -> str | None:
    return first_bad_row((shard, weights), model, precision, chunk_rows)


def _on_task_gpu(args: tuple) -> tuple:
    """A GPU shard's arguments on the GPU Spark gave this task; as they are where it gave none
    (local mode never does: the shard runs on ``cuda``)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    gpus = None if context is None else context.resources().get("gpu")
    if gpus is None or not runs_on_cuda(args):
        return args
    return on_cuda_device(args, spark_cuda_device(gpus.addresses,
                                                  os.environ.get("CUDA_VISIBLE_DEVICES")))


def _scala_list(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def cached_partition_executors(sc: Any, rdd: Any) -> list[Executor]:
    """Where each cached partition of ``rdd`` is held: its executor's id and host, as Spark's
    status store reports them (what its REST API serves); a partition held nowhere (not yet
    computed, or evicted) is ``Executor("", "")``."""
    store = sc._jsc.sc().statusStore()
    hosts = {str(e.id()): str(e.hostPort()).rpartition(":")[0]
             for e in _scala_list(store.executorList(True))}
    held: dict[str, str] = {}
    partitions = store.rdd(rdd.id()).partitions()
    for p in _scala_list(partitions.get()) if partitions.isDefined() else []:
        executors = _scala_list(p.executors())
        held[str(p.blockName())] = str(executors[0]) if executors else ""
    ids = [held.get(f"rdd_{rdd.id()}_{i}", "") for i in range(rdd.getNumPartitions())]
    return [Executor(e, hosts.get(e, "")) for e in ids]


#: Rows of a DataFrame read into the driver to guess its vocabularies (and learn the Arrow
#: schema its batches arrive in) before its one pass, for encoders whose vocabularies cannot be
#: learnt in the pass itself (:func:`~mixfold.backends._recode.learns_in_pass`).
VOCABULARY_SAMPLE_ROWS = 10_000


def _vocabulary_sample(src: Any, encoding: PartitionEncoding) -> tuple[Encoder, Any]:
    """(the encoder fitted on the first :data:`VOCABULARY_SAMPLE_ROWS` rows of ``src``, the
    Arrow schema Spark gives its batches)."""
    sample = src.limit(VOCABULARY_SAMPLE_ROWS).toArrow()
    fitted = encoding.fit(sample)
    if fitted is None:
        raise DataError("the data has no rows")
    return fitted, sample.schema


def _arrow_schema(src: Any) -> Any:
    """The Arrow schema of ``src``'s batches, from its Spark schema (no job), as
    ``DataFrame.toArrow`` gives it."""
    from pyspark.sql.pandas.types import to_arrow_schema

    large = src.sparkSession.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")
    return to_arrow_schema(src.schema, error_on_duplicated_field_names_in_struct=True,
                           timezone="UTC", prefers_large_types=large == "true")


def arrow_batches(df: Any) -> Any:
    """The RDD of ``df``'s Arrow record batches, one IPC message (bytes, no schema) per element,
    partitioned as ``df``: the columns reach a Python task as Spark's JVM wrote them, with no
    Python UDF in between (``mapInArrow`` would also send the encoded rows back through Arrow)."""
    from pyspark.rdd import RDD
    from pyspark.serializers import NoOpSerializer

    return RDD(df._jdf.toArrowBatchRdd().toJavaRDD(), df.sparkSession.sparkContext,
               NoOpSerializer())


class _BatchRecords:
    """The parameter (``AccumulatorParam``'s two methods) of an accumulator of every encoded
    batch's :class:`_Batch`, keyed by ``(partition, batch)``: a recomputed partition writes the
    same keys again."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:
        value1.update(value2)
        return value1


class _Batch(NamedTuple):
    """What one batch's task reports: its node sizes and weight when it was encoded (None
    when the guessed vocabularies lacked its levels), its own fitted encoder when it was
    encoded with that, or when the guess lacked its levels, and its rows (a bad row's index
    in the whole DataFrame counts them)."""

    node_sizes: list[int] | None
    weight: float
    fitted: Encoder | None
    rows: int


def _ipc_tables(schema: Any, message: bytes) -> Iterator[Any]:
    """One Arrow batch of the JVM's (an IPC message without its schema) as a table."""
    import pyarrow as pa

    yield pa.Table.from_batches([pa.ipc.read_record_batch(pa.py_buffer(message), schema)])


def _batch_source(src: Any, schema: Any) -> tuple[Any, Callable[[Any], Iterator[Any]]]:
    """(an RDD partitioned as ``src``, what turns each of its elements into Arrow tables in
    ``src``'s row order): its Parquet files read by pyarrow in the tasks where it is a bare
    Parquet scan (:func:`~mixfold.backends._spark_parquet.parquet_scan`), else the JVM's Arrow
    batches."""
    files = parquet_scan(src, schema)
    if files is None:
        return arrow_batches(src), partial(_ipc_tables, schema)
    batch_rows = int(src.sparkSession.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch",
                                               "10000"))
    sc = src.sparkSession.sparkContext
    return sc.parallelize(files, len(files)), partial(
        parquet_tables, schema, batch_rows if batch_rows > 0 else 2 ** 30)


def _encoded_batch(encoding: PartitionEncoding, guess: Encoder | None, table: Any
                   ) -> tuple[_Batch, Encoded | None, np.ndarray] | None:
    """One Arrow table's record and encoded rows (None for no rows; no rows encoded where
    ``guess`` lacks the table's levels)."""
    rows, weights = encoding.rows(table)
    if not len(rows):
        return None
    fitted = encoding.base.fit(rows)
    if guess is None:
        enc = batch_encoder(fitted).encode(rows)
    elif merge_encoders(guess, fitted) != guess:
        return _Batch(None, 0.0, fitted, len(rows)), None, np.empty(0)
    else:
        enc, fitted = guess.encode(rows), None
    weights = as_weights(weights, enc.n_rows)
    return _Batch(enc.node_sizes(), float(weights.sum()), fitted, len(rows)), enc, weights


def _batch_encoder(encoding: PartitionEncoding, guess: Encoder | None,
                   tables_of: Callable[[Any], Iterator[Any]], records: Any) -> Callable:
    """The ``mapPartitionsWithIndex`` function that encodes each Arrow table a partition's
    elements give (``tables_of``) into one ``(encoded rows, weights)`` element (one batch in
    memory at a time): with its own vocabularies when ``guess`` is None, else with ``guess``
    (a batch with a level ``guess`` lacks is not encoded, only its fitted encoder is
    recorded)."""

    def encode_batches(index: int, elements: Iterator[Any]) -> Iterator[tuple]:
        tables = (table for element in elements for table in tables_of(element))
        for number, table in enumerate(tables):
            done = caught(_encoded_batch, encoding, guess, table)
            if isinstance(done, RowFault):  # the partition stops; the driver names the row
                records.add({(index, number): done})
                return
            if done is None:
                continue
            batch, enc, weights = done
            records.add({(index, number): batch})
            if enc is not None:
                yield enc, weights

    return encode_batches


class _Measured(NamedTuple):
    """What one pass learnt, in partition and batch order: every partition's node sizes and
    weight (None for an empty one), and the fitted encoders of the encoded batches
    (``own``, per partition) and of the batches left unencoded (``lacking``)."""

    sizes: list[tuple[list[int], float] | None]
    own: list[list[Encoder]]
    lacking: list[Encoder]


def _partition_sizes(records: dict, num_partitions: int) -> _Measured:
    """Every partition's node sizes, weight and fitted encoders from its batches' records."""
    out = _Measured([None] * num_partitions, [[] for _ in range(num_partitions)], [])
    ordered = sorted(records.items(), key=lambda item: item[0])
    for number, (_, batch) in enumerate(ordered):  # the first bad row, counted from row 0
        if isinstance(batch, RowFault):
            raise_at(batch, sum(b.rows for _, b in ordered[:number]))
    for (index, _), batch in ordered:
        if batch.node_sizes is None:
            out.lacking.append(batch.fitted)
            continue
        if batch.fitted is not None:
            out.own[index].append(batch.fitted)
        before = out.sizes[index]
        out.sizes[index] = (list(batch.node_sizes), batch.weight) if before is None else (
            [a + b for a, b in zip(before[0], batch.node_sizes)], before[1] + batch.weight)
    return out


class _Layout(NamedTuple):
    """How a task makes its partition's shard from its cached batches: the global start of
    each node, and each batch's :func:`~mixfold.backends._recode.code_map` (None: no batch's
    codes change)."""

    starts: list[int]
    code_maps: list[Any] | None


def _layouts(measured: _Measured, merged: Encoder) -> list[_Layout | None]:
    """Every partition's :class:`_Layout` (None for an empty one); :class:`Unmappable` where a
    batch's fitted encoder differs from ``merged`` in more than its levels."""
    starts, _, _ = row_starts(measured.sizes)
    out: list[_Layout | None] = []
    indices: dict[int, dict] = {}
    for s, own in zip(starts, measured.own):
        maps = [code_map(e, merged, indices) for e in own]
        out.append(None if s is None else _Layout(s, maps if any(
            m is not None for m in maps) else None))
    return out


def _joined_partition(index: int, pieces: Iterator[tuple[Encoded, np.ndarray]], layouts: Any
                      ) -> Iterator[tuple[int, Encoded, np.ndarray]]:
    """A cached partition as one ``(partition, encoded rows on global row indices, weights)``:
    its batches' codes mapped onto the merged vocabularies, joined in order (nothing for an
    empty partition)."""
    pieces = list(pieces)
    if not pieces:
        return
    layout = layouts.value[index]
    encs = [p[0] for p in pieces]
    if layout.code_maps is not None:
        encs = [recoded(e, m) for e, m in zip(encs, layout.code_maps)]
    enc = encs[0] if len(encs) == 1 else type(encs[0]).concat(encs)
    yield index, enc.with_starts(iter(layout.starts)), np.concatenate(
        [p[1] for p in pieces])


def _encode_and_measure(src: Any, encoding: PartitionEncoding, guess: Encoder | None,
                        schema: Any) -> tuple[Any, _Measured]:
    """(the cached RDD of every partition's encoded batches, what the pass learnt) in one
    pass over ``src``: one Spark job fills the cache, and the sizes and fitted encoders come
    back as accumulator updates, not by reading it again."""
    records = src.sparkSession.sparkContext.accumulator({}, _BatchRecords())
    batches, tables_of = _batch_source(src, schema)
    encoded = batches.mapPartitionsWithIndex(
        _batch_encoder(encoding, guess, tables_of, records)).cache()
    encoded._jrdd.count()  # the JVM counts: nothing is read back into Python
    return encoded, _partition_sizes(records.value, batches.getNumPartitions())


def _encode_in_one_pass(src: Any, encoding: PartitionEncoding
                        ) -> tuple[Any, _Measured, Encoder, list[_Layout | None]]:
    """Encode ``src`` learning its vocabularies in the same pass (no job before it): each
    batch with its own levels, mapped onto the merged ones as a task reads its shard; a second
    pass with the merged encoder where a batch's fit cannot be mapped so."""
    schema = _arrow_schema(src)
    cached, measured = _encode_and_measure(src, encoding, None, schema)
    merged = merge_encoders(*(e for own in measured.own for e in own))
    if merged is None:
        raise DataError("the data has no rows")
    merged.encode(encoding.rows(schema.empty_table())[0])  # a field with no value: its error
    try:
        return cached, measured, merged, _layouts(measured, merged)
    except Unmappable:
        cached.unpersist()
    cached, measured = _encode_and_measure(src, encoding, merged, schema)
    return cached, measured, merged, _layouts(measured, merged)


def _encode_after_sample(src: Any, encoding: PartitionEncoding
                         ) -> tuple[Any, _Measured, Encoder, list[_Layout | None]]:
    """Encode ``src`` with the vocabularies of its first rows, in one pass when they hold
    every batch's (else a second pass encodes with the merged vocabularies)."""
    encoder, schema = _vocabulary_sample(src, encoding)
    cached, measured = _encode_and_measure(src, encoding, encoder, schema)
    if measured.lacking:  # a level the sample did not hold: a second pass with every vocabulary
        cached.unpersist()
        encoder = merge_encoders(encoder, *measured.lacking)
        cached, measured = _encode_and_measure(src, encoding, encoder, schema)
    return cached, measured, encoder, _layouts(measured, encoder)


class SparkEncodedData(ShardedEncodedData):
    """Encoded shards in a cached RDD, one partition each.

    Built from rows encoded in the driver (``optimize(rows, est, backend="spark")``) or from a
    Spark DataFrame encoded where its partitions live (:meth:`from_dataframe`). Either way it
    folds and scores through the sharded base, on the shards resident in the stage its first
    fold starts (``treeAggregate`` over a job per fold where that stage cannot run); the shards
    live only on the executors, so the initialisation sample and naming a bad row run there too.
    """

    name = "spark"

    def __init__(self, session: Any, owned: bool, rdd: Any, bounds: list[tuple[int, int]],
                 total_weight: float, chunk_rows: int, reduce_depth: int = 2, plan: Any = None,
                 layouts: list[_Layout | None] | None = None):
        self.session, self.owned = session, owned
        self.sc = getattr(session, "sparkContext", session)
        self.cached = rdd
        # a DataFrame's partitions are encoded apart: each task joins its partition's batches,
        # re-bases their row indices and maps their codes onto the merged levels
        self.layouts = None if layouts is None else self.sc.broadcast(
            {i: s for i, s in enumerate(layouts) if s is not None})
        self.rdd = rdd if self.layouts is None else rdd.mapPartitionsWithIndex(
            lambda i, rows, b=self.layouts: _joined_partition(i, rows, b))
        self.num_partitions = int(rdd.getNumPartitions())
        self.reduce_depth = max(1, int(reduce_depth))
        self.folds = 0
        #: the stage holding the shards in long-lived Python tasks, started by the first fold
        self.resident: ResidentStage | None = None
        #: why folds run as one Spark job each ("" where the session's conf turned it off)
        self.resident_off: str | None = None if resident_enabled(session) else ""
        self._lay_out(bounds[-1][1] if bounds else 0, total_weight, chunk_rows, bounds, plan)

    @classmethod
    def from_encoded(cls, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                     session: Any = None, num_workers: int | None = None,
                     reduce_depth: int = 2, plan: Any = None) -> SparkEncodedData:
        """Ship rows encoded in the driver once into a cached RDD of contiguous shards.

        With a ``plan`` (:class:`~mixfold.parallel.heterogeneous.HeterogeneousPlan`), partition
        ``i`` holds exactly worker ``i``'s planned rows and runs its band, and ``treeAggregate``
        gets the planned depth.
        """
        num_workers = checked_num_workers(num_workers, enc.n_rows)
        if session is None:
            session, owned = running_or_new_session(num_workers or 2)
        else:
            owned = False
        sc = getattr(session, "sparkContext", session)
        w = as_weights(weights, enc.n_rows)
        if plan is None:
            bounds = shard_bounds(enc.n_rows, num_workers or sc.defaultParallelism)
        else:
            bounds, reduce_depth = plan.row_bounds(enc.n_rows), plan.reduce_depth
        shards = [(i, enc.rows(a, b), w[a:b]) for i, (a, b) in enumerate(bounds)]
        rdd = sc.parallelize(shards, len(shards)).cache()
        rdd.count()  # materialise the cache: the data crosses to the executors once
        return cls(session, owned, rdd, bounds, float(w.sum()), chunk_rows, reduce_depth, plan)

    @classmethod
    def from_dataframe(cls, df: Any, estimator: Estimator, *, init: Distribution | None = None,
                       weight_column: str | None = None, chunk_rows: int = 8192,
                       reduce_depth: int = 2) -> tuple[SparkEncodedData, Estimator]:
        """Encode a Spark DataFrame on its executors; returns the handle and bound estimator.

        The columns reach the Python workers as Arrow batches, one batch in memory at a time:
        read by pyarrow from the files of a bare Parquet scan, in the DataFrame's row order
        (:mod:`~mixfold.backends._spark_parquet`), else the JVM's (``arrow_batches``), read
        with the Arrow schema of ``df.schema``. One pass encodes them: each batch with its own
        vocabularies, which merge in the driver; a task maps its batches' codes onto the
        merged levels as it reads its shard (:mod:`~mixfold.backends._recode`). Encoders that
        learn more than levels or a vector's length (bags of tokens, sequences) first fit the
        first :data:`VOCABULARY_SAMPLE_ROWS` rows and encode with that (a second pass encodes
        with the merged vocabularies where a batch holds a level it lacks). Each batch is
        cached as it is encoded, one ``(encoded rows, weights)`` element, and a fold joins a
        partition's elements into its shard. Global row indices come from prefix sums of every
        partition's node sizes (applied as each task reads its shard) — so the seeded start
        equals the local backend's.
        """
        columns = [c for c in df.columns if c != weight_column]
        src = df.select(*columns, weight_column) if weight_column else df.select(*columns)
        base = init.encoder() if init is not None else estimator.encoder()
        encoding = PartitionEncoding(base, weight_column)
        encode = _encode_in_one_pass if learns_in_pass(base) else _encode_after_sample
        cached, measured, encoder, layouts = encode(src, encoding)
        _, bounds, total = row_starts(measured.sizes)
        handle = cls(df.sparkSession, False, cached, bounds, total, chunk_rows, reduce_depth,
                     layouts=layouts)
        return handle, estimator.bind(encoder)

    def shard(self, i: int) -> tuple[Encoded, np.ndarray]:
        raise ValueError(f"shard {i} lives in partition {i} of the RDD, not in the driver")

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        self.folds += 1
        payloads = self._on_resident(partial(_timed_on_task, task, len(shard_args)),
                                     dict(enumerate(shard_args)))
        if payloads is not None:
            return self._tree([payloads[i] for i in sorted(payloads)], combine)
        return self._reduce_by_job(task, shard_args, combine)

    def _reduce_by_job(self, task: str, shard_args: list[tuple],
                       combine: Callable[..., np.ndarray]) -> np.ndarray:
        """One Spark job: every partition folds its shard, ``treeAggregate`` reduces."""
        broadcast = self.sc.broadcast(shard_args)  # partition i reads shard_args[i]

        def seq_op(acc: np.ndarray | None, payload: np.ndarray) -> np.ndarray:
            return payload.copy() if acc is None else combine(acc, payload)

        def comb_op(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
            return b if a is None else a if b is None else combine(a, b)

        payloads = self.rdd.map(lambda item: _run_partition(item, task, broadcast))
        try:
            return spark_job(self.sc, self.folds, lambda: payloads.treeAggregate(
                None, seq_op, comb_op, depth=self.reduce_depth))
        finally:
            broadcast.destroy()

    def _on_resident(self, fn: Callable, args: dict[int, Any]) -> dict[int, Any] | None:
        """``{shard: fn(shard, rows, weights, args[shard])}`` run on the resident shards, the
        stage restarted (and the call redone) when a task is lost; ``None`` where the session
        cannot hold them, so the caller runs a Spark job."""
        restarts = 0
        while (stage := self._resident_stage()) is not None:
            try:
                return stage.call(fn, args)
            except LostTask as lost:
                stage.stop(lost=True)
                self.resident = None
                if not retries_failed_tasks(self.sc):
                    raise _without_retries(self.sc, f"{lost} in fold {self.folds}",
                                           "Or turn resident shards off: "
                                           f"spark.conf.set('{RESIDENT_CONF}', 'false').") \
                        from None
                if restarts == RESIDENT_RESTARTS:
                    raise RuntimeError(f"spark: gave up after {restarts} restarts of the "
                                       f"resident stage in fold {self.folds} of this fit: "
                                       f"{lost} (see that executor's log; with "
                                       f"spark.conf.set('{RESIDENT_CONF}', 'false') every "
                                       f"iteration runs a Spark job instead)") from None
                restarts += 1
        return None

    def _resident_stage(self) -> ResidentStage | None:
        """The running stage, started on first use; ``None`` (with one warning saying why)
        where this session cannot run it."""
        if self.resident is not None or self.resident_off is not None:
            return self.resident
        conf = self.sc.getConf()
        if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
            return self._resident_unavailable("dynamic allocation is on, and a barrier stage "
                                              "needs a fixed set of executors")
        host = conf.get("spark.driver.host", None) or socket.gethostname()
        stage = ResidentStage(self.sc, self.rdd, min(self.num_partitions, task_slots(self.sc)),
                              host, conf.get("spark.driver.bindAddress", None))
        try:
            stage.start()
        except StageUnavailable as err:
            return self._resident_unavailable(str(err))
        except Exception as err:  # noqa: BLE001 - e.g. no barrier mode: the job path still runs
            return self._resident_unavailable(f"{type(err).__name__}: {first_error_line(err)}")
        self.resident = stage
        return stage

    def _resident_unavailable(self, reason: str) -> None:
        self.resident_off = reason
        warnings.warn(f"spark: shards are not resident in Python tasks ({reason}): every "
                      f"iteration runs a Spark job of its own", RuntimeWarning, stacklevel=5)

    def executors(self) -> list[Executor]:
        return cached_partition_executors(self.sc, self.cached)

    def _name_bad_row(self, model: Distribution, precisions: list[str]) -> None:
        if self.resident is not None:
            found = self._on_resident(partial(_bad_row_on_task, model, self.chunk_rows),
                                      dict(enumerate(precisions)))
            message = next((found[i] for i in sorted(found) if found[i] is not None), None)
            raise NumericalError(message or "the log-likelihood is not finite")
        chunk = self.chunk_rows
        found = self.rdd.map(lambda t: first_bad_row(t[1:], model, precisions[t[0]], chunk)) \
            .filter(lambda m: m is not None).take(1)
        raise NumericalError(found[0] if found else "the log-likelihood is not finite")

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        n = self.n_rows
        if self.resident is not None:  # its tasks hold every slot: no other job would run
            found = self._on_resident(partial(_sample_on_task, seed, n),
                                      dict.fromkeys(range(len(self.bounds))))
            pieces = [found[i] for i in sorted(found)]
        else:
            pieces = [p for _, p in sorted(self.rdd.map(
                lambda t: (t[0], sample_shard(t[1:], seed, n))).collect(), key=lambda p: p[0])]
        pieces = [p for p in pieces if p[0].n_rows] or pieces[:1]
        encs = [p[0] for p in pieces]
        return type(encs[0]).concat(encs), np.concatenate([p[1] for p in pieces])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.resident is not None:
            self.resident.stop()
            self.resident = None
        self.cached.unpersist()
        if self.layouts is not None:
            self.layouts.destroy()
        if self.owned:
            stop_spark_session(self.session)
