"""What a leaf whose shape is fixed by its encoder derives (a vocabulary: Categorical,
Multinomial; a length: Dirichlet), and the pieces a leaf of array statistics shares, written
to move into :mod:`mixfold.families.contract` as they are.

A shaped leaf declares ``encoder_class`` and ``carried`` (the options its encoder fixes and
its estimator takes back: ``("levels",)``, ``("dim",)``; the first sizes the encoder and the
statistics). It then derives its encoder, its estimator of the same shape, the dict form
(levels saved as JSON levels, arrays as lists, an ``optional_params`` entry left out at its
default), ``n_parameters`` (a simplex counts one less than its size) and, on the estimator
side, ``encoder``, ``bind`` (the fitted encoder's shape), the accumulator of that shape and the
M-step's named ``Statistics``.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from mixfold.capabilities import StackedScoring, StackedUpdate
from mixfold.families._levels import level_from_json, level_to_json
from mixfold.families._protocol import Distribution, Encoded, Encoder
from mixfold.families.contract import LeafAccumulator, LeafDistribution, LeafEstimator

__all__ = ["ShapedLeafDistribution", "ShapedLeafEstimator", "LevelSums",
           "ColumnwiseUpdate", "StacksOneShape", "transposed_features"]


class ShapedLeafDistribution(LeafDistribution):
    """A leaf whose encoder carries its shape (the module's docstring says what it derives)."""

    #: The encoder class; made with the first of ``carried``.
    encoder_class: ClassVar[type[Encoder]]
    #: The options its estimator takes from it (a refit keeps them).
    carried: ClassVar[tuple[str, ...]]
    #: Parameters model files may leave out (``to_dict`` does at the constructor's default).
    optional_params: ClassVar[tuple[str, ...]] = ()

    def encoder(self) -> Encoder:
        return self.encoder_class(getattr(self, self.carried[0]))

    def estimator(self, **options: Any) -> LeafEstimator:
        for name in self.carried:
            options.setdefault(name, getattr(self, name))
        return self.estimator_class(**options)

    def n_parameters(self) -> int:
        sizes = {"fixed": 0, "simplex": -1}
        return sum(0 if kind == "fixed" else np.size(getattr(self, name)) + sizes.get(kind, 0)
                   for name, kind in self.parameter_coordinates.items())

    def _params(self) -> dict[str, Any]:
        params = {}
        for name in self.parameter_coordinates:
            v = getattr(self, name)
            if name in self.optional_params and v == _default(type(self), name):
                continue
            params[name] = [level_to_json(x) for x in v] if name == "levels" else \
                v.tolist() if isinstance(v, np.ndarray) else v
        return params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> Distribution:
        return cls(**{name: [level_from_json(x) for x in p[name]] if name == "levels" else p[name]
                      for name in cls.parameter_coordinates
                      if name in p or name not in cls.optional_params})


def _default(cls: type, name: str) -> Any:
    """The default of the constructor's parameter ``name``."""
    return inspect.signature(cls).parameters[name].default


class LevelSums(LeafAccumulator):
    """Statistics held as one float64 array per field of the family's ``Statistics`` (in its
    order; so is the payload): ``weight`` the weights' sum (one number), every other field one
    number per level or part. ``value().own`` is then ``Statistics(*own)``."""

    family: ClassVar[type[LeafDistribution]]

    def __init__(self, size: int, keys: str | None = None):
        super().__init__(keys)
        for name in self.family.Statistics._fields:
            setattr(self, name, np.zeros(1 if name == "weight" else size))

    def own_arrays(self) -> list[np.ndarray]:
        return [getattr(self, name) for name in self.family.Statistics._fields]


class ColumnwiseUpdate(StackedUpdate):
    """K components' statistics added column by column through ``_add`` (so any range of
    components added apart gets the same bits)."""

    @staticmethod
    def stack_update(accs: Sequence[LeafAccumulator], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights."""
        for k, acc in enumerate(accs):
            acc._add(enc.values, resp[:, k])


class StacksOneShape(StackedScoring):
    """Components are scored together only when they have one shape (the first of
    ``carried``)."""

    @classmethod
    def can_stack(cls, components: Sequence[Any]) -> bool:
        return len({getattr(c, cls.carried[0]) for c in components}) == 1


class ShapedLeafEstimator(LeafEstimator):
    """The estimator of a :class:`ShapedLeafDistribution`: its shape from the fitted encoder."""

    def _shape(self) -> Any:
        return getattr(self, self.distribution_class.carried[0])

    def encoder(self) -> Encoder:
        return self.distribution_class.encoder_class(self._shape())

    def bind(self, encoder: Encoder) -> LeafEstimator:
        name, cls = self.distribution_class.carried[0], self.distribution_class.encoder_class
        if not isinstance(encoder, cls) or getattr(encoder, name) is None:
            raise ValueError(f"{type(self).__name__} needs a fitted {cls.__name__}, got "
                             f"{encoder!r}")
        bound = copy.copy(self)
        setattr(bound, name, getattr(encoder, name))
        return bound

    def _new_accumulator(self) -> LeafAccumulator:
        shape, name = self._shape(), self.distribution_class.carried[0]
        if shape is None:
            raise ValueError(f"{type(self).__name__} has no {name}: give {name}= or let optimize "
                             f"learn {'them' if name == 'levels' else 'it'} when it encodes the "
                             f"data")
        return self.accumulator_class(shape if isinstance(shape, int) else len(shape), self.keys)

    def estimate(self, nobs: float, stats: Any) -> Distribution:
        own, _ = stats
        return self.from_statistics(self.distribution_class.Statistics(*own))


def transposed_features(phi: np.ndarray, out: np.ndarray) -> None:
    """``out[i, :, j] = phi[i * w + j]`` for ``out`` of shape (s, F, w) (the fused E-step's
    layout of per-row features ``phi`` of shape (s * w, F))."""
    s, f, w = out.shape
    np.copyto(out, phi.reshape(s, w, f).transpose(0, 2, 1), casting="same_kind")
