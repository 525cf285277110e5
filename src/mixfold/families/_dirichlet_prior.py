"""The Dirichlet prior of the probability vectors the M-step estimates (mixture weights, a
hidden Markov model's initial and transition probabilities, categorical and multinomial
probabilities): the maximum a posteriori of expected counts ``c`` under a Dirichlet of
concentration ``alpha`` is ``max(c + alpha - 1, 0)`` normalised (a concentration below 1 may
set a probability to 0: the mode then lies on the simplex's face), hmmlearn's convention."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.options import Rule, rule

__all__ = ["dirichlet_mode", "CONCENTRATION"]


def _concentration(v: Any) -> bool:
    if v is None:
        return True
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return a.ndim <= 2 and a.size > 0 and bool(np.isfinite(a).all() and (a >= 0).all())


#: A Dirichlet concentration option: None (the estimator's pseudo-count decides), or numbers >= 0.
CONCENTRATION: Rule = rule(_concentration, "None or a number >= 0 (or an array of them)")


def dirichlet_mode(counts: np.ndarray, concentration: Any, pseudo_count: float) -> np.ndarray:
    """The unnormalised mode ``max(counts + concentration - 1, 0)`` (``concentration`` None:
    ``counts + pseudo_count``), broadcast along the last axis of ``counts``.

    >>> dirichlet_mode(np.array([3.0, 0.0, 1.0]), [2.0, 0.5, 1.0], 0.0).tolist()
    [4.0, 0.0, 1.0]
    >>> dirichlet_mode(np.array([3.0, 0.0]), None, 1.0).tolist()
    [4.0, 1.0]
    """
    if concentration is None:
        return counts + pseudo_count
    alpha = np.asarray(concentration, dtype=np.float64)
    try:
        alpha = np.broadcast_to(alpha, counts.shape)
    except ValueError:
        raise ValueError(f"a Dirichlet concentration of shape {alpha.shape} does not fit "
                         f"counts of shape {counts.shape}") from None
    return np.maximum(counts + alpha - 1.0, 0.0)
