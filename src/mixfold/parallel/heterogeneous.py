"""Heterogeneous workers: plan rows and a precision band per worker, run the plan, simulate it.

A pool of mixed workers (GPUs fast in fp8/bf16, CPUs in float32/float64 or double-double) is
planned by :func:`plan_heterogeneous`: every worker runs the fastest band it supports whose
a-priori error ``op_count * u`` meets ``target_rel_error`` (optionally also checked by measuring
the band against float64 on a data sample), or -- when none does -- the most accurate band it
supports; rows are split in proportion to each worker's throughput in its band, with an exact
total; the partial statistics fold through a k-way tree of depth ``max(1, ceil(log2(W) / 2))``.

The plan is *executed*: ``optimize(data, est, resources=..., precision="auto",
target_rel_error=...)`` opens the chosen backend with it (:func:`mixfold.dispatch.open_backend`
with a :class:`PlanRequest`) -- every worker holds exactly its planned rows, runs exactly its
planned band (``"<band>@cuda"`` through torch on a GPU worker), and payloads are reduced
through a tree of the planned depth, in process
(``PlannedLocalEncodedData`` of ``mixfold.backends.planned``, re-exported here), on ``mp``,
Spark (``treeAggregate(depth=...)``), Dask and Ray (task trees of the planned fanout) and MPI
(point-to-point k-way tree).

Beyond one machine, :mod:`mixfold.parallel.simulation` computes and draws the makespan of a plan
over thousands of workers.

>>> workers = [Worker("gpu0", "gpu", ("fp8", "bfloat16", "float32"), 8.0),
...            Worker("cpu0", "cpu", ("float32", "float64"), 1.0)]
>>> plan = plan_heterogeneous(workers, 1000, target_rel_error=1e-3)
>>> [(a.name, a.precision, a.rows) for a in plan.assignments], plan.reduce_depth
([('gpu0', 'float32', 914), ('cpu0', 'float32', 86)], 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from mixfold.backends.planned import PlannedLocalEncodedData
from mixfold.compute.accuracy import statistics_relative_error
from mixfold.compute.tree import fanout_for_depth
from mixfold.families._protocol import Encoded
from mixfold.parallel.resources import Resources
from mixfold.precision import (BANDS, UNIT_ROUNDOFF, Precision, band_of, check_bands,
                               most_accurate, predicted_relative_error, promoted,
                               resolve_precision)

__all__ = ["Worker", "WorkerAssignment", "HeterogeneousPlan", "plan_heterogeneous",
           "reduce_depth_for", "split_rows", "NOMINAL_SPEEDUP", "workers_from",
           "PlannedLocalEncodedData", "PlanRequest"]

#: Relative speed of each band against float64 on a device kind, used only for a worker whose
#: band was not measured (``Resources.calibrate`` measures them): GPUs double their rate per
#: halving of the word (tensor cores); CPUs run float32 natively and double-double at about a
#: tenth of float64; an unmeasured fp8/bf16/fp16 on a CPU is taken as slow (whether the CPU has
#: a unit for it -- AVX512_BF16 -- only a measurement says), so it is planned only once measured.
NOMINAL_SPEEDUP: dict[str, dict[str, float]] = {
    "gpu": {"fp8": 8.0, "bfloat16": 4.0, "float16": 4.0, "float32": 2.0, "float64": 1.0,
            "dd": 0.1},
    "cpu": {"fp8": 0.02, "bfloat16": 0.02, "float16": 0.02, "float32": 1.5, "float64": 1.0,
            "dd": 0.1},
}


# -------------------------------------------------------------------------------------------
# Workers and plans


@dataclass(frozen=True)
class Worker:
    """A compute worker: ``name``, ``device`` ("cpu", "gpu", or a torch device such as
    "cuda:1"), the ``precisions`` it can run (any order), ``base_throughput`` (its float64 rows
    per second, or a relative speed), ``band_throughput`` (measured rows per second per band,
    which override the nominal model :data:`NOMINAL_SPEEDUP`) and ``band_error`` (each band's
    measured error of one EM step against float64, from ``Resources.calibrate``, which the
    planner holds against its budget instead of the a-priori model).

    >>> Worker("g", "gpu", ("float16", "float32"), 2.0).throughput("float16")
    8.0
    >>> Worker("c", band_throughput={"float32": 5.0}).throughput("float32")
    5.0
    """

    name: str
    device: str = "cpu"
    precisions: tuple[str, ...] = BANDS
    base_throughput: float = 1.0
    band_throughput: Mapping[str, float] = field(default_factory=dict)
    band_error: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a worker needs a non-empty name, got {self.name!r}")
        precisions = check_bands(self.precisions)
        object.__setattr__(self, "precisions", precisions)
        if not (math.isfinite(self.base_throughput) and self.base_throughput > 0):
            raise ValueError(f"base_throughput must be a finite number > 0, got "
                             f"{self.base_throughput!r}")
        for band, rate in dict(self.band_throughput).items():
            if band not in precisions or not (math.isfinite(rate) and rate > 0):
                raise ValueError(f"band_throughput[{band!r}] = {rate!r}: expected a band of "
                                 f"{list(precisions)} with a finite rate > 0")
        object.__setattr__(self, "band_throughput", dict(self.band_throughput))
        for band, error in dict(self.band_error).items():
            if band not in precisions or not (math.isfinite(error) and error >= 0):
                raise ValueError(f"band_error[{band!r}] = {error!r}: expected a band of "
                                 f"{list(precisions)} with a finite error >= 0")
        object.__setattr__(self, "band_error", dict(self.band_error))

    @property
    def kind(self) -> str:
        """"gpu" for a GPU worker (device "gpu" or "cuda..."), else "cpu"."""
        return "gpu" if self.device.startswith(("gpu", "cuda")) else "cpu"

    @property
    def torch_device(self) -> str | None:
        """The torch device a GPU worker's E-step runs on (None for a CPU worker)."""
        if self.kind != "gpu":
            return None
        return "cuda" if self.device == "gpu" else self.device.replace("gpu", "cuda")

    def throughput(self, band: str) -> float:
        """Rows per second in ``band``: measured when known, else the nominal model."""
        if band in self.band_throughput:
            return float(self.band_throughput[band])
        return self.base_throughput * NOMINAL_SPEEDUP[self.kind][band]

    @classmethod
    def from_device(cls, spec: Any) -> Worker:
        """The worker for a :class:`~mixfold.parallel.resources.DeviceSpec` (measured
        ``band_throughput`` from ``Resources.calibrate`` carried over). A GPU named
        ``gpu:<i>`` runs on ``cuda:<i>``."""
        device = "cpu"
        if spec.kind == "gpu":
            prefix, _, index = spec.name.partition(":")
            device = f"cuda:{index}" if prefix == "gpu" and index.isdigit() else "gpu"
        return cls(spec.name, device, tuple(spec.precisions), spec.throughput,
                   dict(spec.band_throughput), dict(spec.band_error))


@dataclass(frozen=True)
class WorkerAssignment:
    """What one worker does: ``rows`` of the data, in ``precision`` (a band), at
    ``effective_throughput`` rows per second; ``predicted_error`` is the a-priori
    ``op_count * u``, ``measured_error`` the band's measured relative error of the statistics
    against float64 on a sample (None when not verified), ``measured_throughput`` whether the
    rate was measured (calibrated) rather than nominal."""

    name: str
    rows: int
    precision: str
    effective_throughput: float
    device: str = "cpu"
    predicted_error: float = 0.0
    measured_error: float | None = None
    measured_throughput: bool = False
    #: The precision the executor runs: the band, on the worker's torch device for a GPU.
    execution_precision: Precision = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # resolved once, as the plan is built: the folds below read it and never resolve
        torch_device = Worker(self.name, self.device).torch_device
        name = self.precision if torch_device is None else f"{self.precision}@{torch_device}"
        object.__setattr__(self, "execution_precision", resolve_precision(name))

    @property
    def seconds(self) -> float:
        """Planned E-step time of this worker."""
        return self.rows / self.effective_throughput


@dataclass(frozen=True)
class HeterogeneousPlan:
    """Per-worker assignments (in worker order: worker ``i`` holds the ``i``-th contiguous block
    of rows) and the depth of the k-way tree that folds their statistics."""

    assignments: tuple[WorkerAssignment, ...]
    reduce_depth: int

    @property
    def n_rows(self) -> int:
        return sum(a.rows for a in self.assignments)

    @property
    def fanout(self) -> int:
        """Children per node of the reduce tree: the smallest k with k^depth >= workers."""
        return fanout_for_depth(len(self.assignments), self.reduce_depth)

    @property
    def makespan(self) -> float:
        """Planned E-step time (the slowest worker)."""
        return max(a.seconds for a in self.assignments)

    def row_bounds(self, n_rows: int | None = None) -> list[tuple[int, int]]:
        """Each worker's row range ``[begin, end)``; ``n_rows`` (the data's) must be the plan's."""
        if n_rows is not None and n_rows != self.n_rows:
            raise ValueError(f"the plan is for {self.n_rows} rows, the data has {n_rows}")
        edges = np.concatenate([[0], np.cumsum([a.rows for a in self.assignments])])
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]

    def execution_precisions(self) -> list[Precision]:
        """The precision each worker runs (``"<band>@cuda"`` on GPU workers), resolved."""
        return [a.execution_precision for a in self.assignments]

    def promoted(self) -> HeterogeneousPlan | None:
        """This plan with the least accurate band that holds rows promoted (every worker in it:
        :func:`~mixfold.precision.promoted`); ``None`` when none can be.

        >>> plan = HeterogeneousPlan((WorkerAssignment("a", 5, "bfloat16", 1.0),
        ...                           WorkerAssignment("b", 5, "float64", 1.0)), 1)
        >>> [a.precision for a in plan.promoted().assignments]
        ['float32', 'float64']
        """
        used = [a.precision for a in self.assignments if a.rows > 0]
        worst = max(used, key=lambda b: UNIT_ROUNDOFF[b]) if used else None
        up = None if worst is None else promoted(worst)
        if up is None:
            return None
        return replace(self, assignments=tuple(
            replace(a, precision=up) if a.precision == worst else a for a in self.assignments))

    def bands(self) -> dict[str, int]:
        """Rows per band."""
        out: dict[str, int] = {}
        for a in self.assignments:
            out[a.precision] = out.get(a.precision, 0) + a.rows
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description; :meth:`from_dict` gives back an equal plan.

        >>> plan = plan_heterogeneous([Worker("a"), Worker("b", "gpu")], 10)
        >>> HeterogeneousPlan.from_dict(plan.to_dict()) == plan
        True
        """
        return {"reduce_depth": self.reduce_depth,
                "assignments": [{f.name: getattr(a, f.name) for f in fields(a) if f.init}
                                for a in self.assignments]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeterogeneousPlan:
        return cls(tuple(WorkerAssignment(**a) for a in d["assignments"]), int(d["reduce_depth"]))

    def describe(self) -> str:
        """A table: one line per worker, then the reduce tree."""
        lines = [f"{'worker':<16} {'device':<8} {'band':<9} {'rows':>10} {'rows/s':>12} "
                 f"{'predicted':>10} {'measured':>10}"]
        for a in self.assignments:
            measured = "-" if a.measured_error is None else f"{a.measured_error:.2e}"
            lines.append(f"{a.name:<16} {a.device:<8} {a.precision:<9} {a.rows:>10} "
                         f"{a.effective_throughput:>12.4g} {a.predicted_error:>10.2e} "
                         f"{measured:>10}")
        lines.append(f"reduce: {len(self.assignments)} payloads, tree depth {self.reduce_depth} "
                     f"(fanout {self.fanout})")
        return "\n".join(lines)


def reduce_depth_for(n_workers: int) -> int:
    """``max(1, ceil(log2(W) / 2))``: the k-way tree depth for ``W`` payloads.

    >>> [reduce_depth_for(w) for w in (1, 2, 4, 16, 1000, 10_000)]
    [1, 1, 1, 2, 5, 7]
    """
    return max(1, math.ceil(math.log2(max(1, n_workers)) / 2))


def split_rows(n_rows: int, rates: Sequence[float]) -> list[int]:
    """``n_rows`` split in proportion to ``rates``, summing exactly to ``n_rows``: floors of the
    quotas, then one more row to the largest remainders (earlier workers first on ties).

    >>> split_rows(10, [1.0, 1.0, 1.0])
    [4, 3, 3]
    """
    if n_rows < 0:
        raise ValueError(f"n_rows must be >= 0, got {n_rows}")
    rates_arr = np.asarray(rates, dtype=np.float64)
    if rates_arr.size == 0 or not (np.isfinite(rates_arr).all() and (rates_arr > 0).all()):
        raise ValueError(f"rates must be finite and > 0, got {list(rates)}")
    quota = n_rows * (rates_arr / rates_arr.sum())
    rows = np.floor(quota).astype(np.int64)
    short = n_rows - int(rows.sum())
    order = np.lexsort((np.arange(rows.size), -(quota - rows)))  # largest remainder first
    rows[order[:short]] += 1
    return rows.tolist()


def _choose_band(worker: Worker, allowed: Sequence[str], target: float | None, op_count: float,
                 measured: Callable[[str], float] | None) -> tuple[str, float | None, bool]:
    """(band, its measured error, whether it meets ``target``): the worker's fastest band
    whose error -- measured by calibration (``band_error``) or by ``measured``, else the
    a-priori model -- is within ``target``; when none is, its most accurate band (never its
    fastest), which gets no rows."""
    bands = [b for b in allowed if b in worker.precisions]
    if not bands:
        raise ValueError(f"worker {worker.name!r} runs {list(worker.precisions)}, none of the "
                         f"allowed precisions {list(allowed)}")
    # fastest first; on equal speed the more accurate band
    for band in sorted(bands, key=lambda b: (-worker.throughput(b), UNIT_ROUNDOFF[b])):
        error = _band_error(worker, band, op_count, measured)
        if target is None or error <= target:
            return band, _reported_error(worker, band, measured), True
    band = most_accurate(bands)
    return band, _reported_error(worker, band, measured), False


def _band_error(worker: Worker, band: str, op_count: float,
                measured: Callable[[str], float] | None) -> float:
    """A band's error on this worker: calibrated, else the larger of the a-priori model and a
    measurement on the sample."""
    if band in worker.band_error:
        return worker.band_error[band]
    predicted = predicted_relative_error(band, op_count)
    return predicted if measured is None else max(predicted, measured(band))


def _reported_error(worker: Worker, band: str,
                    measured: Callable[[str], float] | None) -> float | None:
    if band in worker.band_error:
        return worker.band_error[band]
    return None if measured is None else measured(band)


def plan_heterogeneous(workers: Sequence[Worker], n_rows: int,
                       allowed_precisions: Sequence[str] = BANDS,
                       target_rel_error: float | None = None, op_count: float = 1000, *,
                       verify: tuple[Any, Any] | None = None) -> HeterogeneousPlan:
    """Assign rows and a precision band to each worker, balanced by precision-adjusted throughput.

    Each worker runs the fastest band it supports (among ``allowed_precisions``) whose error is
    within ``target_rel_error`` (``None``: no accuracy constraint): the error calibration
    measured (``band_error``, from ``Resources.calibrate``: one EM step's log-likelihood and
    model against float64 on a sample of the user's data), else the a-priori ``op_count * u``.
    A worker none of whose bands meets the budget is listed with its most accurate band and no
    rows (a band that cannot meet the budget is never planned); when no worker can, the budget
    is refused, naming the best error any band achieves. Rows are split in proportion to each
    worker's throughput in its band (measured ``band_throughput`` when the worker has it) and
    always sum to ``n_rows``.
    ``reduce_depth`` is ``max(1, ceil(log2(W) / 2))``.

    ``verify=(model, sample)`` also measures each candidate band on ``sample`` (raw rows or
    encoded) against float64 -- the relative error of one E-step's sufficient statistics -- and
    accepts a band only when the measurement meets the target too; the measurement is recorded
    in the assignment.

    >>> plan = plan_heterogeneous([Worker("a", precisions=("float32",)),
    ...                            Worker("b", base_throughput=3.0)], 10, target_rel_error=1e-8)
    >>> [(a.precision, a.rows) for a in plan.assignments]  # float32 cannot: no rows for "a"
    [('float32', 0), ('float64', 10)]
    >>> plan_heterogeneous([Worker("a")], 10, target_rel_error=1e-40)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: target_rel_error=1e-40 cannot be met: the most accurate band these workers run, ...
    """
    workers = list(workers)
    if not workers:
        raise ValueError("plan_heterogeneous needs at least one worker")
    names = [w.name for w in workers]
    if len(set(names)) != len(names):
        twice = sorted(n for n in set(names) if names.count(n) > 1)
        raise ValueError(f"worker names must be distinct, got {twice} more than once")
    allowed = tuple(allowed_precisions)
    unknown = [b for b in allowed if b not in UNIT_ROUNDOFF]
    if not allowed or unknown:
        raise ValueError(f"allowed_precisions must be a non-empty subset of {list(BANDS)}, got "
                         f"{list(allowed)}")
    if target_rel_error is not None and not (math.isfinite(target_rel_error)
                                             and target_rel_error > 0):
        raise ValueError(f"target_rel_error must be None or a finite number > 0, got "
                         f"{target_rel_error!r}")
    if not (math.isfinite(op_count) and op_count > 0):
        raise ValueError(f"op_count must be a finite number > 0, got {op_count!r}")
    measured = _band_checker(*verify) if verify is not None else None
    chosen = [_choose_band(w, allowed, target_rel_error, op_count, measured) for w in workers]
    if not any(meets for _, _, meets in chosen):
        _refuse_budget(workers, allowed, target_rel_error, op_count, measured)
    rates = [w.throughput(band) for w, (band, _, _) in zip(workers, chosen)]
    working = [i for i, (_, _, meets) in enumerate(chosen) if meets]
    rows = [0] * len(workers)  # a worker no band of which meets the budget gets no rows
    for i, r in zip(working, split_rows(int(n_rows), [rates[i] for i in working])):
        rows[i] = r
    assignments = tuple(
        WorkerAssignment(w.name, r, band, rate, w.device, predicted_relative_error(band, op_count),
                         error, band in w.band_throughput)
        for w, (band, error, _), rate, r in zip(workers, chosen, rates, rows))
    return HeterogeneousPlan(assignments, reduce_depth_for(len(workers)))


def _refuse_budget(workers: Sequence[Worker], allowed: Sequence[str], target: float,
                   op_count: float, measured: Callable[[str], float] | None) -> None:
    """One line naming the budget no worker can meet and the best error any band achieves."""
    best = min((_band_error(w, b, op_count, measured), b, w.name) for w in workers
               for b in allowed if b in w.precisions)
    raise ValueError(f"target_rel_error={target:g} cannot be met: the most accurate band these "
                     f"workers run, {best[1]} on {best[2]!r}, has an error of {best[0]:.2g}")


def _band_checker(model: Any, sample: Any) -> Callable[[str], float]:
    """Measured relative error of each band's statistics against float64 (cached per band)."""
    enc = sample if isinstance(sample, Encoded) else model.encoder().encode(sample)
    cache: dict[str, float] = {}

    def measured(band: str) -> float:
        if band not in cache:
            cache[band] = statistics_relative_error(model, enc, band, reference="float64")
        return cache[band]

    return measured


def workers_from(resources: Any) -> list[Worker]:
    """Workers for a :class:`~mixfold.parallel.resources.Resources`, or a sequence of
    :class:`Worker` / ``DeviceSpec``."""
    devices = getattr(resources, "devices", resources)
    out = []
    for d in devices:
        if isinstance(d, Worker):
            out.append(d)
        elif hasattr(d, "band_throughput") and hasattr(d, "kind"):
            out.append(Worker.from_device(d))
        else:
            raise TypeError(f"resources must be a Resources or a sequence of Worker/DeviceSpec, "
                            f"got a {type(d).__name__} in it")
    if not out:
        raise ValueError("resources describe no worker")
    return out


# -------------------------------------------------------------------------------------------
# Executing a plan


def _default_workers(name: str, engine: Any, num_workers: int | None) -> list[Worker]:
    if name == "mpi":
        return workers_from(Resources.from_mpi(engine))
    if name in ("local", "mp"):
        devices = Resources.local().devices
        return workers_from(devices[:num_workers] if num_workers else devices)
    return [Worker(f"{name}:{i}") for i in range(num_workers or 2)]


@dataclass(frozen=True)
class PlanRequest:
    """What a fit asks the planner for, before the rows are counted: the workers
    (``resources``; ``None``: the backend's default workers -- this machine's cores for local and
    mp, the ranks for MPI, ``num_workers`` (2) otherwise), the band (``"auto"``: the planner
    chooses each worker's band; a band name: every worker runs it), the accuracy budget and the
    E-step's operation count. :func:`mixfold.dispatch.open_backend` turns it into a plan once the
    rows are encoded, and places every worker's rows as planned.

    >>> pool = [Worker("a", precisions=("float32",)), Worker("b", precisions=("float64",))]
    >>> plan = PlanRequest(pool, "auto").plan_for(1000, "local", None, None)
    >>> [(a.precision, a.rows) for a in plan.assignments]
    [('float32', 600), ('float64', 400)]
    """

    resources: Any
    precision: str
    target_rel_error: float | None = None
    op_count: float = 1000

    def plan_for(self, n_rows: int, backend: str, engine: Any,
                 num_workers: int | None) -> HeterogeneousPlan:
        """The plan of ``n_rows`` rows over this request's workers on ``backend``."""
        workers = workers_from(self.resources) if self.resources is not None else \
            _default_workers(backend, engine, num_workers)
        allowed = BANDS if self.precision == "auto" else (band_of(self.precision),)
        return plan_heterogeneous(workers, n_rows, allowed, self.target_rel_error, self.op_count)
