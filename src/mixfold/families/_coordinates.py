"""A combinator's dict form and count of free parameters, read from its declared
``parameter_coordinates`` (:mod:`mixfold.families._flat`) as a leaf's are: a child is a
``"part"`` (``None`` where it is optional), children are ``"parts"``, arrays go to lists.

>>> from mixfold import CategoricalDistribution, PoissonDistribution
>>> from mixfold.families.sequence import SequenceDistribution
>>> d = SequenceDistribution(PoissonDistribution(2.0), CategoricalDistribution({1: .5, 3: .5}))
>>> d.to_dict()["item"], d.n_parameters()
({'family': 'Poisson', 'lam': 2.0}, 2)
>>> SequenceDistribution.from_dict(d.to_dict()) == d
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from mixfold.families._protocol import Distribution, _frozen_count

__all__ = ["ParametersByCoordinates"]


class ParametersByCoordinates:
    """A mixin of a distribution whose constructor takes its parameters by the names of its
    ``parameter_coordinates``: ``_params``, ``_from_params`` and ``n_parameters`` follow."""

    parameter_coordinates: ClassVar[Mapping[str, str]]

    def _params(self) -> dict[str, Any]:
        return {name: _to_json(kind, getattr(self, name))
                for name, kind in self.parameter_coordinates.items()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> Distribution:
        return cls(**{name: _from_json(kind, p.get(name) if kind == "part" else p[name])
                      for name, kind in cls.parameter_coordinates.items()})

    def n_parameters(self) -> int:
        # held all at once, a model's parameters hold every free one
        return _frozen_count(self, tuple(self.parameter_coordinates))  # type: ignore[arg-type]


def _to_json(kind: str, value: Any) -> Any:
    if kind == "part":
        return None if value is None else value.to_dict()
    if kind == "parts":
        return [c.to_dict() for c in value]
    return value.tolist() if isinstance(value, np.ndarray) else value


def _from_json(kind: str, value: Any) -> Any:
    if kind == "part":
        return None if value is None else Distribution.from_dict(value)
    if kind == "parts":
        return [Distribution.from_dict(c) for c in value]
    return value
