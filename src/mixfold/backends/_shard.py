"""What every distributed backend shares: shard layout, the per-shard fold, the tree reduce.

A shard's fold returns one flat float64 payload: ``[rows, weight, log-density, *statistics]``.
Its length depends only on the estimator tree (never on the rows), so reducing shards is adding
fixed-size vectors — on a Spark ``treeAggregate``, an MPI ``Reduce``, Dask/Ray combine tasks, or
in the driver for process pools — and the driver turns the sum back into one accumulator.

In the ``dd`` band (on any shard) the payload is compensated: ``[high parts..., low parts...]``,
twice as long, reduced by exact two-sum (:func:`~mixfold.precision.compensated.add_dd_payloads`)
instead of ``+``, so the reduced statistics do not depend on the number of shards. A handle
built from a :class:`~mixfold.parallel.heterogeneous.HeterogeneousPlan` gives each shard its
planned rows and band and reduces through a tree of the planned depth.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mixfold.backends._interface import EncodedDataHandle, FoldResult, init_sample_mask
from mixfold.backends.local import fold_rows, fold_rows_total
from mixfold.errors import NumericalError
from mixfold.families._protocol import Distribution, Encoded, Estimator, as_weights
from mixfold.precision import PLANNED, band_of
from mixfold.precision.compensated import (add_dd_payloads, load_dd_payload, split_dd_payload,
                                           tree_low_parts)
from mixfold.precision.doubledouble import DD, dd_sum_rows

__all__ = ["HEADER", "shard_bounds", "fold_shard", "score_shard", "tree_reduce", "unpack_fold",
           "ShardedEncodedData", "MissingEngineError", "require", "payload_combiner",
           "fanout_for_depth", "tree_levels", "shard_task_args", "checked_num_workers",
           "capped_at_cores"]

#: Leading payload entries: rows, total weight, weighted log-density.
HEADER = 3


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
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingEngineError(f"backend {backend!r} needs {module}: install it with "
                                 f"pip install 'mixfold[{extra}]' ({err})") from None


def shard_bounds(n_rows: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous, balanced row ranges ``[begin, end)`` for ``n_shards`` shards (none empty)."""
    n_shards = max(1, min(int(n_shards), n_rows))
    edges = np.linspace(0, n_rows, n_shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def fold_shard(shard: Encoded, weights: np.ndarray, estimator: Estimator, model: Distribution,
               precision: str, chunk_rows: int, compensated: bool = False) -> np.ndarray:
    """The E-step of one shard as a flat payload (a non-finite row makes the log-density NaN);
    ``compensated``: the ``[high..., low...]`` layout of the ``dd`` reduce."""
    acc = estimator.accumulator_factory().make()
    try:
        total = fold_rows_total(acc, shard, weights, model, precision, chunk_rows)
    except NumericalError:
        total = DD(float("nan"), 0.0)  # the driver finds and names the row
    if not compensated:
        return np.concatenate([[shard.n_rows, float(weights.sum()), total.hi], acc.to_array()])
    weight = dd_sum_rows(DD(weights, np.zeros_like(weights)))
    lows = [a.ravel() for a in tree_low_parts(acc)]
    return np.concatenate([[shard.n_rows, weight.hi, total.hi], acc.to_array(),
                           [0.0, weight.lo, total.lo], *lows])


def score_shard(shard: Encoded, weights: np.ndarray, model: Distribution, precision: str,
                chunk_rows: int, compensated: bool = False) -> np.ndarray:
    """``[rows, weight, weighted log-density]`` of one shard under ``model`` (followed by the
    low parts of the weight and log-density when ``compensated``)."""
    try:
        total = fold_rows_total(None, shard, weights, model, precision, chunk_rows)
    except NumericalError:
        total = DD(float("nan"), 0.0)
    if not compensated:
        return np.array([shard.n_rows, float(weights.sum()), total.hi])
    weight = dd_sum_rows(DD(weights, np.zeros_like(weights)))
    return np.array([shard.n_rows, weight.hi, total.hi, 0.0, weight.lo, total.lo])


def tree_reduce(items: Sequence[Any], combine: Callable[..., Any], fanout: int = 2) -> Any:
    """Reduce ``items`` through a ``fanout``-ary tree over their order (deterministic)."""
    level = list(items)
    if not level:
        raise ValueError("nothing to reduce")
    while len(level) > 1:
        level = [combine(*level[i:i + fanout]) if len(level[i:i + fanout]) > 1 else level[i]
                 for i in range(0, len(level), fanout)]
    return level[0]


def tree_levels(n_items: int, fanout: int) -> int:
    """How many levels :func:`tree_reduce` takes to fold ``n_items`` with ``fanout``."""
    levels = 0
    while n_items > 1:
        n_items = -(-n_items // fanout)
        levels += 1
    return levels


def fanout_for_depth(n_items: int, depth: int) -> int:
    """The smallest fanout (>= 2) whose tree folds ``n_items`` in at most ``depth`` levels.

    >>> fanout_for_depth(8, 2), fanout_for_depth(10_000, 7), fanout_for_depth(2, 1)
    (3, 4, 2)
    """
    depth = max(1, int(depth))
    k = max(2, int(math.ceil(n_items ** (1.0 / depth))))
    while k ** depth < n_items:  # guard the float root
        k += 1
    while k > 2 and (k - 1) ** depth >= n_items:
        k -= 1
    return k


def add_payloads(*payloads: np.ndarray) -> np.ndarray:
    """The sum of payloads (the reduce operation of every backend)."""
    total = np.array(payloads[0], dtype=np.float64, copy=True)
    for p in payloads[1:]:
        total += p
    return total


def payload_combiner(compensated: bool) -> Callable[..., np.ndarray]:
    """The reduce operation of payloads: ``+``, or exact two-sum of ``dd`` pairs."""
    return add_dd_payloads if compensated else add_payloads


def shard_task_args(task: str, precisions: Sequence[str], common: tuple,
                    compensated: bool) -> list[tuple]:
    """The argument tuple of ``task`` for every shard, shard ``i`` running ``precisions[i]``.

    Shards of one band share one tuple (it is serialized once per band, not per shard).
    """
    if task not in ("fold", "score"):
        raise ValueError(f"unknown task {task!r}")
    per_band = {}
    for p in dict.fromkeys(precisions):
        if task == "fold":
            estimator, model, chunk_rows = common
            per_band[p] = (estimator, model, p, chunk_rows, compensated)
        else:
            model, chunk_rows = common
            per_band[p] = (model, p, chunk_rows, compensated)
    return [per_band[p] for p in precisions]


def unpack_fold(flat: np.ndarray, estimator: Estimator, compensated: bool = False) -> FoldResult:
    """The :class:`FoldResult` a reduced payload stands for."""
    acc = estimator.accumulator_factory().make()
    if compensated:
        hi, lo = split_dd_payload(flat)
        load_dd_payload(acc, hi[HEADER:], lo[HEADER:])
    else:
        hi = flat
        acc.from_array(flat[HEADER:])
    return FoldResult(int(round(hi[0])), float(hi[1]), float(hi[2]), acc)


class ShardedEncodedData(EncodedDataHandle):
    """Rows encoded once in the driver and split into contiguous shards held by workers.

    Subclasses place the shards (``_place``) and run a function over all of them, reducing the
    payloads (``_reduce``); seeding, scoring and error reporting are shared here. The driver
    keeps the encoding: the initialisation sample is drawn from it exactly as the local backend
    draws it (so the same seed gives the same start), and a lost worker's shard is re-sent.

    With a ``plan`` (:class:`~mixfold.parallel.heterogeneous.HeterogeneousPlan`), shard ``i``
    holds exactly the rows of the plan's worker ``i``, runs its band whenever the fit asks for
    ``precision=PLANNED``, and payloads fold through a tree of the planned depth.
    """

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 num_shards: int, plan: Any = None):
        self.enc = enc
        self.n_rows = enc.n_rows
        self.weights = as_weights(weights, enc.n_rows)
        self.total_weight = float(self.weights.sum())
        self.chunk_rows = int(chunk_rows)
        self.plan = plan
        if plan is None:
            self.bounds = shard_bounds(enc.n_rows, num_shards)
            self.fanout = 2
        else:
            self.bounds = plan.row_bounds(enc.n_rows)
            self.fanout = fanout_for_depth(len(self.bounds), plan.reduce_depth)
        self.closed = False
        #: payload length of the last reduce (what crossed the network per shard)
        self.last_payload_size = 0
        #: levels of the last tree reduce
        self.last_reduce_levels = 0

    def shard(self, i: int) -> tuple[Encoded, np.ndarray]:
        a, b = self.bounds[i]
        return self.enc.rows(a, b), self.weights[a:b]

    def shard_precisions(self, precision: str) -> list[str]:
        """The precision every shard runs: the planned bands for ``PLANNED``, else the one given."""
        if precision == PLANNED:
            if self.plan is None:
                raise ValueError(f"precision {PLANNED!r} needs a handle built from a plan")
            return self.plan.execution_precisions()
        return [precision] * len(self.bounds)

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        """Run ``fold_shard`` (task "fold") or ``score_shard`` ("score") on every shard, shard
        ``i`` with ``shard_args[i]``; reduce the payloads with ``combine``."""
        raise NotImplementedError

    def _tree(self, payloads: list[np.ndarray], combine: Callable[..., np.ndarray]) -> np.ndarray:
        """The driver-side tree reduce (fixed order, ``self.fanout`` children per node)."""
        self.last_reduce_levels = tree_levels(len(payloads), self.fanout)
        return tree_reduce(payloads, combine, self.fanout)

    def _run(self, task: str, common: tuple, precision: str) -> tuple[np.ndarray, list[str], bool]:
        precisions = self.shard_precisions(precision)
        compensated = any(band_of(p) == "dd" for p in precisions)
        args = shard_task_args(task, precisions, common, compensated)
        return self._reduce(task, args, payload_combiner(compensated)), precisions, compensated

    def fold(self, estimator: Estimator, model: Distribution,
             precision: str = "float64") -> FoldResult:
        flat, precisions, compensated = self._run("fold", (estimator, model, self.chunk_rows),
                                                  precision)
        self.last_payload_size = flat.size
        if not np.isfinite(flat[2]):
            self._name_bad_row(model, precisions)
        return unpack_fold(flat, estimator, compensated)

    def log_density_sum(self, model: Distribution, precision: str = "float64") -> tuple[int, float]:
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


def run_task(task: str, shard: Encoded, weights: np.ndarray, args: tuple) -> np.ndarray:
    """Worker side: the payload of ``task`` on one shard."""
    if task == "fold":
        return fold_shard(shard, weights, *args)
    if task == "score":
        return score_shard(shard, weights, *args)
    raise ValueError(f"unknown task {task!r}")
