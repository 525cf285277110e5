"""Log-normal distribution on x > 0: log x ~ N(mu, sigma2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._leaf import LeafAccumulator, LeafEstimator, NumericEncoder
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.precision import native_dtype

__all__ = ["LogGaussianDistribution", "LogGaussianEstimator", "LogGaussianAccumulator"]

_LOG_2PI = float(np.log(2.0 * np.pi))


@family("LogGaussian")
class LogGaussianDistribution(Distribution):
    """Log-normal: ``log x`` is Gaussian with mean ``mu`` and variance ``sigma2``, for x > 0.

    The density of x includes the Jacobian ``1/x`` of the log transform.

    >>> d = LogGaussianDistribution(0.5, 0.25)
    >>> round(d.log_density(2.0), 6)
    -0.99355
    >>> d.sampler(0).sample(3).shape
    (3,)
    """

    def __init__(self, mu: float, sigma2: float):
        self.mu = float(mu)
        self.sigma2 = float(sigma2)
        if not np.isfinite(self.mu):
            raise ParameterError(f"mu must be finite, got {mu!r}")
        if not (np.isfinite(self.sigma2) and self.sigma2 > 0):
            raise ParameterError(f"sigma2 must be finite and > 0, got {sigma2!r}")

    def seq_log_density(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        dt = native_dtype(precision)
        y = np.log(enc.values.astype(dt, copy=False))
        z = (y - dt.type(self.mu)) ** 2
        norm = dt.type(0.5 * (_LOG_2PI + np.log(self.sigma2)))
        out = dt.type(-0.5) * z / dt.type(self.sigma2) - norm - y
        return out.astype(np.float64, copy=False)

    @classmethod
    def stack_log_density(cls, components: Sequence[LogGaussianDistribution], enc: Encoded,
                          precision: str = "float64") -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K)."""
        dt = native_dtype(precision)
        mu = np.array([c.mu for c in components], dtype=dt)
        s2 = np.array([c.sigma2 for c in components])
        y = np.log(enc.values.astype(dt, copy=False))
        out = np.subtract.outer(y, mu)
        out *= out
        out *= (-0.5 / s2).astype(dt)
        out += (-0.5 * (_LOG_2PI + np.log(s2))).astype(dt)
        out -= y[:, None]
        return out

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, 1) on the log scale, for k-means++ seeding."""
        return np.log(enc.values)[:, None]

    def encoder(self) -> Encoder:
        return NumericEncoder("positive")

    def estimator(self, **options: Any) -> LogGaussianEstimator:
        return LogGaussianEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.lognormal(self.mu, np.sqrt(self.sigma2), size=n)

    def _params(self) -> dict[str, Any]:
        return {"mu": self.mu, "sigma2": self.sigma2}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> LogGaussianDistribution:
        return cls(p["mu"], p["sigma2"])


class LogGaussianAccumulator(LeafAccumulator):
    """Statistics: sum of weights, of weighted log-values and of weighted squared log-values."""

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(3)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        y = np.log(x)
        wy = w * y
        self.sums += (w.sum(), wy.sum(), wy @ y)

    @staticmethod
    def stack_update(accs: Sequence[LogGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights."""
        y = np.log(enc.values)
        s0 = resp.sum(axis=0)
        s1 = y @ resp
        s2 = (y * y) @ resp
        for k, acc in enumerate(accs):
            acc.sums += (s0[k], s1[k], s2[k])


class LogGaussianEstimator(LeafEstimator):
    """M-step for :class:`LogGaussianDistribution`: the Gaussian M-step on ``log x``.

    ``reg_covar`` is added to the estimated variance of ``log x`` and ``min_variance`` floors it,
    as in :class:`~mixfold.families.gaussian.GaussianEstimator`. With no weight at all the
    estimate is ``LogGaussianDistribution(0.0, 1.0)``.

    >>> import mixfold
    >>> x = LogGaussianDistribution(1.0, 0.5).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, LogGaussianEstimator(), progress=False)
    >>> round(d.mu, 1), round(d.sigma2, 1)
    (1.0, 0.5)
    """

    accumulator_class = LogGaussianAccumulator
    distribution_class = LogGaussianDistribution

    def __init__(self, reg_covar: float = 1e-6, min_variance: float = 1e-12,
                 keys: str | None = None):
        super().__init__(keys)
        if reg_covar < 0 or min_variance <= 0:
            raise ValueError(f"reg_covar must be >= 0 and min_variance > 0, got {reg_covar!r}, "
                             f"{min_variance!r}")
        self.reg_covar = float(reg_covar)
        self.min_variance = float(min_variance)

    def encoder(self) -> Encoder:
        return NumericEncoder("positive")

    def estimate(self, nobs: float, stats: Any) -> LogGaussianDistribution:
        (sums,), _ = stats
        s0, s1, s2 = sums
        if s0 <= 0:
            return LogGaussianDistribution(0.0, 1.0)
        mu = s1 / s0
        var = max(s2 / s0 - mu * mu, 0.0) + self.reg_covar
        return LogGaussianDistribution(mu, max(var, self.min_variance))
