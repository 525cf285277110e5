"""Model-parallel EM: the planned axis of the model tree is threaded over workers.

The inversion of the data backends: there the model is replicated and the rows sharded; here the
rows stay whole and the units of one node of the model tree (a mixture's components, a record's
fields, a hidden Markov model's states) are cut into the contiguous ranges a
:class:`~mixfold.parallel.model_decomposition.ModelDecomposition` names, range ``i`` running on
worker ``i``. One recursive fold, :func:`model_parallel_fold` (in
:mod:`mixfold.parallel.executor`, with the worker pool and the plan checks), walks the tree from
the root to the cut node along the plan's path; every node's own arithmetic is its family's,
through the hooks of :mod:`mixfold.families._hooks` (the executor knows no family class):

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
its row blocks on every core of the process. A second: a cut of a topic model (the TOPIC axis,
LDA): every word's normaliser over the topics is the sum of the workers' partial sums over their
topic ranges, so the variational parameters, and from them the statistics, agree with the
serial fold to rounding (a few ulps per iteration of each document's fixed point; 1e-12
relative after a fit of a few iterations), everything else per topic being the serial bits.
A third: a cut of a tied mixture (full covariances sharing one ``covariance_keys``) on a small
chunk, whose serial fold hands each component a share of the pooled scatter (``tied_fold``,
``families/stacked_gaussian.py``) where the split adds each component's own outer products:
the statistics' pooled sums, and so the fit, agree to rounding (1e-12 relative after a fit of
a few iterations). One proviso, about the serial fold itself: it must run with the BLAS thread
count the workers run with (OpenBLAS splits a long dot product over its threads, so the serial
fold's last bits change with that count); the workers run ``cores // workers`` BLAS threads
each, one on a 2-core machine.

Where the units run is one value, a :class:`~mixfold.parallel.placement.Placement` (the plan,
or the planner's over ``num_workers`` threads), which the fit resolves once from its first model
(``placed_estimator``). Two entry points hand it over. ``optimize(data, est,
backend="model_parallel")`` keeps the rows in this process and threads the model
(:class:`ModelParallelEncodedData`, whose pool lives as long as the handle).
``optimize(data, ModelParallelEstimator(est), backend=...)`` composes with every data backend:
the rows are sharded by the backend (mp, Spark, Dask, Ray, MPI) and the model is threaded inside
each shard's E-step. Threads, because NumPy, BLAS and the compiled kernels release the GIL; one
pool per fit (stopped when it ends) or, in a remote worker's process, per process, created on
the first fold and reused by every iteration; a unit's work never opens a pool of its own (no
nesting).

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

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.backends.local import LocalEncodedData
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, FoldResult, fold_rows
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom)
from mixfold.parallel.executor import (WorkerPool, check_plan, model_parallel_fold, new_pool,
                                        plan_for)
from mixfold.parallel.placement import Placement
from mixfold.parallel.model_decomposition import ModelDecomposition, decompose_model
from mixfold.parallel.resources import Resources
from mixfold.options import instance_of, integer, none_or
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["model_parallel_fold", "ModelParallelAccumulator", "ModelParallelAccumulatorFactory",
           "ModelParallelEstimator", "ModelParallelEncodedData", "auto_parallel_estimator",
           "placed_estimator", "Placement", "WorkerPool", "plan_for", "check_plan"]


# ---------------------------------------------------------------------------------------------
# The accumulator, its factory and the estimator: any data backend's fold threads the model


class ModelParallelAccumulator(Accumulator):
    """An accumulator whose ``seq_update`` is :func:`model_parallel_fold` over its
    :class:`~mixfold.parallel.placement.Placement`.

    Everything else — the statistics, ``combine``, the flat payload, key tying — is the wrapped
    accumulator's, so every data backend reduces it unchanged. ``plan`` is the fit's plan
    (``None``: the planner's for the first model folded, with ``num_workers``); ``pool`` a pool
    of the plan's workers to run on (default: the fit's, see the placement).
    """

    def __init__(self, inner: Accumulator, plan: ModelDecomposition | None = None,
                 num_workers: int | None = None, pool: WorkerPool | None = None):
        self.inner = inner
        self.placement = Placement(plan, num_workers)
        self.pool = pool
        self.keys = None  # the wrapped accumulator ties its own keys

    @property
    def plan(self) -> ModelDecomposition | None:
        return self.placement.plan

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
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        if self.placement.plan is None:  # kept: every later fold of this accumulator cuts alike
            self.placement = self.placement.resolved(model)
        return self.placement.fold(self.inner, enc, weights, model, precision, self.pool)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        self.inner.seq_initialize(enc, weights, rng)


class ModelParallelAccumulatorFactory(AccumulatorFactory):
    """Makes :class:`ModelParallelAccumulator` around the wrapped factory's accumulators."""

    __slots__ = ("inner", "plan", "num_workers", "pool")

    def __init__(self, inner: AccumulatorFactory, plan: ModelDecomposition | None = None,
                 num_workers: int | None = None, pool: WorkerPool | None = None):
        self.inner = inner
        self.plan = plan
        self.num_workers = num_workers
        self.pool = pool

    def make(self) -> ModelParallelAccumulator:
        return ModelParallelAccumulator(self.inner.make(), self.plan, self.num_workers,
                                        self.pool)


class ModelParallelEstimator(Estimator):
    """``inner`` with its E-step threaded over the model: compose with any ``backend=``.

    ``optimize(data, ModelParallelEstimator(est), backend="mp"|"spark"|"dask"|"ray"|"mpi")``
    shards the rows through the backend while each shard's E-step runs the cut of ``plan``
    (a :class:`~mixfold.parallel.model_decomposition.ModelDecomposition`; ``None``: the
    planner's best axis of the fit's first model over ``num_workers`` threads, see
    :func:`plan_for`, resolved once by the fit so that every iteration and every worker cuts
    alike). The encoder, the starting guess and the M-step are ``inner``'s. The estimator
    pickles (it travels to remote workers); the fit's threads stop when it ends, a remote
    worker's process keeps its own for its next task.

    >>> import numpy as np, mixfold
    >>> from mixfold import GaussianEstimator, MixtureEstimator
    >>> x = np.concatenate([np.random.default_rng(0).normal(m, 1, 500) for m in (-5, 0, 5)])
    >>> est = ModelParallelEstimator(MixtureEstimator([GaussianEstimator()] * 3), num_workers=2)
    >>> fit = mixfold.optimize(x, est, max_iter=20, progress=False)
    >>> sorted(round(c.mu) for c in fit.components)
    [-5, 0, 5]
    """

    option_rules = {"plan": none_or(instance_of(ModelDecomposition, what="a ModelDecomposition")),
                    "num_workers": none_or(integer(1))}

    def __init__(self, inner: Estimator, plan: ModelDecomposition | None = None,
                 num_workers: int | None = None):
        if not isinstance(inner, Estimator):
            raise TypeError(f"inner must be a mixfold Estimator, got {type(inner).__name__}")
        if isinstance(inner, ModelParallelEstimator):
            raise TypeError("a ModelParallelEstimator cannot wrap another (pools never nest)")
        self.check_options(plan=plan, num_workers=num_workers)
        self.inner = inner
        self.plan = plan
        self.num_workers = num_workers

    def placed(self, model: Distribution) -> ModelParallelEstimator:
        """This estimator with its plan resolved for ``model`` (the fit's first model)."""
        placement = Placement(self.plan, self.num_workers).resolved(model)
        return self if placement.plan is self.plan else \
            ModelParallelEstimator(self.inner, placement.plan, self.num_workers)

    def accumulator_factory(self) -> ModelParallelAccumulatorFactory:
        return ModelParallelAccumulatorFactory(self.inner.accumulator_factory(), self.plan,
                                               self.num_workers)

    def estimate(self, nobs: float, stats: Any) -> Distribution:
        return self.inner.estimate(nobs, stats)

    def encoder(self) -> Encoder:
        return self.inner.encoder()

    def bind(self, encoder: Encoder) -> ModelParallelEstimator:
        return ModelParallelEstimator(self.inner.bind(encoder), self.plan, self.num_workers)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> Distribution:
        return self.inner.initial_guess(sample, weights, rng)

    def __repr__(self) -> str:
        where = f", plan={self.plan.path!r}" if self.plan is not None else ""
        return f"ModelParallelEstimator({self.inner!r}{where})"


def placed_estimator(estimator: Estimator, model: Distribution) -> Estimator:
    """What the fit folds with, given its first model: a :class:`ModelParallelEstimator` with
    its plan resolved (:meth:`ModelParallelEstimator.placed`), any other estimator as it is."""
    return estimator.placed(model) if isinstance(estimator, ModelParallelEstimator) else estimator


def auto_parallel_estimator(estimator: Estimator, model: Distribution,
                            resources: Resources | None = None, *, n_data: int | None = None,
                            min_components_per_shard: int = 1,
                            prefer_data_parallel: bool = True
                            ) -> tuple[Estimator, ModelDecomposition]:
    """Ask the planner how to run ``model`` on ``resources`` (default: this machine's cores);
    return ``(estimator to fit with, the plan)``.

    When the plan is model parallel, the estimator is a :class:`ModelParallelEstimator` that
    executes exactly that plan — its path, its unit ranges, one worker per planned device
    (its ``num_workers`` is the number of cuts);
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
    >>> est.num_workers  # sized to the planner's cuts
    2
    """
    plan = decompose_model(model, resources if resources is not None else Resources.local(),
                           n_data=n_data, min_components_per_shard=min_components_per_shard,
                           prefer_data_parallel=prefer_data_parallel)
    if not plan.is_model_parallel:
        return estimator, plan
    check_plan(model, plan)
    return ModelParallelEstimator(estimator, plan, num_workers=len(plan.cuts)), plan


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
             precision: Precision = FLOAT64) -> FoldResult:
        if isinstance(estimator, ModelParallelEstimator):  # its plan, this handle's pool
            self.plan = self.plan or estimator.plan
            estimator = estimator.inner
        acc = estimator.accumulator_factory().make()
        if self.plan is None:
            self.plan = Placement(None, self.num_workers).resolved(model).plan
        if self.plan.is_model_parallel and self.pool is None:
            self.pool = new_pool(self.plan)
        threaded = ModelParallelAccumulator(acc, self.plan, pool=self.pool)
        total = fold_rows(threaded, self.enc, self.weights, model, precision, self.chunk_rows)
        return FoldResult(self.n_rows, self.total_weight, total, acc)

    def close(self) -> None:
        super().close()
        if self.pool is not None:
            self.pool.close()
            self.pool = None
