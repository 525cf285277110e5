"""``backend="mp"``: a pool of worker processes that hold their shards for the whole fit.

Each worker is a spawned process with one BLAS thread that receives its shard once; per
iteration only the (pickled once) estimator and model go out and one fixed-size payload per
worker comes back, reduced in the driver through a fixed-order tree. A worker that dies is
restarted, given its shard again and asked again, so the fit's result is unchanged.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import socket
from collections.abc import Callable
from typing import Any

import numpy as np

from mixfold.backends._shard import ShardedEncodedData, capped_at_cores, checked_num_workers
from mixfold.backends.worker_records import Executor, timed_task
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.row_blocks import one_blas_thread_in_children
from mixfold.families._protocol import Encoded

__all__ = ["MPEncodedData"]

def _worker_main(conn: Any) -> None:
    """Worker loop: hold a shard (and, within their budget, its fused E-step's features from
    one fold to the next); answer fold/score requests until told to stop."""
    shard = weights = None
    slot, n_slots = 0, 1
    features = FeatureCache(0, ratio=0)  # until a shard is loaded (a bad budget is reported then)
    while True:
        try:
            msg = pickle.loads(conn.recv_bytes())
        except EOFError:
            return
        op = msg[0]
        try:
            if op == "load":
                shard, weights, slot, n_slots = msg[1:]
                features = FeatureCache.for_rows(shard.nbytes)
                reply: Any = None
            elif op == "stop":
                conn.send_bytes(pickle.dumps(("ok", None)))
                return
            else:
                with features.active():
                    reply = timed_task(op, shard, weights, msg[1], slot, n_slots)
            conn.send_bytes(pickle.dumps(("ok", reply)))
        except Exception as err:  # noqa: BLE001 - every failure goes back to the driver
            conn.send_bytes(pickle.dumps(("error", err)))


class _Worker:
    def __init__(self, ctx: Any):
        self.conn, child = ctx.Pipe()
        with one_blas_thread_in_children():
            self.process = ctx.Process(target=_worker_main, args=(child,), daemon=True)
            self.process.start()
        child.close()

    def send(self, blob: bytes) -> None:
        self.conn.send_bytes(blob)

    def recv(self) -> Any:
        return pickle.loads(self.conn.recv_bytes())

    def discard(self) -> None:
        """Reap a worker that died (kill it first if it only looks dead)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()

    def stop(self) -> None:
        try:
            if self.process.is_alive():
                self.send(pickle.dumps(("stop",)))
                self.conn.poll(5) and self.recv()
        except (OSError, EOFError):
            pass
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


_MAIN_GUARD_HINT = ("the mp backend spawns its workers, which import the main module again: "
                    "in a script, put the code that fits under `if __name__ == \"__main__\":`")


def _refuse_inside_a_spawning_worker() -> None:
    """A worker importing a script without the main guard would start workers of its own: stop
    it with one line (the driver then reports the worker's exit)."""
    if getattr(mp.current_process(), "_inheriting", False):
        raise SystemExit(f"mixfold: {_MAIN_GUARD_HINT}")


class MPEncodedData(ShardedEncodedData):
    """Shards held by ``num_workers`` processes (default: the machine's cores). More workers
    than rows, or than cores (unless ``oversubscribe``), are capped with a warning.

    >>> import numpy as np, mixfold
    >>> x = np.random.default_rng(0).normal(2.0, 1.0, size=1000)
    >>> m = mixfold.optimize(x, mixfold.GaussianEstimator(), backend="mp", num_workers=2,
    ...                      progress=False)
    >>> round(m.mu, 2)
    1.95
    """

    name = "mp"

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 num_workers: int | None = None, max_restarts: int = 3, plan: Any = None,
                 oversubscribe: bool = False):
        _refuse_inside_a_spawning_worker()
        count = checked_num_workers(num_workers, enc.n_rows)
        count = min(os.cpu_count() or 1, enc.n_rows) if count is None else \
            capped_at_cores(count, oversubscribe)
        super().__init__(enc, weights, chunk_rows, max(count, 1), plan)
        self.max_restarts = int(max_restarts)
        self.restarts = 0
        self._ctx = mp.get_context("spawn")
        self.workers: list[_Worker] = []
        try:
            for i in range(len(self.bounds)):
                self.workers.append(_Worker(self._ctx))
                self._start(i)
        except BaseException:
            self.close()
            raise

    def _start(self, i: int) -> None:
        """Load worker ``i``'s shard; a worker that exits before holding it most likely ran a
        script without the main guard: say so in one line."""
        try:
            self._load(i)
        except (EOFError, OSError):
            worker = self.workers[i]
            worker.process.join(5)
            raise RuntimeError(f"mp worker {i} exited while starting (exit code "
                               f"{worker.process.exitcode}): {_MAIN_GUARD_HINT}") from None

    def _load(self, i: int) -> None:
        """Send worker ``i`` its shard and wait until it holds it."""
        shard, weights = self.shard(i)
        worker = self.workers[i]
        worker.send(pickle.dumps(("load", shard, weights, i, len(self.bounds)),
                                 protocol=pickle.HIGHEST_PROTOCOL))
        status, value = worker.recv()
        if status != "ok":
            raise value

    def _restart(self, i: int, cause: BaseException) -> None:
        """Replace dead worker ``i`` with one holding its shard; a replacement that dies too
        (at once, or while loading the shard) is replaced again, within ``max_restarts``."""
        while True:
            self.restarts += 1
            if self.restarts > self.max_restarts:
                self.close()  # no process outlives the fit that gives up
                raise RuntimeError(f"mp worker {i} died; gave up after {self.max_restarts} "
                                   f"restarts (last: {type(cause).__name__}: {cause})") from None
            self.workers[i].discard()
            self.workers[i] = _Worker(self._ctx)
            try:
                self._load(i)
                return
            except (EOFError, OSError) as err:
                cause = err

    def _send(self, i: int, blob: bytes) -> None:
        while True:
            try:
                self.workers[i].send(blob)
                return
            except OSError as err:  # the worker is gone: BrokenPipeError, ConnectionResetError
                self._restart(i, err)

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        pickled: dict[int, bytes] = {}  # one pickle per distinct argument tuple (per band)
        blobs = [pickled.setdefault(id(a), pickle.dumps((task, a), pickle.HIGHEST_PROTOCOL))
                 for a in shard_args]
        for i in range(len(self.workers)):  # all workers start before any is awaited
            self._send(i, blobs[i])
        payloads = []
        for i in range(len(self.workers)):
            while True:
                try:
                    status, value = self.workers[i].recv()
                    break
                except (EOFError, OSError) as err:  # died mid-iteration: redo its shard
                    self._restart(i, err)
                    self._send(i, blobs[i])
            if status != "ok":
                raise value
            payloads.append(value)
        return self._tree(payloads, combine)

    def executors(self) -> list[Executor]:
        host = socket.gethostname()
        return [Executor(f"pid {pid}", host) for pid in self.pids]

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self.workers]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in self.workers:
            w.stop()
        self.workers = []
