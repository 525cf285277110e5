"""A shard's fold as one flat float64 payload, and how payloads add up.

The payload is ``[rows, weight, log-density, *statistics]``. Its length depends only on the
estimator tree (never on the rows), so reducing shards is adding fixed-size vectors -- on a Spark
``treeAggregate``, an MPI ``Reduce``, Dask/Ray combine tasks, or in the driver for process pools --
and the driver turns the sum back into one accumulator (:func:`unpack_fold`).

In the ``dd`` band the payload is compensated: ``[high parts..., low parts...]``, twice as long,
reduced by exact two-sum (:func:`~mixfold.precision.compensated.add_dd_payloads`) instead of ``+``,
so the reduced statistics do not depend on the number of shards.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mixfold.compute.encoded import Encoded
from mixfold.compute.fold import FoldResult, MakesAccumulators, Scores, fold_rows_total
from mixfold.errors import NumericalError
from mixfold.precision.bands import Precision
from mixfold.precision.compensated import (add_dd_payloads, load_dd_payload, split_dd_payload,
                                           tree_low_parts)
from mixfold.precision.doubledouble import DD, dd_sum_rows

__all__ = ["HEADER", "fold_shard", "score_shard", "run_task", "add_payloads", "payload_combiner",
           "shard_task_args", "unpack_fold"]

#: Leading payload entries: rows, total weight, weighted log-density.
HEADER = 3


def fold_shard(shard: Encoded, weights: np.ndarray, estimator: MakesAccumulators, model: Scores,
               precision: Precision, chunk_rows: int, compensated: bool = False) -> np.ndarray:
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


def score_shard(shard: Encoded, weights: np.ndarray, model: Scores, precision: Precision,
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


def unpack_fold(flat: np.ndarray, estimator: MakesAccumulators,
                compensated: bool = False) -> FoldResult:
    """The :class:`FoldResult` a reduced payload stands for."""
    acc = estimator.accumulator_factory().make()
    if compensated:
        hi, lo = split_dd_payload(flat)
        load_dd_payload(acc, hi[HEADER:], lo[HEADER:])
    else:
        hi = flat
        acc.from_array(flat[HEADER:])
    return FoldResult(int(round(hi[0])), float(hi[1]), float(hi[2]), acc)


def run_task(task: str, shard: Encoded, weights: np.ndarray, args: tuple) -> np.ndarray:
    """Worker side: the payload of ``task`` on one shard."""
    if task == "fold":
        return fold_shard(shard, weights, *args)
    if task == "score":
        return score_shard(shard, weights, *args)
    raise ValueError(f"unknown task {task!r}")
