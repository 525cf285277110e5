"""Negative binomial distribution over counts 0, 1, 2, ... (over-dispersed counts), in scipy's
``nbinom(n=r, p)`` convention: the number of failures before the ``r``-th success."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from mixfold.decomposition import Decomposition
from mixfold.errors import DegenerateFitWarning, ParameterError
from mixfold.families.contract import (Encoded, LeafDistribution, LeafEstimator,
                                       ModelStatsAccumulator, RecordSums, SeedsFromPoints,
                                       family)
from mixfold.families._scipy import digamma, gammaln, xlog1py
from mixfold.families.gamma import gamma_shape_mle
from mixfold.families.poisson import log_factorial
from mixfold.options import number

__all__ = ["NegativeBinomialDistribution", "NegativeBinomialEstimator",
           "NegativeBinomialAccumulator", "NegativeBinomialStatistics"]


class NegativeBinomialStatistics(NamedTuple):
    """A negative binomial's statistics of weighted rows: the moments a start is taken from,
    then the E-step's sums over the latent Gamma rate ``lam`` of each row, in units of its
    posterior scale ``1 - p`` (the Gamma shape does not depend on the unit); zero at the start,
    which has no model to take a posterior under."""

    weight: float  #: the sum of the weights
    total: float  #: the weighted sum of the counts
    squares: float  #: the weighted sum of the squared counts
    latent_weight: float  #: the sum of the weights, as the E-step adds rows under a model
    latent_rate: float  #: the weighted sum of ``E[lam | x]``
    latent_log_rate: float  #: the weighted sum of ``E[log lam | x]``


@family("NegativeBinomial")
class NegativeBinomialDistribution(LeafDistribution, SeedsFromPoints):
    """Negative binomial with ``r`` > 0 and success probability ``p`` in (0, 1]:
    ``P(x) = Gamma(x + r) / (Gamma(r) x!) p**r (1 - p)**x``, mean ``r (1 - p) / p``, variance
    ``mean / p`` (``p = 1`` is the point mass at 0). It is a Poisson whose rate is
    Gamma(shape ``r``, scale ``(1 - p) / p``), which is how its estimator fits it.

    >>> d = NegativeBinomialDistribution(3.0, 0.4)
    >>> round(d.log_density(2), 6)  # scipy.stats.nbinom(3, 0.4).logpmf(2)
    -1.978764
    >>> d.sampler(0).sample(3).dtype
    dtype('int64')
    """

    domain = "count"
    parameter_coordinates = {"r": "positive", "p": "unit"}
    estimated_jointly = ("r", "p")
    Statistics = NegativeBinomialStatistics

    def __init__(self, r: float, p: float):
        self.r = float(r)
        self.p = float(p)
        if not (np.isfinite(self.r) and self.r > 0):
            raise ParameterError(f"r must be finite and > 0, got {r!r}")
        if not (0.0 < self.p <= 1.0):
            raise ParameterError(f"p must be in (0, 1], got {p!r}")

    @property
    def mean(self) -> float:
        return self.r * (1.0 - self.p) / self.p

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        """In float64 in every band: the two log-gammas nearly cancel when r is large."""
        out = gammaln(x + self.r) - gammaln(self.r)
        out += xlog1py(x, -self.p)  # 0 * log(0) = 0: p = 1 is the point mass at 0
        out += self.r * np.log(self.p)
        out -= log_factorial(x)
        return out

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, 1) for k-means++ seeding of mixtures, on the log scale
        (over-dispersed counts spread over orders of magnitude)."""
        return np.log1p(enc.values)[:, None]

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.negative_binomial(self.r, self.p, size=n).astype(np.int64)

    def decomposition(self) -> Decomposition:
        """Atomic: two log-gammas per row, about four scalar leaves' work."""
        return Decomposition.atomic(row_work=4.0, param_bytes=16)


class NegativeBinomialAccumulator(ModelStatsAccumulator, RecordSums):
    """Statistics: :class:`NegativeBinomialStatistics`, in one array ``sums``."""

    family = NegativeBinomialDistribution

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        # einsum, not BLAS: a dot product per call would wake the BLAS threads
        self.sums[:3] += (w.sum(), np.einsum("i,i->", w, x), np.einsum("i,i,i->", w, x, x))

    def _add_model(self, x: np.ndarray, w: np.ndarray,
                   model: NegativeBinomialDistribution) -> None:
        self._add(x, w)
        # lam | x ~ Gamma(r + x, scale 1 - p): in units of 1 - p, p = 1 takes no log(0)
        shape = x + model.r
        self.sums[3:] += (w.sum(), np.einsum("i,i->", w, shape),
                          np.einsum("i,i->", w, digamma(shape)))


class NegativeBinomialEstimator(LeafEstimator):
    """M-step for :class:`NegativeBinomialDistribution`: EM through the latent Gamma rate.

    Each E-step gives the posterior Gamma of every row's Poisson rate; the M-step fits the
    Gamma's shape ``r`` to their expected values and logs (Newton's method on
    ``log r - digamma(r)``, :func:`~mixfold.families.gamma.gamma_shape_mle`), then takes ``p``
    as the exact maximum given ``r``, ``r / (r + mean)`` (an ECME step: the likelihood never
    decreases). The start (no model yet) is the method of moments. Counts with no more spread
    than a Poisson drive ``r`` to ``max_r`` (a Poisson in the limit), with a
    :class:`~mixfold.DegenerateFitWarning`. ``min_mean`` floors the mean, so a component that
    sees only zeros keeps ``p < 1``.

    >>> import mixfold
    >>> x = NegativeBinomialDistribution(3.0, 0.4).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, NegativeBinomialEstimator(), max_iter=500, progress=False)
    >>> round(d.r, 1), round(d.p, 2)
    (3.0, 0.4)
    """

    accumulator_class = NegativeBinomialAccumulator
    distribution_class = NegativeBinomialDistribution

    option_rules = {"max_r": number(0, above=True), "min_mean": number(0, above=True)}

    def __init__(self, max_r: float = 1e6, min_mean: float = 1e-10, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_r=max_r, min_mean=min_mean)
        self.max_r = float(max_r)
        self.min_mean = float(min_mean)

    def from_statistics(self, stats: NegativeBinomialStatistics) -> NegativeBinomialDistribution:
        s0, m0 = stats.weight, stats.latent_weight
        if s0 <= 0:
            return NegativeBinomialDistribution(1.0, 0.5)
        mean = max(stats.total / s0, self.min_mean)
        if m0 > 0:
            r = gamma_shape_mle(np.log(stats.latent_rate / m0) - stats.latent_log_rate / m0,
                                self.max_r)
        else:  # the start: variance = mean + mean^2 / r
            extra = stats.squares / s0 - mean * mean - mean
            r = mean * mean / extra if extra > 0 else self.max_r
        r = min(r, self.max_r)
        if r >= self.max_r and m0 > 0:  # (stacklevel: the caller of estimate)
            warnings.warn(f"a negative binomial r reached its cap max_r={self.max_r:g}: counts "
                          f"of total weight {s0:.6g} spread no more than a Poisson's",
                          DegenerateFitWarning, stacklevel=3)
        return NegativeBinomialDistribution(r, r / (r + mean))
