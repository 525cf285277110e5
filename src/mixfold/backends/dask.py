"""``backend="dask"``: shards held by Dask workers, payloads reduced by a task tree.

Rows given to the fit are encoded in the driver and scattered once, one shard per worker; a Dask
DataFrame, Series or Array is encoded partition by partition on the workers
(:mod:`mixfold.backends._partitions`) and never reaches the driver. By default a
``LocalCluster`` of ``num_workers`` single-threaded worker processes on 127.0.0.1 is started for
the fit and closed with it; a ``Client`` passed as ``backend=`` (or, for a Dask collection, the
current client) is used as it is. Each iteration scatters the estimator and model once
(broadcast), submits one fold per resident shard and adds the payloads through the sharded
base's tree (binary by default), each node a task on the workers; only the root payload comes
back to the driver.

With a plan of ``Resources.from_dask`` devices, each shard is scattered to and folded on the
worker its device names; a ``dask:<worker>:gpu<k>`` device's fold holds one of the worker's
``GPU`` resources and runs on its k-th CUDA device.

A lost worker: a scattered shard is scattered again from the driver's encoding and the fold is
run again (the same payloads, so the same result); a shard encoded on the workers is recomputed
by Dask from its partition's source. Every wait is bounded by ``timeout`` seconds.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mixfold.backends._partitions import EncodedOnWorkers, PartitionEncoding, encode_partitions
from mixfold.backends._shard import (ShardedEncodedData, capped_at_cores, checked_num_workers,
                                     require)
from mixfold.backends.worker_gpus import (dask_cuda_device, gpu_index, on_cuda_device,
                                          runs_on_cuda)
from mixfold.backends.worker_records import Executor, timed_task
from mixfold.families._protocol import Distribution, Encoded, Estimator
from mixfold.io.kinds import Kind, kind_of

__all__ = ["DaskEncodedData", "DaskPartitionedData", "local_dask_client", "is_dask_collection",
           "WAIT_SECONDS", "worker_of"]

#: The longest mixfold waits for one result from the workers before it reports them stuck.
WAIT_SECONDS = 3600.0

#: Times one fold is run again after a worker is lost, the n-th after a pause of
#: ``RETRY_PAUSE_SECONDS * 2**n`` (about 15 s in all: the scheduler's time to notice the loss).
MAX_RETRIES = 5
RETRY_PAUSE_SECONDS = 0.5


def local_dask_client(num_workers: int = 2) -> Any:
    """A Client on a loopback ``LocalCluster`` of single-threaded worker processes."""
    distributed = require("distributed", "dask", "dask")
    cluster = distributed.LocalCluster(n_workers=num_workers, threads_per_worker=1,
                                       processes=True, host="127.0.0.1",
                                       dashboard_address="127.0.0.1:0")
    return distributed.Client(cluster)


def is_dask_collection(data: Any) -> bool:
    """Whether ``data`` is a Dask DataFrame, Series or Array (without importing Dask)."""
    return kind_of(data) is Kind.DASK


def _lost_worker_errors(distributed: Any) -> tuple[type[BaseException], ...]:
    """What Dask raises when a worker holding a shard or receiving the model is gone."""
    return (distributed.client.FutureCancelledError, distributed.KilledWorker,
            distributed.comm.CommClosedError, OSError)


def _fold_shard_task(shard_and_weights: tuple, task: str, args: tuple, slot: int,
                     n_slots: int, gpu: int | None = None) -> np.ndarray:
    """The shard's timed payload; a shard planned on the worker's GPU ``gpu`` runs on the CUDA
    device the worker has for it."""
    shard, weights = shard_and_weights
    if gpu is not None and runs_on_cuda(args):
        args = on_cuda_device(args, dask_cuda_device(gpu, os.environ.get("CUDA_VISIBLE_DEVICES")))
    return timed_task(task, shard, weights, args, slot, n_slots)


def worker_of(device: str, workers: Sequence[str]) -> tuple[str, bool] | None:
    """(worker address, whether it is a GPU) of a device of ``Resources.from_dask`` -- the
    worker's address, or ``dask:<address>:gpu<k>`` -- when that worker is one of ``workers``.

    >>> w = ["tcp://127.0.0.1:4001"]
    >>> worker_of("tcp://127.0.0.1:4001", w), worker_of("dask:tcp://127.0.0.1:4001:gpu0", w)
    (('tcp://127.0.0.1:4001', False), ('tcp://127.0.0.1:4001', True))
    >>> worker_of("dask:tcp://127.0.0.1:4002:gpu0", w) is None
    True
    """
    gpu = re.fullmatch(r"dask:(.+):gpu\d+", device)
    address, is_gpu = (gpu.group(1), True) if gpu else (device.removeprefix("dask:"), False)
    return (address, is_gpu) if address in workers else None


class DaskCalls:
    """:class:`~mixfold.backends._partitions.RemoteCalls` on a Dask client, every wait bounded."""

    def __init__(self, client: Any, timeout: float = WAIT_SECONDS):
        self.client = client
        self.timeout = float(timeout)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def result(self, future: Any, what: str) -> Any:
        """``future``'s value, or one error line when it takes longer than the timeout."""
        try:
            return future.result(timeout=self.timeout)
        except TimeoutError:
            raise TimeoutError(f"dask: {what} gave no result within {self.timeout:g} s (workers "
                               f"{sorted(self.client.scheduler_info()['workers'])})") from None

    def gather(self, refs: Sequence[Any]) -> list[Any]:
        return [self.result(f, "a task on the workers") for f in refs]

    def wait(self, refs: Sequence[Any]) -> None:
        """Until every one of ``refs`` is computed on the workers (nothing comes back)."""
        distributed = require("distributed", "dask", "dask")
        try:
            distributed.wait(list(refs), timeout=self.timeout)
        except TimeoutError:
            raise TimeoutError(f"dask: encoding the partitions gave no result within "
                               f"{self.timeout:g} s") from None
        for f in refs:
            if f.status == "error":
                f.result()  # raises the worker's error


def _futures(shard: Any) -> list[Any]:
    """A shard's futures: a scattered shard is its rows' and weights' pair, a shard encoded on
    the workers one future."""
    return list(shard) if isinstance(shard, (tuple, list)) else [shard]


class DaskEncodedData(ShardedEncodedData):
    """Shards resident on Dask workers (one shard per worker by default)."""

    name = "dask"

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 client: Any = None, num_workers: int | None = None, fanout: int = 2,
                 plan: Any = None, timeout: float = WAIT_SECONDS):
        distributed = require("distributed", "dask", "dask")
        num_workers = checked_num_workers(num_workers, enc.n_rows)
        self.owned = client is None
        self.client = local_dask_client(capped_at_cores(num_workers or 2)) if self.owned \
            else client
        self.calls = DaskCalls(self.client, timeout)
        self._lost = _lost_worker_errors(distributed)
        workers = sorted(self.client.scheduler_info()["workers"])
        super().__init__(enc, weights, chunk_rows, num_workers or len(workers), plan)
        if plan is None:
            self.fanout = max(2, int(fanout))
        self.folds = 0
        self.placed: dict[int, str] = {}  # shard -> the worker it was scattered to
        self.shards = [self._scatter(i, self._home(i, workers)) for i in range(len(self.bounds))]
        self.pinned = self._restrictions(workers)
        self.gpus = self._gpus(workers)

    def _home(self, i: int, workers: list[str]) -> str:
        """Where shard ``i`` lives: the worker its planned device names (a plan made from
        ``Resources.from_dask``), else the workers in turn."""
        named = self._planned_worker(i, workers)
        return workers[i % len(workers)] if named is None else named[0]

    def _planned_worker(self, i: int, workers: list[str]) -> tuple[str, bool] | None:
        return None if self.plan is None else worker_of(self.plan.assignments[i].name, workers)

    def _restrictions(self, workers: list[str]) -> list[dict[str, Any]]:
        """Each shard's fold pinned to the worker its planned device names (and, for a GPU
        device, holding one of the worker's declared ``GPU`` resources); none unplanned."""
        out: list[dict[str, Any]] = []
        for i in range(len(self.bounds)):
            named = self._planned_worker(i, workers)
            out.append({} if named is None else
                       {"workers": [named[0]], "allow_other_workers": False,
                        **({"resources": {"GPU": 1}} if named[1] else {})})
        return out

    def _gpus(self, workers: list[str]) -> list[int | None]:
        """Each shard's GPU on its planned worker (the ``k`` of ``dask:<worker>:gpu<k>``); None
        for a CPU shard, or one whose worker is gone."""
        out: list[int | None] = []
        for i in range(len(self.bounds)):
            named = self._planned_worker(i, workers)
            out.append(gpu_index(self.plan.assignments[i].name) if named and named[1] else None)
        return out

    def _scatter(self, i: int, worker: str) -> tuple[Any, Any]:
        """Shard ``i`` (its rows' and its weights' futures) sent to ``worker``."""
        self.placed[i] = worker
        return self.client.scatter(self.shard(i), workers=[worker], hash=False)

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        self.folds += 1
        resent: list[tuple[int, str]] = []
        for attempt in range(MAX_RETRIES + 1):
            try:
                return self._reduce_once(task, shard_args, combine)
            except self._lost as err:
                if attempt == MAX_RETRIES:
                    named = ", ".join(f"shard {i} from {w}" for i, w in resent) or "no shard"
                    raise RuntimeError(f"dask: a worker was lost in fold {self.folds} of this "
                                       f"fit and {MAX_RETRIES} retries failed (re-sent: "
                                       f"{named}; last: {type(err).__name__}: {err})") from None
                time.sleep(RETRY_PAUSE_SECONDS * 2 ** attempt)  # the scheduler sees the loss
                resent += self._resend_lost_shards()
        raise AssertionError("unreachable")

    def _reduce_once(self, task: str, shard_args: list[tuple],
                     combine: Callable[..., np.ndarray]) -> np.ndarray:
        scattered: dict[int, Any] = {}  # each distinct argument tuple (one per band) sent once
        shared = [scattered.setdefault(id(a), self.client.scatter(a, broadcast=True, hash=False))
                  for a in shard_args]
        n = len(self.bounds)
        futures = [self.client.submit(_fold_shard_task, s, task, a, i, n, gpu, pure=False, **pin)
                   for i, (s, a, pin, gpu) in enumerate(zip(self.shards, shared, self.pinned,
                                                              self.gpus))]
        root = self._tree(futures, lambda *parts: self.client.submit(combine, *parts,
                                                                     pure=False))
        return self.calls.result(root, f"fold {self.folds}")

    def _resend_lost_shards(self) -> list[tuple[int, str]]:
        """Scatter every shard whose data is gone again (from the driver's encoding) to a live
        worker; returns (shard, the worker it was on) for each."""
        held = [f for shard in self.shards for f in shard if f.status == "finished"]
        holders = self.client.who_has(held)
        workers = sorted(self.client.scheduler_info()["workers"])
        lost = []
        for i, shard in enumerate(self.shards):
            if not all(holders.get(f.key) for f in shard):
                lost.append((i, self.placed[i]))
                self.shards[i] = self._scatter(i, self._home(i, workers))
        self.pinned = self._restrictions(workers)  # a lost planned worker pins nothing now
        self.gpus = self._gpus(workers)
        return lost

    def executors(self) -> list[Executor]:
        """The worker holding each shard (its address) and that worker's host."""
        held = self.client.who_has([f for shard in self.shards for f in _futures(shard)])
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # versions without the argument list every worker
            info = self.client.scheduler_info()
        hosts = {a: w.get("host", "") for a, w in info["workers"].items()}
        out = []
        for shard in self.shards:
            address = next((a for f in _futures(shard) for a in held.get(f.key, ())), "")
            out.append(Executor(address, hosts.get(address, "")))
        return out

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.shards = []
        if self.owned:
            cluster = self.client.cluster
            self.client.close()
            cluster.close()


def dask_blocks(data: Any) -> list[Any]:
    """A Dask collection's partitions as delayed values, in row order: a DataFrame's or
    Series' partitions, an Array's row blocks (its other axes joined into one chunk)."""
    if type(data).__name__ == "Array":
        if data.ndim > 1:
            data = data.rechunk({axis: -1 for axis in range(1, data.ndim)})
        return list(data.to_delayed().ravel())
    return list(data.to_delayed())


def current_or_new_client(num_workers: int | None) -> tuple[Any, bool]:
    """(client, whether mixfold owns it): the current Dask client, left running when the fit
    ends, or a new local one that the fit closes."""
    distributed = require("distributed", "dask", "dask")
    try:
        return distributed.default_client(), False
    except ValueError:  # no client in this process
        return local_dask_client(capped_at_cores(num_workers or 2)), True


class DaskPartitionedData(EncodedOnWorkers, DaskEncodedData):
    """A Dask DataFrame, Series or Array encoded partition by partition on the workers; each
    partition's shard stays where Dask computed it (recomputed from its source if lost)."""

    def __init__(self, client: Any, owned: bool, shards: list[Any],
                 bounds: list[tuple[int, int]], total_weight: float, chunk_rows: int,
                 fanout: int = 2, timeout: float = WAIT_SECONDS):
        distributed = require("distributed", "dask", "dask")
        self.client, self.owned = client, owned
        self.calls = DaskCalls(client, timeout)
        self._lost = _lost_worker_errors(distributed)
        self.shards = shards
        self.folds = 0
        self._lay_out(bounds[-1][1], total_weight, chunk_rows, bounds, None)
        self.pinned = [{} for _ in shards]
        self.gpus = [None for _ in shards]
        self.fanout = max(2, int(fanout))

    @classmethod
    def from_collection(cls, data: Any, estimator: Estimator, *,
                        init: Distribution | None = None, weight_column: str | None = None,
                        chunk_rows: int = 8192, client: Any = None,
                        num_workers: int | None = None
                        ) -> tuple[DaskPartitionedData, Estimator]:
        """Encode ``data`` (a Dask DataFrame, Series or Array) on the workers; returns the
        handle and the bound estimator."""
        owned = False
        if client is None:
            client, owned = current_or_new_client(checked_num_workers(num_workers))
        try:
            calls = DaskCalls(client)
            base = init.encoder() if init is not None else estimator.encoder()
            blocks = client.compute(dask_blocks(data))
            shards, encoder, bounds, total = encode_partitions(
                calls, blocks, PartitionEncoding(base, weight_column))
            calls.wait(shards)  # held on the workers before the partitions are released
            del blocks
            return cls(client, owned, shards, bounds, total, chunk_rows), estimator.bind(encoder)
        except BaseException:
            if owned:
                cluster = client.cluster
                client.close()
                cluster.close()
            raise

    def _resend_lost_shards(self) -> list[tuple[int, str]]:
        return []  # Dask recomputes a lost shard from its partition's source
