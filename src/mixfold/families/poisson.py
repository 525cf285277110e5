"""Poisson distribution over counts 0, 1, 2, ... with rate ``lam``."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from mixfold.compute.feature_cache import cache_for
from mixfold.errors import ParameterError
from mixfold.families._scipy import gammaln, xlogy
from mixfold.families.contract import (LeafEstimator, LinearForm, LinearLeafDistribution,
                                       accumulator_for, family)
from mixfold.options import number

__all__ = ["PoissonDistribution", "PoissonEstimator", "PoissonAccumulator", "PoissonStatistics"]

#: log(x!) for counts below this come from a table (a gather) rather than gammaln (~25 ns each)
LOG_FACTORIAL_TABLE_SIZE = 4096


@functools.cache
def _log_factorials() -> np.ndarray:
    """The table, made on first use (not at import: scipy is imported when first needed)."""
    return gammaln(np.arange(LOG_FACTORIAL_TABLE_SIZE) + 1.0)


def log_factorial(counts: np.ndarray) -> np.ndarray:
    """``log(x!)`` of integer-valued counts (float64 array).

    >>> log_factorial(np.array([0.0, 3.0, 5000.0])).round(4).tolist()
    [0.0, 1.7918, 37591.1435]
    """
    if counts.size and counts.max() < LOG_FACTORIAL_TABLE_SIZE:
        return _log_factorials()[counts.astype(np.intp)]
    return gammaln(counts + 1.0)


def _minus_log_factorials(x: np.ndarray) -> np.ndarray:
    """``-log(x!)`` of the counts ``x``, kept with the fused E-step's features where the rows
    stay resident (:mod:`mixfold.compute.feature_cache`): it depends on the rows only, so it is
    computed once per fit, not once per fold."""
    store = cache_for(("poisson -log x!",), [x], x.nbytes, x.nbytes)
    base = None if store is None else store.get("base")
    if base is None:
        base = -log_factorial(x)
        if store is not None:
            store["base"] = base
    return base


class PoissonStatistics(NamedTuple):
    """A Poisson's statistics of weighted rows."""

    weight: float  #: the sum of the weights
    total: float  #: the weighted sum of the counts


@family("Poisson")
class PoissonDistribution(LinearLeafDistribution):
    """Poisson with rate ``lam`` >= 0 (``lam = 0`` is the point mass at 0).

    >>> d = PoissonDistribution(3.0)
    >>> round(d.log_density(2), 6)
    -1.495923
    >>> d.sampler(0).sample(3).dtype
    dtype('int64')
    """

    domain = "count"
    parameter_coordinates = {"lam": "positive"}
    Statistics = PoissonStatistics

    def __init__(self, lam: float):
        self.lam = float(lam)
        if not (np.isfinite(self.lam) and self.lam >= 0):
            raise ParameterError(f"lam must be finite and >= 0, got {lam!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        lam = dt.type(self.lam)
        # xlogy gives 0 * log(0) = 0, so lam = 0 scores 0 at x = 0 and -inf elsewhere, never NaN
        return xlogy(x.astype(dt, copy=False), lam) - lam - log_factorial(x).astype(dt, copy=False)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.poisson(self.lam, size=n).astype(np.int64)

    @staticmethod
    def features(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return (x,)

    def natural(self) -> LinearForm | None:
        """``log p(x) = x log lam - lam - log x!``: none at ``lam = 0``."""
        return LinearForm((np.log(self.lam),), -self.lam) if self.lam > 0 else None

    @staticmethod
    def base(x: np.ndarray) -> np.ndarray:
        """``-log x!``: thousands of nats for large counts, kept out of the bands."""
        return _minus_log_factorials(x)


PoissonAccumulator = accumulator_for(PoissonDistribution)


class PoissonEstimator(LeafEstimator):
    """M-step for :class:`PoissonDistribution`: ``lam`` is the weighted mean count.

    ``min_lam`` (> 0) floors the rate, so a component that only sees zeros keeps a positive rate
    and still scores other counts finitely. With no weight at all the estimate is
    ``PoissonDistribution(1.0)``. ``prior_shape`` and ``prior_rate``, a Gamma(shape, rate)
    prior on the rate in hmmlearn's convention (its ``lambdas_prior`` and ``lambdas_weight``):
    ``lam = (prior_shape + sum w x) / (prior_rate + sum w)``, the posterior mean (with no weight
    and a prior, ``prior_shape / prior_rate``).

    >>> import mixfold
    >>> x = PoissonDistribution(4.0).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, PoissonEstimator(), progress=False)
    >>> round(d.lam, 1)
    4.0
    >>> mixfold.optimize([2, 4], PoissonEstimator(prior_shape=3.0, prior_rate=1.0),
    ...                  progress=False).lam    # (3 + 6) / (1 + 2)
    3.0
    """

    distribution_class = PoissonDistribution
    option_rules = {"min_lam": number(0, above=True), "prior_shape": number(0),
                    "prior_rate": number(0)}

    def __init__(self, min_lam: float = 1e-10, keys: str | None = None, *,
                 prior_shape: float = 0.0, prior_rate: float = 0.0):
        super().__init__(keys)
        self.check_options(min_lam=min_lam, prior_shape=prior_shape, prior_rate=prior_rate)
        self.min_lam = float(min_lam)
        self.prior_shape = float(prior_shape)
        self.prior_rate = float(prior_rate)

    def from_statistics(self, stats: PoissonStatistics) -> PoissonDistribution:
        weight, total = stats.weight + self.prior_rate, stats.total + self.prior_shape
        if weight <= 0:
            return PoissonDistribution(1.0)
        return PoissonDistribution(max(total / weight, self.min_lam))
