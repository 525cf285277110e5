"""The conjugate prior of the Gaussian families' M-step: a Normal prior on the mean and an
inverse-Wishart-like prior on the covariance, so that ``estimate()`` returns the maximum a
posteriori parameters (hmmlearn's ``means_prior`` / ``means_weight`` / ``covars_prior`` /
``covars_weight`` once its conventions are translated; :mod:`mixfold.sklearn.hmm` does that).

With weights ``w`` on the rows, ``n = sum w`` and ``xbar`` their weighted mean::

    mu  = (mean_weight * mean_prior + n * xbar) / (mean_weight + n)
    S   = sum w (x - mu)(x - mu)^T + mean_weight (mu - mean_prior)(mu - mean_prior)^T
    cov = (covariance_prior + S) / (n + covariance_weight)

(squares instead of outer products for the diagonal family). ``covariance_prior`` is the prior
scatter (a number: that times the identity; a vector: a diagonal; a matrix), ``covariance_weight``
the prior's pseudo-rows in the denominator. With every option at 0 this is the maximum
likelihood. Components that share a covariance (``covariance_keys``) pool their ``S`` and ``n``
before the division, the prior counted once (:mod:`mixfold.families._shared_covariance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mixfold.options import Rule, rule

__all__ = ["GaussianPrior", "PRIOR_RULES", "plain"]


def _numbers(v: Any) -> bool:
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return a.ndim <= 2 and a.size > 0 and bool(np.isfinite(a).all())


def _real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and bool(np.isfinite(v))


#: The options the Gaussian estimators declare for their prior.
PRIOR_RULES: dict[str, Rule] = {
    "mean_prior": rule(_numbers, "a finite number or a vector of them (the prior mean)"),
    "mean_weight": rule(lambda v: _real(v) and v >= 0, "a finite number >= 0"),
    "covariance_prior": rule(_numbers, "a finite number, vector or matrix (the prior scatter)"),
    "covariance_weight": rule(lambda v: _numbers(v) and np.ndim(v) <= 1,
                              "a finite number (the prior's rows in the denominator; the "
                              "diagonal family: or one per coordinate)"),
}


def plain(value: Any) -> Any:
    """An option given as a number or an array, held as a float or nested lists (what a spec
    writes and compares)."""
    return np.asarray(value, dtype=np.float64).tolist()


def _zero(option: Any) -> bool:
    """Whether a prior option is 0 everywhere (a plain number without NumPy's call: the M-step
    asks each iteration)."""
    if type(option) in (int, float):
        return option == 0
    return not np.any(option)


@dataclass(frozen=True)
class GaussianPrior:
    """The four prior options of a Gaussian estimator (``is_flat``: all at 0, maximum
    likelihood).

    >>> p = GaussianPrior(mean_prior=0.0, mean_weight=1.0, covariance_prior=2.0,
    ...                   covariance_weight=1.0)
    >>> mu = p.mean(3.0, np.array([2.0]))            # (1 * 0 + 3 * 2) / (1 + 3)
    >>> s = p.scatter(3.0, np.array([2.0]), np.array([1.0]), mu)
    >>> mu.tolist(), p.covariance(s, 3.0).tolist()   # (2 + 3 * 1 + 3 * 0.5^2 + 1.5^2) / 4
    ([1.5], [2.0])
    """

    mean_prior: Any = 0.0
    mean_weight: float = 0.0
    covariance_prior: Any = 0.0
    covariance_weight: Any = 0.0

    @property
    def is_flat(self) -> bool:
        return (self.mean_weight == 0 and _zero(self.covariance_weight)
                and _zero(self.covariance_prior))

    def mean(self, n: float, xbar: np.ndarray) -> np.ndarray:
        """The posterior mode of the mean from the rows' weight ``n`` and mean ``xbar``."""
        if self.mean_weight == 0:
            return xbar
        prior = np.broadcast_to(np.asarray(self.mean_prior, dtype=np.float64), xbar.shape)
        return (self.mean_weight * prior + n * xbar) / (self.mean_weight + n)

    def scatter(self, n: float, xbar: np.ndarray, second: np.ndarray,
                mu: np.ndarray) -> np.ndarray:
        """``S`` about ``mu`` from the central second moment ``second`` of the rows ((D,) or
        (D, D)) and the mean prior's term."""
        shift = xbar - mu
        away = mu - np.broadcast_to(np.asarray(self.mean_prior, dtype=np.float64), mu.shape)
        if second.ndim == 2:
            return n * second + n * np.outer(shift, shift) \
                + self.mean_weight * np.outer(away, away)
        return n * second + n * shift * shift + self.mean_weight * away * away

    def prior_scatter(self, like: np.ndarray) -> np.ndarray:
        """``covariance_prior`` in the shape of ``like`` (a number on the diagonal)."""
        prior = np.asarray(self.covariance_prior, dtype=np.float64)
        if like.ndim == 2 and prior.ndim == 0:
            return prior * np.eye(like.shape[0])
        if like.ndim == 2 and prior.ndim == 1:
            return np.diag(prior)
        if prior.shape not in ((), like.shape):
            raise ValueError(f"covariance_prior must be a number or have shape {like.shape}, "
                             f"got {prior.shape}")
        return np.broadcast_to(prior, like.shape)

    def pooled(self, scatter: np.ndarray, n: float, empty: np.ndarray) -> np.ndarray:
        """:meth:`covariance` of a group's pooled ``scatter`` (weight ``n``); without a prior
        the plain ``scatter / n``, and ``empty`` (the standard normal's) when nothing weighs."""
        if not self.is_flat:
            return self.covariance(scatter, n)
        return scatter / n if n > 0 else empty

    def covariance(self, scatter: np.ndarray, n: float) -> np.ndarray:
        """``(covariance_prior + scatter) / (n + covariance_weight)``: the posterior mode of
        the covariance (or variances) of rows of total weight ``n``."""
        denominator = n + np.asarray(self.covariance_weight, dtype=np.float64)
        if not (denominator > 0).all():
            raise ValueError(f"the covariance's denominator n + covariance_weight = "
                             f"{np.min(denominator):.6g} is not positive: raise "
                             f"covariance_weight")
        return (self.prior_scatter(scatter) + scatter) / denominator
