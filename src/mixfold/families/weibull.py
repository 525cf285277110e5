"""Weibull distribution on x > 0 (times to event) with ``shape`` k and ``scale`` lambda, scipy's
``weibull_min(k, scale=lambda)``."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._intervals import IntervalLaw, scipy_stats
from mixfold.families.contract import (LeafDistribution, LeafEstimator, ModelStatsAccumulator,
                                       RecordSums, SeedsFromLogs, family)
from mixfold.options import number

__all__ = ["WeibullDistribution", "WeibullEstimator", "WeibullAccumulator", "WeibullStatistics",
           "MAX_SHAPE_STEP"]

#: A shape update moves the shape by at most this factor (a Newton step far from the maximum
#: can overshoot; the profile likelihood is concave in the shape, so steps only shrink near it).
MAX_SHAPE_STEP = 2.0
#: Largest |log(scale)| an estimate takes (the float64 range).
LOG_SCALE_LIMIT = 700.0
#: Euler's constant: the mean of log x is log(scale) - EULER_GAMMA / shape.
EULER_GAMMA = 0.5772156649015329


class WeibullStatistics(NamedTuple):
    """A Weibull's statistics of weighted rows: the start's (``log x`` is Gumbel), then those
    under the current ``(k, lam)``, with ``L = log(x / lam)`` and ``y = exp(k L)`` (the profile
    likelihood of the shape, its slope and its curvature at the current shape, and where that
    is)."""

    weight: float  #: the sum of the weights
    log_sum: float  #: the weighted sum of ``log x``
    log_square_sum: float  #: the weighted sum of ``(log x)^2``
    model_weight: float  #: the sum of the weights added under a model
    y_sum: float  #: the weighted sum of ``y``
    y_log_sum: float  #: the weighted sum of ``y L``
    y_log_square_sum: float  #: the weighted sum of ``y L^2``
    shape_mass: float  #: the weighted sum of the current shape ``k``
    log_scale_mass: float  #: the weighted sum of the current ``log lam``


@family("Weibull")
class WeibullDistribution(LeafDistribution, SeedsFromLogs, IntervalLaw):
    """Weibull with density ``k / lam (x / lam)**(k-1) exp(-(x / lam)**k)`` for x > 0.

    >>> d = WeibullDistribution(1.5, 2.0)
    >>> round(d.log_density(1.0), 6)  # scipy.stats.weibull_min(1.5, scale=2).logpdf(1)
    -0.987809
    """

    domain = "positive"
    parameter_coordinates = {"shape": "positive", "scale": "positive"}
    estimated_jointly = ("shape", "scale")
    Statistics = WeibullStatistics
    row_work = 3.0  # a log and an exp a row

    def __init__(self, shape: float, scale: float):
        self.shape = float(shape)
        self.scale = float(scale)
        if not (np.isfinite(self.shape) and self.shape > 0):
            raise ParameterError(f"shape must be finite and > 0, got {shape!r}")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ParameterError(f"scale must be finite and > 0, got {scale!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        log_z = np.log(x) - np.log(self.scale)  # in float64 in every band
        return np.log(self.shape / self.scale) + (self.shape - 1.0) * log_z \
            - np.exp(self.shape * log_z)

    def scipy_law(self) -> Any:
        """``scipy.stats.weibull_min(shape, scale=scale)``."""
        return scipy_stats().weibull_min(self.shape, scale=self.scale)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # small shapes put real mass below the smallest float: keep draws inside x > 0
        x = self.scale * rng.weibull(self.shape, size=n)
        return np.maximum(x, np.finfo(np.float64).smallest_subnormal)


class WeibullAccumulator(ModelStatsAccumulator, RecordSums):
    """:class:`WeibullStatistics`: the start's three sums, then the E-step's six."""

    family = WeibullDistribution

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        log_x = np.log(x)
        # einsum, not BLAS: a dot product per call would wake the BLAS threads
        self.sums[:3] += (w.sum(), np.einsum("i,i->", w, log_x),
                          np.einsum("i,i,i->", w, log_x, log_x))

    def _add_model(self, x: np.ndarray, w: np.ndarray, model: WeibullDistribution) -> None:
        self._add(x, w)
        log_z = np.log(x) - np.log(model.scale)
        # capped below exp's overflow: only rows far beyond a poor current fit's scale reach it
        wy = w * np.exp(np.minimum(model.shape * log_z, 700.0))
        s0 = w.sum()
        self.sums[3:] += (s0, wy.sum(), np.einsum("i,i->", wy, log_z),
                          np.einsum("i,i,i->", wy, log_z, log_z), s0 * model.shape,
                          s0 * np.log(model.scale))


class WeibullEstimator(LeafEstimator):
    """M-step for :class:`WeibullDistribution`: a Newton step on the profile likelihood of the
    shape, the scale exact given it.

    The shape's likelihood equation has no fixed-size statistics, so each E-step gathers the
    profile log-likelihood's slope and curvature at the current shape (``sum w (x/lam)^k`` and
    its first two derivatives in ``k``); the M-step takes the Newton step (the profile is
    concave), at most a factor :data:`MAX_SHAPE_STEP`, and the scale that maximises the
    likelihood given the new shape (``sum w (x/lam)^k`` carried to it to second order). A fixed
    point is the maximum likelihood estimate; near it the steps converge quadratically. The
    start is the method of moments on ``log x`` (a Gumbel). ``max_shape`` caps the shape (rows
    that all sit on one value). With no weight at all the estimate is ``Weibull(1, 1)``.

    >>> import mixfold
    >>> x = WeibullDistribution(1.5, 2.0).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, WeibullEstimator(), progress=False)
    >>> round(d.shape, 1), round(d.scale, 1)
    (1.5, 2.0)
    """

    distribution_class = WeibullDistribution
    accumulator_class = WeibullAccumulator

    option_rules = {"max_shape": number(0, above=True)}

    def __init__(self, max_shape: float = 1e6, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_shape=max_shape)
        self.max_shape = float(max_shape)

    def from_statistics(self, stats: WeibullStatistics) -> WeibullDistribution:
        s0, s_log, s_log2, m0, sy, syl, syll, sk, s_log_scale = stats
        if s0 <= 0:
            return WeibullDistribution(1.0, 1.0)
        mean_log = s_log / s0
        if m0 <= 0 or not 0 < sy < np.inf:
            return _gumbel_start(s0, mean_log, s_log2, self.max_shape)
        k0, log_scale0 = sk / m0, s_log_scale / m0
        mean_log_z = mean_log - log_scale0
        d1, d2 = syl / sy, syll / sy - (syl / sy) ** 2  # log S(k) slope and curvature
        slope = 1.0 / k0 + mean_log_z - d1
        curvature = -1.0 / (k0 * k0) - d2
        k = min(max(k0 - slope / curvature, k0 / MAX_SHAPE_STEP), k0 * MAX_SHAPE_STEP,
                self.max_shape)
        step = k - k0
        log_mean_y = np.log(sy / m0) + step * d1 + 0.5 * step * step * d2
        log_scale = log_scale0 + log_mean_y / k
        if not (np.isfinite(k) and k > 0 and abs(log_scale) < LOG_SCALE_LIMIT):
            # a step from a fit gone degenerate
            return _gumbel_start(s0, mean_log, s_log2, self.max_shape)
        return WeibullDistribution(k, np.exp(log_scale))


def _gumbel_start(s0: float, mean_log: float, s_log2: float,
                  max_shape: float) -> WeibullDistribution:
    """The method of moments on ``log x``: ``var = pi^2 / (6 k^2)``, ``mean = log(lam) -
    EULER_GAMMA / k``."""
    var = max(s_log2 / s0 - mean_log * mean_log, 0.0)
    k = min(np.pi / np.sqrt(6.0 * var), max_shape) if var > 0 else max_shape
    log_scale = np.clip(mean_log + EULER_GAMMA / k, -LOG_SCALE_LIMIT, LOG_SCALE_LIMIT)
    return WeibullDistribution(k, np.exp(log_scale))
