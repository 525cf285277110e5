"""The model-parallel executor: a pool, a plan and one generic recursion.

A plan (:class:`~mixfold.parallel.model_decomposition.ModelDecomposition`) names a node of the
model tree and cuts its units into contiguous ranges, range ``i`` on worker ``i``.
:func:`model_parallel_fold` walks from the root to that node along the plan's path; every node's
own arithmetic is its family's, reached through the hooks of :mod:`mixfold.families._hooks`
(``FoldsChildren``/``ScoresChildren``: a node that folds each child once; ``ScoresColumns``/
``FoldsColumns``: a node whose units score columns of one (rows x K) matrix, normalised
centrally). The executor knows no family class. :mod:`mixfold.parallel.model_parallel` holds
the public accumulator, estimator and data handle built on it.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

import numpy as np

from mixfold.compute.row_blocks import blas_threads
from mixfold.decomposition import DecompAxis, decomposition_for
from mixfold.families._protocol import (Accumulator, Distribution, Encoded)
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     FoldsColumns, FoldsRanges, RunRanges, ScoreChildren,
                                     ScoresChildren, ScoresColumns, ScoresRanges, fold_serially,
                                     score_serially)
from mixfold.parallel.model_decomposition import ModelDecomposition, decompose_model
from mixfold.parallel.resources import DeviceSpec, Resources
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["WorkerPool", "plan_for", "check_plan", "model_parallel_fold", "fit_pools",
           "pool_for", "new_pool", "plan_devices", "score_threaded", "in_worker"]


# ---------------------------------------------------------------------------------------------
# Workers: one thread per planned device, started once per fit


_IN_WORKER = threading.local()


def in_worker() -> bool:
    """Whether this thread is a model-parallel worker (its work never opens a pool)."""
    return getattr(_IN_WORKER, "active", False)


class WorkerPool:
    """One thread per device of a plan: task ``i`` of every :meth:`run` runs on thread ``i``.

    ``assignments`` records, for the last run, which thread ran which unit range (what the
    plan asked for). While the pool is open, BLAS runs ``threads_per_worker`` threads per call
    (``None``: cores // workers), so the workers do not oversubscribe the cores. The limit holds
    for the pool's life, not per call: OpenBLAS threads woken between folds spin for a while
    and would take the cores from the workers.

    >>> with WorkerPool(["cpu:0", "cpu:1"]) as pool:
    ...     pool.run([lambda: 1 + 1, lambda: 2 + 2], [(0, 3), (3, 5)])
    ...     pool.assignments
    [2, 4]
    [('cpu:0', 0, 3), ('cpu:1', 3, 5)]
    """

    def __init__(self, devices: Sequence[str], threads_per_worker: int | None = None):
        self.devices = tuple(devices)
        if not self.devices:
            raise ValueError("a worker pool needs at least one device")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
            (os.cpu_count() or 1)
        self.threads_per_worker = int(threads_per_worker or max(1, cores // len(self.devices)))
        self._threads = [ThreadPoolExecutor(1, thread_name_prefix=f"mixfold-{name}")
                         for name in self.devices]
        self.assignments: list[tuple[str, int, int]] = []
        self.closed = False
        self._blas_limit = blas_threads(self.threads_per_worker)

    def run(self, tasks: Sequence[Callable[[], Any]],
            ranges: Sequence[tuple[int, int]]) -> list[Any]:
        """Run ``tasks[i]`` (the work of unit range ``ranges[i]``) on thread ``i``; the results
        in order. The first task's error is raised once all have finished."""
        if self.closed:
            raise RuntimeError("the worker pool is closed")
        if len(tasks) != len(self.devices):
            raise ValueError(f"need one task per worker ({len(self.devices)}), got {len(tasks)}")
        if in_worker():  # pools never nest: a worker runs what it is given itself
            return [task() for task in tasks]
        ran: list[tuple[str, int, int] | None] = [None] * len(tasks)

        def on_worker(i: int) -> Any:
            _IN_WORKER.active = True
            try:
                ran[i] = (threading.current_thread().name.split("-", 1)[1].rsplit("_", 1)[0],
                          *ranges[i])
                return tasks[i]()
            finally:
                _IN_WORKER.active = False

        futures = [t.submit(on_worker, i) for i, t in enumerate(self._threads)]
        errors = [f.exception() for f in futures]
        self.assignments = [r for r in ran if r is not None]
        for err in errors:
            if err is not None:
                raise err
        return [f.result() for f in futures]

    def close(self) -> None:
        """Stop the threads and give BLAS its thread count back; idempotent."""
        if not self.closed:
            self.closed = True
            for t in self._threads:
                t.shutdown(wait=True)
            self._blas_limit.restore_original_limits()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Pools: a fit's pools belong to the fit (opened in :func:`fit_pools`, stopped when it ends, which
# gives BLAS its thread count back); outside a fit -- a remote worker's task, handed a pickled
# estimator every iteration -- a process keeps one pool per device list for its later tasks.
_FIT_POOLS: ContextVar[dict[tuple[str, ...], WorkerPool] | None] = ContextVar(
    "mixfold_fit_pools", default=None)
_PROCESS_POOLS: dict[tuple[str, ...], WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


@contextmanager
def fit_pools() -> Iterator[None]:
    """Within it (a fit), the pools :func:`pool_for` opens belong to it and are stopped at its
    end."""
    pools: dict[tuple[str, ...], WorkerPool] = {}
    token = _FIT_POOLS.set(pools)
    try:
        yield
    finally:
        _FIT_POOLS.reset(token)
        for pool in pools.values():
            pool.close()


def pool_for(devices: Sequence[str]) -> WorkerPool:
    """The pool of ``devices``: the running fit's (one per device list), else this process's."""
    key = tuple(devices)
    fit = _FIT_POOLS.get()
    with _POOLS_LOCK:
        pools = _PROCESS_POOLS if fit is None else fit
        pool = pools.get(key)
        if pool is None or pool.closed:
            pool = pools[key] = WorkerPool(key)
        return pool


@atexit.register
def _close_process_pools() -> None:
    with _POOLS_LOCK:
        while _PROCESS_POOLS:
            _PROCESS_POOLS.popitem()[1].close()


# ---------------------------------------------------------------------------------------------
# Plans


def plan_for(model: Distribution, num_workers: int | None = None) -> ModelDecomposition:
    """The default plan: the planner's best axis of ``model`` cut over ``num_workers`` equal
    CPU devices (default: this machine's cores), model parallel even when data parallelism
    would be preferred.

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> mix = MixtureDistribution([GaussianDistribution(i, 1) for i in range(5)], [0.2] * 5)
    >>> [(c.start, c.stop) for c in plan_for(mix, 2).cuts]
    [(0, 3), (3, 5)]
    """
    if num_workers is None:
        resources = Resources.local()
    else:
        if isinstance(num_workers, bool) or not (isinstance(num_workers, (int, np.integer))
                                                 and num_workers >= 1):
            raise ValueError(f"num_workers must be None or an integer >= 1, got {num_workers!r}")
        resources = Resources(tuple(DeviceSpec(f"cpu:{i}") for i in range(int(num_workers))))
    return decompose_model(model, resources, prefer_data_parallel=False)


def check_plan(model: Distribution, plan: ModelDecomposition) -> None:
    """Raise ``ValueError`` unless the executor can run ``plan`` on ``model`` bit for bit: the
    node at ``plan.path`` has ``plan.num_units`` units along ``plan.axis``, and every node above
    it is one the fold recurses through (a factor, a sequence, an optional value, or a mixture
    or hidden Markov model that scores its units one by one).

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> mix = MixtureDistribution([GaussianDistribution(i, 1) for i in range(4)], [0.25] * 4)
    >>> check_plan(mix, plan_for(mix, 2))
    """
    if not plan.is_model_parallel:
        return
    node, rest, cut = model, plan.path, _Cut(plan)
    while True:  # the fold's own walk, without the folding
        _, index, rest = _locate(node, rest, cut)
        if index is None:
            return
        node = decomposition_for(node).units[index]


def _fused_message(node: Any, at: str, path: str) -> str:
    return (f"cannot thread below {at or 'the root'} of path {path!r}: that "
            f"{type(node).__name__} scores and adds its units together (fused, a stacked fast "
            f"path), so one unit cannot be folded apart with the same bits; cut that node itself")


def _step(dc: Any, rest: str, path: str) -> tuple[int, str]:
    """(index of the unit the path goes to next, the rest of the path) — as ``node_at`` reads
    paths, the longest matching role first."""
    matches = [r for r in dc.child_roles if rest == r or rest.startswith(r + "/")]
    if not matches:
        raise ValueError(f"path {path!r} does not name a unit at {rest!r}; the roles there are "
                         f"{list(dc.child_roles)}")
    role = max(matches, key=len)
    index = dc.child_roles.index(role)
    if index >= len(dc.units):
        raise ValueError(f"path {path!r} goes through {role!r}, a child every worker holds "
                         f"whole, not a unit")
    return index, rest[len(role) + 1:]


class _Cut:
    """What the fold reads from a plan: the path, the unit ranges and their workers."""

    __slots__ = ("path", "axis", "num_units", "ranges", "devices")

    def __init__(self, plan: ModelDecomposition):
        self.path = plan.path
        self.axis = plan.axis
        self.num_units = plan.num_units
        self.ranges = tuple((c.start, c.stop) for c in plan.cuts)
        self.devices = tuple(c.device.name for c in plan.cuts)


# ---------------------------------------------------------------------------------------------
# The fold


def model_parallel_fold(acc: Accumulator, model: Distribution, enc: Encoded, weights: np.ndarray,
                        plan: ModelDecomposition, precision: Precision = FLOAT64,
                        pool: WorkerPool | None = None) -> np.ndarray | None:
    """E-step of ``model`` over ``enc`` into ``acc`` (in place), the node ``plan`` cuts threaded
    over ``pool`` (one thread per cut; a pool of the plan's devices for this call when
    ``None``). Returns what ``acc.seq_update(enc, weights, model, precision)`` returns, and
    leaves ``acc`` as it leaves it, bit for bit (see the module notes).

    A plan that is not model parallel, a call from inside a worker (no nested pools), or an
    E-step in an emulated precision band (fp8, bfloat16, float16, dd: the precision layer runs
    those) runs the serial ``seq_update``.

    >>> import numpy as np
    >>> from mixfold import (CategoricalDistribution, CategoricalEstimator, GaussianDistribution,
    ...                      GaussianEstimator, RecordDistribution, RecordEstimator)
    >>> model = RecordDistribution({"x": GaussianDistribution(4.5, 8.25),
    ...                             "c": CategoricalDistribution({"a": 0.5, "b": 0.5})})
    >>> rows = [{"x": float(i), "c": "ab"[i % 2]} for i in range(10)]
    >>> enc = model.encoder().encode(rows)
    >>> est = model.estimator()
    >>> serial, threaded = est.accumulator_factory().make(), est.accumulator_factory().make()
    >>> _ = serial.seq_update(enc, np.ones(10), model)
    >>> _ = model_parallel_fold(threaded, model, enc, np.ones(10), plan_for(model, 2))
    >>> bool(np.array_equal(serial.to_array(), threaded.to_array()))
    True
    """
    if not plan.is_model_parallel or in_worker() or not precision.native:
        return acc.seq_update(enc, weights, model, precision)
    cut = _Cut(plan)
    owned = pool is None
    if owned:
        pool = WorkerPool(cut.devices)
    elif pool.devices != cut.devices:
        raise ValueError(f"the pool's workers {list(pool.devices)} are not the plan's devices "
                         f"{list(cut.devices)}")
    try:
        return _fold(acc, model, enc, weights, precision, cut.path, cut, pool)
    finally:
        if owned:
            pool.close()


_CUT_AXES = frozenset({DecompAxis.FACTOR, DecompAxis.COMPONENT, DecompAxis.STATE,
                       DecompAxis.TOPIC})


def _locate(model: Any, rest: str, cut: _Cut) -> tuple[int, int | None, str]:
    """(the node's number of units, the index of the unit the path goes to next — ``None`` at
    the cut node —, the rest of the path), the plan checked against the node."""
    dc = decomposition_for(model)
    if not rest:
        if dc.axis is not cut.axis or len(dc.units) != cut.num_units:
            raise ValueError(f"the plan cuts {cut.num_units} units along {cut.axis.value} at "
                             f"{cut.path!r}, the model has {len(dc.units)} along "
                             f"{dc.axis.value} there")
        if dc.axis not in _CUT_AXES:
            raise ValueError(f"cannot execute a cut along the {dc.axis.value} axis")
        return len(dc.units), None, ""
    at = cut.path[:len(cut.path) - len(rest)].rstrip("/")
    index, rest = _step(dc, rest, cut.path)
    if dc.fused:
        raise ValueError(_fused_message(model, at, cut.path))
    return len(dc.units), index, rest


def _fold(acc: Accumulator, model: Distribution, enc: Encoded, weights: np.ndarray,
          precision: Precision, rest: str, cut: _Cut, pool: WorkerPool) -> np.ndarray | None:
    """``acc.seq_update`` with the cut ``rest`` below this node threaded: the node's own hook
    runs its serial arithmetic, its units' folds run by :func:`_child_folds`."""
    k, index, below = _locate(model, rest, cut)
    if index is None and isinstance(acc, FoldsRanges):
        return acc.fold_ranges(enc, weights, model, precision, _range_runner(cut, pool))
    folds = _child_folds(index, below, cut, pool)
    if isinstance(acc, FoldsChildren):
        return acc.fold_children(enc, weights, model, precision, folds)
    if isinstance(acc, FoldsColumns) and isinstance(model, ScoresColumns):
        rows = model.unit_rows(enc)
        scores = _columns(model, rows, precision, k, index, below, cut, pool)
        resp, ll = acc.posteriors_from_columns(enc, weights, model, scores)  # centrally
        if index is None:
            pool.run([partial(acc.add_columns, rows, resp, model, precision, a, b)
                      for a, b in cut.ranges], cut.ranges)
        else:
            acc.add_columns(rows, resp, model, precision, 0, k, folds)
        return ll
    raise ValueError(f"cannot thread through a {type(acc).__name__} on path {cut.path!r}")


def _score(model: Distribution, enc: Encoded, precision: Precision, rest: str, cut: _Cut,
           pool: WorkerPool) -> np.ndarray:
    """``model.seq_log_density(enc, precision)`` with the cut ``rest`` below this node threaded
    (what the fit computes for rows whose fold returned no log-densities, and what a mixture or
    HMM above the cut needs of the unit on the path)."""
    k, index, below = _locate(model, rest, cut)
    if index is None and isinstance(model, ScoresRanges):
        return model.score_ranges(enc, precision, _range_runner(cut, pool))
    if isinstance(model, ScoresChildren):
        return model.score_children(enc, precision, _child_scores(index, below, cut, pool))
    if isinstance(model, ScoresColumns):
        return model.log_density_from_columns(
            enc, _columns(model, model.unit_rows(enc), precision, k, index, below, cut, pool))
    raise ValueError(f"cannot thread through a {type(model).__name__} on path {cut.path!r}")


def _columns(model: ScoresColumns, rows: Encoded, precision: Precision, k: int, index: int | None,
             rest: str, cut: _Cut, pool: WorkerPool) -> np.ndarray:
    """The (rows, K) score matrix: each worker its range of columns at the cut node; above it,
    every column serially but the one on the path, scored threaded."""
    scores = np.empty((rows.n_rows, k), order="F")
    if index is None:
        pool.run([partial(model.score_columns, rows, precision, a, b, scores)
                  for a, b in cut.ranges], cut.ranges)
    else:
        model.score_columns(rows, precision, 0, k, scores,
                            _child_scores(index, rest, cut, pool))
    return scores


def _range_runner(cut: _Cut, pool: WorkerPool) -> RunRanges:
    """Each step over units of a node that works by ranges (a topic model): range ``i`` on
    worker ``i``."""
    def run(task: Callable[[int, int], Any]) -> list[Any]:
        return pool.run([partial(task, a, b) for a, b in cut.ranges], cut.ranges)
    return run


def _child_folds(index: int | None, rest: str, cut: _Cut, pool: WorkerPool) -> FoldChildren:
    """The units' folds: a range per worker at the cut node; above it, the unit on the path
    through :func:`_fold`, the others serially."""
    def fold(children: Sequence[ChildFold], precision: Precision) -> list[np.ndarray | None]:
        if index is None:
            return _on_workers(fold_serially, children, precision, cut, pool)
        return [_fold(c.acc, c.dist, c.rows, c.weights, precision, rest, cut, pool)
                if c.index == index else c.acc.seq_update(c.rows, c.weights, c.dist, precision)
                for c in children]
    return fold


def _child_scores(index: int | None, rest: str, cut: _Cut, pool: WorkerPool) -> ScoreChildren:
    """As :func:`_child_folds`, for the units' log-densities."""
    def score(children: Sequence[ChildScore], precision: Precision) -> list[np.ndarray]:
        if index is None:
            return _on_workers(score_serially, children, precision, cut, pool)
        return [_score(c.dist, c.rows, precision, rest, cut, pool) if c.index == index
                else c.dist.seq_log_density(c.rows, precision) for c in children]
    return score


def _on_workers(run: Callable[[Sequence[Any], str], list[Any]], children: Sequence[Any],
                precision: Precision, cut: _Cut, pool: WorkerPool) -> list[Any]:
    """``run`` over each worker's range of ``children``; the results in the children's order."""
    if len(children) != cut.num_units:
        raise ValueError(f"the plan cuts {cut.num_units} units at {cut.path!r}, the node "
                         f"hands {len(children)} to fold")
    per_range = pool.run([partial(run, children[a:b], precision) for a, b in cut.ranges],
                         cut.ranges)
    return [r for rs in per_range for r in rs]


def new_pool(plan: ModelDecomposition) -> WorkerPool:
    """A pool of its own (not the fit's) with one thread per device of ``plan``."""
    return WorkerPool(_Cut(plan).devices)


def plan_devices(plan: ModelDecomposition) -> tuple[str, ...]:
    """The workers of ``plan``, one per cut, in the cuts' order."""
    return _Cut(plan).devices


def score_threaded(model: Distribution, enc: Encoded, precision: Precision,
                   plan: ModelDecomposition, pool: WorkerPool) -> np.ndarray:
    """``model.seq_log_density(enc, precision)`` with the cut of ``plan`` threaded, same bits."""
    return _score(model, enc, precision, plan.path, _Cut(plan), pool)
