"""A model's parameters as one flat vector of coordinates, and back.

Accelerated EM (:mod:`mixfold.acceleration`) extrapolates in this vector. Each family declares,
in :attr:`~mixfold.families.Distribution.parameter_coordinates`, how every entry of its
``to_dict`` maps to coordinates:

================ ==========================================================================
``"real"``       as it is (means, locations)
``"positive"``   as it is (variances, scales, rates, shapes); below zero maps to no model
``"covariance"`` its lower triangle, diagonal included, as it is; a matrix that is not
                 positive definite maps to no model
``"unit"``       as it is (a probability of one event); outside [0, 1] maps to no model
``"simplex"``    as they are (probability vectors along the last axis); a point with a
                 negative entry maps to no model, others are renormalised
``"fixed"``      not a coordinate: kept from the model (levels, trial counts, flags)
``"part"``       a child distribution (or None)
``"parts"``      child distributions: a list, or names to distributions
================ ==========================================================================

Every parameter stays as the M-step writes it, a weighted mean of the rows' statistics (the
extrapolation backs off when it leaves the parameter space): EM's map is closer to linear in
these coordinates than in logs, log-ratios or Cholesky factors, where a weight on its way down
extrapolates to zero in one step (its component lost for good) and a variance's curved path
leaves SQUAREM's steps short (``benchmarks/README.md``, SQUAREM: P1, P2 and P4 in fewer folds).

>>> from mixfold import GaussianDistribution, MixtureDistribution
>>> m = MixtureDistribution([GaussianDistribution(0.0, 1.0), GaussianDistribution(5.0, 4.0)],
...                         [0.25, 0.75])
>>> v = to_flat(m)
>>> v.round(4).tolist()
[0.25, 0.75, 0.0, 1.0, 5.0, 4.0]
>>> back = from_flat(m, v)
>>> round(back.components[1].sigma2, 12), back.weights.round(12).tolist()
(4.0, [0.25, 0.75])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._protocol import Distribution, family_class

__all__ = ["COORDINATES", "to_flat", "from_flat", "undeclared_families"]

#: The coordinate kinds a family may declare for a parameter.
COORDINATES = ("real", "positive", "unit", "simplex", "covariance", "fixed", "part", "parts")


def undeclared_families(model: Distribution) -> list[str]:
    """The families in ``model``'s tree that do not declare ``parameter_coordinates`` (or
    declare them for other parameters than their ``to_dict`` holds), in tree order."""
    out: list[str] = []
    _visit_undeclared(model.to_dict(), out)
    return list(dict.fromkeys(out))


def _visit_undeclared(d: dict[str, Any], out: list[str]) -> None:
    declared = family_class(d["family"]).parameter_coordinates
    params = {k: v for k, v in d.items() if k != "family"}
    if declared is None or not set(params) <= set(declared):
        out.append(d["family"])
        return
    for name, value in params.items():
        for child in _children(declared[name], value):
            _visit_undeclared(child, out)


def _children(kind: str, value: Any) -> list[dict[str, Any]]:
    if kind == "part":
        return [] if value is None else [value]
    if kind == "parts":
        return list(value.values()) if isinstance(value, dict) else list(value)
    return []


def to_flat(model: Distribution) -> np.ndarray:
    """Every free parameter of ``model``'s tree as one float64 vector of coordinates, in
    ``to_dict`` order (the layout depends only on the tree's structure)."""
    parts: list[np.ndarray] = []
    _encode(model.to_dict(), parts, _TO)
    return np.concatenate(parts) if parts else np.zeros(0)


def _encode(d: dict[str, Any], out: list[np.ndarray],
            maps: dict[str, Callable[[np.ndarray], np.ndarray]]) -> None:
    declared = _declared(d)
    for name, value in d.items():
        if name == "family":
            continue
        kind = declared[name]
        if kind in ("part", "parts"):
            for child in _children(kind, value):
                _encode(child, out, maps)
        elif kind != "fixed" and value is not None:
            out.append(maps[kind](np.asarray(value, dtype=np.float64)).ravel())


def from_flat(template: Distribution, vector: np.ndarray) -> Distribution:
    """The distribution of ``template``'s structure whose coordinates are ``vector`` (made by
    :func:`to_flat` of a model of that structure). Raises what the family's constructor
    raises for parameters it refuses (:class:`~mixfold.errors.ParameterError`)."""
    position = [0]
    with np.errstate(over="ignore", under="ignore"):
        rebuilt = _decode(template.to_dict(), np.asarray(vector, dtype=np.float64), position)
    if position[0] != len(vector):
        raise ValueError(f"a flat vector of {len(vector)} coordinates for a model of "
                         f"{position[0]}")
    return Distribution.from_dict(rebuilt)


def _decode(d: dict[str, Any], vector: np.ndarray, position: list[int]) -> dict[str, Any]:
    declared = _declared(d)
    out: dict[str, Any] = {"family": d["family"]}
    for name, value in d.items():
        if name == "family":
            continue
        kind = declared[name]
        if kind == "part":
            out[name] = None if value is None else _decode(value, vector, position)
        elif kind == "parts" and isinstance(value, dict):
            out[name] = {k: _decode(v, vector, position) for k, v in value.items()}
        elif kind == "parts":
            out[name] = [_decode(v, vector, position) for v in value]
        elif kind == "fixed" or value is None:
            out[name] = value
        else:
            out[name] = _decode_array(kind, np.asarray(value, dtype=np.float64), vector,
                                      position)
    return out


def _decode_array(kind: str, like: np.ndarray, vector: np.ndarray,
                  position: list[int]) -> Any:
    size = like.shape[0] * (like.shape[0] + 1) // 2 if kind == "covariance" else like.size
    coords = vector[position[0]:position[0] + size]
    position[0] += size
    values = _FROM[kind](coords, like.shape)
    return values.tolist() if like.ndim else float(values)


def _declared(d: dict[str, Any]) -> dict[str, str]:
    declared = family_class(d["family"]).parameter_coordinates
    if declared is None:
        raise ValueError(f"family {d['family']!r} does not declare parameter_coordinates")
    missing = [k for k in d if k != "family" and k not in declared]
    if missing:
        raise ValueError(f"family {d['family']!r} declares no coordinate for {missing[0]!r}")
    return dict(declared)


# --- the maps, one pair per kind (arrays of the parameter's shape <-> flat coordinates) ---

def _nonnegative(v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if not (v >= 0).all():  # a zero (a degenerate scale) stays as the model had it
        raise ParameterError("an extrapolated positive parameter fell below zero")
    return v.reshape(shape)


def _probability(v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if not ((v >= 0) & (v <= 1)).all():
        raise ParameterError("an extrapolated probability left [0, 1]")
    return v.reshape(shape)


def _probabilities(v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    p = v.reshape(shape)
    if not (p >= 0).all():
        raise ParameterError("an extrapolated probability vector left the simplex")
    return p / p.sum(axis=-1, keepdims=True)


def _lower_triangle(cov: np.ndarray) -> np.ndarray:
    return cov[np.tril_indices(cov.shape[0])]


def _covariance(v: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    low = np.zeros(shape)
    low[np.tril_indices(shape[0])] = v
    cov = low + np.tril(low, -1).T
    if np.linalg.eigvalsh(cov)[0] <= 0:
        raise ParameterError("an extrapolated covariance is not positive definite")
    return cov


_TO: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "real": lambda x: x.ravel(), "positive": lambda x: x.ravel(),
    "unit": lambda x: x.ravel(), "simplex": lambda x: x.ravel(),
    "covariance": _lower_triangle,
}
_FROM: dict[str, Callable[[np.ndarray, tuple[int, ...]], np.ndarray]] = {
    "real": lambda v, shape: v.reshape(shape),
    "positive": _nonnegative,
    "unit": _probability, "simplex": _probabilities, "covariance": _covariance,
}
