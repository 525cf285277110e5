"""Geometric distribution: the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._leaf import LeafEstimator, NumericEncoder, WeightedSumAccumulator
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families._scipy import xlog1py
from mixfold.precision import native_dtype
from mixfold.options import number

__all__ = ["GeometricDistribution", "GeometricEstimator", "GeometricAccumulator"]


@family("Geometric")
class GeometricDistribution(Distribution):
    """Geometric on {1, 2, ...} with success probability ``p`` in (0, 1], as ``scipy.stats.geom``.

    ``P(x) = (1 - p)**(x - 1) * p``; ``p = 1`` is the point mass at 1.

    >>> d = GeometricDistribution(0.25)
    >>> round(d.log_density(3), 6)
    -1.961659
    >>> int(d.sampler(0).sample(1000).min())
    1
    """

    parameter_coordinates = {"p": "unit"}

    def __init__(self, p: float):
        self.p = float(p)
        if not (0 < self.p <= 1):
            raise ParameterError(f"p must be in (0, 1], got {p!r}")

    def seq_log_density(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        # xlog1py gives 0 * log(0) = 0, so p = 1 scores 0 at x = 1 and -inf elsewhere, never NaN
        out = xlog1py(x - dt.type(1), dt.type(-self.p)) + dt.type(np.log(self.p))
        return out.astype(np.float64, copy=False)

    def encoder(self) -> Encoder:
        return NumericEncoder("positive_count")

    def estimator(self, **options: Any) -> GeometricEstimator:
        return GeometricEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.geometric(self.p, size=n).astype(np.int64)

    def n_parameters(self) -> int:
        return 1

    def _params(self) -> dict[str, Any]:
        return {"p": self.p}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> GeometricDistribution:
        return cls(p["p"])


class GeometricAccumulator(WeightedSumAccumulator):
    """Statistics: sum of weights (successes) and of weighted trial counts."""


class GeometricEstimator(LeafEstimator):
    """M-step for :class:`GeometricDistribution`: ``p`` is successes over trials.

    ``pseudo_count`` c adds c successes and c failures (the posterior mode under a
    Beta(1 + c, 1 + c) prior), which keeps ``p`` below 1 when every row is 1. With no weight and
    no pseudo counts the estimate is ``GeometricDistribution(0.5)``.

    >>> import mixfold
    >>> x = GeometricDistribution(0.3).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, GeometricEstimator(), progress=False)
    >>> round(d.p, 2)
    0.3
    """

    accumulator_class = GeometricAccumulator
    distribution_class = GeometricDistribution

    option_rules = {"pseudo_count": number(0)}

    def __init__(self, pseudo_count: float = 0.0, keys: str | None = None):
        super().__init__(keys)
        self.check_options(pseudo_count=pseudo_count)
        self.pseudo_count = float(pseudo_count)

    def encoder(self) -> Encoder:
        return NumericEncoder("positive_count")

    def estimate(self, nobs: float, stats: Any) -> GeometricDistribution:
        (sums,), _ = stats
        successes, trials = sums
        c = self.pseudo_count
        if successes + c <= 0:
            return GeometricDistribution(0.5)
        # every row has trials >= 1, so the ratio is at most 1 up to rounding
        return GeometricDistribution(min((successes + c) / (trials + 2 * c), 1.0))
