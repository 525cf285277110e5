"""The law of a univariate continuous family on an interval: what censored and truncated values
need (:mod:`mixfold.families.censored`).

A family that inherits :class:`IntervalLaw` names its scipy law; from it follow the log of the
mass of any interval, computed on the side of the median where it does not cancel, and the
*representative points* of the law restricted to an interval: points with probabilities whose
weighted sums are the expected sufficient statistics of the family given that the value lies
in the interval. A family whose truncated moments have a closed form (Gaussian, LogGaussian,
Exponential) gives the few points that reproduce them exactly; the others get tanh-sinh
quadrature in probability space (:func:`quadrature_points`), whose nodes crowd towards the ends
of the interval, where a quantile function has its singularities.

>>> from mixfold import GaussianDistribution
>>> d = GaussianDistribution(0.0, 1.0)
>>> round(float(np.exp(d.log_mass(np.array([0.0]), np.array([np.inf]))[0])), 12)
0.5
>>> points, probs = quadrature_points(d, np.array([0.0]), np.array([np.inf]))
>>> round(float(probs[0] @ points[0]), 12)  # E[X | X > 0] = sqrt(2 / pi)
0.797884560803
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

__all__ = ["IntervalLaw", "quadrature_points", "log_interval_mass", "scipy_stats",
           "truncated_normal_moments", "QUADRATURE_STEP", "QUADRATURE_REACH"]

#: The tanh-sinh grid: nodes ``t = k h`` for ``|t| <= QUADRATURE_REACH`` (the last node within
#: 1e-15 of the interval's end in probability); ``h = 1/8`` gives ~1e-13 on a quantile's log
#: singularity at an unbounded end.
QUADRATURE_STEP = 0.125
QUADRATURE_REACH = 3.25


def scipy_stats() -> Any:
    """``scipy.stats``, imported on first use (it costs a quarter second at import)."""
    return importlib.import_module("scipy.stats")


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """``log(1 - exp(x))`` for ``x <= 0`` without cancellation."""
    with np.errstate(divide="ignore"):
        return np.where(x > -np.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_interval_mass(law: Any, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``log P(low < X < high)`` under a frozen scipy ``law``, on the side of the median where
    the difference of the two probabilities does not cancel."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lc_low, lc_high = law.logcdf(low), law.logcdf(high)
        ls_low, ls_high = law.logsf(low), law.logsf(high)
        lower = lc_high + _log1mexp(lc_low - lc_high)  # F(high) - F(low), both below 1/2
        upper = ls_low + _log1mexp(ls_high - ls_low)  # S(low) - S(high), both below 1/2
        middle = np.log1p(-(np.exp(lc_low) + np.exp(ls_high)))  # 1 - F(low) - S(high)
        half = np.log(0.5)
        return np.where(lc_high <= half, lower, np.where(ls_low <= half, upper, middle))


def _tanh_sinh_grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nodes ``s`` in (0, 1), their complements ``1 - s`` (each exact) and weights summing to 1."""
    t = np.arange(-QUADRATURE_REACH, QUADRATURE_REACH + QUADRATURE_STEP / 2, QUADRATURE_STEP)
    e = np.pi * np.sinh(t)
    s, rest = 1.0 / (1.0 + np.exp(-e)), 1.0 / (1.0 + np.exp(e))
    weights = np.cosh(t) * s * rest
    return s, rest, weights / weights.sum()


_GRID = _tanh_sinh_grid()


def quadrature_points(dist: IntervalLaw, low: np.ndarray, high: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Points (n, m) and probabilities (n, m) of ``dist`` restricted to each interval
    ``(low, high)``: ``E[g(X) | low < X < high] ~ sum_j probs_j g(points_j)``, tanh-sinh in
    probability, each node's quantile taken from the nearer tail (``ppf`` below the median,
    ``isf`` above) so that no probability near 1 loses its digits."""
    law = dist.scipy_law()
    s, rest, weights = _GRID
    mass = np.exp(log_interval_mass(law, low, high))[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        below = law.cdf(low)[:, None] + mass * s  # the node's probability from below
        above = law.sf(high)[:, None] + mass * rest  # and from above
        points = np.where(below <= 0.5, law.ppf(below), law.isf(above))
    # rounding at the very ends: strictly inside, so a log of a point at a support's 0 is finite
    points = np.clip(points, np.nextafter(low, np.inf)[:, None], high[:, None])
    return points, np.broadcast_to(weights, points.shape)


def truncated_normal_moments(alpha: np.ndarray, beta: np.ndarray
                             ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of a standard normal given ``alpha < Z < beta``, in closed form: an
    interval above the median is reflected below it, where the ratios ``phi / mass`` are
    taken in logs (no underflow of either far out in a tail)."""
    stats = scipy_stats()
    flip = alpha > -beta  # more of the interval above 0 than below: reflect
    a, b = np.where(flip, -beta, alpha), np.where(flip, -alpha, beta)
    log_mass = log_interval_mass(stats.norm, a, b)
    with np.errstate(over="ignore", invalid="ignore"):
        ra = np.exp(stats.norm.logpdf(a) - log_mass)
        rb = np.exp(stats.norm.logpdf(b) - log_mass)
        mean = ra - rb
        var = 1.0 + np.where(np.isfinite(a), a * ra, 0.0) - np.where(np.isfinite(b), b * rb, 0.0) \
            - mean * mean
    return np.where(flip, -mean, mean), np.maximum(var, 0.0)


class IntervalLaw(ABC):
    """A univariate continuous family with a CDF: censored and truncated values of it can be
    fitted by exact EM (:class:`~mixfold.CensoredEstimator`)."""

    @abstractmethod
    def scipy_law(self) -> Any:
        """This distribution as a frozen ``scipy.stats`` law."""

    def log_mass(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """``log P(low < X < high)`` per interval (n,)."""
        return log_interval_mass(self.scipy_law(), low, high)

    def interval_points(self, low: np.ndarray, high: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Points (n, m) and probabilities (n, m) whose weighted statistics are this family's
        expected sufficient statistics given ``low < X < high``: tanh-sinh quadrature unless
        the family has them in closed form."""
        return quadrature_points(self, low, high)
