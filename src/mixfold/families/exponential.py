"""Exponential distribution on x >= 0 with rate ``rate`` (mean 1 / rate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._leaf import LeafEstimator, NumericEncoder, WeightedSumAccumulator
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.precision import native_dtype

__all__ = ["ExponentialDistribution", "ExponentialEstimator", "ExponentialAccumulator"]


@family("Exponential")
class ExponentialDistribution(Distribution):
    """Exponential with density ``rate * exp(-rate * x)`` for x >= 0.

    >>> d = ExponentialDistribution(2.0)
    >>> round(d.log_density(0.5), 6)
    -0.306853
    >>> d.sampler(0).sample(3).shape
    (3,)
    """

    def __init__(self, rate: float):
        self.rate = float(rate)
        if not (np.isfinite(self.rate) and self.rate > 0):
            raise ParameterError(f"rate must be finite and > 0, got {rate!r}")

    def seq_log_density(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        out = dt.type(np.log(self.rate)) - dt.type(self.rate) * x
        return out.astype(np.float64, copy=False)

    def encoder(self) -> Encoder:
        return NumericEncoder("nonnegative")

    def estimator(self, **options: Any) -> ExponentialEstimator:
        return ExponentialEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.exponential(1.0 / self.rate, size=n)

    def n_parameters(self) -> int:
        return 1

    def _params(self) -> dict[str, Any]:
        return {"rate": self.rate}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> ExponentialDistribution:
        return cls(p["rate"])


class ExponentialAccumulator(WeightedSumAccumulator):
    """Statistics: sum of weights and of weighted values."""


class ExponentialEstimator(LeafEstimator):
    """M-step for :class:`ExponentialDistribution`: ``rate`` is one over the weighted mean.

    ``max_rate`` caps the rate, so rows that are all zero give a finite rate instead of an
    infinite one. With no weight at all the estimate is ``ExponentialDistribution(1.0)``.

    >>> import mixfold
    >>> x = ExponentialDistribution(0.5).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, ExponentialEstimator(), progress=False)
    >>> round(d.rate, 2)
    0.5
    """

    accumulator_class = ExponentialAccumulator
    distribution_class = ExponentialDistribution

    def __init__(self, max_rate: float = 1e12, keys: str | None = None):
        super().__init__(keys)
        if not (np.isfinite(max_rate) and max_rate > 0):
            raise ValueError(f"max_rate must be finite and > 0, got {max_rate!r}")
        self.max_rate = float(max_rate)

    def encoder(self) -> Encoder:
        return NumericEncoder("nonnegative")

    def estimate(self, nobs: float, stats: Any) -> ExponentialDistribution:
        (sums,), _ = stats
        s0, s1 = sums
        if s0 <= 0:
            return ExponentialDistribution(1.0)
        # s0 <= max_rate * s1 is the division-free form of s0 / s1 <= max_rate (s1 may be 0)
        return ExponentialDistribution(s0 / s1 if s0 <= self.max_rate * s1 else self.max_rate)
