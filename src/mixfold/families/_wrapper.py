"""A wrapper: a node over one child family that changes how the child's rows are seen -- a value
that may be missing (:mod:`~mixfold.families.optional`), extra zeros
(:mod:`~mixfold.families.zero_inflated`), censored or truncated values
(:mod:`~mixfold.families.censored`).

What the three write alike is written here once. The distribution and the estimator hold the
child under one name (``child_name``: ``"inner"``, ``"base"``), their one part. The distribution
declares its parameters in ``parameter_coordinates`` (the child ``"part"``, a probability
``"unit"``, a setting ``"fixed"``), and its dict form, parameter count and refit estimator follow.
The estimator names its distribution (``model_class``) and accumulator (``accumulator_class``).
A wrapper that switches between an outcome of its own and the child's draw (a missing value, a
structural zero) counts the two in a :class:`WrapperCounts` record and estimates the
probability of its own outcome from it (:func:`smoothed_share`).

>>> from mixfold import GaussianDistribution, OptionalDistribution
>>> d = OptionalDistribution(GaussianDistribution(0.0, 1.0), 0.25)
>>> d.parts(), d.n_parameters(), d.to_dict()["p_missing"]
((GaussianDistribution(mu=0.0, sigma2=1.0),), 3, 0.25)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import numpy as np

from mixfold.families._protocol import Accumulator, AccumulatorFactory, Distribution, Estimator

__all__ = ["WrapperDistribution", "WrapperAccumulator", "WrapperEstimator", "WrapperCounts",
           "smoothed_share"]


class WrapperCounts(NamedTuple):
    """A switching wrapper's own statistics: the weighted rows its own outcome took (missing
    values, structural zeros) and those the child drew."""

    own: float
    child: float


def smoothed_share(own: float, child: float, pseudo_count: float) -> float:
    """The probability of the wrapper's own outcome, ``(own + pseudo_count) / (own + child + 2
    pseudo_count)`` (a symmetric Beta prior); 0.5 where no row carries weight.

    >>> smoothed_share(1.0, 3.0, 0.0), smoothed_share(0.0, 0.0, 0.0)
    (0.25, 0.5)
    """
    total = own + child + 2.0 * pseudo_count
    return (own + pseudo_count) / total if total > 0 else 0.5


class _OneChild:
    """What a wrapper's distribution and estimator share: the one child, held as
    ``child_name``."""

    #: the attribute (and, in the distribution, the parameter) that holds the child
    child_name: ClassVar[str] = "inner"

    def parts(self) -> tuple[Any, ...]:
        return (getattr(self, self.child_name),)


class WrapperDistribution(_OneChild, Distribution):
    """A wrapper's distribution: its dict form, parameter count and refit estimator read from
    ``parameter_coordinates`` (in its constructor's order, each a keyword of it)."""

    #: A setting's JSON form both ways (name -> (to_json, from_json)); a setting not named is
    #: written as it is.
    json_forms: ClassVar[Mapping[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]]] = {}
    #: Settings model files may leave out (``to_dict`` does), each with its default's JSON.
    optional_params: ClassVar[Mapping[str, Any]] = {}

    def n_parameters(self) -> int:
        own = sum(kind not in ("part", "fixed") for kind in self.parameter_coordinates.values())
        return own + self.parts()[0].n_parameters()

    def estimator(self, **options: Any) -> Estimator:
        """The refit's estimator: the child's, with this node's settings unless given."""
        for name, kind in self.parameter_coordinates.items():
            if kind == "fixed":
                options.setdefault(name, getattr(self, name))
        return self.estimator_class(self.parts()[0].estimator(), **options)

    def _params(self) -> dict[str, Any]:
        params = {}
        for name, kind in self.parameter_coordinates.items():
            value = getattr(self, name)
            if kind == "part":
                value = value.to_dict()
            elif name in self.json_forms:
                value = self.json_forms[name][0](value)
            if name not in self.optional_params or value != self.optional_params[name]:
                params[name] = value
        return params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> Distribution:
        args = {}
        for name, kind in cls.parameter_coordinates.items():
            if name in p or name not in cls.optional_params:
                value = p[name]
                if kind == "part":
                    value = Distribution.from_dict(value)
                elif name in cls.json_forms:
                    value = cls.json_forms[name][1](value)
                args[name] = value
        return cls(**args)


class WrapperAccumulator(Accumulator):
    """The child's accumulator (``child``) and, for a switching wrapper (``counted``), the
    node's own :class:`WrapperCounts` in one float64 array ``counts``."""

    #: whether the node counts its own outcome against the child's draws
    counted: ClassVar[bool] = True

    def __init__(self, child: Accumulator, keys: str | None = None):
        self.child = child
        self.keys = keys
        if self.counted:
            self.counts = np.zeros(len(WrapperCounts._fields))

    def own_arrays(self) -> list[np.ndarray]:
        return [self.counts] if self.counted else []

    def children(self) -> tuple[Accumulator, ...]:
        return (self.child,)


class WrapperEstimator(_OneChild, Estimator):
    """A wrapper's estimator: the declared ``model_class`` takes it as its estimator; the
    accumulator is ``accumulator_class`` over the child's; a switching wrapper's M-step is the
    child's M-step on the rows it drew and the smoothed share of the node's own outcome (with
    ``pseudo_count``)."""

    #: the distribution this estimator makes (not ``distribution_class``, which names a leaf)
    model_class: ClassVar[type[WrapperDistribution]]
    accumulator_class: ClassVar[type[WrapperAccumulator]]
    pseudo_count: float

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "model_class" in cls.__dict__:
            cls.model_class.estimator_class = cls

    def accumulator_factory(self) -> AccumulatorFactory:
        child, make, keys = self.parts()[0].accumulator_factory(), self.accumulator_class, self.keys
        return AccumulatorFactory(lambda: make(child.make(), keys))

    def estimate(self, nobs: float, stats: Any) -> Distribution:
        own, (child_stats,) = stats
        counts = WrapperCounts(*(float(c) for c in own[0]))
        child = self.parts()[0].estimate(counts.child, child_stats)
        settings = {name: getattr(self, name) for name, kind
                    in self.model_class.parameter_coordinates.items() if kind == "fixed"}
        return self.model_class(child, smoothed_share(*counts, self.pseudo_count), **settings)
