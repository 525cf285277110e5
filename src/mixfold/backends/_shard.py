"""The sharded base of the distributed backends: rows encoded once in the driver, split into
contiguous shards held by workers; each engine only places the shards and runs a task over them
(:func:`~mixfold.compute.payload.run_task`), and the payloads fold through one tree reduce
(:func:`~mixfold.compute.tree.tree_reduce`). A handle built from a
:class:`~mixfold.parallel.heterogeneous.HeterogeneousPlan` gives each shard its planned rows,
reduces through a tree of the planned depth, and -- folded with the plan in place of one
precision -- runs each shard in its planned band.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from mixfold.backends._interface import EncodedDataHandle
from mixfold.backends.worker_records import (Executor, FoldTimes, TimedCombine, WorkerRecord,
                                             this_process)
from mixfold.compute.encoded import Encoded, as_weights
from mixfold.compute.fold import FoldResult, fold_rows, init_sample_mask
from mixfold.compute.payload import payload_combiner, shard_task_args, unpack_fold
from mixfold.compute.tree import fanout_for_depth, shard_bounds, tree_levels, tree_reduce
from mixfold.errors import NumericalError
from mixfold.families._protocol import Distribution, Estimator
from mixfold.precision import Precision
from mixfold.precision.bands import FLOAT64, require_resolved

__all__ = ["ShardedEncodedData", "RowPlan", "MissingEngineError", "require",
           "checked_num_workers", "capped_at_cores"]


class RowPlan(Protocol):
    """What a handle reads of a heterogeneous plan
    (:class:`~mixfold.parallel.heterogeneous.HeterogeneousPlan`): each worker's rows, the
    precision each worker runs, the depth of the reduce tree."""

    reduce_depth: int
    #: each worker's assignment, in worker order (its ``name`` is the planned device's)
    assignments: Sequence[Any]

    def row_bounds(self, n_rows: int | None = None) -> list[tuple[int, int]]: ...

    def execution_precisions(self) -> list[Precision]: ...


def checked_num_workers(num_workers: Any, n_rows: int | None = None) -> int | None:
    """``num_workers`` checked (None, or an integer >= 1 that is not a bool) and capped at
    ``n_rows`` with a warning: a worker without rows has nothing to do.

    >>> checked_num_workers(4, n_rows=100), checked_num_workers(None)
    (4, None)
    >>> checked_num_workers(True)
    Traceback (most recent call last):
    ...
    ValueError: num_workers must be None or an integer >= 1, got True (bool)
    """
    if num_workers is None:
        return None
    if isinstance(num_workers, (bool, np.bool_)) or not isinstance(num_workers,
                                                                   (int, np.integer)) \
            or num_workers < 1:
        raise ValueError(f"num_workers must be None or an integer >= 1, got {num_workers!r} "
                         f"({type(num_workers).__name__})")
    n = int(num_workers)
    if n_rows is not None and n > n_rows >= 1:
        warnings.warn(f"num_workers={n} is more than the {n_rows} rows: using {n_rows} workers",
                      UserWarning, stacklevel=3)
        n = n_rows
    return n


def capped_at_cores(num_workers: int, oversubscribe: bool = False) -> int:
    """``num_workers`` processes on this machine, at most one per core (with a warning) unless
    ``oversubscribe``."""
    cores = os.cpu_count() or 1
    if num_workers > cores and not oversubscribe:
        warnings.warn(f"num_workers={num_workers} is more than this machine's {cores} cores: "
                      f"using {cores} worker processes (pass oversubscribe=True to the backend "
                      f"handle to insist)", UserWarning, stacklevel=3)
        return cores
    return num_workers


class MissingEngineError(ImportError):
    """A backend whose engine is not installed; the message names the extra to install."""


def require(module: str, backend: str, extra: str) -> Any:
    """Import ``module`` for ``backend`` or raise :class:`MissingEngineError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingEngineError(f"backend {backend!r} needs {module}: install it with "
                                 f"pip install 'mixfold[{extra}]' ({err})") from None


class ShardedEncodedData(EncodedDataHandle):
    """Rows encoded once in the driver and split into contiguous shards held by workers.

    Subclasses place the shards and run a task over all of them, reducing the payloads
    (``_reduce``, through :meth:`_tree` or the engine's own tree); folding, scoring, seeding and
    error reporting are shared here. The driver keeps the encoding: the initialisation sample is
    drawn from it exactly as the local backend draws it (so the same seed gives the same start),
    and a lost worker's shard is re-sent. Shards encoded where they live (a Spark DataFrame's
    partitions, MPI ranks) lay out with :meth:`_lay_out` and override ``shard``,
    ``init_sample`` and ``_name_bad_row``.

    With a ``plan`` (:class:`RowPlan`), shard ``i`` holds exactly the rows of the plan's worker
    ``i`` and payloads fold through a tree of the planned depth; folded with the plan (or its
    promotion, :meth:`~mixfold.parallel.heterogeneous.HeterogeneousPlan.promoted`) as its
    precision, shard ``i`` runs worker ``i``'s band.
    """

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 num_shards: int, plan: RowPlan | None = None):
        self.enc = enc
        self.weights = as_weights(weights, enc.n_rows)
        bounds = (shard_bounds(enc.n_rows, num_shards) if plan is None
                  else plan.row_bounds(enc.n_rows))
        self._lay_out(enc.n_rows, float(self.weights.sum()), chunk_rows, bounds, plan)

    def _lay_out(self, n_rows: int, total_weight: float, chunk_rows: int,
                 bounds: list[tuple[int, int]], plan: RowPlan | None) -> None:
        """The shard layout every engine shares, also one whose shards were encoded where they
        live (a Spark DataFrame's partitions, MPI ranks): shard ``i`` holds rows
        ``bounds[i]``; a plan sets the tree's fanout from its depth."""
        self.n_rows = int(n_rows)
        self.total_weight = float(total_weight)
        self.chunk_rows = int(chunk_rows)
        self.plan = plan
        self.bounds = bounds
        self.fanout = 2 if plan is None else fanout_for_depth(len(bounds), plan.reduce_depth)
        self.closed = False
        #: payload length of the last reduce (what crossed the network per shard)
        self.last_payload_size = 0
        #: levels of the last tree reduce
        self.last_reduce_levels = 0
        self.fold_times = FoldTimes(len(bounds))

    def shard(self, i: int) -> tuple[Encoded, np.ndarray]:
        a, b = self.bounds[i]
        return self.enc.rows(a, b), self.weights[a:b]

    def shard_precisions(self, precision: Precision | RowPlan) -> list[Precision]:
        """The precision every shard runs, resolved: the one given, or -- given a plan of this
        handle's rows -- each shard its worker's."""
        if isinstance(precision, str):
            require_resolved(precision)  # refused here, not in a remote worker
            return [precision] * len(self.bounds)
        if self.plan is None or precision.row_bounds(self.n_rows) != self.bounds:
            raise ValueError("a plan runs on the handle built from it: its rows are placed as "
                             "planned when the handle opens")
        return precision.execution_precisions()

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        """Run ``fold_shard`` (task "fold") or ``score_shard`` ("score") on every shard, shard
        ``i`` with ``shard_args[i]`` -- through
        :func:`~mixfold.backends.worker_records.timed_task` with slot ``i``, so its fold time
        rides behind its payload --; reduce the payloads with ``combine``."""
        raise NotImplementedError

    def _tree(self, payloads: list[Any], combine: Callable[..., Any]) -> Any:
        """The tree reduce (fixed order, ``self.fanout`` children per node) of payloads, or of
        futures of them when ``combine`` submits a remote task and returns its future."""
        self.last_reduce_levels = tree_levels(len(payloads), self.fanout)
        return tree_reduce(payloads, combine, self.fanout)

    def _run(self, task: str, common: tuple,
             precision: Precision | RowPlan) -> tuple[np.ndarray, list[Precision], bool]:
        precisions = self.shard_precisions(precision)
        compensated = any(p.compensated for p in precisions)
        args = shard_task_args(task, precisions, common, compensated)
        flat = self._reduce(task, args, TimedCombine(payload_combiner(compensated),
                                                     len(self.bounds)))
        return (self.fold_times.split(flat, precisions if task == "fold" else None),
                precisions, compensated)

    def executors(self) -> list[Executor]:
        """Where each shard lives, asked of the engine (this process by default)."""
        return [this_process()] * len(self.bounds)

    def worker_records(self) -> tuple[WorkerRecord, ...]:
        """One record per shard: where it lived, its planned device, the band its last fold
        ran, its rows and its fold's mean seconds."""
        devices = ["cpu"] * len(self.bounds) if self.plan is None else \
            [a.name for a in self.plan.assignments]
        return self.fold_times.records(self.bounds, self.executors(), devices)

    def fold(self, estimator: Estimator, model: Distribution,
             precision: Precision | RowPlan = FLOAT64) -> FoldResult:
        flat, precisions, compensated = self._run("fold", (estimator, model, self.chunk_rows),
                                                  precision)
        self.last_payload_size = flat.size
        if not np.isfinite(flat[2]):
            self._name_bad_row(model, precisions)
        return unpack_fold(flat, estimator, compensated)

    def log_density_sum(self, model: Distribution,
                        precision: Precision | RowPlan = FLOAT64) -> tuple[int, float]:
        flat, precisions, _ = self._run("score", (model, self.chunk_rows), precision)
        if not np.isfinite(flat[2]):
            self._name_bad_row(model, precisions)
        return int(flat[0]), float(flat[2])

    def _name_bad_row(self, model: Distribution, precisions: list[str]) -> None:
        for i, precision in enumerate(precisions):
            shard, weights = self.shard(i)
            fold_rows(None, shard, weights, model, precision, self.chunk_rows)
        raise NumericalError("the log-likelihood is not finite")

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        mask = init_sample_mask(self.enc, seed, self.n_rows)
        idx = np.flatnonzero(mask & (self.weights > 0))
        return self.enc.take(idx), self.weights[idx]


