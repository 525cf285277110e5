"""The local executor of a heterogeneous plan: every worker's rows folded in this process, each
in its planned band, the payloads reduced through the planned k-way tree."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mixfold.backends._shard import RowPlan, ShardedEncodedData
from mixfold.backends.worker_records import timed_task
from mixfold.compute.encoded import Encoded

__all__ = ["PlannedLocalEncodedData"]


class PlannedLocalEncodedData(ShardedEncodedData):
    """The rows of ``plan``'s workers held in this process, shard ``i`` worker ``i``'s.

    >>> import numpy as np, mixfold
    >>> from mixfold.parallel.heterogeneous import Worker
    >>> x = np.random.default_rng(0).normal(size=1000)
    >>> pool = [Worker("a", precisions=("float32",)), Worker("b", precisions=("float64",))]
    >>> model = mixfold.optimize(x, mixfold.GaussianEstimator(), resources=pool,
    ...                          precision="auto", progress=False)
    >>> [(a.precision, a.rows) for a in model.fit_result.plan.assignments]
    [('float32', 600), ('float64', 400)]
    """

    name = "local"

    def __init__(self, enc: Encoded, weights: np.ndarray | None, chunk_rows: int,
                 plan: RowPlan):
        super().__init__(enc, weights, chunk_rows, len(plan.row_bounds()), plan)

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        n = len(shard_args)
        payloads = [timed_task(task, *self.shard(i), args, i, n)
                    for i, args in enumerate(shard_args)]
        return self._tree(payloads, combine)
