"""Frozen parameters: any parameter of any node held at its value in the fit's ``init`` while
every other parameter is estimated.

Every estimator takes ``frozen=`` (names of its own parameters, as its distribution's
``to_dict`` spells them). After each M-step the fit puts the held values back, node by node
down the tree (:func:`hold_frozen`), through the family's
:meth:`~mixfold.families.Distribution.hold_parameters`: where no other parameter's M-step reads
a held one that is the estimate of the others given it (a mixture's weights, a hidden Markov
model's transitions, a categorical's probabilities); a Gaussian family's variance is re-centred
on a held mean; a family whose parameters are solved together (``estimated_jointly``) holds
all of them or none.

>>> import numpy as np, mixfold
>>> x = np.random.default_rng(0).normal(2.0, 3.0, size=1000)
>>> est = mixfold.GaussianEstimator(frozen=["mu"])
>>> m = mixfold.optimize(x, est, init=mixfold.GaussianDistribution(0.0, 1.0), progress=False)
>>> m.mu, bool(abs(m.sigma2 - np.mean(x ** 2)) < 1e-5)  # the variance about the held mean
(0.0, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._protocol import Distribution, Estimator, family_class

__all__ = ["frozen_anywhere", "check_frozen", "hold_frozen", "recentred_spread"]


def frozen_anywhere(estimator: Estimator) -> bool:
    """Whether ``estimator`` or any estimator below it holds a parameter."""
    return bool(estimator.frozen) or any(frozen_anywhere(p) for p in estimator.parts())


def check_frozen(estimator: Estimator, start: Distribution) -> None:
    """Refuse, naming the estimator, a frozen name ``start``'s node does not have, or a
    family's jointly estimated parameters held in part."""
    _check(estimator, start.to_dict())


def _check(estimator: Estimator, d: dict[str, Any]) -> None:
    owner = type(estimator).__name__
    params = [k for k in d if k != "family"]
    missing = [n for n in estimator.frozen if n not in params]
    if missing:
        raise ParameterError(f"{owner}: frozen names {missing[0]!r}, not a parameter of the "
                             f"{d['family']} node of init (its parameters: {', '.join(params)})")
    joint = family_class(d["family"]).estimated_jointly
    held = [n for n in estimator.frozen if n in joint]
    if held and len(held) < len(joint):
        raise ParameterError(f"{owner}: frozen={list(estimator.frozen)} holds {held[0]!r} "
                             f"but {d['family']} estimates {', '.join(joint)} together: hold "
                             f"all of them or none")
    children = _child_dicts(d)
    if len(children) != len(estimator.parts()):
        raise ParameterError(f"{owner}: init's {d['family']} node has {len(children)} parts, "
                             f"the estimator {len(estimator.parts())}")
    for part, child in zip(estimator.parts(), children):
        _check(part, child)


def hold_frozen(estimator: Estimator, model: Distribution, start: Distribution) -> Distribution:
    """``model`` (an M-step's output) with every frozen parameter of ``estimator``'s tree put
    back to its value in ``start``."""
    if not frozen_anywhere(estimator):
        return model
    return Distribution.from_dict(_held(estimator, model.to_dict(), start.to_dict()))


def _held(estimator: Estimator, d: dict[str, Any], start: dict[str, Any]) -> dict[str, Any]:
    out = dict(d)
    slots = _child_slots(d)
    for part, (name, key), held_child in zip(estimator.parts(), slots, _child_dicts(start)):
        child = _held(part, d[name] if key is None else d[name][key], held_child)
        if key is None:
            out[name] = child
        else:
            out[name] = (dict(out[name]) if isinstance(out[name], dict) else list(out[name]))
            out[name][key] = child
    if estimator.frozen:
        out = family_class(d["family"]).hold_parameters(
            out, {n: start[n] for n in estimator.frozen})
    return out


def _child_slots(d: dict[str, Any]) -> list[tuple[str, Any]]:
    """Where each child distribution sits in ``d``: (parameter, None | index | field name)."""
    kinds = family_class(d["family"]).parameter_coordinates or {}
    slots: list[tuple[str, Any]] = []
    for name, value in d.items():
        kind = kinds.get(name)
        if kind == "part" and value is not None:
            slots.append((name, None))
        elif kind == "parts":
            slots.extend((name, k) for k in (value if isinstance(value, dict)
                                             else range(len(value))))
    return slots


def _child_dicts(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [d[name] if key is None else d[name][key] for name, key in _child_slots(d)]


def recentred_spread(estimated: dict[str, Any], held: dict[str, Any], mean: str,
                     spread: str) -> dict[str, Any]:
    """A Gaussian family's parameters with ``held`` ones fixed: a held mean ``m0`` re-centres
    the estimated (co)variance on it, ``E[(x - m0)(x - m0)']`` being the variance about the
    estimated mean ``m`` plus ``(m - m0)(m - m0)'``.

    >>> recentred_spread({"mu": 1.0, "sigma2": 2.0}, {"mu": 4.0}, "mu", "sigma2")
    {'mu': 4.0, 'sigma2': 11.0}
    """
    out = {**estimated, **held}
    if mean in held and spread not in held:
        shift = np.asarray(estimated[mean], dtype=np.float64) - np.asarray(held[mean],
                                                                         dtype=np.float64)
        s = np.asarray(estimated[spread], dtype=np.float64)
        s = s + (np.outer(shift, shift) if s.ndim == 2 else shift ** 2)
        out[spread] = s.tolist() if s.ndim else float(s)
    return out
