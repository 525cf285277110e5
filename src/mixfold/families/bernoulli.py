"""Bernoulli distribution over 0/1 (or False/True) with success probability ``p``."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._scipy import xlog1py, xlogy
from mixfold.families.contract import LeafDistribution, LeafEstimator, accumulator_for, family
from mixfold.options import number

__all__ = ["BernoulliDistribution", "BernoulliEstimator", "BernoulliAccumulator",
           "BernoulliStatistics"]


class BernoulliStatistics(NamedTuple):
    """A Bernoulli's statistics of weighted rows."""

    weight: float  #: the sum of the weights
    ones: float  #: the weighted number of ones


@family("Bernoulli")
class BernoulliDistribution(LeafDistribution):
    """Bernoulli with ``P(1) = p`` for ``p`` in [0, 1]; values are 0/1 or bools.

    >>> d = BernoulliDistribution(0.2)
    >>> round(d.log_density(True), 6), round(d.log_density(0), 6)
    (-1.609438, -0.223144)
    >>> d.sampler(0).sample(5).tolist()
    [0, 0, 1, 1, 0]
    """

    domain = "binary"
    parameter_coordinates = {"p": "unit"}
    Statistics = BernoulliStatistics

    def __init__(self, p: float):
        self.p = float(p)
        if not (0 <= self.p <= 1):
            raise ParameterError(f"p must be in [0, 1], got {p!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        x = x.astype(dt, copy=False)
        p = dt.type(self.p)
        # xlogy / xlog1py give 0 * log(0) = 0, so p = 0 and p = 1 score the sure value 0, not NaN
        return xlogy(x, p) + xlog1py(dt.type(1) - x, -p)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return (rng.random(n) < self.p).astype(np.int64)

    @staticmethod
    def features(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return (x,)


BernoulliAccumulator = accumulator_for(BernoulliDistribution)


class BernoulliEstimator(LeafEstimator):
    """M-step for :class:`BernoulliDistribution`: ``p`` is the weighted fraction of ones.

    ``pseudo_count`` c adds c ones and c zeros (the posterior mode under a Beta(1 + c, 1 + c)
    prior), which keeps ``p`` inside (0, 1) when a component sees only one value. With no
    weight and no pseudo counts the estimate is ``BernoulliDistribution(0.5)``.

    >>> import mixfold
    >>> x = BernoulliDistribution(0.3).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, BernoulliEstimator(), progress=False)
    >>> round(d.p, 2)
    0.3
    """

    distribution_class = BernoulliDistribution
    option_rules = {"pseudo_count": number(0)}

    def __init__(self, pseudo_count: float = 0.0, keys: str | None = None):
        super().__init__(keys)
        self.check_options(pseudo_count=pseudo_count)
        self.pseudo_count = float(pseudo_count)

    def from_statistics(self, stats: BernoulliStatistics) -> BernoulliDistribution:
        c = self.pseudo_count
        if stats.weight + 2 * c <= 0:
            return BernoulliDistribution(0.5)
        # ones <= weight, so the ratio is in [0, 1] up to rounding
        return BernoulliDistribution(min((stats.ones + c) / (stats.weight + 2 * c), 1.0))
