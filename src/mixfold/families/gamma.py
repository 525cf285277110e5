"""Gamma distribution on x > 0 with ``shape`` k and ``scale`` theta (mean k * theta)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.compute.logspace import LOG_2PI
from mixfold.errors import DegenerateFitWarning, ParameterError
from mixfold.families._centred import ScalarReference
from mixfold.families._intervals import IntervalLaw, scipy_stats
from mixfold.families._scipy import digamma, gammaln, polygamma
from mixfold.families.contract import (LeafDistribution, LeafEstimator, RecordSums,
                                       SeedsFromLogs, family)
from mixfold.options import number

__all__ = ["GammaDistribution", "GammaEstimator", "GammaAccumulator", "GammaStatistics",
           "gamma_shape_mle"]

#: log of the smallest scale a fit may give: a subnormal with 10 significant bits.
SMALLEST_LOG_SCALE = float(np.log(2.0 ** -1064))


class GammaStatistics(NamedTuple):
    """A Gamma's statistics of weighted rows, about a reference log scale ``r``
    (:class:`GammaAccumulator`)."""

    weight: float  #: the sum of the weights
    ratio: float  #: the weighted sum of ``x / exp(r)``
    log_ratio: float  #: the weighted sum of ``log x - r``
    reference_mass: float  #: the weighted sum of ``r``


@family("Gamma")
class GammaDistribution(LeafDistribution, SeedsFromLogs, IntervalLaw):
    """Gamma with density ``x**(k-1) exp(-x/theta) / (Gamma(k) theta**k)`` for x > 0.

    >>> d = GammaDistribution(2.0, 3.0)
    >>> round(d.log_density(1.5), 6)
    -2.291759
    >>> d.sampler(0).sample(3).shape
    (3,)
    """

    domain = "positive"
    parameter_coordinates = {"shape": "positive", "scale": "positive"}
    estimated_jointly = ("shape", "scale")
    Statistics = GammaStatistics

    def __init__(self, shape: float, scale: float):
        self.shape = float(shape)
        self.scale = float(scale)
        if not (np.isfinite(self.shape) and self.shape > 0):
            raise ParameterError(f"shape must be finite and > 0, got {shape!r}")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ParameterError(f"scale must be finite and > 0, got {scale!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        if self.shape >= LARGE_SHAPE:
            return _large_shape_log_density(x, self.shape, self.scale, dt)
        x = x.astype(dt, copy=False)
        norm = dt.type(gammaln(self.shape) + self.shape * np.log(self.scale))
        return dt.type(self.shape - 1.0) * np.log(x) - x / dt.type(self.scale) - norm

    def scipy_law(self) -> Any:
        """``scipy.stats.gamma(shape, scale=scale)``."""
        return scipy_stats().gamma(self.shape, scale=self.scale)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # Small shapes put real mass below the smallest float; keep draws inside the support x > 0.
        x = rng.gamma(self.shape, self.scale, size=n)
        return np.maximum(x, np.finfo(np.float64).smallest_subnormal)


#: From this shape on, the log-density is taken in Stirling's form: ``(k - 1) log x``,
#: ``x / theta``, ``log Gamma(k)`` and ``k log theta`` are each of order k log k and cancel.
LARGE_SHAPE = 1e3


def _log1p_minus(t: np.ndarray, log_ratio: np.ndarray, k: float) -> np.ndarray:
    """``(k - 1) log(1 + t) - k t`` (``log_ratio`` = ``log(1 + t)``, taken from the logs so
    that it holds far below the mean) without its cancellation near t = 0: there ``k`` times
    the series of ``log(1 + t) - t``, less ``log1p(t)``."""
    small = np.abs(t) < 0.1
    ts = np.where(small, t, 0.0)
    series = np.zeros_like(ts)
    for j in range(24, 1, -1):  # -t^2/2 + t^3/3 - ...: what is left is below 1e-23 t^2
        series = ts * (series + (-1.0) ** (j + 1) / j)
    series *= ts
    return np.where(small, k * series - np.log1p(ts), (k - 1.0) * log_ratio - k * t)


def _large_shape_log_density(x: np.ndarray, k: float, theta: float, dt: np.dtype) -> np.ndarray:
    """``log p(x)`` for shape ``k >= LARGE_SHAPE``: with ``y = x / theta = k (1 + t)``,
    ``k (log(1+t) - t) - log(1+t) - log(2 pi k) / 2 - stirlerr(k) - log theta``, where
    ``stirlerr(k) = log Gamma(k) - (k - 1/2) log k + k - log(2 pi) / 2``; each term is small
    (in float64, rounded to ``dt`` at the end).

    >>> d = GammaDistribution(1e8, 1e-8)
    >>> out = _large_shape_log_density(np.array([1.0]), d.shape, d.scale, np.dtype(float))
    >>> round(float(out[0]), 9)
    8.291401838
    """
    x = np.asarray(x, dtype=np.float64)
    t = x / (k * theta) - 1.0
    stirlerr = (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / (1260.0 * k * k)) / (k * k)) / k
    with np.errstate(divide="ignore"):
        log_ratio = np.log(x) - np.log(theta) - np.log(k)
        out = _log1p_minus(t, log_ratio, k) - 0.5 * (LOG_2PI + np.log(k)) - stirlerr - np.log(theta)
    return out.astype(dt).astype(np.float64, copy=False)


class GammaAccumulator(RecordSums, ScalarReference):
    """:class:`GammaStatistics` about a reference scale ``c = exp(r)`` (the model's mean when
    rows are added under a model, else the rows' geometric mean). The values enter as ratios to
    ``c``, so no product ``w x`` underflows for values near the smallest float (nor overflows
    near the largest), and the log gap the shape is read from is not a difference of two large
    logs."""

    family = GammaDistribution

    @staticmethod
    def stack_reference(components: Sequence[GammaDistribution]) -> np.ndarray:
        """The mean log of the components' means, for each."""
        point = np.mean([np.log(c.shape) + np.log(c.scale) for c in components])
        return np.full((len(components), 1), point)

    def _moved(self, shift: float) -> None:
        self.sums[1] *= np.exp(shift)
        self.sums[2] += self.sums[0] * shift

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        logs = np.log(x)
        r = self.point_for(logs, w)  # without a model: the logs' weighted mean
        s0 = w.sum()
        self.sums += (s0, w @ np.exp(logs - r), w @ (logs - r), s0 * r)


def gamma_shape_mle(log_gap: float, max_shape: float = 1e8, max_iter: int = 50) -> float:
    """The shape k solving ``log(k) - digamma(k) = log_gap`` (the Gamma MLE), at most max_shape.

    ``log_gap`` is ``log(mean(x)) - mean(log(x))`` (>= 0 by Jensen; 0 when all values are equal).
    Newton's method starts from Minka's closed-form approximation, which is within 1.5%.

    >>> k = gamma_shape_mle(0.1)
    >>> round(k, 6), round(float(np.log(k) - digamma(k)), 12)
    (5.160876, 0.1)
    >>> gamma_shape_mle(0.0)
    100000000.0
    """
    # log(k) - digamma(k) ~ 1/(2k) for large k: a gap this small means a shape beyond max_shape
    if not log_gap > 0.5 / max_shape:
        return max_shape
    s = log_gap
    k = (3.0 - s + np.sqrt((s - 3.0) ** 2 + 24.0 * s)) / (12.0 * s)
    for _ in range(max_iter):
        f = np.log(k) - digamma(k) - s
        new = k - f / (1.0 / k - polygamma(1, k))
        # f is convex and decreasing, so Newton only overshoots downward; halve instead of k <= 0
        new = new if new > 0 else 0.5 * k
        converged = abs(new - k) <= 1e-14 * k
        k = new
        if converged:
            break
    return float(min(k, max_shape))


class GammaEstimator(LeafEstimator):
    """M-step for :class:`GammaDistribution`: maximum likelihood shape and scale.

    The shape solves ``log(k) - digamma(k) = log(mean) - mean(log x)`` by Newton's method
    (:func:`gamma_shape_mle`) and the scale is ``mean / k``. ``max_shape`` caps the shape; rows
    that are all equal (a point mass, whose MLE shape is infinite) get ``max_shape`` and the
    mean as the distribution's mean, with a :class:`~mixfold.DegenerateFitWarning`. With no
    weight at all the estimate is ``GammaDistribution(1.0, 1.0)``.

    >>> import mixfold
    >>> x = GammaDistribution(2.5, 1.5).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, GammaEstimator(), progress=False)
    >>> round(d.shape, 1), round(d.scale, 1)
    (2.5, 1.5)
    """

    distribution_class = GammaDistribution
    accumulator_class = GammaAccumulator

    option_rules = {"max_shape": number(0, above=True)}

    def __init__(self, max_shape: float = 1e8, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_shape=max_shape)
        self.max_shape = float(max_shape)

    def from_statistics(self, stats: GammaStatistics) -> GammaDistribution:
        s0, ratio, log_ratio, ref_mass = stats
        if not s0 > 0:
            return GammaDistribution(1.0, 1.0)
        log_ref = ref_mass / s0
        mean_log = log_ratio / s0
        # ratio / s0: a mean of x / c, near 1; it is 0 only when every w x / c underflowed (a
        # weight near the smallest float): the rows' geometric mean is all that is known then
        log_gap = np.log(ratio / s0) - mean_log if ratio > 0 else 0.0
        log_mean = log_ref + mean_log + log_gap
        # no shape may leave a scale below the smallest float: mean / shape must stay > 0
        cap = min(self.max_shape, max(1.0, np.exp(min(log_mean - SMALLEST_LOG_SCALE, 700.0))))
        shape = gamma_shape_mle(log_gap, cap)
        mean = np.exp(log_mean)
        if shape >= cap:
            warnings.warn(f"a Gamma shape reached its cap {cap:g} (max_shape={self.max_shape:g}"
                          f" or a scale at the smallest float); rows of total weight {s0:.6g} sit"
                          f" on (nearly) one value, {mean:.6g}", DegenerateFitWarning,
                          stacklevel=3)  # the caller of estimate
        return GammaDistribution(shape, float(np.exp(log_mean - np.log(shape))))
