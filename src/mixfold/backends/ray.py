"""``backend="ray"``: shards held in Ray's object store, payloads reduced by a task tree.

Rows given to the fit are encoded in the driver and put once (with a plan of
:meth:`~mixfold.parallel.resources.Resources.from_ray` devices, each shard is stored on, and
folded on, the node its worker names -- a GPU device's fold given ``num_gpus=1`` and run on
the CUDA device of the GPU Ray gave it); a Ray dataset is encoded block by
block by Ray tasks (:mod:`mixfold.backends._partitions`) and never reaches the driver. Ray is
started locally (``num_cpus=num_workers``, no dashboard, bound to 127.0.0.1) unless it is
already initialised, in which case the running instance is used and left running. Per iteration
the estimator and model are put once, one fold task runs per shard and the payloads are added
through the sharded base's tree (binary by default) of remote tasks; only the root payload is
fetched. Every wait is bounded by ``timeout`` seconds; a task whose worker dies is run again
by Ray (its shard, in the object store, is not lost with the worker).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mixfold.backends._partitions import EncodedOnWorkers, PartitionEncoding, encode_partitions
from mixfold.backends._shard import ShardedEncodedData, checked_num_workers, require
from mixfold.backends.worker_gpus import on_cuda_device, ray_cuda_device, runs_on_cuda
from mixfold.backends.worker_records import Executor, timed_task
from mixfold.families._protocol import Distribution, Encoded, Estimator

__all__ = ["RayEncodedData", "RayPartitionedData", "is_ray_dataset", "node_of", "WAIT_SECONDS"]

#: The longest mixfold waits for results from Ray tasks before it reports them stuck.
WAIT_SECONDS = 3600.0

_REMOTE: dict[str, Any] = {}


def is_ray_dataset(data: Any) -> bool:
    """Whether ``data`` is a Ray dataset (without importing Ray)."""
    return any(c.__module__.startswith("ray.data") and c.__name__ == "Dataset"
               for c in type(data).__mro__)


class RayCalls:
    """:class:`~mixfold.backends._partitions.RemoteCalls` as Ray tasks, every wait bounded."""

    def __init__(self, ray: Any, timeout: float = WAIT_SECONDS):
        self.ray = ray
        self.timeout = float(timeout)
        self.remote: dict[Callable[..., Any], Any] = {}

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        if fn not in self.remote:
            self.remote[fn] = self.ray.remote(num_cpus=1)(fn)
        return self.remote[fn].remote(*args)

    def gather(self, refs: Sequence[Any]) -> list[Any]:
        try:
            return self.ray.get(list(refs), timeout=self.timeout)
        except self.ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"ray: tasks gave no result within {self.timeout:g} s") from None

    def wait(self, refs: Sequence[Any]) -> None:
        """Until every one of ``refs`` is computed (nothing comes back to the driver)."""
        refs = list(refs)
        done, pending = self.ray.wait(refs, num_returns=len(refs), timeout=self.timeout,
                                      fetch_local=False)
        if pending:
            raise TimeoutError(f"ray: {len(pending)} of {len(refs)} blocks were not encoded "
                               f"within {self.timeout:g} s")


def _remote_functions(ray: Any) -> tuple[Any, Any]:
    if "fold" not in _REMOTE:
        _REMOTE["fold"] = ray.remote(num_cpus=1, num_returns=2)(_fold_task)
        _REMOTE["combine"] = ray.remote(num_cpus=1)(_combine_task)
    return _REMOTE["fold"], _REMOTE["combine"]


def _fold_task(shard_and_weights: tuple, task: str, args: tuple, slot: int, n_slots: int,
               gpu: bool) -> tuple[np.ndarray, str]:
    """(the shard's timed payload, the id of the node it was folded on); a GPU shard's task
    (given ``num_gpus=1``) runs on the CUDA device of the GPU Ray gave it."""
    import ray

    shard, weights = shard_and_weights
    if gpu and runs_on_cuda(args):
        args = on_cuda_device(args, ray_cuda_device(ray.get_gpu_ids(),
                                                    os.environ.get("CUDA_VISIBLE_DEVICES")))
    return (timed_task(task, shard, weights, args, slot, n_slots),
            ray.get_runtime_context().get_node_id())


def _combine_task(combine: Callable[..., np.ndarray], *parts: np.ndarray) -> np.ndarray:
    return combine(*parts)


def _kept(shard_and_weights: tuple) -> tuple:
    """The shard as given: run on a node, it makes that node's object store the shard's home."""
    return shard_and_weights


def node_of(device: str) -> tuple[str, bool] | None:
    """(Ray node id, whether it is a GPU) of a device named by ``Resources.from_ray``, else None.

    >>> node_of("ray:ab12"), node_of("ray:ab12:gpu0"), node_of("cpu:0")
    (('ab12', False), ('ab12', True), None)
    """
    parts = device.split(":")
    if len(parts) not in (2, 3) or parts[0] != "ray" or not parts[1]:
        return None
    return parts[1], len(parts) == 3


class RayEncodedData(ShardedEncodedData):
    """Shards in Ray's object store (``num_workers`` shards, default 2)."""

    name = "ray"

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 num_workers: int | None = None, fanout: int = 2,
                 object_store_bytes: int = 512 * 1024 * 1024, plan: Any = None,
                 timeout: float = WAIT_SECONDS):
        num_workers = checked_num_workers(num_workers, enc.n_rows)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = require("ray", "ray", "ray")
        self.ray = ray
        self.timeout = float(timeout)
        self.owned = not ray.is_initialized()
        if self.owned:
            ray.init(num_cpus=num_workers or 2, include_dashboard=False, log_to_driver=False,
                     object_store_memory=object_store_bytes, _node_ip_address="127.0.0.1",
                     configure_logging=False)
        super().__init__(enc, weights, chunk_rows, num_workers or 2, plan)
        if plan is None:
            self.fanout = max(2, int(fanout))
        self.placed: dict[int, str] = {}  # shard -> the node its plan put it on
        self.task_options = [self._placement(i) for i in range(len(self.bounds))]
        self.shards = [self._put(i) for i in range(len(self.bounds))]
        self.folded_on: list[Any] = []

    def _placement(self, i: int) -> dict[str, Any]:
        """Ray options that pin shard ``i``'s tasks to the node its planned device names (a
        GPU device's task also takes one GPU); none without such a plan."""
        named = None if self.plan is None else node_of(self.plan.assignments[i].name)
        if named is None:
            return {}
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.placed[i] = named[0]
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(named[0], soft=False),
                "num_gpus": 1 if named[1] else 0}

    def _put(self, i: int) -> Any:
        """Shard ``i`` in the object store: on its planned node (made there by a task), else put
        from the driver."""
        if not self.task_options[i]:
            return self.ray.put(self.shard(i))
        if "kept" not in _REMOTE:
            _REMOTE["kept"] = self.ray.remote(num_cpus=1)(_kept)
        return _REMOTE["kept"].options(**self.task_options[i]).remote(self.shard(i))

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        fold, add = _remote_functions(self.ray)
        put: dict[int, Any] = {}  # each distinct argument tuple (one per band) stored once
        shared = [put.setdefault(id(a), self.ray.put(a)) for a in shard_args]
        n = len(self.bounds)
        refs = [fold.options(**o).remote(s, task, a, i, n, bool(o.get("num_gpus")))
                for i, (s, a, o) in enumerate(zip(self.shards, shared, self.task_options))]
        self.folded_on = [node for _, node in refs]  # read once, when the records are
        root = self._tree([payload for payload, _ in refs],
                          lambda *parts: add.remote(combine, *parts))
        try:
            return self.ray.get(root, timeout=self.timeout)
        except self.ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"ray: a fold gave no result within {self.timeout:g} s") from None

    def executors(self) -> list[Executor]:
        """The node each shard's last fold ran on (its id and address)."""
        driver = self.ray.get_runtime_context().get_node_id()
        try:
            nodes = self.ray.get(self.folded_on, timeout=self.timeout) if self.folded_on \
                else [driver] * len(self.bounds)
        except self.ray.exceptions.RayError:  # a node lost since: the fit stands, its id not
            nodes = [""] * len(self.bounds)
        hosts = {n["NodeID"]: n.get("NodeManagerAddress", "") for n in self.ray.nodes()}
        return [Executor(node, hosts.get(node, "")) for node in nodes]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.shards = []
        if self.owned:
            self.ray.shutdown()
            _REMOTE.clear()


class RayPartitionedData(EncodedOnWorkers, RayEncodedData):
    """A Ray dataset encoded block by block by Ray tasks; each shard stays in the object store.
    Ray, already running (a dataset runs on it), is left running."""

    def __init__(self, ray: Any, shards: list[Any], bounds: list[tuple[int, int]],
                 total_weight: float, chunk_rows: int, fanout: int = 2,
                 timeout: float = WAIT_SECONDS):
        self.ray, self.owned, self.timeout = ray, False, float(timeout)
        self.calls = RayCalls(ray, timeout)
        self.shards = shards
        self.placed, self.task_options = {}, [{} for _ in shards]
        self.folded_on = []
        self._lay_out(bounds[-1][1], total_weight, chunk_rows, bounds, None)
        self.fanout = max(2, int(fanout))

    @classmethod
    def from_dataset(cls, dataset: Any, estimator: Estimator, *,
                     init: Distribution | None = None, weight_column: str | None = None,
                     chunk_rows: int = 8192) -> tuple[RayPartitionedData, Estimator]:
        """Encode ``dataset``'s blocks (as Arrow tables) in Ray tasks; returns the handle and
        the bound estimator."""
        ray = require("ray", "ray", "ray")
        calls = RayCalls(ray)
        base = init.encoder() if init is not None else estimator.encoder()
        blocks = _blocks_in_order(dataset)
        shards, encoder, bounds, total = encode_partitions(
            calls, blocks, PartitionEncoding(base, weight_column))
        calls.wait(shards)
        del blocks
        return cls(ray, shards, bounds, total, chunk_rows), estimator.bind(encoder)


def _blocks_in_order(dataset: Any) -> list[Any]:
    """The dataset's blocks in its row order: Ray streams blocks as tasks finish unless told
    to keep order, and a seeded start reads rows by position."""
    options = dataset.context.execution_options
    kept = options.preserve_order
    options.preserve_order = True
    try:
        return dataset.to_arrow_refs()
    finally:
        options.preserve_order = kept
