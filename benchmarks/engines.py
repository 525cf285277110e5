"""Engines at scale: data that lives in Spark, Dask or Ray, fitted where it lives.

    python benchmarks/engines.py                    # 10^6 rows, every engine
    python benchmarks/engines.py --rows 10000000    # 10^7 rows
    python benchmarks/engines.py --engines spark --quick

Spark (``local[2,4]``, from Parquet): mixfold's encode of the DataFrame on the executors (the
first, which starts the Python workers, and a second) against reading the Parquet alone and
against Arrow ``toPandas`` plus a local encode; seconds per EM iteration of mixfold (its shards
resident in long-lived Python tasks, and again with a Spark job per iteration) against MLlib's
``GaussianMixture`` on the same rows (full covariances, the same K; MLlib's per-iteration time
is its fit at ``maxIter=I`` less its fit at ``maxIter=1``, over ``I - 1``)
and against the local backend in the driver. Dask (``LocalCluster``, 2 workers) and Ray
(2 CPUs): a DataFrame or dataset generated on the workers, fitted there; the driver's peak
resident memory above its level before the fit, and seconds per iteration, beside the local
backend on the same rows in the driver. Every figure is one run (medians over the
iterations); ratios side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import mixfold
from mixfold.backends.spark import SparkEncodedData
from mixfold.backends.spark_resident import RESIDENT_CONF
from mixfold.dispatch import open_backend
from mixfold.io.readers import table_rows

from _table import print_measures  # benchmarks/: the script's own folder is on the path
from backends import iteration_times

K, D = 4, 3
PARTITIONS = 8


def partition(seed: int, rows: int):
    """One partition of the K-component, D-column Gaussian mixture (a pandas DataFrame)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    means = np.random.default_rng(0).normal(0, 4, size=(K, D))
    z = rng.integers(0, K, size=rows)
    x = means[z] + rng.normal(size=(rows, D))
    return pd.DataFrame({f"x{j}": x[:, j] for j in range(D)})


def estimator() -> mixfold.MixtureEstimator:
    return mixfold.MixtureEstimator([mixfold.MultivariateGaussianEstimator()] * K)


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_growth(run):
    """(run's value, the process's peak resident bytes above its level before, sampled)."""
    base, peak, done = rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.02)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        value = run()
    finally:
        done.set()
        watcher.join()
    return value, max(peak[0], rss()) - base


def iterate(handle, bound, iterations: int) -> float:
    """Median seconds of one EM iteration (fold + reduce + M-step) over an open handle."""
    return statistics.median(iteration_times(handle, bound, iterations)[0])


def timed(fn):
    t = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t


# --- Spark -----------------------------------------------------------------------------------

def spark_table(rows: int, iterations: int, folder: Path) -> list[tuple]:
    from pyspark.ml.clustering import GaussianMixture
    from pyspark.ml.feature import VectorAssembler

    from mixfold.backends.spark import local_spark_session, stop_spark_session

    for i in range(PARTITIONS):
        partition(i, rows // PARTITIONS).to_parquet(folder / f"part{i}.parquet")
    session = local_spark_session(2)
    session.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    out = []
    try:
        path = str(folder)
        session.read.parquet(path).count()  # the JVM's first query (class loading) is not timed
        _, read_s = timed(lambda: session.read.parquet(path).selectExpr(
            *[f"sum(x{j})" for j in range(D)]).collect())
        df = session.read.parquet(path)
        (handle, bound), cold_s = timed(lambda: SparkEncodedData.from_dataframe(df,
                                                                                estimator()))
        handle.close()  # the first encode starts the Python workers; the second finds them
        (handle, bound), encode_s = timed(lambda: SparkEncodedData.from_dataframe(df,
                                                                                  estimator()))
        try:
            mixfold_it = iterate(handle, bound, iterations)
        finally:
            handle.close()
        session.conf.set(RESIDENT_CONF, "false")  # the same fit, one Spark job per iteration
        handle, bound = SparkEncodedData.from_dataframe(df, estimator())
        try:
            per_job_it = iterate(handle, bound, iterations)
        finally:
            handle.close()
            session.conf.unset(RESIDENT_CONF)

        def arrow_local():
            frame = session.read.parquet(path).toPandas()
            return open_backend("local", table_rows(frame, "array"), estimator())[:2]

        (local, local_bound), arrow_s = timed(arrow_local)
        try:
            local_it = iterate(local, local_bound, iterations)
        finally:
            local.close()
        vectors = VectorAssembler(inputCols=[f"x{j}" for j in range(D)], outputCol="features") \
            .transform(session.read.parquet(path)).select("features").cache()
        vectors.count()
        GaussianMixture(k=K, maxIter=1, tol=0.0, seed=0).fit(vectors)  # warm, not timed
        _, one = timed(lambda: GaussianMixture(k=K, maxIter=1, tol=0.0, seed=0).fit(vectors))
        _, many = timed(lambda: GaussianMixture(k=K, maxIter=iterations + 1, tol=0.0,
                                                seed=0).fit(vectors))
        mllib_it = (many - one) / iterations
        vectors.unpersist()
    finally:
        stop_spark_session(session)
    out.append(("spark", "read the Parquet (a sum per column)", read_s, None))
    out.append(("spark", "mixfold encode, first (Python workers start)", cold_s,
                cold_s / read_s))
    out.append(("spark", "mixfold encode on the executors", encode_s, encode_s / read_s))
    out.append(("spark", "Arrow toPandas + local encode", arrow_s, arrow_s / read_s))
    out.append(("spark", "mixfold s/iteration (shards resident in Python tasks)", mixfold_it,
                None))
    out.append(("spark", "mixfold s/iteration, a Spark job per iteration", per_job_it,
                per_job_it / mixfold_it))
    out.append(("spark", "MLlib GaussianMixture s/iteration", mllib_it, mllib_it / mixfold_it))
    out.append(("local", "s/iteration (the driver, same rows)", local_it, local_it / mixfold_it))
    return out


# --- Dask and Ray ----------------------------------------------------------------------------

def _dask_frame(rows: int):
    import dask.dataframe as dd

    return dd.from_map(partition, range(PARTITIONS), rows=rows // PARTITIONS)


def _ray_dataset(rows: int):
    import ray.data

    def generate(batch):
        return partition(int(batch["id"][0]), rows // PARTITIONS)

    return ray.data.range(PARTITIONS, override_num_blocks=PARTITIONS).map_batches(
        generate, batch_size=1, batch_format="pandas")


def engine_table(name: str, rows: int, iterations: int) -> list[tuple]:
    if name == "dask":
        from mixfold.backends.dask import local_dask_client

        engine = local_dask_client(2)
        data = _dask_frame(rows)
    else:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _node_ip_address="127.0.0.1", configure_logging=False)
        engine = "ray"
        data = _ray_dataset(rows)
    try:
        def on_engine():
            handle, bound, _ = open_backend(engine, data, estimator())
            try:
                return iterate(handle, bound, iterations)
            finally:
                handle.close()

        engine_it, engine_rss = peak_growth(on_engine)
    finally:
        if name == "dask":
            cluster = engine.cluster
            engine.close()
            cluster.close()
        else:
            ray.shutdown()

    def local():
        import pandas as pd

        frame = pd.concat([partition(i, rows // PARTITIONS) for i in range(PARTITIONS)],
                          ignore_index=True)
        handle, bound, _ = open_backend("local", table_rows(frame, "array"), estimator())
        del frame
        try:
            return iterate(handle, bound, iterations)
        finally:
            handle.close()

    local_it, local_rss = peak_growth(local)
    mb = 2 ** 20
    return [(name, "driver peak RSS growth (MB)", engine_rss / mb, engine_rss / local_rss),
            ("local", "driver peak RSS growth (MB)", local_rss / mb, None),
            (name, "s/iteration (2 workers)", engine_it, engine_it / local_it),
            ("local", "s/iteration (this process)", local_it, None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--engines", default="spark,dask,ray")
    parser.add_argument("--quick", action="store_true", help="20,000 rows, 2 iterations")
    args = parser.parse_args()
    rows, iterations = (20_000, 2) if args.quick else (args.rows, args.iterations)
    load = os.getloadavg()[0]
    print(f"{rows:,} rows x {D} columns, K={K}, {iterations} iterations; load average "
          f"{load:.1f} on {os.cpu_count()} cores")
    table: list[tuple] = []
    for name in args.engines.split(","):
        if name == "spark":
            with tempfile.TemporaryDirectory() as folder:
                table += spark_table(rows, iterations, Path(folder))
        else:
            table += engine_table(name, rows, iterations)
    print_measures(table, "engine", "ratio")


if __name__ == "__main__":
    main()
