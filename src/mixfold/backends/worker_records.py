"""Where each shard of a fit ran, in which band, and how long its fold took.

Every shard's task times its own fold where it runs and sends the seconds back beside its
payload: a trailer of one float per shard, zero but at the shard's own slot, which the reduce
adds up with the payloads -- so the driver reads every shard's time off the one root payload,
with no round trip of its own. Where the shard lives (the engine's executor id and host) is
asked of the engine once, when the fit's records are read.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from mixfold.compute.encoded import Encoded
from mixfold.compute.payload import run_task
from mixfold.precision.bands import Precision

__all__ = ["WorkerRecord", "Executor", "timed_task", "TimedCombine", "FoldTimes",
           "this_process"]


class Executor(NamedTuple):
    """Where a shard lives: the engine's own id of its executor, and that executor's host."""

    id: str
    host: str


class WorkerRecord(NamedTuple):
    """One shard of a fit (``FitResult.workers``): ``shard`` (its index, in row order),
    ``executor`` (the engine's id of where it lived: a Spark executor id, a Dask worker
    address, a Ray node id, ``rank <r>`` on MPI, ``pid <n>`` for a process), ``host``,
    ``device`` (the planned device's name, ``"cpu"`` without a plan), ``band`` (the precision
    its last fold ran), ``rows``, and ``seconds_per_iteration`` (its fold's mean wall time,
    measured where the fold ran, over every fold of the fit).

    >>> import numpy as np, mixfold
    >>> x = np.random.default_rng(0).normal(size=1000)
    >>> m = mixfold.optimize(x, mixfold.GaussianEstimator(), progress=False)
    >>> [(w.shard, w.device, w.band, w.rows) for w in m.fit_result.workers]
    [(0, 'cpu', 'float64', 1000)]
    """

    shard: int
    executor: str
    host: str
    device: str
    band: str
    rows: int
    seconds_per_iteration: float


def this_process() -> Executor:
    """This process as an executor: ``pid <n>`` on this host."""
    return Executor(f"pid {os.getpid()}", socket.gethostname())


def timed_task(task: str, shard: Encoded, weights: np.ndarray, args: tuple, slot: int,
               n_slots: int) -> np.ndarray:
    """Worker side: ``task``'s payload on one shard, followed by ``n_slots`` seconds, this
    shard's fold time at ``slot`` and zero elsewhere."""
    start = time.perf_counter()
    payload = run_task(task, shard, weights, args)
    seconds = np.zeros(n_slots)
    seconds[slot] = time.perf_counter() - start
    return np.concatenate([payload, seconds])


class TimedCombine:
    """The reduce of timed payloads: ``payloads`` (``+`` or the ``dd`` two-sum) on the
    payloads, ``+`` on their seconds trailers. It pickles, so it runs on remote workers.

    >>> add = TimedCombine(lambda *p: sum(p), 2)
    >>> add(np.array([1.0, 0.5, 0.0]), np.array([2.0, 0.0, 0.25])).tolist()
    [3.0, 0.5, 0.25]
    """

    def __init__(self, payloads: Callable[..., np.ndarray], n_slots: int):
        self.payloads = payloads
        self.n_slots = int(n_slots)

    def __call__(self, *parts: np.ndarray) -> np.ndarray:
        n = self.n_slots
        return np.concatenate([self.payloads(*(p[:-n] for p in parts)),
                               np.sum([p[-n:] for p in parts], axis=0)])


class FoldTimes:
    """Each shard's fold seconds summed over the folds read, and the band its last fold ran."""

    def __init__(self, n_slots: int):
        self.total = np.zeros(n_slots)
        self.folds = 0
        self.bands = [""] * n_slots

    def split(self, flat: np.ndarray, bands: Sequence[Precision] | None) -> np.ndarray:
        """``flat``'s payload; its seconds trailer added to the record when ``bands`` (each
        shard's precision) says it was a fold."""
        n = self.total.size
        if bands is not None:
            self.add(flat[-n:], bands)
        return flat[:-n]

    def add(self, seconds: np.ndarray, bands: Sequence[Precision]) -> None:
        """One fold: each shard's seconds and precision."""
        self.total += seconds
        self.folds += 1
        self.bands = [b.band for b in bands]

    def per_fold(self) -> np.ndarray:
        return self.total / max(1, self.folds)

    def records(self, bounds: Sequence[tuple[int, int]], executors: Sequence[Executor],
                devices: Sequence[str]) -> tuple[WorkerRecord, ...]:
        """One :class:`WorkerRecord` per shard."""
        seconds = self.per_fold()
        return tuple(WorkerRecord(i, e.id, e.host, d, band, b - a, float(s))
                     for i, ((a, b), e, d, band, s) in
                     enumerate(zip(bounds, executors, devices, self.bands, seconds)))
