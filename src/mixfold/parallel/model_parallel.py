"""Model-parallel EM: the planned axis of the model tree is threaded over workers.

The inversion of the data backends: there the model is replicated and the rows sharded; here the
rows stay whole and the units of one node of the model tree (a mixture's components, a record's
fields, a hidden Markov model's states) are cut into the contiguous ranges a
:class:`~mixfold.parallel.model_decomposition.ModelDecomposition` names, range ``i`` running on
worker ``i``. One recursive fold, :func:`model_parallel_fold`, walks the tree from the root to the
cut node along the plan's path; every node's own arithmetic is its family's, through the hooks
of :mod:`mixfold.families._hooks` (the executor knows no family class):

- a node that folds each child once (``FoldsChildren``: Composite, Record, Sequence, Optional)
  hands its children's folds to the executor, which runs each worker's range of them (the cut
  node) or recurses into the one on the path; the node combines the results centrally.
- a node that works on ranges of its units between central steps (``ScoresRanges``/
  ``FoldsRanges``: LDA's topics): each step over topics runs range ``i`` on worker ``i``, the
  normalisation over topics and each document's convergence are central.
- a node whose units score columns (``ScoresColumns``/``FoldsColumns``: Mixture, HiddenMarkov):
  each worker scores its units' columns of one (rows x K) matrix, the node turns it into
  posteriors centrally (log-sum-exp, forward-backward), each worker adds the rows to its units.
  Above the cut, the unit on the path is scored and folded threaded (a second recursion
  reproduces ``seq_log_density`` the same way); a node that scores its units together
  (``Decomposition.fused``, a stacked fast path) cannot hand one apart, and
  :func:`check_plan` refuses a cut below it (the planner never makes one).

Rows whose fold returns no log-densities (leaves return none) are scored by the same scoring
recursion, so the fit never scores them serially.

Each unit's arithmetic is the serial fold's, unit by unit: stacked scorers take a unit range and
compute each column by calls that do not depend on the other columns (a GEMM over a subset of
components, or of one component — a matrix-vector product — rounds differently), on the row
blocks the serial E-step scores; the normalisation runs the serial calls on the same blocks;
stacked updates go component by component. So an iteration is **bit-identical** to the serial
fold: ``np.array_equal`` on every statistic. One exception: a cut of a mixture whose serial
E-step is fused (:func:`~mixfold.compute.linear.linear_fold`: a mixture of Gaussians,
log-Gaussians, Poissons, categoricals or diagonal Gaussians, or of records whose fields are all
of those; one GEMM scores all K components of a row block, one sums them, and a GEMM over a
range of components sums in another order) — split, it runs the three steps every mixture runs
and agrees to rounding (1e-15 relative in float64). Unsplit, that fused E-step already runs
its row blocks on every core of the process. A second: a cut of a topic model (the TOPIC axis, LDA):
every word's normaliser over the topics is the sum of the workers' partial sums over their
topic ranges, so the variational parameters, and from them the statistics, agree with the
serial fold to rounding (a few ulps per iteration of each document's fixed point; 1e-12
relative after a fit of a few iterations), everything else per topic being the serial bits.
One proviso, about the serial fold itself: it must run with the BLAS thread count the workers
run with (OpenBLAS splits a long dot product over its threads, so the serial fold's last bits
change with that count); the workers run ``cores // workers`` BLAS threads each, one on a
2-core machine.

Two entry points share the fold. ``optimize(data, est, backend="model_parallel")`` keeps the
rows in this process and threads the model (:class:`ModelParallelEncodedData`).
``optimize(data, ModelParallelEstimator(est), backend=...)`` composes with every data backend:
the rows are sharded by the backend (mp, Spark, Dask, Ray, MPI) and the model is threaded inside
each shard's E-step. Threads, because NumPy, BLAS and the compiled kernels release the GIL; one
pool per fit and process, created on the first fold and reused by every iteration; a unit's
work never opens a pool of its own (no nesting).

>>> import numpy as np, mixfold
>>> from mixfold import MixtureDistribution, VonMisesDistribution, VonMisesEstimator
>>> truth = MixtureDistribution([VonMisesDistribution(m, 4) for m in (-2, 0, 1, 2.5)], [0.25] * 4)
>>> x = truth.sampler(0).sample(4000)
>>> est = mixfold.MixtureEstimator([VonMisesEstimator()] * 4)
>>> threaded = mixfold.optimize(x, est, backend="model_parallel", num_workers=2, max_iter=5,
...                             progress=False)
>>> serial = mixfold.optimize(x, est, max_iter=5, progress=False)
>>> all(a == b for a, b in zip(threaded.components, serial.components))
True
"""

from __future__ import annotations

import atexit
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from mixfold.backends.local import LocalEncodedData
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, FoldResult, fold_rows
from mixfold.compute.row_blocks import blas_threads
from mixfold.decomposition import DecompAxis, decomposition_for
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom)
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     FoldsColumns, FoldsRanges, RunRanges, ScoreChildren,
                                     ScoresChildren, ScoresColumns, ScoresRanges, fold_serially,
                                     score_serially)
from mixfold.parallel.model_decomposition import ModelDecomposition, decompose_model
from mixfold.parallel.resources import DeviceSpec, Resources
from mixfold.precision import is_native

__all__ = ["model_parallel_fold", "ModelParallelAccumulator", "ModelParallelAccumulatorFactory",
           "ModelParallelEstimator", "ModelParallelEncodedData", "auto_parallel_estimator",
           "WorkerPool", "plan_for", "check_plan"]


# ---------------------------------------------------------------------------------------------
# Workers: one thread per planned device, started once per fit


_IN_WORKER = threading.local()


def _in_worker() -> bool:
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
        if _in_worker():  # pools never nest: a worker runs what it is given itself
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


# Pools by fit: an estimator travels (pickled) to remote workers every iteration; each process
# keeps the pool of its fit across iterations and drops the pools of earlier fits.
_POOLS: dict[tuple[str, tuple[str, ...]], WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def _pool_for(fit_id: str, devices: tuple[str, ...]) -> WorkerPool:
    key = (fit_id, devices)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool.closed:
            for old in [k for k in _POOLS if k[0] != fit_id]:
                _POOLS.pop(old).close()
            pool = _POOLS[key] = WorkerPool(devices)
        return pool


def _release_pools(fit_id: str) -> None:
    with _POOLS_LOCK:
        for key in [k for k in _POOLS if k[0] == fit_id]:
            _POOLS.pop(key).close()


@atexit.register
def _close_all_pools() -> None:
    with _POOLS_LOCK:
        while _POOLS:
            _POOLS.popitem()[1].close()


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
        if not (isinstance(num_workers, (int, np.integer)) and num_workers >= 1):
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
                        plan: ModelDecomposition, precision: str = "float64",
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
    if not plan.is_model_parallel or _in_worker() or not is_native(precision):
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
          precision: str, rest: str, cut: _Cut, pool: WorkerPool) -> np.ndarray | None:
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


def _score(model: Distribution, enc: Encoded, precision: str, rest: str, cut: _Cut,
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


def _columns(model: ScoresColumns, rows: Encoded, precision: str, k: int, index: int | None,
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
    def fold(children: Sequence[ChildFold], precision: str) -> list[np.ndarray | None]:
        if index is None:
            return _on_workers(fold_serially, children, precision, cut, pool)
        return [_fold(c.acc, c.dist, c.rows, c.weights, precision, rest, cut, pool)
                if c.index == index else c.acc.seq_update(c.rows, c.weights, c.dist, precision)
                for c in children]
    return fold


def _child_scores(index: int | None, rest: str, cut: _Cut, pool: WorkerPool) -> ScoreChildren:
    """As :func:`_child_folds`, for the units' log-densities."""
    def score(children: Sequence[ChildScore], precision: str) -> list[np.ndarray]:
        if index is None:
            return _on_workers(score_serially, children, precision, cut, pool)
        return [_score(c.dist, c.rows, precision, rest, cut, pool) if c.index == index
                else c.dist.seq_log_density(c.rows, precision) for c in children]
    return score


def _on_workers(run: Callable[[Sequence[Any], str], list[Any]], children: Sequence[Any],
                precision: str, cut: _Cut, pool: WorkerPool) -> list[Any]:
    """``run`` over each worker's range of ``children``; the results in the children's order."""
    if len(children) != cut.num_units:
        raise ValueError(f"the plan cuts {cut.num_units} units at {cut.path!r}, the node "
                         f"hands {len(children)} to fold")
    per_range = pool.run([partial(run, children[a:b], precision) for a, b in cut.ranges],
                         cut.ranges)
    return [r for rs in per_range for r in rs]



# ---------------------------------------------------------------------------------------------
# The accumulator, its factory and the estimator: any data backend's fold threads the model


class ModelParallelAccumulator(Accumulator):
    """An accumulator whose ``seq_update`` is :func:`model_parallel_fold`.

    Everything else — the statistics, ``combine``, the flat payload, key tying — is the wrapped
    accumulator's, so every data backend reduces it unchanged. ``plan`` is the fit's plan
    (``None``: :func:`plan_for` the first model folded, with ``num_workers``); the pool is the
    process's pool for ``fit_id``.
    """

    def __init__(self, inner: Accumulator, plan: ModelDecomposition | None = None,
                 num_workers: int | None = None, fit_id: str | None = None,
                 pool: WorkerPool | None = None):
        self.inner = inner
        self.plan = plan
        self.num_workers = num_workers
        self.fit_id = fit_id or uuid.uuid4().hex
        self.pool = pool
        self.keys = None  # the wrapped accumulator ties its own keys

    def arrays(self) -> list[np.ndarray]:
        return self.inner.arrays()

    def children(self) -> Sequence[Accumulator]:
        return (self.inner,)

    def value(self) -> Any:
        return self.inner.value()

    def from_value(self, value: Any) -> ModelParallelAccumulator:
        self.inner.from_value(value)
        return self

    def combine(self, other: Accumulator) -> ModelParallelAccumulator:
        self.inner.combine(other.inner if isinstance(other, ModelParallelAccumulator) else other)
        return self

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Distribution,
                   precision: str = "float64") -> np.ndarray | None:
        if self.plan is None:
            self.plan = _fit_plan(self.fit_id, model, self.num_workers)
        if not self.plan.is_model_parallel:
            return self.inner.seq_update(enc, weights, model, precision)
        pool = self.pool or _pool_for(self.fit_id, _Cut(self.plan).devices)
        ll = model_parallel_fold(self.inner, model, enc, weights, self.plan, precision, pool)
        if ll is None and not _in_worker() and is_native(precision):
            # the fit would score the rows serially (model.seq_log_density): score them with
            # the cut threaded instead, with that method's bits
            ll = _score(model, enc, precision, self.plan.path, _Cut(self.plan), pool)
        return ll

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        self.inner.seq_initialize(enc, weights, rng)


_PLANS: dict[str, ModelDecomposition] = {}


def _fit_plan(fit_id: str, model: Distribution, num_workers: int | None) -> ModelDecomposition:
    """The plan of a fit without one, made from its first model and kept for the whole fit."""
    with _POOLS_LOCK:
        plan = _PLANS.get(fit_id)
    if plan is None:
        plan = plan_for(model, num_workers)
        check_plan(model, plan)
        with _POOLS_LOCK:
            plan = _PLANS.setdefault(fit_id, plan)
    return plan


class ModelParallelAccumulatorFactory(AccumulatorFactory):
    """Makes :class:`ModelParallelAccumulator` around the wrapped factory's accumulators."""

    __slots__ = ("inner", "plan", "num_workers", "fit_id", "pool")

    def __init__(self, inner: AccumulatorFactory, plan: ModelDecomposition | None = None,
                 num_workers: int | None = None, fit_id: str | None = None,
                 pool: WorkerPool | None = None):
        self.inner = inner
        self.plan = plan
        self.num_workers = num_workers
        self.fit_id = fit_id or uuid.uuid4().hex
        self.pool = pool

    def make(self) -> ModelParallelAccumulator:
        return ModelParallelAccumulator(self.inner.make(), self.plan, self.num_workers,
                                        self.fit_id, self.pool)


class ModelParallelEstimator(Estimator):
    """``inner`` with its E-step threaded over the model: compose with any ``backend=``.

    ``optimize(data, ModelParallelEstimator(est), backend="mp"|"spark"|"dask"|"ray"|"mpi")``
    shards the rows through the backend while each shard's E-step runs the cut of ``plan``
    (a :class:`~mixfold.parallel.model_decomposition.ModelDecomposition`; ``None``: the
    planner's best axis of the first model over ``num_workers`` threads, see :func:`plan_for`).
    The encoder, the starting guess and the M-step are ``inner``'s. The estimator pickles (it
    travels to remote workers); each process starts its pool on its first fold and keeps it for
    the fit; :meth:`close` stops this process's pool (``optimize`` calls it at the end of a fit).

    >>> import numpy as np, mixfold
    >>> from mixfold import GaussianEstimator, MixtureEstimator
    >>> x = np.concatenate([np.random.default_rng(0).normal(m, 1, 500) for m in (-5, 0, 5)])
    >>> est = ModelParallelEstimator(MixtureEstimator([GaussianEstimator()] * 3), num_workers=2)
    >>> fit = mixfold.optimize(x, est, max_iter=20, progress=False)
    >>> sorted(round(c.mu) for c in fit.components)
    [-5, 0, 5]
    """

    def __init__(self, inner: Estimator, plan: ModelDecomposition | None = None,
                 num_workers: int | None = None, *, fit_id: str | None = None):
        if not isinstance(inner, Estimator):
            raise TypeError(f"inner must be a mixfold Estimator, got {type(inner).__name__}")
        if isinstance(inner, ModelParallelEstimator):
            raise TypeError("a ModelParallelEstimator cannot wrap another (pools never nest)")
        if plan is not None and not isinstance(plan, ModelDecomposition):
            raise TypeError(f"plan must be None or a ModelDecomposition, got "
                            f"{type(plan).__name__}")
        if num_workers is not None and not (isinstance(num_workers, (int, np.integer))
                                            and num_workers >= 1):
            raise ValueError(f"num_workers must be None or an integer >= 1, got {num_workers!r}")
        self.inner = inner
        self.plan = plan
        self.num_workers = num_workers
        self.fit_id = fit_id or uuid.uuid4().hex

    def accumulator_factory(self) -> ModelParallelAccumulatorFactory:
        return ModelParallelAccumulatorFactory(self.inner.accumulator_factory(), self.plan,
                                               self.num_workers, self.fit_id)

    def estimate(self, nobs: float, stats: Any) -> Distribution:
        return self.inner.estimate(nobs, stats)

    def encoder(self) -> Encoder:
        return self.inner.encoder()

    def bind(self, encoder: Encoder) -> ModelParallelEstimator:
        return ModelParallelEstimator(self.inner.bind(encoder), self.plan, self.num_workers,
                                      fit_id=self.fit_id)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> Distribution:
        return self.inner.initial_guess(sample, weights, rng)

    def close(self) -> None:
        """Stop this process's worker pool of the fit (a later fold starts a new one)."""
        _release_pools(self.fit_id)
        with _POOLS_LOCK:
            _PLANS.pop(self.fit_id, None)

    def __repr__(self) -> str:
        where = f", plan={self.plan.path!r}" if self.plan is not None else ""
        return f"ModelParallelEstimator({self.inner!r}{where})"


def auto_parallel_estimator(estimator: Estimator, model: Distribution,
                            resources: Resources | None = None, *, n_data: int | None = None,
                            min_components_per_shard: int = 1,
                            prefer_data_parallel: bool = True
                            ) -> tuple[Estimator, ModelDecomposition]:
    """Ask the planner how to run ``model`` on ``resources`` (default: this machine's cores);
    return ``(estimator to fit with, the plan)``.

    When the plan is model parallel, the estimator is a :class:`ModelParallelEstimator` that
    executes exactly that plan — its path, its unit ranges, one worker per planned device;
    otherwise it is ``estimator`` itself (replicate the model, shard the rows with
    ``backend=``). ``plan.describe()`` says why. A plan the executor cannot run bit for bit
    (see :func:`check_plan`) raises ``ValueError`` rather than running something else.

    >>> import mixfold
    >>> from mixfold import GaussianDistribution, GaussianEstimator, MixtureDistribution
    >>> from mixfold.parallel.resources import DeviceSpec, Resources
    >>> mix = MixtureDistribution([GaussianDistribution(i, 1) for i in range(6)], [1 / 6] * 6)
    >>> two = Resources((DeviceSpec("a"), DeviceSpec("b", throughput=2.0)))
    >>> est, plan = auto_parallel_estimator(mixfold.MixtureEstimator([GaussianEstimator()] * 6),
    ...                                     mix, two, prefer_data_parallel=False)
    >>> type(est).__name__, [(c.device.name, c.start, c.stop) for c in est.plan.cuts]
    ('ModelParallelEstimator', [('a', 0, 2), ('b', 2, 6)])
    """
    plan = decompose_model(model, resources if resources is not None else Resources.local(),
                           n_data=n_data, min_components_per_shard=min_components_per_shard,
                           prefer_data_parallel=prefer_data_parallel)
    if not plan.is_model_parallel:
        return estimator, plan
    check_plan(model, plan)
    return ModelParallelEstimator(estimator, plan), plan


# ---------------------------------------------------------------------------------------------
# backend="model_parallel": rows in this process, the model threaded


class ModelParallelEncodedData(LocalEncodedData):
    """Rows held in this process (as on the local backend), folded chunk by chunk with the
    model threaded over ``num_workers`` threads (default: this machine's cores) by the
    planner's cut, or by ``plan``.

    One pool for the handle's life (the fit), stopped at :meth:`close`. ``plan`` is made from
    the first model folded when not given, and kept; a :class:`ModelParallelEstimator` folded
    here brings its own plan.

    >>> import numpy as np
    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> mix = MixtureDistribution([GaussianDistribution(-1, 1), GaussianDistribution(1, 1)],
    ...                           [0.5, 0.5])
    >>> with ModelParallelEncodedData(mix.encoder().encode(np.zeros(3)), num_workers=2) as h:
    ...     res = h.fold(mix.estimator(), mix)
    ...     h.plan.path, [(c.start, c.stop) for c in h.plan.cuts], round(res.log_density, 6)
    ('', [(0, 1), (1, 2)], -4.256816)
    """

    name = "model_parallel"

    def __init__(self, enc: Encoded, weights: np.ndarray | None = None,
                 chunk_rows: int = DEFAULT_CHUNK_ROWS, num_workers: int | None = None,
                 plan: ModelDecomposition | None = None):
        super().__init__(enc, weights, chunk_rows)
        self.num_workers = num_workers
        self.plan = plan
        self.pool: WorkerPool | None = None

    def fold(self, estimator: Estimator, model: Distribution,
             precision: str = "float64") -> FoldResult:
        if isinstance(estimator, ModelParallelEstimator):  # its plan, this handle's pool
            self.plan = self.plan or estimator.plan
            estimator = estimator.inner
        acc = estimator.accumulator_factory().make()
        if self.plan is None:
            self.plan = plan_for(model, self.num_workers)
            check_plan(model, self.plan)
        if self.plan.is_model_parallel and self.pool is None:
            self.pool = WorkerPool(_Cut(self.plan).devices)
        threaded = ModelParallelAccumulator(acc, self.plan, pool=self.pool)
        total = fold_rows(threaded, self.enc, self.weights, model, precision, self.chunk_rows)
        return FoldResult(self.n_rows, self.total_weight, total, acc)

    def close(self) -> None:
        super().close()
        if self.pool is not None:
            self.pool.close()
            self.pool = None
