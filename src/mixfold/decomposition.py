"""The decomposition contract: how one node of a model tree splits into independent units.

A node declares, through ``decomposition()``, the axis along which its E-step splits (a mixture's
components, a record's fields, a hidden Markov model's states), the child distributions that are
the units of that axis, how the units' results meet again (the reduction), which children every
worker must hold whole, and what the node itself costs (per-row work and parameter bytes). The
planner (:mod:`mixfold.parallel.model_decomposition`) sizes, costs and cuts the tree from these
declarations alone, and the model-parallel executor threads the same units, so the two can never
disagree about what is splittable.

>>> from mixfold import GaussianDistribution, MixtureDistribution
>>> m = MixtureDistribution([GaussianDistribution(-1, 1), GaussianDistribution(1, 1)], [0.5, 0.5])
>>> dc = decomposition_for(m)
>>> dc.axis.value, dc.reduction.value, dc.num_units, dc.child_roles
('component', 'logsumexp_responsibility', 2, ('component_0', 'component_1'))
>>> decomposition_for(GaussianDistribution(0, 1)).axis
<DecompAxis.NONE: 'none'>
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

__all__ = ["DecompAxis", "ReductionOp", "Decomposition", "decomposition_for",
           "register_decomposition", "TreeDeclarations", "subtree_work",
           "declared_param_bytes"]


class DecompAxis(str, Enum):
    """The axis along which a node's work splits.

    ``COMPONENT``: mixture components; ``FACTOR``: independent factors of a composite or record;
    ``STATE``: the states of a hidden Markov model; ``TOPIC``: the topics of a topic model. These
    four split into units that workers can hold apart. ``SEQUENCE``: the node's rows map to rows
    of its one unit (the items of a sequence, the present values of an optional field); the node
    is not split itself, the executor and the planner recurse into the unit. ``NONE``: atomic.
    """

    NONE = "none"
    COMPONENT = "component"
    FACTOR = "factor"
    SEQUENCE = "sequence"
    TOPIC = "topic"
    STATE = "state"


#: The axes whose units can be placed on different workers.
SPLIT_AXES = frozenset({DecompAxis.COMPONENT, DecompAxis.FACTOR, DecompAxis.TOPIC,
                        DecompAxis.STATE})


class ReductionOp(str, Enum):
    """How the results of a node's units meet again.

    ``SUM``: independent units whose log-densities add and whose statistics stay apart (factors).
    ``LOGSUMEXP_RESPONSIBILITY``: the units' per-row scores are gathered and normalised centrally
    into responsibilities (a mixture's log-sum-exp; an HMM's forward-backward recursion), which
    go back to the units as row weights. ``REPLICATE``: nothing is split here; every worker that
    needs the node holds it whole.
    """

    SUM = "sum"
    LOGSUMEXP_RESPONSIBILITY = "logsumexp_responsibility"
    REPLICATE = "replicate"


@dataclass(frozen=True)
class Decomposition:
    """What one node declares about splitting its E-step.

    - ``axis``, ``reduction``: see :class:`DecompAxis` and :class:`ReductionOp`; an unsplit node
      (``NONE`` or ``SEQUENCE``) reduces by ``REPLICATE``, a split one never does.
    - ``units``: the child distributions along the axis, in order (cut ranges index them).
    - ``shared_children``: children that are not units but that every worker holding the node
      needs whole (a sequence's length law); they are costed and sized, never split.
    - ``child_roles``: one name per unit, then one per shared child, used in paths
      (``"age/component_3"``); defaults to ``"<axis>_<i>"`` and ``"shared_<j>"``.
    - ``fused``: the node scores (and adds up) all its units in one stacked call, so no unit
      can be folded apart from the others: the node itself may be cut (each range stacked
      apart), but the planner never cuts anything below it and the executor never threads
      through it.
    - ``unit_rows``: rows each unit sees per row of this node (a sequence's expected length, an
      optional field's probability of being present; 1 when every unit sees every row).
    - ``row_work``: this node's own E-step work per row, children excluded, in the units of a
      scalar leaf (a univariate Gaussian scores and accumulates a row for 1).
    - ``param_bytes``: bytes of this node's own parameters (and their cached forms), children
      excluded; a node's own parameters are held by every worker holding any of its units.

    >>> dc = Decomposition(DecompAxis.FACTOR, ReductionOp.SUM, units=("a", "b"))
    >>> dc.child_roles, dc.is_shardable
    (('factor_0', 'factor_1'), True)
    """

    axis: DecompAxis
    reduction: ReductionOp
    units: tuple[Any, ...] = ()
    shared_children: tuple[Any, ...] = ()
    child_roles: tuple[str, ...] = ()
    fused: bool = False
    unit_rows: float = 1.0
    row_work: float = 1.0
    param_bytes: int = 0

    def __post_init__(self) -> None:
        axis, reduction = DecompAxis(self.axis), ReductionOp(self.reduction)
        units, shared = tuple(self.units), tuple(self.shared_children)
        roles = tuple(self.child_roles) or (
            tuple(f"{axis.value}_{i}" for i in range(len(units)))
            + tuple(f"shared_{j}" for j in range(len(shared))))
        object.__setattr__(self, "axis", axis)
        object.__setattr__(self, "reduction", reduction)
        object.__setattr__(self, "units", units)
        object.__setattr__(self, "shared_children", shared)
        object.__setattr__(self, "child_roles", roles)
        split = axis in SPLIT_AXES
        if axis is DecompAxis.NONE and units:
            raise ValueError(f"an atomic node has no units, got {len(units)}")
        if axis is DecompAxis.SEQUENCE and len(units) != 1:
            raise ValueError(f"a SEQUENCE node has exactly one unit, got {len(units)}")
        if split and not units:
            raise ValueError(f"a {axis.value} node needs at least one unit")
        if split == (reduction is ReductionOp.REPLICATE):
            raise ValueError(f"a {axis.value} node cannot reduce by {reduction.value}: unsplit "
                             f"nodes (none, sequence) replicate, split nodes do not")
        if len(roles) != len(units) + len(shared):
            raise ValueError(f"need one role per unit and shared child ({len(units) + len(shared)})"
                             f", got {len(roles)}")
        if not isinstance(self.fused, bool):
            raise ValueError(f"fused must be True or False, got {self.fused!r}")
        if self.fused and not split:
            raise ValueError(f"only a node split into units can be fused, not a {axis.value} "
                             f"node")
        for name in ("unit_rows", "row_work"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not (isinstance(self.param_bytes, int) and self.param_bytes >= 0):
            raise ValueError(f"param_bytes must be an integer >= 0, got {self.param_bytes!r}")

    @classmethod
    def atomic(cls, *, row_work: float = 1.0, param_bytes: int = 0,
               shared_children: tuple[Any, ...] = (),
               child_roles: tuple[str, ...] = ()) -> Decomposition:
        """An unsplittable node (a leaf): replicated whole; ``shared_children`` are still costed."""
        return cls(DecompAxis.NONE, ReductionOp.REPLICATE, shared_children=shared_children,
                   child_roles=child_roles, row_work=row_work, param_bytes=param_bytes)

    @property
    def num_units(self) -> int:
        """Units along the axis; an atomic node is one indivisible unit."""
        return max(1, len(self.units))

    @property
    def is_shardable(self) -> bool:
        """Whether the units can go to different workers (a split axis with two or more)."""
        return self.axis in SPLIT_AXES and len(self.units) >= 2

    @property
    def children(self) -> tuple[Any, ...]:
        """Every child whose cost counts: the units, then the shared children."""
        return self.units + self.shared_children


_REGISTRY: dict[type, Callable[[Any], Decomposition]] = {}

_F = TypeVar("_F", bound=Callable[[Any], Decomposition])


def register_decomposition(cls: type, fn: _F | None = None) -> Any:
    """Declare ``fn(node) -> Decomposition`` for instances of ``cls`` (and its subclasses).

    For classes one cannot edit; a class's own ``decomposition()`` method wins over the
    registry. Usable as ``register_decomposition(cls, fn)`` or as a decorator
    ``@register_decomposition(cls)``.

    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> @register_decomposition(Pair)
    ... def _pair(p):
    ...     return Decomposition(DecompAxis.FACTOR, ReductionOp.SUM, units=(p.a, p.b),
    ...                          child_roles=("a", "b"))
    >>> decomposition_for(Pair(1, 2)).child_roles
    ('a', 'b')
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_decomposition needs a class, got {cls!r}")

    def register(f: _F) -> _F:
        if not callable(f):
            raise TypeError(f"a decomposition must be a callable node -> Decomposition, got {f!r}")
        _REGISTRY[cls] = f
        return f

    return register if fn is None else register(fn)


def decomposition_for(node: Any) -> Decomposition:
    """The node's :class:`Decomposition`: its ``decomposition()`` method, else the function
    registered for its class, else for the nearest registered class in its MRO, else atomic.

    An undeclared distribution is an atomic scalar leaf (``row_work`` 1) holding the numbers of
    its ``to_dict()`` parameters as float64.
    """
    hook = getattr(node, "decomposition", None)
    if callable(hook):
        return _checked(hook(), node)
    for cls in type(node).__mro__:
        fn = _REGISTRY.get(cls)
        if fn is not None:
            return _checked(fn(node), node)
    return Decomposition.atomic(param_bytes=declared_param_bytes(node))


def _checked(dc: Any, node: Any) -> Decomposition:
    if not isinstance(dc, Decomposition):
        raise TypeError(f"the decomposition of a {type(node).__name__} must be a Decomposition, "
                        f"got {type(dc).__name__}")
    return dc


def declared_param_bytes(node: Any) -> int:
    """8 bytes per number in ``node.to_dict()``, not counting nested distributions (children)."""
    to_dict = getattr(node, "to_dict", None)
    if not callable(to_dict):
        return 0

    def count(v: Any) -> int:
        if isinstance(v, bool):
            return 0
        if isinstance(v, (int, float)):
            return 1
        if isinstance(v, dict):
            return 0 if "family" in v else sum(count(x) for x in v.values())
        if isinstance(v, (list, tuple)):
            return sum(count(x) for x in v)
        return 0

    params = {k: v for k, v in to_dict().items() if k != "family"}
    return 8 * count(params)


class TreeDeclarations:
    """Each node's :class:`Decomposition`, asked once, and its work per row, computed once.

    Keyed by ``id``: the model holds every node for as long as this object lives.
    """

    def __init__(self) -> None:
        self._dc: dict[int, Decomposition] = {}
        self._work: dict[int, float] = {}
        self._alone: dict[int, int] = {}

    def of(self, node: Any) -> Decomposition:
        dc = self._dc.get(id(node))
        if dc is None:
            dc = self._dc[id(node)] = decomposition_for(node)
        return dc

    def work(self, node: Any) -> float:
        """Work per row of ``node``: own work, units times ``unit_rows``, shared children once."""
        w = self._work.get(id(node))
        if w is None:
            dc = self.of(node)
            units = sum(self.work(u) for u in dc.units)
            shared = sum(self.work(s) for s in dc.shared_children)
            w = self._work[id(node)] = dc.row_work + dc.unit_rows * units + shared
        return w

    def alone_bytes(self, node: Any) -> int:
        """Bytes to hold ``node``'s subtree on its own; a child object listed twice counts once,
        one shared deeper down by two children counts twice (an upper bound)."""
        b = self._alone.get(id(node))
        if b is None:
            dc = self.of(node)
            distinct = {id(c): c for c in dc.children}
            b = self._alone[id(node)] = dc.param_bytes + sum(
                self.alone_bytes(c) for c in distinct.values())
        return b


def subtree_work(model: Any) -> float:
    """E-step work per row of ``model``: its own ``row_work`` plus its units' work times
    ``unit_rows`` plus its shared children's work.

    This is the figure :meth:`~mixfold.parallel.resources.Resources.calibrate` records as
    ``calibrated_work``, so measured rows per second convert to work per second.

    >>> from mixfold import DiagonalGaussianDistribution, MixtureDistribution
    >>> diag = DiagonalGaussianDistribution([0.0] * 5, [1.0] * 5)
    >>> subtree_work(MixtureDistribution([diag] * 3, [1 / 3] * 3))  # 3 (normalise) + 3 * 5
    18.0
    """
    return TreeDeclarations().work(model)
