"""Exponential distribution on x >= 0 with rate ``rate`` (mean 1 / rate)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._centred import ScalarReference, weighted_centre
from mixfold.families._intervals import IntervalLaw, scipy_stats
from mixfold.families.contract import LeafAccumulator, LeafDistribution, LeafEstimator, family
from mixfold.options import number

__all__ = ["ExponentialDistribution", "ExponentialEstimator", "ExponentialAccumulator",
           "ExponentialStatistics"]


class ExponentialStatistics(NamedTuple):
    """An exponential's statistics of weighted rows, about a reference log scale ``r``
    (:class:`ExponentialAccumulator`)."""

    weight: float  #: the sum of the weights
    ratio: float  #: the weighted sum of ``x / exp(r)``
    reference_mass: float  #: the weighted sum of ``r``


@family("Exponential")
class ExponentialDistribution(LeafDistribution, IntervalLaw):
    """Exponential with density ``rate * exp(-rate * x)`` for x >= 0.

    >>> d = ExponentialDistribution(2.0)
    >>> round(d.log_density(0.5), 6)
    -0.306853
    >>> d.sampler(0).sample(3).shape
    (3,)
    """

    domain = "nonnegative"
    parameter_coordinates = {"rate": "positive"}
    Statistics = ExponentialStatistics

    def __init__(self, rate: float):
        self.rate = float(rate)
        if not (np.isfinite(self.rate) and self.rate > 0):
            raise ParameterError(f"rate must be finite and > 0, got {rate!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        return dt.type(np.log(self.rate)) - dt.type(self.rate) * x.astype(dt, copy=False)

    def scipy_law(self) -> Any:
        """``scipy.stats.expon(scale=1 / rate)``."""
        return scipy_stats().expon(scale=1.0 / self.rate)

    def interval_points(self, low: np.ndarray, high: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """The mean on each interval (closed form; memoryless: ``low + 1/rate`` less the share
        of the interval's width cut off above), all an exponential's statistics need."""
        width = high - low
        with np.errstate(over="ignore", invalid="ignore"):
            cut = np.where(np.isfinite(width), width / np.expm1(self.rate * width), 0.0)
        mean = low + 1.0 / self.rate - np.where(width > 0, cut, 1.0 / self.rate)
        return mean[:, None], np.ones((len(mean), 1))

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.exponential(1.0 / self.rate, size=n)


class ExponentialAccumulator(LeafAccumulator, ScalarReference):
    """Statistics about a reference scale ``c`` (the model's mean when rows are added under a
    model, else the rows' mean): the sums of ``w``, ``w x / c`` and ``w log c``. The values
    enter as ratios to ``c``, so their weighted sum neither underflows near the smallest float
    nor overflows near the largest."""

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(3)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]

    @staticmethod
    def stack_reference(components: Sequence[ExponentialDistribution]) -> np.ndarray:
        """The mean log of the components' means, for each."""
        return np.full((len(components), 1), -np.mean([np.log(c.rate) for c in components]))

    def _moved(self, shift: float) -> None:
        self.sums[1] *= np.exp(shift)

    def _rows_point(self, x: np.ndarray, w: np.ndarray) -> float:
        # the log of the rows' mean, found without overflow as their largest times a mean ratio
        top = float(x.max()) if x.size else 0.0
        mean = top * float(weighted_centre(x / top, w)[0]) if top > 0 else 0.0
        return float(np.log(mean)) if mean > 0 else 0.0

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        r = self.point_for(x, w)
        s0 = w.sum()
        self.sums += (s0, w @ (x * np.exp(-r)), s0 * r)


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

    option_rules = {"max_rate": number(0, above=True)}

    def __init__(self, max_rate: float = 1e12, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_rate=max_rate)
        self.max_rate = float(max_rate)

    def from_statistics(self, stats: ExponentialStatistics) -> ExponentialDistribution:
        s0, ratio = stats.weight, stats.ratio
        if not s0 > 0:
            return ExponentialDistribution(1.0)
        # the rate s0 / (c ratio) in logs; ratio is 0 for rows that are all zero
        log_rate = -stats.reference_mass / s0 - np.log(ratio / s0) if ratio > 0 else np.inf
        if log_rate >= np.log(self.max_rate):
            return ExponentialDistribution(self.max_rate)
        return ExponentialDistribution(float(np.exp(log_rate)))
