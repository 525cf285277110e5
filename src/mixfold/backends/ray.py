"""``backend="ray"``: shards put once into Ray's object store, payloads reduced by a task tree.

Ray is started locally (``num_cpus=num_workers``, no dashboard, bound to 127.0.0.1) unless it is
already initialised, in which case the running instance is used and left running. Per iteration
the estimator and model are put once, one fold task runs per shard and the payloads are added
through the sharded base's tree (binary by default) of remote tasks; only the root payload is
fetched.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from mixfold.backends._shard import ShardedEncodedData, checked_num_workers, require
from mixfold.compute.payload import run_task
from mixfold.families._protocol import Encoded

__all__ = ["RayEncodedData"]

_REMOTE: dict[str, Any] = {}


def _remote_functions(ray: Any, combine: Callable[..., np.ndarray]) -> tuple[Any, Any]:
    if "fold" not in _REMOTE:
        _REMOTE["fold"] = ray.remote(num_cpus=1)(_fold_task)
    if combine.__name__ not in _REMOTE:
        _REMOTE[combine.__name__] = ray.remote(num_cpus=1)(combine)
    return _REMOTE["fold"], _REMOTE[combine.__name__]


def _fold_task(shard_and_weights: tuple, task: str, args: tuple) -> np.ndarray:
    shard, weights = shard_and_weights
    return run_task(task, shard, weights, args)


class RayEncodedData(ShardedEncodedData):
    """Shards in Ray's object store (``num_workers`` shards, default 2)."""

    name = "ray"

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 num_workers: int | None = None, fanout: int = 2,
                 object_store_bytes: int = 512 * 1024 * 1024, plan: Any = None):
        num_workers = checked_num_workers(num_workers, enc.n_rows)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = require("ray", "ray", "ray")
        self.ray = ray
        self.owned = not ray.is_initialized()
        if self.owned:
            ray.init(num_cpus=num_workers or 2, include_dashboard=False, log_to_driver=False,
                     object_store_memory=object_store_bytes, _node_ip_address="127.0.0.1",
                     configure_logging=False)
        super().__init__(enc, weights, chunk_rows, num_workers or 2, plan)
        if plan is None:
            self.fanout = max(2, int(fanout))
        self.shards = [ray.put(self.shard(i)) for i in range(len(self.bounds))]

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        fold, add = _remote_functions(self.ray, combine)
        put: dict[int, Any] = {}  # each distinct argument tuple (one per band) stored once
        shared = [put.setdefault(id(a), self.ray.put(a)) for a in shard_args]
        refs = [fold.remote(s, task, a) for s, a in zip(self.shards, shared)]
        return self.ray.get(self._tree(refs, add.remote))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.shards = []
        if self.owned:
            self.ray.shutdown()
            _REMOTE.clear()
