"""Student's t distribution: a robust location ``mu`` with squared scale ``sigma2`` and ``nu``
degrees of freedom (scipy's ``t(nu, loc=mu, scale=sqrt(sigma2))``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.capabilities import SeedsFromPoints
from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._encoders import NumericEncoder
from mixfold.families.contract import LeafEstimator, ModelStatsAccumulator
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families._scipy import digamma, gammaln
from mixfold.families.gamma import gamma_shape_mle
from mixfold.options import none_or, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["StudentTDistribution", "StudentTEstimator", "StudentTAccumulator"]


@family("StudentT", kind="student_t")
class StudentTDistribution(Distribution, SeedsFromPoints):
    """Student's t with location ``mu``, squared scale ``sigma2`` > 0 and ``nu`` > 0 degrees of
    freedom: a Gaussian ``N(mu, sigma2 / u)`` whose precision scale ``u`` is
    Gamma(``nu / 2``, rate ``nu / 2``), which is how its estimator fits it.

    >>> d = StudentTDistribution(1.0, 4.0, 3.0)
    >>> round(d.log_density(2.5), 6)  # scipy.stats.t(3, loc=1, scale=2).logpdf(2.5)
    -2.037737
    """

    parameter_coordinates = {"mu": "real", "sigma2": "positive", "nu": "positive"}
    estimated_jointly = ("mu", "sigma2", "nu")

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

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.log_norm - 0.5 * (self.nu + 1.0) * np.log1p(
            self.scaled_squares(enc.values) / self.nu)

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, 1) for k-means++ seeding of mixtures."""
        return enc.values[:, None]

    def encoder(self) -> Encoder:
        return NumericEncoder("real")

    def estimator(self, **options: Any) -> StudentTEstimator:
        return StudentTEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mu + np.sqrt(self.sigma2) * rng.standard_t(self.nu, size=n)

    def n_parameters(self) -> int:
        return 3

    def _params(self) -> dict[str, Any]:
        return {"mu": self.mu, "sigma2": self.sigma2, "nu": self.nu}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> StudentTDistribution:
        return cls(p["mu"], p["sigma2"], p["nu"])

    def decomposition(self) -> Decomposition:
        """Atomic: a log per row to score, a digamma-free log more to accumulate."""
        return Decomposition.atomic(row_work=3.0, param_bytes=32)


class StudentTAccumulator(ModelStatsAccumulator):
    """Statistics: ``[sum w, sum w u, sum w u z, sum w u z^2, sum w (E[log u] - u), sum w c,
    model weight]`` with ``u`` the posterior mean of each row's precision scale and
    ``z = x - c`` centred on the current location ``c`` (so the variance does not come from a
    difference of large sums). The start (no model) has ``u = 1`` and ``c = 0``."""

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(7)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]

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

    accumulator_class = StudentTAccumulator
    distribution_class = StudentTDistribution

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

    def encoder(self) -> Encoder:
        return NumericEncoder("real")

    def estimate(self, nobs: float, stats: Any) -> StudentTDistribution:
        (sums,), _ = stats
        s0, su, suz, suzz, slog, sc, m0 = sums
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
