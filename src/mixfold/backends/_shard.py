"""What every distributed backend shares: shard layout, the per-shard fold, the tree reduce.

A shard's fold returns one flat float64 payload: ``[rows, weight, log-density, *statistics]``.
Its length depends only on the estimator tree (never on the rows), so reducing shards is adding
fixed-size vectors — on a Spark ``treeAggregate``, an MPI ``Reduce``, Dask/Ray combine tasks, or
in the driver for process pools — and the driver turns the sum back into one accumulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mixfold.backends._interface import EncodedDataHandle, FoldResult, init_sample_mask
from mixfold.backends.local import fold_rows
from mixfold.errors import NumericalError
from mixfold.families._protocol import Distribution, Encoded, Estimator, as_weights

__all__ = ["HEADER", "shard_bounds", "fold_shard", "score_shard", "tree_reduce", "unpack_fold",
           "ShardedEncodedData", "MissingEngineError", "require"]

#: Leading payload entries: rows, total weight, weighted log-density.
HEADER = 3


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
               precision: str, chunk_rows: int) -> np.ndarray:
    """The E-step of one shard as a flat payload (a non-finite row makes the log-density NaN)."""
    acc = estimator.accumulator_factory().make()
    try:
        total = fold_rows(acc, shard, weights, model, precision, chunk_rows)
    except NumericalError:
        total = float("nan")  # the driver finds and names the row
    return np.concatenate([[shard.n_rows, float(weights.sum()), total], acc.to_array()])


def score_shard(shard: Encoded, weights: np.ndarray, model: Distribution, precision: str,
                chunk_rows: int) -> np.ndarray:
    """``[rows, weight, weighted log-density]`` of one shard under ``model``."""
    try:
        total = fold_rows(None, shard, weights, model, precision, chunk_rows)
    except NumericalError:
        total = float("nan")
    return np.array([shard.n_rows, float(weights.sum()), total])


def tree_reduce(items: Sequence[Any], combine: Callable[..., Any], fanout: int = 2) -> Any:
    """Reduce ``items`` through a ``fanout``-ary tree over their order (deterministic)."""
    level = list(items)
    if not level:
        raise ValueError("nothing to reduce")
    while len(level) > 1:
        level = [combine(*level[i:i + fanout]) if len(level[i:i + fanout]) > 1 else level[i]
                 for i in range(0, len(level), fanout)]
    return level[0]


def add_payloads(*payloads: np.ndarray) -> np.ndarray:
    """The sum of payloads (the reduce operation of every backend)."""
    total = np.array(payloads[0], dtype=np.float64, copy=True)
    for p in payloads[1:]:
        total += p
    return total


def unpack_fold(flat: np.ndarray, estimator: Estimator) -> FoldResult:
    """The :class:`FoldResult` a reduced payload stands for."""
    acc = estimator.accumulator_factory().make().from_array(flat[HEADER:])
    return FoldResult(int(round(flat[0])), float(flat[1]), float(flat[2]), acc)


class ShardedEncodedData(EncodedDataHandle):
    """Rows encoded once in the driver and split into contiguous shards held by workers.

    Subclasses place the shards (``_place``) and run a function over all of them, reducing the
    payloads (``_reduce``); seeding, scoring and error reporting are shared here. The driver
    keeps the encoding: the initialisation sample is drawn from it exactly as the local backend
    draws it (so the same seed gives the same start), and a lost worker's shard is re-sent.
    """

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 num_shards: int):
        self.enc = enc
        self.n_rows = enc.n_rows
        self.weights = as_weights(weights, enc.n_rows)
        self.total_weight = float(self.weights.sum())
        self.chunk_rows = int(chunk_rows)
        self.bounds = shard_bounds(enc.n_rows, num_shards)
        self.closed = False
        #: payload length of the last reduce (what crossed the network per shard)
        self.last_payload_size = 0

    def shard(self, i: int) -> tuple[Encoded, np.ndarray]:
        a, b = self.bounds[i]
        return self.enc.rows(a, b), self.weights[a:b]

    def _reduce(self, task: str, args: tuple) -> np.ndarray:
        """Run ``fold_shard`` (task "fold") or ``score_shard`` ("score") on every shard, summed."""
        raise NotImplementedError

    def fold(self, estimator: Estimator, model: Distribution,
             precision: str = "float64") -> FoldResult:
        flat = self._reduce("fold", (estimator, model, precision, self.chunk_rows))
        self.last_payload_size = flat.size
        if not np.isfinite(flat[2]):
            self._name_bad_row(model, precision)
        return unpack_fold(flat, estimator)

    def log_density_sum(self, model: Distribution, precision: str = "float64") -> tuple[int, float]:
        flat = self._reduce("score", (model, precision, self.chunk_rows))
        if not np.isfinite(flat[2]):
            self._name_bad_row(model, precision)
        return int(flat[0]), float(flat[2])

    def _name_bad_row(self, model: Distribution, precision: str) -> None:
        fold_rows(None, self.enc, self.weights, model, precision, self.chunk_rows)
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
