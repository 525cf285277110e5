"""Weibull distribution on x > 0 (times to event) with ``shape`` k and ``scale`` lambda, scipy's
``weibull_min(k, scale=lambda)``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.capabilities import SeedsFromPoints
from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._intervals import IntervalLaw, scipy_stats
from mixfold.families._encoders import NumericEncoder
from mixfold.families.contract import LeafEstimator, ModelStatsAccumulator
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["WeibullDistribution", "WeibullEstimator", "WeibullAccumulator", "MAX_SHAPE_STEP"]

#: A shape update moves the shape by at most this factor (a Newton step far from the maximum
#: can overshoot; the profile likelihood is concave in the shape, so steps only shrink near it).
MAX_SHAPE_STEP = 2.0
#: Largest |log(scale)| an estimate takes (the float64 range).
LOG_SCALE_LIMIT = 700.0
#: Euler's constant: the mean of log x is log(scale) - EULER_GAMMA / shape.
EULER_GAMMA = 0.5772156649015329


@family("Weibull", kind="weibull")
class WeibullDistribution(Distribution, SeedsFromPoints, IntervalLaw):
    """Weibull with density ``k / lam (x / lam)**(k-1) exp(-(x / lam)**k)`` for x > 0.

    >>> d = WeibullDistribution(1.5, 2.0)
    >>> round(d.log_density(1.0), 6)  # scipy.stats.weibull_min(1.5, scale=2).logpdf(1)
    -0.987809
    """

    parameter_coordinates = {"shape": "positive", "scale": "positive"}
    estimated_jointly = ("shape", "scale")

    def __init__(self, shape: float, scale: float):
        self.shape = float(shape)
        self.scale = float(scale)
        if not (np.isfinite(self.shape) and self.shape > 0):
            raise ParameterError(f"shape must be finite and > 0, got {shape!r}")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ParameterError(f"scale must be finite and > 0, got {scale!r}")

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        log_z = np.log(enc.values) - np.log(self.scale)
        return np.log(self.shape / self.scale) + (self.shape - 1.0) * log_z \
            - np.exp(self.shape * log_z)

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, 1) for k-means++ seeding of mixtures, on the log scale."""
        return np.log(enc.values)[:, None]

    def scipy_law(self) -> Any:
        """``scipy.stats.weibull_min(shape, scale=scale)``."""
        return scipy_stats().weibull_min(self.shape, scale=self.scale)

    def encoder(self) -> Encoder:
        return NumericEncoder("positive")

    def estimator(self, **options: Any) -> WeibullEstimator:
        return WeibullEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # small shapes put real mass below the smallest float: keep draws inside x > 0
        x = self.scale * rng.weibull(self.shape, size=n)
        return np.maximum(x, np.finfo(np.float64).smallest_subnormal)

    def n_parameters(self) -> int:
        return 2

    def _params(self) -> dict[str, Any]:
        return {"shape": self.shape, "scale": self.scale}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> WeibullDistribution:
        return cls(p["shape"], p["scale"])

    def decomposition(self) -> Decomposition:
        """Atomic: a log and an exp per row, about three scalar leaves' work."""
        return Decomposition.atomic(row_work=3.0, param_bytes=16)


class WeibullAccumulator(ModelStatsAccumulator):
    """Statistics: ``[sum w, sum w log x, sum w (log x)^2]`` (the start: log x is Gumbel), then
    under the current ``(k, lam)``, with ``L = log(x / lam)`` and ``y = exp(k L)``:
    ``[sum w, sum w y, sum w y L, sum w y L^2, sum w k, sum w log lam]`` (the profile likelihood
    of the shape, its slope and its curvature at the current shape, and where that is)."""

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(9)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]

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

    accumulator_class = WeibullAccumulator
    distribution_class = WeibullDistribution

    option_rules = {"max_shape": number(0, above=True)}

    def __init__(self, max_shape: float = 1e6, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_shape=max_shape)
        self.max_shape = float(max_shape)

    def encoder(self) -> Encoder:
        return NumericEncoder("positive")

    def estimate(self, nobs: float, stats: Any) -> WeibullDistribution:
        (sums,), _ = stats
        s0, s_log, s_log2, m0, sy, syl, syll, sk, s_log_scale = sums
        if s0 <= 0:
            return WeibullDistribution(1.0, 1.0)
        mean_log = s_log / s0
        if m0 <= 0 or not 0 < sy < np.inf:
            return self._start(s0, mean_log, s_log2)
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
            return self._start(s0, mean_log, s_log2)  # a step from a fit gone degenerate
        return WeibullDistribution(k, np.exp(log_scale))

    def _start(self, s0: float, mean_log: float, s_log2: float) -> WeibullDistribution:
        """The method of moments on ``log x``: ``var = pi^2 / (6 k^2)``, ``mean = log(lam) -
        EULER_GAMMA / k``."""
        var = max(s_log2 / s0 - mean_log * mean_log, 0.0)
        k = min(np.pi / np.sqrt(6.0 * var), self.max_shape) if var > 0 else self.max_shape
        log_scale = np.clip(mean_log + EULER_GAMMA / k, -LOG_SCALE_LIMIT, LOG_SCALE_LIMIT)
        return WeibullDistribution(k, np.exp(log_scale))
