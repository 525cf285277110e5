"""Gamma distribution on x > 0 with ``shape`` k and ``scale`` theta (mean k * theta)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import SeedsFromPoints
from mixfold.compute.logspace import LOG_2PI
from mixfold.errors import DegenerateFitWarning, ParameterError
from mixfold.families._centred import ScalarReference, weighted_centre
from mixfold.families._intervals import IntervalLaw, scipy_stats
from mixfold.families._encoders import NumericEncoder
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families._scipy import digamma, gammaln, polygamma
from mixfold.precision import native_dtype
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["GammaDistribution", "GammaEstimator", "GammaAccumulator", "gamma_shape_mle"]

#: log of the smallest scale a fit may give: a subnormal with 10 significant bits.
SMALLEST_LOG_SCALE = float(np.log(2.0 ** -1064))


@family("Gamma", kind="gamma")
class GammaDistribution(Distribution, SeedsFromPoints, IntervalLaw):
    """Gamma with density ``x**(k-1) exp(-x/theta) / (Gamma(k) theta**k)`` for x > 0.

    >>> d = GammaDistribution(2.0, 3.0)
    >>> round(d.log_density(1.5), 6)
    -2.291759
    >>> d.sampler(0).sample(3).shape
    (3,)
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
        if self.shape >= LARGE_SHAPE:
            return _large_shape_log_density(enc.values, self.shape, self.scale, precision)
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        norm = dt.type(gammaln(self.shape) + self.shape * np.log(self.scale))
        out = dt.type(self.shape - 1.0) * np.log(x) - x / dt.type(self.scale) - norm
        return out.astype(np.float64, copy=False)

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, 1) for k-means++ seeding of mixtures, on the log scale.

        Without it a mixture starts Gamma components from a random partition of the rows, which
        leaves them too alike for EM to pull apart.
        """
        return np.log(enc.values)[:, None]

    def scipy_law(self) -> Any:
        """``scipy.stats.gamma(shape, scale=scale)``."""
        return scipy_stats().gamma(self.shape, scale=self.scale)

    def encoder(self) -> Encoder:
        return NumericEncoder("positive")

    def estimator(self, **options: Any) -> GammaEstimator:
        return GammaEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # Small shapes put real mass below the smallest float; keep draws inside the support x > 0.
        x = rng.gamma(self.shape, self.scale, size=n)
        return np.maximum(x, np.finfo(np.float64).smallest_subnormal)

    def n_parameters(self) -> int:
        return 2

    def _params(self) -> dict[str, Any]:
        return {"shape": self.shape, "scale": self.scale}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> GammaDistribution:
        return cls(p["shape"], p["scale"])


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


def _large_shape_log_density(x: np.ndarray, k: float, theta: float,
                             precision: Precision) -> np.ndarray:
    """``log p(x)`` for shape ``k >= LARGE_SHAPE``: with ``y = x / theta = k (1 + t)``,
    ``k (log(1+t) - t) - log(1+t) - log(2 pi k) / 2 - stirlerr(k) - log theta``, where
    ``stirlerr(k) = log Gamma(k) - (k - 1/2) log k + k - log(2 pi) / 2``; each term is small.

    >>> d = GammaDistribution(1e8, 1e-8)
    >>> round(float(_large_shape_log_density(np.array([1.0]), d.shape, d.scale, "float64")[0]), 9)
    8.291401838
    """
    x = np.asarray(x, dtype=np.float64)
    t = x / (k * theta) - 1.0
    stirlerr = (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / (1260.0 * k * k)) / (k * k)) / k
    with np.errstate(divide="ignore"):
        log_ratio = np.log(x) - np.log(theta) - np.log(k)
        out = _log1p_minus(t, log_ratio, k) - 0.5 * (LOG_2PI + np.log(k)) - stirlerr - np.log(theta)
    return out.astype(native_dtype(precision)).astype(np.float64, copy=False)


class GammaAccumulator(LeafAccumulator, ScalarReference):
    """Statistics about a reference scale ``c`` (the model's mean when rows are added under a
    model, else the rows' geometric mean): the sums of ``w``, ``w x / c``, ``w log(x / c)`` and
    ``w log c``. The values enter as ratios to ``c``, so no product ``w x`` underflows for
    values near the smallest float (nor overflows near the largest), and the log gap the shape
    is read from is not a difference of two large logs."""

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(4)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]

    @staticmethod
    def stack_reference(components: Sequence[GammaDistribution]) -> np.ndarray:
        """The mean log of the components' means, for each."""
        point = np.mean([np.log(c.shape) + np.log(c.scale) for c in components])
        return np.full((len(components), 1), point)

    def _moved(self, shift: float) -> None:
        self.sums[1] *= np.exp(shift)
        self.sums[2] += self.sums[0] * shift

    def _rows_point(self, x: np.ndarray, w: np.ndarray) -> float:
        return float(weighted_centre(x, w)[0])  # (x: the logs of the rows)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        logs = np.log(x)
        r = self.point_for(logs, w)
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

    accumulator_class = GammaAccumulator
    distribution_class = GammaDistribution

    option_rules = {"max_shape": number(0, above=True)}

    def __init__(self, max_shape: float = 1e8, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_shape=max_shape)
        self.max_shape = float(max_shape)

    def encoder(self) -> Encoder:
        return NumericEncoder("positive")

    def estimate(self, nobs: float, stats: Any) -> GammaDistribution:
        (sums,), _ = stats
        s0, ratio, log_ratio, ref_mass = sums
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
                          stacklevel=2)
        return GammaDistribution(shape, float(np.exp(log_mean - np.log(shape))))
