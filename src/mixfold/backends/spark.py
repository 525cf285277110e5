"""``backend="spark"``: encoded shards cached as RDD partitions, reduced by ``treeAggregate``.

The rows are encoded once in the driver and shipped once into a cached RDD with one partition
per shard. Per iteration the estimator and model are broadcast, every partition folds its shard
into one fixed-size payload inside ``map``, and ``treeAggregate`` adds the payloads through a tree
of the given depth — the driver never collects per-shard results. An existing SparkSession (or
SparkContext) is used as it is and left running; one mixfold starts itself is bound to loopback
and stopped, JVM included, at ``close()``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from mixfold.backends._shard import ShardedEncodedData, add_payloads, require, run_task
from mixfold.families._protocol import Encoded

__all__ = ["SparkEncodedData", "local_spark_session", "stop_spark_session"]


def local_spark_session(num_workers: int = 2) -> Any:
    """A ``local[num_workers]`` SparkSession bound to 127.0.0.1, with no UI."""
    require("pyspark", "spark", "spark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(f"local[{num_workers}]").appName("mixfold")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.python.worker.reuse", "true")
            .getOrCreate())


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


def _fold_partition(item: tuple, task: str, broadcast: Any) -> np.ndarray:
    _, shard, weights = item
    return run_task(task, shard, weights, broadcast.value)


class SparkEncodedData(ShardedEncodedData):
    """Shards in a cached RDD, one partition each (default: ``defaultParallelism`` shards)."""

    name = "spark"

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 session: Any = None, num_workers: int | None = None, reduce_depth: int = 2):
        require("pyspark", "spark", "spark")
        self.owned = session is None
        self.session = local_spark_session(num_workers or 2) if self.owned else session
        self.sc = getattr(self.session, "sparkContext", self.session)
        super().__init__(enc, weights, chunk_rows, num_workers or self.sc.defaultParallelism)
        self.reduce_depth = max(1, int(reduce_depth))
        shards = [(i, *self.shard(i)) for i in range(len(self.bounds))]
        self.rdd = self.sc.parallelize(shards, len(shards)).cache()
        self.rdd.count()  # materialise the cache: data crosses to the executors once

    def _reduce(self, task: str, args: tuple) -> np.ndarray:
        broadcast = self.sc.broadcast(args)
        try:
            payloads = self.rdd.map(lambda item: _fold_partition(item, task, broadcast))
            return payloads.treeAggregate(None, _seq_add, _comb_add, depth=self.reduce_depth)
        finally:
            broadcast.destroy()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.rdd.unpersist()
        if self.owned:
            stop_spark_session(self.session)


def _seq_add(acc: np.ndarray | None, payload: np.ndarray) -> np.ndarray:
    return payload.copy() if acc is None else add_payloads(acc, payload)


def _comb_add(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return add_payloads(a, b)
