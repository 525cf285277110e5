"""The structural model-decomposition planner: where to cut a model tree, and onto which devices.

Everything here is read from the :mod:`~mixfold.decomposition` declarations alone (never from a
node's attributes), so the planner and the model-parallel executor agree on what is splittable:

- :func:`size_model_tree` sizes every node: its own parameter bytes and its subtree's, counting an
  object that appears at several places in the tree once (it is held once);
- :func:`subtree_work` costs a node's E-step per row: its own ``row_work`` plus, per row, the work
  of every child (units seen ``unit_rows`` times, shared children once). A child object used at
  several places is scored at each, so its work counts at each;
- :func:`tree_axes` lists every splittable axis anywhere in the tree with the work of each of its
  units per row of the whole model, and :func:`best_parallel_axis` picks the one whose cut removes
  the most serial time (never less than its heaviest unit takes);
- :func:`decompose_model` decides between data parallelism (replicate the model) and cutting one
  axis into contiguous unit ranges balanced by work against the devices' throughputs, within
  their memory. It is a pure function of the model and the resources.

Work is in units of one scalar leaf's row (a univariate Gaussian scores and accumulates a row for
1). When :meth:`~mixfold.parallel.resources.Resources.calibrate` has measured the devices, their
throughputs are rows per second of a model whose work is ``Resources.calibrated_work``, which
turns work into estimated seconds.

>>> from mixfold import CompositeDistribution, GaussianDistribution, MixtureDistribution
>>> from mixfold.parallel.resources import DeviceSpec, Resources
>>> mix = MixtureDistribution([GaussianDistribution(i, 1) for i in range(8)], [1 / 8] * 8)
>>> model = CompositeDistribution([GaussianDistribution(0, 1), mix])
>>> two = Resources((DeviceSpec("a"), DeviceSpec("b")))
>>> plan = decompose_model(model, two, prefer_data_parallel=False)
>>> plan.path, plan.axis.value, [(c.device.name, c.start, c.stop) for c in plan.cuts]
('1', 'component', [('a', 0, 4), ('b', 4, 8)])
>>> node_at(model, plan.path) is mix
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixfold.decomposition import (DecompAxis, Decomposition, ReductionOp, TreeDeclarations,
                                   decomposition_for, subtree_work)
from mixfold.parallel.resources import DeviceSpec, Resources

__all__ = [
    "NodeSize", "size_model_tree", "cost_children", "subtree_work", "compute_cost",
    "shard_children", "AxisCandidate", "tree_axes", "best_parallel_axis", "ModelCut",
    "ModelDecomposition", "decompose_model", "node_at",
]

#: Data parallelism wins when the model fits replicated, the data has at least this many rows
#: per device, and the best axis has fewer than ``_UNITS_PER_DEVICE`` units per device.
_ROWS_PER_DEVICE = 8
_UNITS_PER_DEVICE = 2


# -- one walk over the declarations ---------------------------------------------------------------


def _join(path: str, role: str) -> str:
    return f"{path}/{role}" if path else role


# -- sizing and costing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSize:
    """Structural size of one node of a model tree.

    ``path``: the '/'-joined child roles from the root (``""`` for the root). ``own_param_bytes``:
    the node's own parameters, children excluded. ``subtree_param_bytes``: own plus every
    descendant not already counted earlier in the tree (0 for a repeat). ``subtree_work``: E-step
    work per row of this node. ``rows_per_model_row``: rows this node sees per row of the whole
    model (a sequence's items see its expected length). ``repeat_of``: for an object met earlier
    in the tree, the path where it was first met (its children are listed there only).
    """

    path: str
    axis: DecompAxis
    num_units: int
    own_param_bytes: int
    subtree_param_bytes: int
    subtree_work: float
    rows_per_model_row: float = 1.0
    children: tuple[NodeSize, ...] = ()
    repeat_of: str | None = None

    def find(self, path: str) -> NodeSize:
        """The node at ``path`` below (or at) this one.

        >>> from mixfold import CompositeDistribution, GaussianDistribution
        >>> tree = size_model_tree(CompositeDistribution([GaussianDistribution(0, 1)] * 2))
        >>> tree.find("1").repeat_of, tree.find("1").subtree_param_bytes
        ('0', 0)
        """
        node = self
        while node.path != path:
            below = [c for c in node.children
                     if path == c.path or path.startswith(c.path + "/")]
            if not below:
                raise KeyError(f"no node at path {path!r} (stopped at {node.path!r})")
            node = max(below, key=lambda c: len(c.path))
        return node


def size_model_tree(model: Any) -> NodeSize:
    """Size every node of ``model``'s tree from its declarations; shared objects count once.

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> g = GaussianDistribution(0, 1)
    >>> s = size_model_tree(MixtureDistribution([g, g], [0.5, 0.5]))
    >>> s.own_param_bytes, s.subtree_param_bytes, s.subtree_work
    (32, 48, 4.0)
    """
    return _size(model, TreeDeclarations(), "", 1.0, {})


def _size(node: Any, decl: TreeDeclarations, path: str, rows: float,
          first_seen: dict[int, str]) -> NodeSize:
    dc = decl.of(node)
    if id(node) in first_seen:
        return NodeSize(path, dc.axis, dc.num_units, dc.param_bytes, 0, decl.work(node), rows,
                        repeat_of=first_seen[id(node)])
    first_seen[id(node)] = path
    roles = iter(dc.child_roles)
    children = [_size(u, decl, _join(path, next(roles)), rows * dc.unit_rows, first_seen)
                for u in dc.units]
    children += [_size(s, decl, _join(path, next(roles)), rows, first_seen)
                 for s in dc.shared_children]
    subtree = dc.param_bytes + sum(c.subtree_param_bytes for c in children)
    return NodeSize(path, dc.axis, dc.num_units, dc.param_bytes, subtree, decl.work(node), rows,
                    tuple(children))


def cost_children(model: Any) -> tuple[Any, ...]:
    """Every child whose work and bytes count: the units, then the shared children.

    >>> from mixfold import GaussianDistribution, SequenceDistribution, PoissonDistribution
    >>> item, length = GaussianDistribution(0, 1), PoissonDistribution(3.0)
    >>> cost_children(SequenceDistribution(item, length)) == (item, length)
    True
    """
    return decomposition_for(model).children


def shard_children(node: Any, dc: Decomposition | None = None) -> tuple[Any, ...]:
    """The units ``node`` splits into along its axis (a sequence's one item distribution, which
    is recursed into, not split; ``()`` for a leaf).

    >>> from mixfold import GaussianDistribution
    >>> shard_children(GaussianDistribution(0, 1))
    ()
    """
    return (dc if dc is not None else decomposition_for(node)).units


def compute_cost(model: Any) -> tuple[float, int]:
    """``(work per row, parameter bytes)`` of the whole model: the load the planner balances and
    the footprint every replica holds (shared objects counted once).

    >>> from mixfold import MultivariateGaussianDistribution
    >>> compute_cost(MultivariateGaussianDistribution([0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]))
    (4.0, 112)
    """
    size = size_model_tree(model)
    return size.subtree_work, size.subtree_param_bytes


# -- axes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AxisCandidate:
    """One splittable axis of the tree: the node at ``path``, its axis and reduction, and for
    each unit its work per row of the whole model (``unit_works``) and the bytes to hold it
    (``unit_bytes``)."""

    path: str
    axis: DecompAxis
    reduction: ReductionOp
    num_units: int
    unit_works: tuple[float, ...]
    unit_bytes: tuple[int, ...] = ()

    @property
    def total_work(self) -> float:
        """The units' work added up (per row of the whole model)."""
        return float(sum(self.unit_works))

    def benefit(self, speeds: Sequence[float]) -> float:
        """Serial time removed by cutting this axis over devices of relative ``speeds``, in
        work on the fastest: the units' time on the fastest device minus their time cut, which
        is never below the heaviest unit on the fastest device.

        >>> AxisCandidate("", DecompAxis.FACTOR, ReductionOp.SUM, 2, (9.0, 1.0)).benefit([1, 1])
        1.0
        """
        used = sorted((float(s) for s in speeds), reverse=True)[:self.num_units]
        if not used or self.total_work <= 0:
            return 0.0
        fastest = used[0]
        parallel = max(max(self.unit_works) / fastest, self.total_work / sum(used))
        return self.total_work / fastest - parallel


def tree_axes(model: Any) -> list[AxisCandidate]:
    """Every splittable axis in the tree (two or more units), parents before children.

    The walk follows the units of every node (through sequences and optional values too), not
    the shared children, which every worker holds whole, nor the units of a fused node (scored
    together, so the executor cannot thread through it). An object met a second time is not
    listed again.

    >>> from mixfold import CompositeDistribution, GaussianDistribution, MixtureDistribution
    >>> mix = MixtureDistribution([GaussianDistribution(0, 1)] * 3, [1 / 3] * 3)
    >>> [(a.path, a.axis.value, a.unit_works) for a in
    ...  tree_axes(CompositeDistribution([GaussianDistribution(0, 1), mix]))]
    [('', 'factor', (1.0, 6.0)), ('1', 'component', (1.0, 1.0, 1.0))]
    """
    return _axes(model, TreeDeclarations())


def _axes(model: Any, decl: TreeDeclarations) -> list[AxisCandidate]:
    out: list[AxisCandidate] = []
    seen: set[int] = set()
    stack = [(model, "", 1.0)]
    while stack:
        node, path, rows = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        dc = decl.of(node)
        unit_rows = rows * dc.unit_rows
        if dc.is_shardable:
            out.append(AxisCandidate(path, dc.axis, dc.reduction, len(dc.units),
                                     tuple(unit_rows * decl.work(u) for u in dc.units),
                                     tuple(decl.alone_bytes(u) for u in dc.units)))
        if not dc.fused:  # a fused node's units are scored together: nothing below is cut
            stack.extend((u, _join(path, role), unit_rows)
                         for u, role in reversed(tuple(zip(dc.units, dc.child_roles))))
    return out


def best_parallel_axis(model: Any, max_workers: int | None = None) -> AxisCandidate | None:
    """The axis whose cut over ``max_workers`` equal workers (default: one per unit) removes
    the most serial time (:meth:`AxisCandidate.benefit`); ``None`` when nothing splits.

    The whole tree is searched, so a heavy mixture inside a thin composite is found, and an
    imbalanced axis (a composite of a heavy mixture and a light leaf) loses to the balanced
    one inside it.

    >>> from mixfold import CompositeDistribution, GaussianDistribution, MixtureDistribution
    >>> mix = MixtureDistribution([GaussianDistribution(0, 1)] * 8, [1 / 8] * 8)
    >>> best_parallel_axis(CompositeDistribution([mix, GaussianDistribution(0, 1)]), 4).path
    '0'
    """
    if max_workers is not None and (not isinstance(max_workers, int) or max_workers < 1):
        raise ValueError(f"max_workers must be None or an integer >= 1, got {max_workers!r}")
    candidates = tree_axes(model)
    if not candidates:
        return None
    return max(candidates, key=lambda c: c.benefit(
        [1.0] * (c.num_units if max_workers is None else max_workers)))


def node_at(model: Any, path: str) -> Any:
    """The distribution at ``path`` ('/'-joined child roles from the root; ``""``: the root).

    A role that itself contains '/' (a record field "a/b") is matched whole.

    >>> from mixfold import GaussianDistribution, RecordDistribution, SequenceDistribution
    >>> g = GaussianDistribution(0, 1)
    >>> node_at(RecordDistribution({"pages": SequenceDistribution(g)}), "pages/item") is g
    True
    """
    node, rest = model, path
    while rest:
        dc = decomposition_for(node)
        matches = [r for r in dc.child_roles if rest == r or rest.startswith(r + "/")]
        if not matches:
            at = path[:len(path) - len(rest)].rstrip("/") or "the root"
            raise KeyError(f"no child role matching {rest.split('/')[0]!r} at {at} of path "
                           f"{path!r}; the roles there are {list(dc.child_roles)}")
        role = max(matches, key=len)
        node = dc.children[dc.child_roles.index(role)]
        rest = rest[len(role) + 1:]
    return node


# -- the decision ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCut:
    """Units ``[start, stop)`` of the cut node, run on ``device``; ``reduction`` is how their
    results meet the other cuts' (the cut node's)."""

    device: DeviceSpec
    start: int
    stop: int
    reduction: ReductionOp


@dataclass(frozen=True)
class ModelDecomposition:
    """How a model runs on a set of devices.

    Model parallel (:attr:`is_model_parallel`): the node at ``path`` (see :func:`node_at`) is cut
    along ``axis`` into ``cuts``, contiguous unit ranges covering ``[0, num_units)`` in order,
    cut ``i`` running on ``cuts[i].device``; everything else is held by every device. Otherwise
    ``axis`` is NONE, ``cuts`` is empty and the model is replicated (data parallel).

    ``cut_work``: each cut's work per row of the model; ``cut_seconds``: each cut's estimated
    seconds per row, when the resources are calibrated; ``data_parallel_seconds``: then also the
    estimated seconds per row of the whole model with the rows shared by every device in
    proportion to its speed. ``model_work`` and ``model_bytes``: the whole model's work per row
    and parameter bytes; ``n_data``: the rows the plan was made for.
    """

    axis: DecompAxis
    reduction: ReductionOp
    num_units: int
    cuts: tuple[ModelCut, ...]
    rationale: str
    path: str = ""
    cut_work: tuple[float, ...] = ()
    cut_seconds: tuple[float, ...] | None = None
    data_parallel_seconds: float | None = None
    model_work: float = 0.0
    model_bytes: int = 0
    n_data: int | None = None

    def __post_init__(self) -> None:
        stop = 0
        for cut in self.cuts:
            if cut.start != stop or cut.stop <= cut.start:
                raise ValueError(f"cuts must be non-empty contiguous ranges from 0, got "
                                 f"{[(c.start, c.stop) for c in self.cuts]}")
            stop = cut.stop
        if self.cuts and stop != self.num_units:
            raise ValueError(f"cuts must cover [0, {self.num_units}), they stop at {stop}")

    @property
    def is_model_parallel(self) -> bool:
        """Whether the model is cut over two or more devices."""
        return self.axis is not DecompAxis.NONE and len(self.cuts) > 1

    def describe(self) -> str:
        """A readable summary: the decision, its reason, and one line per cut.

        >>> from mixfold import GaussianDistribution
        >>> from mixfold.parallel.resources import DeviceSpec, Resources
        >>> print(decompose_model(GaussianDistribution(0, 1),
        ...                       Resources((DeviceSpec("a"), DeviceSpec("b")))).describe())
        data parallel: the model (1 work/row, 16 B) is replicated on every device
        why: nothing in the model splits -> replicate it and shard the rows
        """
        size = f"{_fmt(self.model_work)} work/row, {_fmt_bytes(self.model_bytes)}"
        per = "s/iteration" if self.n_data else "us/row"
        scale = float(self.n_data) if self.n_data else 1e6
        estimate = [] if self.data_parallel_seconds is None else [
            f"data parallel estimate: {_fmt(self.data_parallel_seconds * scale)} {per}"]
        if not self.is_model_parallel:
            return "\n".join([f"data parallel: the model ({size}) is replicated on every device",
                              f"why: {self.rationale}"] + estimate)
        where = f"'{self.path}'" if self.path else "the root"
        lines = [f"model parallel: {self.axis.value} axis of {where}, {self.num_units} units "
                 f"over {len(self.cuts)} devices, reduced by {self.reduction.value} "
                 f"(model: {size})",
                 f"why: {self.rationale}"] + estimate
        header = ["device", "kind", "units", "count", "work/row", "share"]
        if self.cut_seconds is not None:
            header.append(f"est. {per}")
        rows = [header]
        total = sum(self.cut_work) or 1.0
        for i, (cut, work) in enumerate(zip(self.cuts, self.cut_work)):
            row = [cut.device.name, cut.device.kind, f"[{cut.start}, {cut.stop})",
                   str(cut.stop - cut.start), _fmt(work), f"{100 * work / total:.1f}%"]
            if self.cut_seconds is not None:
                row.append(_fmt(self.cut_seconds[i] * scale))
            rows.append(row)
        widths = [max(len(r[j]) for r in rows) for j in range(len(header))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def decompose_model(model: Any, resources: Resources, *, n_data: int | None = None,
                    min_components_per_shard: int = 1,
                    prefer_data_parallel: bool = True) -> ModelDecomposition:
    """Decide how ``model`` runs on ``resources``: replicated (data parallel), or one axis of
    its tree cut into contiguous unit ranges, one per device.

    - Every splittable axis of the tree is a candidate (:func:`tree_axes`), ranked by the serial
      time its cut removes on these devices (:meth:`AxisCandidate.benefit`).
    - Data parallelism is preferred (``prefer_data_parallel``) when the model fits replicated
      on every device, the data (``n_data`` rows; unknown counts as large) has at least 8 rows
      per device, and the best axis has fewer than 2 units per device.
    - A cut balances work against throughput: device ``s`` gets the units whose work midpoints
      fall in its throughput-proportional share, so each cut is within one unit's work of its
      ideal share. When that overflows a device's memory (the model outside the cut node's
      units, plus the cut's units), the cut minimising the slowest device's time within memory
      is taken instead, and a less beneficial axis if none fits.
    - At most ``len(units) // min_components_per_shard`` devices are used (the fastest).

    Raises ``ValueError`` when the model fits neither replicated nor cut. The model is only read.

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> from mixfold.parallel.resources import DeviceSpec, Resources
    >>> mix = MixtureDistribution([GaussianDistribution(i, 1) for i in range(6)], [1 / 6] * 6)
    >>> fast_slow = Resources((DeviceSpec("fast", throughput=2.0), DeviceSpec("slow")))
    >>> plan = decompose_model(mix, fast_slow, prefer_data_parallel=False)
    >>> [(c.device.name, c.start, c.stop) for c in plan.cuts]
    [('fast', 0, 4), ('slow', 4, 6)]
    """
    _check_planner_options(resources, n_data, min_components_per_shard)
    decl = TreeDeclarations()
    size = _size(model, decl, "", 1.0, {})
    devices = resources.devices
    calibrated = resources.calibrated_work
    base = dict(model_work=size.subtree_work, model_bytes=size.subtree_param_bytes,
                n_data=None if n_data is None else int(n_data),
                data_parallel_seconds=None if calibrated is None else
                size.subtree_work / (calibrated * resources.total_throughput))
    short = [d for d in devices if d.memory_bytes is not None
             and size.subtree_param_bytes > d.memory_bytes]

    def replicate(why: str) -> ModelDecomposition:
        if short:
            d = short[0]
            raise ValueError(f"the model needs {size.subtree_param_bytes} bytes and {why}, but "
                             f"device {d.name} holds {d.memory_bytes} bytes")
        return ModelDecomposition(DecompAxis.NONE, ReductionOp.REPLICATE, size.num_units, (),
                                  f"{why} -> replicate it and shard the rows", **base)

    candidates = _axes(model, decl)
    if not candidates:
        return replicate("nothing in the model splits")
    if len(devices) < 2:
        return replicate("there is one device")
    speeds = sorted((d.throughput for d in devices), reverse=True)
    ranked = sorted(candidates, key=lambda c: -c.benefit(
        speeds[:max(1, c.num_units // min_components_per_shard)]))
    best = ranked[0]
    p = len(devices)
    many_rows = n_data is None or n_data >= _ROWS_PER_DEVICE * p
    if prefer_data_parallel and not short and many_rows and \
            best.num_units < _UNITS_PER_DEVICE * p:
        rows = "unknown" if n_data is None else str(n_data)
        return replicate(f"the model fits on every device, the data ({rows} rows) dominates "
                         f"and the best axis has {best.num_units} units for {p} devices")
    by_path = _by_path(size)
    for cand in ranked:
        placed = _place(cand, by_path[cand.path], size.subtree_param_bytes, devices,
                        min_components_per_shard)
        cuts = None if placed is None else _cuts(cand, *placed[:2])
        if cuts is None:
            continue
        works = [float(sum(cand.unit_works[c.start:c.stop])) for c in cuts]
        seconds = None if calibrated is None else tuple(
            w / (c.device.throughput * calibrated) for c, w in zip(cuts, works))
        why = _why_model_parallel(cand, cuts, works, size, short, prefer_data_parallel,
                                  many_rows, n_data, p, placed[2])
        return ModelDecomposition(cand.axis, cand.reduction, cand.num_units, tuple(cuts), why,
                                  cand.path, tuple(works), seconds, **base)
    return replicate("no axis cuts over two or more devices within their memory")


def _check_planner_options(resources: Resources, n_data: int | None,
                           min_components_per_shard: int) -> None:
    """One clear error for an option :func:`decompose_model` cannot take."""
    if not isinstance(resources, Resources):
        raise TypeError(f"resources must be a Resources (Resources.local(), from_json, ...), "
                        f"got a {type(resources).__name__}")
    if n_data is not None and (not isinstance(n_data, (int, np.integer)) or n_data < 0):
        raise ValueError(f"n_data must be None or an integer >= 0, got {n_data!r}")
    if not isinstance(min_components_per_shard, (int, np.integer)) or \
            min_components_per_shard < 1:
        raise ValueError(f"min_components_per_shard must be an integer >= 1, got "
                         f"{min_components_per_shard!r}")


def _cuts(cand: AxisCandidate, used: Sequence[DeviceSpec], stops: Sequence[int]
          ) -> list[ModelCut] | None:
    """The non-empty unit ranges of a placement, device by device; ``None`` when fewer than
    two devices get units (no cut)."""
    cuts, start = [], 0
    for d, stop in zip(used, stops):
        if stop > start:
            cuts.append(ModelCut(d, start, stop, cand.reduction))
            start = stop
    return cuts if len(cuts) >= 2 else None


def _why_model_parallel(cand: AxisCandidate, cuts: list[ModelCut], works: list[float],
                        size: NodeSize, short: list[DeviceSpec], prefer_data_parallel: bool,
                        many_rows: bool, n_data: int | None, p: int, fallback: bool) -> str:
    if short:
        reason = (f"the model ({size.subtree_param_bytes} B) does not fit on {short[0].name} "
                  f"({short[0].memory_bytes} B)")
    elif not prefer_data_parallel:
        reason = "model parallelism was asked for"
    elif not many_rows:
        reason = f"the data ({n_data} rows) is small for {p} devices"
    else:
        reason = (f"the {cand.axis.value} axis has {cand.num_units} units, at least "
                  f"{_UNITS_PER_DEVICE} per device")
    rest = size.subtree_work - cand.total_work
    fastest = max(c.device.throughput for c in cuts)
    serial = size.subtree_work / fastest
    parallel = rest / fastest + max(w / c.device.throughput for c, w in zip(cuts, works))
    how = "cuts fitted to memory" if fallback else "cuts balanced by work against throughput"
    where = f"'{cand.path}'" if cand.path else "the root"
    return (f"{reason}; cutting {where} removes the most serial time of any axis "
            f"({how}; an estimated {serial / parallel:.2f}x the speed of the fastest device "
            f"alone)")


def _by_path(size: NodeSize) -> dict[str, NodeSize]:
    out, stack = {}, [size]
    while stack:
        node = stack.pop()
        out.setdefault(node.path, node)
        stack.extend(node.children)
    return out


def _place(cand: AxisCandidate, node: NodeSize, model_bytes: int,
           devices: tuple[DeviceSpec, ...], min_per_cut: int
           ) -> tuple[list[DeviceSpec], list[int], bool] | None:
    """(devices used, the stop of each one's range, whether memory forced the cut) or ``None``
    when the units cannot be placed within the devices' memory. ``node``: the cut node's size;
    what is not among its units' bytes is held by every device."""
    n = cand.num_units
    k = min(len(devices), n // min_per_cut)
    if k < 2:
        return None
    fastest = sorted(range(len(devices)), key=lambda i: -devices[i].throughput)[:k]
    used = [devices[i] for i in sorted(fastest)]
    speed = np.array([d.throughput for d in used])
    works = np.asarray(cand.unit_works, dtype=np.float64)
    if works.sum() <= 0:
        works = np.ones(n)
    context = model_bytes - sum(c.subtree_param_bytes for c in node.children[:n])
    room = np.array([math.inf if d.memory_bytes is None else d.memory_bytes - context
                     for d in used], dtype=np.float64)
    unit_bytes = np.concatenate([[0.0], np.cumsum(np.asarray(cand.unit_bytes, np.float64))])
    stops = _balanced_stops(works, speed)
    starts = np.concatenate([[0], stops[:-1]])
    if np.all(unit_bytes[stops] - unit_bytes[starts] <= room):
        return used, stops.tolist(), False
    fitted = _memory_stops(works, speed, unit_bytes, room)
    return None if fitted is None else (used, fitted, True)


def _balanced_stops(works: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """Stops of contiguous ranges whose work is each within one unit of ``speed``'s shares:
    a unit goes to the device whose share its work midpoint falls in."""
    cum = np.cumsum(works)
    targets = cum[-1] * np.cumsum(speed) / speed.sum()
    stops = np.searchsorted(cum - works / 2, targets, side="right")
    stops[-1] = len(works)
    return stops


def _memory_stops(works: np.ndarray, speed: np.ndarray, unit_bytes: np.ndarray,
                  room: np.ndarray) -> list[int] | None:
    """Stops minimising the slowest device's time with every range within its ``room``
    (bisection on that time; each device in turn takes as much as the time and its room allow),
    or ``None`` if the units do not fit even with unlimited time."""
    cum = np.concatenate([[0.0], np.cumsum(works)])
    n = len(works)

    def fill(limit: float) -> list[int] | None:
        stops, start = [], 0
        for s in range(len(speed)):
            by_work = np.searchsorted(cum, cum[start] + limit * speed[s] * (1 + 1e-12),
                                      side="right") - 1
            by_bytes = np.searchsorted(unit_bytes, unit_bytes[start] + room[s],
                                       side="right") - 1
            start = max(start, int(min(by_work, by_bytes)))
            stops.append(start)
        return stops if start == n else None

    if fill(math.inf) is None:
        return None
    lo, hi = 0.0, cum[-1] / speed.min()
    for _ in range(60):
        mid = (lo + hi) / 2
        if fill(mid) is None:
            lo = mid
        else:
            hi = mid
    return fill(hi)
