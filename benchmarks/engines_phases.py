"""Where mixfold's Spark encode and iteration spend their time, phase by phase, same run.

    python benchmarks/engines_phases.py                  # 10^6 rows
    python benchmarks/engines_phases.py --rows 10000000

The rows are ``engines.py``'s Gaussian mixture, written to Parquet in 8 files and read on
``local[2,4]``. Memory first: the Python workers' peak resident growth over an encode (each
worker's peak before and after, by process id; the workers have encoded 1% of the rows
before, so their imports are not counted) against the largest partition's Arrow bytes. Then every
phase is timed in the started workers.
Encode phases, each a Spark job of its own and each ratio to reading the Parquet: the Parquet
read alone (a sum per column, JVM only); the DataFrame's Arrow batches read into the Python
workers and dropped (the floor of an encode through the JVM); the vocabulary sample on the
first rows; the encoding pass four ways, side by side: as ``from_dataframe`` runs it now (no
sample: levels and a vector's length learnt in the pass; the Parquet files read by pyarrow in
the tasks), after a vocabulary sample, from the JVM's Arrow batches, and both of those (the
encode before #35's arrow3 branch); the whole of ``from_dataframe``; Arrow ``toPandas`` plus a
local encode. Iteration
phases, each ratio to the local backend's iteration in the driver: a Spark job over empty
partitions (task launch, broadcast, ``treeAggregate``); a job that reads every cached shard
into the Python workers and folds nothing; a whole mixfold iteration. Every figure is the
median of ``--repeats`` runs (the encode phases in rounds that run each phase once).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import mixfold.backends.spark as spark_backend
from mixfold.backends._partitions import PartitionEncoding
from mixfold.backends.spark import (SparkEncodedData, _encode_after_sample, _encode_in_one_pass,
                                    _vocabulary_sample, arrow_batches, local_spark_session,
                                    stop_spark_session)
from mixfold.dispatch import open_backend
from mixfold.io.readers import table_rows

from _table import print_measures  # benchmarks/: the script's own folder is on the path
from engines import D, PARTITIONS, estimator, partition


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


@contextlib.contextmanager
def jvm_arrow_batches():
    """The encode reads the JVM's Arrow batches even from a bare Parquet scan."""
    saved = spark_backend.parquet_scan
    spark_backend.parquet_scan = lambda df, schema: None
    try:
        yield
    finally:
        spark_backend.parquet_scan = saved


def interleaved_medians(fns, repeats: int) -> list[float]:
    """Each function's median seconds over ``repeats`` rounds that run every function once
    (a load that comes and goes lands on all of them alike)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times):
            t = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


def _batch_rows(messages):
    import pyarrow as pa

    yield sum(len(pa.ipc.read_message(pa.py_buffer(m)).body) for m in messages)


def _peak_rss(_):
    import resource

    import pyarrow.parquet  # noqa: F401 - what an encoding task imports
    import mixfold.backends.spark  # noqa: F401

    yield os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _worker_peaks(sc, tasks: int = 16) -> dict[int, int]:
    """Each Python worker's peak resident bytes so far, by process id."""
    peaks: dict[int, int] = {}
    for pid, peak in sc.parallelize(range(tasks), tasks).mapPartitions(_peak_rss).collect():
        peaks[pid] = max(peak, peaks.get(pid, 0))
    return peaks


def worker_memory(session, path: str) -> list[tuple]:
    """The Python workers' peak growth in an encode, against the largest partition's Arrow
    bytes (run before anything but 1% of the rows has been encoded in these workers)."""
    df = session.read.parquet(path)
    # every worker runs what an encode runs (imports, Parquet reader) on 1% of the rows, in
    # Parquet files of their own and through the JVM's batches
    with tempfile.TemporaryDirectory() as warm:
        for i in range(2):
            partition(i, max(1, df.count() // 200)).to_parquet(Path(warm) / f"part{i}.parquet")
        SparkEncodedData.from_dataframe(session.read.parquet(warm), estimator())[0].close()
    SparkEncodedData.from_dataframe(df.sample(fraction=0.01, seed=0), estimator())[0].close()
    arrow_bytes = arrow_batches(df).mapPartitions(lambda ms: [sum(len(m) for m in ms)]).max()
    before = _worker_peaks(session.sparkContext)
    SparkEncodedData.from_dataframe(df, estimator())[0].close()
    after = _worker_peaks(session.sparkContext)
    growth = max(after[p] - before[p] for p in before.keys() & after.keys())
    mb = 2 ** 20
    return [("memory", "largest partition's Arrow batches (MB)", arrow_bytes / mb, None),
            ("memory", "Python worker peak growth in the encode (MB)", growth / mb,
             growth / arrow_bytes)]


def encode_phases(session, path: str, repeats: int) -> list[tuple]:
    df = session.read.parquet(path)
    encoding = PartitionEncoding(estimator().encoder())
    SparkEncodedData.from_dataframe(df, estimator())[0].close()  # starts the Python workers

    def read():
        df.selectExpr(*[f"sum(x{j})" for j in range(D)]).collect()

    def arrow_to_python():
        arrow_batches(df).mapPartitions(_batch_rows).sum()

    def from_dataframe():
        SparkEncodedData.from_dataframe(df, estimator())[0].close()

    def one_pass():
        _encode_in_one_pass(df, encoding)[0].unpersist()

    def after_sample():
        _encode_after_sample(df, encoding)[0].unpersist()

    def through_jvm_arrow():
        with jvm_arrow_batches():
            _encode_in_one_pass(df, encoding)[0].unpersist()

    def before():
        with jvm_arrow_batches():
            _encode_after_sample(df, encoding)[0].unpersist()

    def to_pandas_local():
        frame = df.toPandas()
        open_backend("local", table_rows(frame, "array"), estimator())[0].close()

    phases = [("Arrow batches into the Python workers, nothing done", arrow_to_python),
              ("vocabulary sample (first rows to the driver)",
               lambda: _vocabulary_sample(df, encoding)),
              ("encode pass, vocabularies learnt in it (no sample)", one_pass),
              ("encode pass after the vocabulary sample", after_sample),
              ("encode pass from the JVM's Arrow batches (no direct Parquet read)",
               through_jvm_arrow),
              ("encode pass after the sample, JVM's Arrow batches (before #35 arrow3)", before),
              ("mixfold encode (from_dataframe, whole)", from_dataframe),
              ("Arrow toPandas + local encode", to_pandas_local)]
    seconds = interleaved_medians([read] + [fn for _, fn in phases], repeats)
    out = [("encode", "read the Parquet (a sum per column)", seconds[0], None)]
    for (name, _), s in zip(phases, seconds[1:]):
        out.append(("encode", name, s, s / seconds[0]))
    return out


def iteration_phases(session, path: str, repeats: int, iterations: int) -> list[tuple]:
    df = session.read.parquet(path)
    handle, bound = SparkEncodedData.from_dataframe(df, estimator())
    sc = session.sparkContext
    try:
        model = handle.initialize(bound, 0)
        handle.estimate(bound, model)  # warm

        def empty_job():
            payload = sc.broadcast(np.zeros(80))
            sc.parallelize(range(handle.num_partitions), handle.num_partitions) \
                .map(lambda _: payload.value.copy()).treeAggregate(
                    np.zeros(80), lambda a, b: a + b, lambda a, b: a + b, depth=2)
            payload.destroy()

        def read_shards():
            handle.rdd.map(lambda item: item[1].n_rows).sum()

        def iteration():
            handle.estimate(bound, model)

        spark_it = median_seconds(iteration, iterations)
        empty_s = median_seconds(empty_job, repeats)
        read_s = median_seconds(read_shards, repeats)
    finally:
        handle.close()
    local, local_bound = open_backend("local", table_rows(df.toPandas(), "array"),
                                      estimator())[:2]
    try:
        local_model = local.initialize(local_bound, 0)
        local_it = median_seconds(lambda: local.estimate(local_bound, local_model), iterations)
    finally:
        local.close()
    return [("iteration", "local backend in the driver", local_it, None),
            ("iteration", "Spark job over empty partitions", empty_s, empty_s / local_it),
            ("iteration", "cached shards read into the workers, no fold", read_s,
             read_s / local_it),
            ("iteration", "mixfold on Spark, whole", spark_it, spark_it / local_it)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--encode-only", action="store_true",
                        help="skip the memory and iteration phases")
    args = parser.parse_args()
    print(f"{args.rows:,} rows x {D} columns in {PARTITIONS} Parquet files, local[2,4]; "
          f"medians of {args.repeats} (iterations: {args.iterations}); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as folder:
        for i in range(PARTITIONS):
            partition(i, args.rows // PARTITIONS).to_parquet(Path(folder) / f"part{i}.parquet")
        # toPandas collects every row's Arrow into the driver JVM: 1 GB heap is too little at 10^7
        os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-memory 4g pyspark-shell")
        session = local_spark_session(2)
        session.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
        try:
            session.read.parquet(folder).count()  # the JVM's first query (class loading)
            table = [] if args.encode_only else worker_memory(session, folder)
            table += encode_phases(session, folder, args.repeats)
            if not args.encode_only:
                table += iteration_phases(session, folder, args.repeats, args.iterations)
        finally:
            stop_spark_session(session)
    print_measures(table, "phase", "ratio")


if __name__ == "__main__":
    main()
