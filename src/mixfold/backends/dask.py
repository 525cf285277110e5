"""``backend="dask"``: shards scattered once to Dask workers, payloads reduced by a task tree.

By default a ``LocalCluster`` of ``num_workers`` single-threaded worker processes on 127.0.0.1 is
started for the fit and closed with it; a ``Client`` passed as ``backend=`` is used as it is. Each
iteration scatters the estimator and model once (broadcast), submits one fold per resident shard
and adds the payloads through the sharded base's tree (binary by default), each node a task on
the workers; only the root payload comes back to the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mixfold.backends._shard import (ShardedEncodedData, capped_at_cores, checked_num_workers,
                                     require)
from mixfold.compute.payload import run_task
from mixfold.families._protocol import Encoded

__all__ = ["DaskEncodedData", "local_dask_client"]


def local_dask_client(num_workers: int = 2) -> Any:
    """A Client on a loopback ``LocalCluster`` of single-threaded worker processes."""
    distributed = require("distributed", "dask", "dask")
    cluster = distributed.LocalCluster(n_workers=num_workers, threads_per_worker=1,
                                       processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0")
    return distributed.Client(cluster)


def _fold_shard_task(shard_and_weights: tuple, task: str, args: tuple) -> np.ndarray:
    shard, weights = shard_and_weights
    return run_task(task, shard, weights, args)


class DaskEncodedData(ShardedEncodedData):
    """Shards resident on Dask workers (one shard per worker by default)."""

    name = "dask"

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 client: Any = None, num_workers: int | None = None, fanout: int = 2,
                 plan: Any = None):
        require("distributed", "dask", "dask")
        num_workers = checked_num_workers(num_workers, enc.n_rows)
        self.owned = client is None
        self.client = local_dask_client(capped_at_cores(num_workers or 2)) if self.owned \
            else client
        workers = sorted(self.client.scheduler_info()["workers"])
        super().__init__(enc, weights, chunk_rows, num_workers or len(workers), plan)
        if plan is None:
            self.fanout = max(2, int(fanout))
        self.shards = [self.client.scatter(self.shard(i), workers=[workers[i % len(workers)]],
                                           hash=False)
                       for i in range(len(self.bounds))]

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        scattered: dict[int, Any] = {}  # each distinct argument tuple (one per band) sent once
        shared = [scattered.setdefault(id(a), self.client.scatter(a, broadcast=True, hash=False))
                  for a in shard_args]
        futures = [self.client.submit(_fold_shard_task, s, task, a, pure=False)
                   for s, a in zip(self.shards, shared)]
        root = self._tree(futures, lambda *parts: self.client.submit(combine, *parts,
                                                                     pure=False))
        result = root.result()
        del shared, scattered, futures, root
        return result

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.shards = []
        if self.owned:
            cluster = self.client.cluster
            self.client.close()
            cluster.close()
