"""Student's t distribution: a robust location ``mu`` with squared scale ``sigma2`` and ``nu``
degrees of freedom (scipy's ``t(nu, loc=mu, scale=sqrt(sigma2))``)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._scipy import digamma, gammaln
from mixfold.families.contract import (LeafDistribution, LeafEstimator, ModelStatsAccumulator,
                                       RecordSums, SeedsFromValues, family)
from mixfold.families.gamma import gamma_shape_mle
from mixfold.options import none_or, number

__all__ = ["StudentTDistribution", "StudentTEstimator", "StudentTAccumulator",
           "StudentTStatistics"]


class StudentTStatistics(NamedTuple):
    """A Student's t's statistics of weighted rows, with ``u`` the posterior mean of each row's
    precision scale and ``z = x - c`` centred on the current location ``c`` (so the variance
    does not come from a difference of large sums). The start (no model) has ``u = 1`` and
    ``c = 0``."""

    weight: float  #: the sum of the weights
    u_sum: float  #: the weighted sum of ``u``
    uz_sum: float  #: the weighted sum of ``u z``
    uzz_sum: float  #: the weighted sum of ``u z^2``
    log_u_gap: float  #: the weighted sum of ``E[log u] - u``
    centre_mass: float  #: the weighted sum of ``c``
    model_weight: float  #: the sum of the weights added under a model


@family("StudentT")
class StudentTDistribution(LeafDistribution, SeedsFromValues):
    """Student's t with location ``mu``, squared scale ``sigma2`` > 0 and ``nu`` > 0 degrees of
    freedom: a Gaussian ``N(mu, sigma2 / u)`` whose precision scale ``u`` is
    Gamma(``nu / 2``, rate ``nu / 2``), which is how its estimator fits it.

    >>> d = StudentTDistribution(1.0, 4.0, 3.0)
    >>> round(d.log_density(2.5), 6)  # scipy.stats.t(3, loc=1, scale=2).logpdf(2.5)
    -2.037737
    """

    domain = "real"
    parameter_coordinates = {"mu": "real", "sigma2": "positive", "nu": "positive"}
    estimated_jointly = ("mu", "sigma2", "nu")
    Statistics = StudentTStatistics
    row_work = 3.0  # a log a row to score, a digamma-free log more to accumulate
    param_bytes = 32  # and its normaliser

    def __init__(self, mu: float, sigma2: float, nu: float):
        self.mu = float(mu)
        self.sigma2 = float(sigma2)
        self.nu = float(nu)
        if not np.isfinite(self.mu):
            raise ParameterError(f"mu must be finite, got {mu!r}")
        if not (np.isfinite(self.sigma2) and self.sigma2 > 0):
            raise ParameterError(f"sigma2 must be finite and > 0, got {sigma2!r}")
        if not (np.isfinite(self.nu) and self.nu > 0):
            raise ParameterError(f"nu must be finite and > 0, got {nu!r}")
        half = 0.5 * (self.nu + 1.0)
        self.log_norm = float(gammaln(half) - gammaln(0.5 * self.nu)
                              - 0.5 * np.log(np.pi * self.nu * self.sigma2))

    def scaled_squares(self, x: np.ndarray) -> np.ndarray:
        """``(x - mu)^2 / sigma2`` of every row."""
        z = x - self.mu
        return z * z / self.sigma2

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        return self.log_norm - 0.5 * (self.nu + 1.0) * np.log1p(  # in float64 in every band
            self.scaled_squares(x) / self.nu)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mu + np.sqrt(self.sigma2) * rng.standard_t(self.nu, size=n)


class StudentTAccumulator(ModelStatsAccumulator, RecordSums):
    """:class:`StudentTStatistics`: the start's plain sums, then the E-step's under the
    current model."""

    family = StudentTDistribution

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        s0 = w.sum()
        self.sums[:4] += (s0, s0, np.einsum("i,i->", w, x), np.einsum("i,i,i->", w, x, x))

    def _add_model(self, x: np.ndarray, w: np.ndarray, model: StudentTDistribution) -> None:
        z = x - model.mu
        spread = model.nu + z * z / model.sigma2
        u = (model.nu + 1.0) / spread
        wu = w * u
        s0 = w.sum()
        log_u = digamma(0.5 * (model.nu + 1.0)) - np.log(0.5 * spread)
        # einsum, not BLAS: a dot product per call would wake the BLAS threads
        self.sums += (s0, wu.sum(), np.einsum("i,i->", wu, z), np.einsum("i,i,i->", wu, z, z),
                      np.einsum("i,i->", w, log_u - u), s0 * model.mu, s0)


class StudentTEstimator(LeafEstimator):
    """M-step for :class:`StudentTDistribution`: EM through the latent precision scale
    (Liu & Rubin 1995, "ML estimation of the t distribution using EM and its extensions").

    The E-step weighs every row by the posterior mean of its scale, ``(nu + 1) / (nu + d^2)``
    (``d^2 = (x - mu)^2 / sigma2``), so outliers pull the location less; the M-step takes the
    weighted mean and variance and, unless ``nu`` is given (then fixed), solves
    ``log(nu/2) - digamma(nu/2) = -(1 + mean(E[log u] - E[u]))`` by Newton's method
    (:func:`~mixfold.families.gamma.gamma_shape_mle`), capped at ``max_nu`` (a Gaussian in the
    limit). The start has ``nu = start_nu`` and the plain mean and variance. ``min_sigma2``
    floors the squared scale. With no weight at all the estimate is ``StudentT(0, 1, nu)``.

    >>> import mixfold
    >>> x = StudentTDistribution(2.0, 0.25, 4.0).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, StudentTEstimator(), max_iter=300, progress=False)
    >>> round(d.mu, 1), round(d.sigma2, 2), round(d.nu)
    (2.0, 0.25, 4)
    """

    distribution_class = StudentTDistribution
    accumulator_class = StudentTAccumulator

    option_rules = {"nu": none_or(number(0, above=True)), "start_nu": number(0, above=True),
                    "max_nu": number(0, above=True), "min_sigma2": number(0, above=True)}

    def __init__(self, nu: float | None = None, start_nu: float = 10.0, max_nu: float = 1e6,
                 min_sigma2: float = 1e-12, keys: str | None = None):
        super().__init__(keys)
        self.check_options(nu=nu, start_nu=start_nu, max_nu=max_nu, min_sigma2=min_sigma2)
        self.start_nu = float(start_nu)
        self.max_nu = float(max_nu)
        self.min_sigma2 = float(min_sigma2)
        self.nu = None if nu is None else float(nu)

    def from_statistics(self, stats: StudentTStatistics) -> StudentTDistribution:
        s0, su, suz, suzz, slog, sc, m0 = stats
        nu = self.start_nu if self.nu is None else self.nu
        if s0 <= 0 or su <= 0:
            return StudentTDistribution(0.0, 1.0, nu)
        shift = suz / su
        mu = sc / s0 + shift
        sigma2 = max((suzz - suz * shift) / s0, self.min_sigma2)
        if self.nu is None and m0 > 0:
            # log(k) - digamma(k) = gap >= 0 for k = nu/2 (E[log u] - E[u] <= -1 by Jensen)
            gap = max(-(1.0 + slog / s0), 0.0)
            nu = 2.0 * gamma_shape_mle(gap, 0.5 * self.max_nu)
        return StudentTDistribution(mu, sigma2, nu)
