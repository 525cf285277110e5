"""Beta distribution over proportions in (0, 1), scipy's ``beta(a, b)``."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from mixfold.compute.linear import LinearTerms
from mixfold.errors import DegenerateFitWarning, ParameterError
from mixfold.families._scipy import gammaln
from mixfold.families.contract import (Encoded, LeafDistribution, LeafEstimator,
                                       LinearInFeatures, RecordSums, SeedsFromPoints,
                                       StackedScoring, StackedUpdate, family)
from mixfold.families.dirichlet import dirichlet_mle, moment_start, transposed_features
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["BetaDistribution", "BetaEstimator", "BetaAccumulator", "BetaStatistics"]


class BetaStatistics(NamedTuple):
    """A Beta's statistics of weighted rows (the logs are sufficient; the moments give Newton
    its start)."""

    weight: float  #: the sum of the weights
    log_sum: float  #: the weighted sum of ``log x``
    log1m_sum: float  #: the weighted sum of ``log(1 - x)``
    total: float  #: the weighted sum of ``x``
    square_sum: float  #: the weighted sum of ``x^2``


def _features(x: np.ndarray) -> np.ndarray:
    """``[log x, log(1-x), x, x^2]`` of every row, (n_rows, 4): the weighted sums of a
    statistics record but the first, taken as one matrix product."""
    return np.stack([np.log(x), np.log1p(-x), x, x * x], axis=1)


@family("Beta")
class BetaDistribution(LeafDistribution, StackedScoring, SeedsFromPoints):
    """Beta with shapes ``a`` > 0 and ``b`` > 0: density
    ``x**(a-1) (1-x)**(b-1) / B(a, b)`` on (0, 1); a Dirichlet with two parts.

    >>> d = BetaDistribution(2.0, 5.0)
    >>> round(d.log_density(0.25), 6)  # scipy.stats.beta(2, 5).logpdf(0.25)
    0.864175
    >>> bool(((d.sampler(0).sample(100) > 0) & (d.sampler(0).sample(100) < 1)).all())
    True
    """

    domain = "unit_interval"
    parameter_coordinates = {"a": "positive", "b": "positive"}
    estimated_jointly = ("a", "b")
    Statistics = BetaStatistics
    row_work = 2.0  # two logs and two multiply-adds a row
    param_bytes = 24  # and its normaliser

    def __init__(self, a: float, b: float):
        self.a = float(a)
        self.b = float(b)
        for name, v, given in (("a", self.a, a), ("b", self.b, b)):
            if not (np.isfinite(v) and v > 0):
                raise ParameterError(f"{name} must be finite and > 0, got {given!r}")
        self.log_norm = float(gammaln(self.a + self.b) - gammaln(self.a) - gammaln(self.b))

    @property
    def mean(self) -> float:
        return self.a / (self.a + self.b)

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        return (self.a - 1.0) * np.log(x) + (self.b - 1.0) * np.log1p(-x) + self.log_norm

    @classmethod
    def stack_log_density(cls, components: Sequence[BetaDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-densities of all K components at once, (n_rows, K), in float64 (one matrix
        product: the contract's linear derivation would sum the two terms in another order)."""
        logs = np.stack([np.log(enc.values), np.log1p(-enc.values)], axis=1)  # (n, 2)
        coef = np.array([[c.a - 1.0 for c in components], [c.b - 1.0 for c in components]])
        return logs @ coef + np.array([c.log_norm for c in components])

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, 1) for k-means++ seeding of mixtures, on the logit scale
        (proportions crowd near 0 and 1)."""
        x = enc.values
        return (np.log(x) - np.log1p(-x))[:, None]

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        # small shapes put real mass within a rounding of 0 or 1: keep draws inside (0, 1)
        x = rng.beta(self.a, self.b, size=n)
        tiny = np.finfo(np.float64).tiny
        return np.clip(x, tiny, np.nextafter(1.0, 0.0))


class BetaAccumulator(RecordSums, StackedUpdate, LinearInFeatures):
    """:class:`BetaStatistics`, the weighted sums of the features as one matrix product (for
    K components too, and by the fused E-step)."""

    family = BetaDistribution

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        self.sums[0] += w.sum()
        self.sums[1:] += w @ _features(x)

    @staticmethod
    def stack_update(accs: Sequence[BetaAccumulator], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights."""
        phi = _features(enc.values)
        for k, acc in enumerate(accs):
            acc.sums[0] += resp[:, k].sum()
            acc.sums[1:] += resp[:, k] @ phi

    @staticmethod
    def linear_terms(accs: Sequence[BetaAccumulator], components: Sequence[BetaDistribution],
                     enc: Encoded) -> LinearTerms:
        """``log p_k(x) = (a_k - 1) log x + (b_k - 1) log(1-x) + log_norm_k`` on the features
        ``[log x, log(1-x), x, x^2]`` (the moments with coefficient 0: summed for the start).
        A shape below 1 makes the density unbounded at 0 or 1: then no peak."""
        x = enc.values
        k = len(components)
        shapes = np.array([[c.a, c.b] for c in components])
        coef = np.concatenate([shapes - 1.0, np.zeros((k, 2))], axis=1)
        const = np.array([c.log_norm for c in components])

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            transposed_features(_features(x[lo:hi]), out)

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, m, s in zip(accs, mass, sums):
                acc.sums[0] += m
                acc.sums[1:] += s

        peak = None
        if (shapes >= 1.0).all():  # the log-density at the mode (a - 1) / (a + b - 2)
            excess = shapes - 1.0
            with np.errstate(divide="ignore", invalid="ignore"):
                mode = excess / excess.sum(axis=1, keepdims=True)
                at_mode = np.where(excess > 0, excess * np.log(mode), 0.0).sum(axis=1)
            peak = np.where(excess.sum(axis=1) > 0, at_mode, 0.0) + const
        return LinearTerms(coef, const, features, add_sums, peak=peak, source=x, key=("beta",))


class BetaEstimator(LeafEstimator):
    """M-step for :class:`BetaDistribution`: the maximum likelihood shapes (Newton's method
    from the method of moments, as a two-part Dirichlet,
    :func:`~mixfold.families.dirichlet.dirichlet_mle`).

    ``max_concentration`` caps ``a + b``: rows that all sit on one value have no finite
    maximum and get the cap, with a :class:`~mixfold.DegenerateFitWarning`. With no weight at
    all the estimate is the uniform ``BetaDistribution(1, 1)``.

    >>> import mixfold
    >>> x = BetaDistribution(2.0, 5.0).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, BetaEstimator(), progress=False)
    >>> round(d.a, 1), round(d.b, 0)
    (2.0, 5.0)
    """

    distribution_class = BetaDistribution
    accumulator_class = BetaAccumulator

    option_rules = {"max_concentration": number(0, above=True)}

    def __init__(self, max_concentration: float = 1e8, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_concentration=max_concentration)
        self.max_concentration = float(max_concentration)

    def from_statistics(self, stats: BetaStatistics) -> BetaDistribution:
        w, log_x, log_1mx, s1, s2 = stats
        if w <= 0:
            return BetaDistribution(1.0, 1.0)
        mean, mean_sq = s1 / w, s2 / w
        start = moment_start(np.array([mean, 1.0 - mean]),
                             np.array([mean_sq, 1.0 - 2.0 * mean + mean_sq]))
        (a, b), capped = dirichlet_mle(np.array([log_x, log_1mx]) / w, start,
                                       self.max_concentration)
        if capped:
            warnings.warn(f"a Beta's a + b reached its cap max_concentration="
                          f"{self.max_concentration:g}; rows of total weight {w:.6g} sit on "
                          f"(nearly) one value, {mean:.6g}", DegenerateFitWarning, stacklevel=3)
        return BetaDistribution(a, b)
