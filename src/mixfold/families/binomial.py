"""Binomial distribution: successes in ``n`` fixed trials of probability ``p`` (0, 1, ..., n)."""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._scipy import gammaln, xlog1py, xlogy
from mixfold.families.contract import (Encoder, LeafDistribution, LeafEstimator, NumericEncoder,
                                       accumulator_for, family)
from mixfold.options import number, rule

__all__ = ["BinomialDistribution", "BinomialEstimator", "BinomialAccumulator",
           "BinomialStatistics"]


#: The most trials: NumPy draws binomials with a 64-bit signed count.
MAX_TRIALS = 2**63 - 1


def _as_trials(n: Any) -> int | None:
    """``n`` as a number of trials (an integer in [0, MAX_TRIALS], not a bool), else None."""
    if isinstance(n, (bool, np.bool_)):
        return None
    try:
        n = operator.index(n)
    except TypeError:
        return None
    return n if 0 <= n <= MAX_TRIALS else None


class BinomialStatistics(NamedTuple):
    """A binomial's statistics of weighted rows."""

    weight: float  #: the sum of the weights
    successes: float  #: the weighted sum of the success counts


@family("Binomial")
class BinomialDistribution(LeafDistribution):
    """Binomial with ``n`` trials and success probability ``p`` in [0, 1].

    >>> d = BinomialDistribution(10, 0.3)
    >>> round(d.log_density(4), 6)
    -1.608833
    >>> int(d.sampler(0).sample(1000).max()) <= 10
    True
    """

    domain = "count"
    parameter_coordinates = {"n": "fixed", "p": "unit"}  # n is fixed by the estimator
    Statistics = BinomialStatistics

    def __init__(self, n: int, p: float):
        trials = _as_trials(n)
        if trials is None:
            raise ParameterError(f"n must be an integer in [0, 2**63 - 1], got {n!r:.40}")
        self.n = trials
        self.p = float(p)
        if not (0 <= self.p <= 1):
            raise ParameterError(f"p must be in [0, 1], got {p!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        x = x.astype(dt, copy=False)
        n, p, one = dt.type(self.n), dt.type(self.p), dt.type(1)
        log_choose = gammaln(n + one) - gammaln(x + one) - gammaln(n - x + one)
        # xlogy / xlog1py give 0 * log(0) = 0, so p = 0 and p = 1 are point masses, never NaN
        return log_choose + xlogy(x, p) + xlog1py(n - x, -p)

    def encoder(self) -> Encoder:
        return NumericEncoder("count", upper=self.n)

    def estimator(self, **options: Any) -> BinomialEstimator:
        options.setdefault("n", self.n)
        return BinomialEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.binomial(self.n, self.p, size=n).astype(np.int64)

    @staticmethod
    def features(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return (x,)


BinomialAccumulator = accumulator_for(BinomialDistribution)


class BinomialEstimator(LeafEstimator):
    """M-step for :class:`BinomialDistribution` with the number of trials ``n`` fixed.

    ``p`` is successes over trials. ``pseudo_count`` c adds c successes and c failures (the
    posterior mode under a Beta(1 + c, 1 + c) prior), which keeps ``p`` inside (0, 1). With no
    weight (or ``n = 0``) and no pseudo counts the estimate has ``p = 0.5``.

    >>> import mixfold
    >>> x = BinomialDistribution(12, 0.4).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, BinomialEstimator(12), progress=False)
    >>> d.n, round(d.p, 2)
    (12, 0.4)
    """

    distribution_class = BinomialDistribution

    option_rules = {"n": rule(lambda v: _as_trials(v) is not None, "an integer in [0, 2**63 - 1]"),
                    "pseudo_count": number(0)}

    def __init__(self, n: int, pseudo_count: float = 0.0, keys: str | None = None):
        super().__init__(keys)
        self.check_options(n=n, pseudo_count=pseudo_count)
        self.n = _as_trials(n)
        self.pseudo_count = float(pseudo_count)

    def encoder(self) -> Encoder:
        return NumericEncoder("count", upper=self.n)

    def from_statistics(self, stats: BinomialStatistics) -> BinomialDistribution:
        c = self.pseudo_count
        trials = self.n * stats.weight + 2 * c
        if trials <= 0:
            return BinomialDistribution(self.n, 0.5)
        # successes <= n per row, so the ratio is in [0, 1] up to rounding
        return BinomialDistribution(self.n, min((stats.successes + c) / trials, 1.0))
