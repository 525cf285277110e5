"""Log-normal distribution on x > 0: log x ~ N(mu, sigma2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mixfold.compute.linear import LinearTerms
from mixfold.families._intervals import IntervalLaw, scipy_stats, truncated_normal_moments
from mixfold.families.contract import (ArrayEncoded, Encoded, LeafDistribution, RelativeScoring,
                                       SeedsFromLogs, StackedScoring, family)
from mixfold.families.gaussian import (GaussianAccumulator, GaussianDistribution,
                                       GaussianEstimator, GaussianStatistics)
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["LogGaussianDistribution", "LogGaussianEstimator", "LogGaussianAccumulator"]


@family("LogGaussian")
class LogGaussianDistribution(LeafDistribution, StackedScoring, SeedsFromLogs, RelativeScoring,
                              IntervalLaw):
    """Log-normal: ``log x`` is Gaussian with mean ``mu`` and variance ``sigma2``, for x > 0.

    The density of x includes the Jacobian ``1/x`` of the log transform.

    >>> d = LogGaussianDistribution(0.5, 0.25)
    >>> round(d.log_density(2.0), 6)
    -0.99355
    >>> d.sampler(0).sample(3).shape
    (3,)
    """

    domain = "positive"
    parameter_coordinates = {"mu": "real", "sigma2": "positive"}
    location_spread = ("mu", "sigma2")  # a held mean re-centres the estimated variance
    Statistics = GaussianStatistics  # those of log x

    def __init__(self, mu: float, sigma2: float):
        self.log_law = GaussianDistribution(mu, sigma2)  # validates the parameters
        self.mu, self.sigma2 = self.log_law.mu, self.log_law.sigma2

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        y = np.log(x)  # the Jacobian -log x in float64
        return self.log_law.log_densities(y, dt).astype(np.float64, copy=False) - y

    @classmethod
    def stack_log_density(cls, components: Sequence[LogGaussianDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K)."""
        y = _log_encoded(enc)
        out = GaussianDistribution.stack_log_density([c.log_law for c in components], y, precision)
        out -= y.values.astype(out.dtype, copy=False)[:, None]
        return out

    @classmethod
    def stack_relative_log_density(cls, components: Sequence[LogGaussianDistribution],
                                   enc: Encoded) -> np.ndarray:
        """The Gaussian's on ``log x`` (the Jacobian ``-log x`` is the same for every
        component)."""
        return GaussianDistribution.stack_relative_log_density(
            [c.log_law for c in components], _log_encoded(enc))

    @classmethod
    def stack_far_rows(cls, components: Sequence[LogGaussianDistribution],
                       enc: Encoded) -> np.ndarray:
        """The Gaussian's on ``log x``."""
        return GaussianDistribution.stack_far_rows([c.log_law for c in components],
                                                   _log_encoded(enc))

    def scipy_law(self) -> Any:
        """``scipy.stats.lognorm(sqrt(sigma2), scale=exp(mu))``."""
        return scipy_stats().lognorm(np.sqrt(self.sigma2), scale=np.exp(self.mu))

    def interval_points(self, low: np.ndarray, high: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """``exp(m -+ s)`` at probability 1/2 each: ``m`` and ``s^2`` the mean and variance of
        ``log x`` on each interval (a truncated normal, closed form)."""
        sd = np.sqrt(self.sigma2)
        with np.errstate(divide="ignore"):
            log_low, log_high = np.log(low), np.log(high)
        mean, var = truncated_normal_moments((log_low - self.mu) / sd, (log_high - self.mu) / sd)
        m, s = self.mu + sd * mean, sd * np.sqrt(var)
        return np.exp(np.stack([m - s, m + s], axis=1)), np.full((len(m), 2), 0.5)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.lognormal(self.mu, np.sqrt(self.sigma2), size=n)


class LogGaussianAccumulator(GaussianAccumulator):
    """The Gaussian statistics of ``log x``: weights, weighted logs and weighted squared logs."""

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        super()._add(np.log(x), w)

    @staticmethod
    def stack_update(accs: Sequence[LogGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights."""
        GaussianAccumulator.stack_update(accs, _log_encoded(enc), resp)

    @staticmethod
    def linear_terms(accs: Sequence[LogGaussianAccumulator],
                     components: Sequence[LogGaussianDistribution], enc: Encoded) -> LinearTerms:
        """The Gaussian terms of ``log x``, with ``-log x`` (the Jacobian) as the base term."""
        y = _log_encoded(enc)
        terms = GaussianAccumulator.linear_terms(accs, [c.log_law for c in components], y)
        # the features are those of log x: they are kept by the rows x they are read from
        return replace(terms, base=-y.values, source=enc.values, key=("log",) + terms.key)


class LogGaussianEstimator(GaussianEstimator):
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

    distribution_class = LogGaussianDistribution
    accumulator_class = LogGaussianAccumulator

    def from_statistics(self, stats: GaussianStatistics) -> LogGaussianDistribution:
        log_law = super().from_statistics(stats)
        return LogGaussianDistribution(log_law.mu, log_law.sigma2)


def _log_encoded(enc: Encoded) -> ArrayEncoded:
    return ArrayEncoded(np.log(enc.values), enc.start)
