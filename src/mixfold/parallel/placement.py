"""Model parallelism as one value: where a fit's model runs.

A :class:`Placement` names the cut (a :class:`~mixfold.parallel.model_decomposition.
ModelDecomposition`: a node of the model tree and its units' ranges, one worker thread each) or
asks the planner for one over ``num_workers`` threads. The fit resolves it once, from its first
model (:meth:`Placement.resolved`), so every iteration and every remote worker runs the same
cut; :meth:`Placement.fold` runs one E-step with that cut threaded. Its threads are a pool of
the fit's (:func:`~mixfold.parallel.executor.fit_pools`: stopped when the fit ends), a data
handle's own, or -- in a remote worker's task -- its process's.

>>> import numpy as np
>>> from mixfold import MixtureDistribution, VonMisesDistribution
>>> from mixfold.parallel.executor import fit_pools
>>> mix = MixtureDistribution([VonMisesDistribution(m, 4) for m in range(4)], [0.25] * 4)
>>> placed = Placement(num_workers=2).resolved(mix)
>>> [(c.start, c.stop) for c in placed.plan.cuts], placed.threaded
([(0, 2), (2, 4)], True)
>>> enc = mix.encoder().encode(np.linspace(-3, 3, 6))
>>> serial, threaded = (mix.estimator().accumulator_factory().make() for _ in range(2))
>>> a = serial.seq_update(enc, np.ones(6), mix)
>>> with fit_pools():  # as a fit runs it: its threads stop at the end
...     b = placed.fold(threaded, enc, np.ones(6), mix)
>>> bool(np.array_equal(a, b) and np.array_equal(serial.to_array(), threaded.to_array()))
True
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mixfold.families._protocol import Accumulator, Distribution, Encoded
from mixfold.parallel.executor import (WorkerPool, check_plan, in_worker, model_parallel_fold,
                                        plan_devices, plan_for, pool_for, score_threaded)
from mixfold.parallel.model_decomposition import ModelDecomposition
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["Placement"]


@dataclass(frozen=True)
class Placement:
    """The cut of ``plan``, one worker thread per cut; ``plan=None``: the planner's cut of the
    first model it is resolved for, over ``num_workers`` threads (default: this machine's
    cores)."""

    plan: ModelDecomposition | None = None
    num_workers: int | None = None

    def resolved(self, model: Distribution) -> Placement:
        """This placement with its plan: the given one, checked against ``model`` (one clear
        ``ValueError`` when the executor cannot run it bit for bit), or the planner's."""
        plan = self.plan if self.plan is not None else plan_for(model, self.num_workers)
        check_plan(model, plan)
        return self if plan is self.plan else replace(self, plan=plan)

    @property
    def threaded(self) -> bool:
        """Whether the plan cuts the model (a resolved placement may replicate it)."""
        return self.plan is not None and self.plan.is_model_parallel

    def fold(self, acc: Accumulator, enc: Encoded, weights: np.ndarray, model: Distribution,
             precision: Precision = FLOAT64, pool: WorkerPool | None = None) -> np.ndarray | None:
        """``acc.seq_update(enc, weights, model, precision)`` with the cut threaded, the same
        bits (:func:`~mixfold.parallel.executor.model_parallel_fold`), on ``pool`` (default:
        :func:`~mixfold.parallel.executor.pool_for` the plan's workers). Rows the fold returns
        no log-densities for are scored threaded too, so the fit never scores them serially."""
        placed = self if self.plan is not None else self.resolved(model)
        if not placed.threaded:
            return acc.seq_update(enc, weights, model, precision)
        pool = pool or pool_for(plan_devices(placed.plan))
        ll = model_parallel_fold(acc, model, enc, weights, placed.plan, precision, pool)
        if ll is None and not in_worker() and precision.native:
            ll = score_threaded(model, enc, precision, placed.plan, pool)
        return ll
