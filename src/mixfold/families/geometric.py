"""Geometric distribution: the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._scipy import xlog1py
from mixfold.families.contract import LeafDistribution, LeafEstimator, accumulator_for, family
from mixfold.options import number

__all__ = ["GeometricDistribution", "GeometricEstimator", "GeometricAccumulator",
           "GeometricStatistics"]


class GeometricStatistics(NamedTuple):
    """A geometric's statistics of weighted rows."""

    successes: float  #: the sum of the weights (one success a row)
    trials: float  #: the weighted sum of the trial counts


@family("Geometric")
class GeometricDistribution(LeafDistribution):
    """Geometric on {1, 2, ...} with success probability ``p`` in (0, 1], as ``scipy.stats.geom``.

    ``P(x) = (1 - p)**(x - 1) * p``; ``p = 1`` is the point mass at 1.

    >>> d = GeometricDistribution(0.25)
    >>> round(d.log_density(3), 6)
    -1.961659
    >>> int(d.sampler(0).sample(1000).min())
    1
    """

    domain = "positive_count"
    parameter_coordinates = {"p": "unit"}
    Statistics = GeometricStatistics

    def __init__(self, p: float):
        self.p = float(p)
        if not (0 < self.p <= 1):
            raise ParameterError(f"p must be in (0, 1], got {p!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        x = x.astype(dt, copy=False)
        # xlog1py gives 0 * log(0) = 0, so p = 1 scores 0 at x = 1 and -inf elsewhere, never NaN
        return xlog1py(x - dt.type(1), dt.type(-self.p)) + dt.type(np.log(self.p))

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.geometric(self.p, size=n).astype(np.int64)

    @staticmethod
    def features(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return (x,)


GeometricAccumulator = accumulator_for(GeometricDistribution)


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

    distribution_class = GeometricDistribution
    option_rules = {"pseudo_count": number(0)}

    def __init__(self, pseudo_count: float = 0.0, keys: str | None = None):
        super().__init__(keys)
        self.check_options(pseudo_count=pseudo_count)
        self.pseudo_count = float(pseudo_count)

    def from_statistics(self, stats: GeometricStatistics) -> GeometricDistribution:
        c = self.pseudo_count
        if stats.successes + c <= 0:
            return GeometricDistribution(0.5)
        # every row has trials >= 1, so the ratio is at most 1 up to rounding
        return GeometricDistribution(min((stats.successes + c) / (stats.trials + 2 * c), 1.0))
