"""Student's t on vectors of length D: location ``mu``, scale matrix ``scale`` (D x D) and ``nu``
degrees of freedom (scipy's ``multivariate_t(loc=mu, shape=scale, df=nu)``).

Its rows' latent precision scales and the statistics weighted by them are
:mod:`mixfold.families._t_scales`'."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._centred import FLOOR_MODES, central_moments
from mixfold.families._covariance import covariance_floor
from mixfold.families._missing import fill_for_points, has_missing, require_native
from mixfold.families._t_scales import MultivariateStudentTAccumulator, RowScales
from mixfold.families.contract import (Encoded, SeedsFromVectors, VectorLeafDistribution,
                                       VectorLeafEstimator, family)
from mixfold.families.gamma import gamma_shape_mle
from mixfold.families.multivariate_gaussian import MultivariateGaussianDistribution
from mixfold.options import flag, integer, none_or, number, one_of
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["MultivariateStudentTDistribution", "MultivariateStudentTEstimator",
           "MultivariateStudentTStatistics", "MultivariateStudentTAccumulator"]

#: The quantiles of each column the seeding points are clipped to: k-means's squared
#: distances would give the far rows of a heavy tail their own centres.
SEED_QUANTILES = (0.02, 0.98)


class MultivariateStudentTStatistics(NamedTuple):
    """A multivariate t's statistics of weighted rows: the moments of
    :class:`~mixfold.families._centred.CentredMoments` with row weights ``w u`` (``u`` the
    posterior mean of each row's precision scale), and what the equation of ``nu`` needs."""

    weight: np.ndarray  #: (1,) ``sum w u``
    sum_x: np.ndarray  #: (D,) ``sum w u (x - c)``
    sum_xx: np.ndarray  #: (D, D) ``sum w u (x - c)(x - c)^T``
    ref_mass: np.ndarray  #: (D,) ``sum w u c``
    scale_sums: np.ndarray  #: (3,) ``[sum w, sum w (E[log u] - u), model weight]``


@family("MultivariateStudentT")
class MultivariateStudentTDistribution(VectorLeafDistribution, SeedsFromVectors):
    """Student's t with location ``mu`` (length D), scale matrix ``scale`` (D x D, symmetric
    positive definite) and ``nu`` > 0 degrees of freedom: a Gaussian ``N(mu, scale / u)`` whose
    precision scale ``u`` is Gamma(``nu / 2``, rate ``nu / 2``), which is how its estimator
    fits it. Its covariance is ``scale * nu / (nu - 2)`` for ``nu > 2``. Rows are vectors of
    length D (array of shape (n_rows, D)).

    With ``missing=True`` an entry may be NaN (missing at random): a row is scored by the
    marginal density of its observed coordinates, itself a t with the same ``nu``.

    >>> d = MultivariateStudentTDistribution([0.0, 1.0], [[2.0, 0.5], [0.5, 1.0]], 4.0)
    >>> round(d.log_density([0.5, 0.0]), 6)  # scipy.stats.multivariate_t(...).logpdf
    -3.111756
    >>> d.sampler(0).sample(3).shape
    (3, 2)
    """

    parameter_coordinates = {"mu": "real", "scale": "covariance", "nu": "positive",
                             "missing": "fixed"}
    estimated_jointly = ("mu", "scale", "nu")
    Statistics = MultivariateStudentTStatistics

    def __init__(self, mu: Sequence[float] | np.ndarray,
                 scale: Sequence[Sequence[float]] | np.ndarray, nu: float,
                 missing: bool = False):
        try:
            self.gaussian = MultivariateGaussianDistribution(mu, scale, missing)
        except ParameterError as err:  # the same checks, in this family's words
            raise ParameterError(str(err).replace("cov", "scale")) from None
        self.nu = float(nu) if isinstance(nu, (int, float, np.number)) else np.nan
        if not (np.isfinite(self.nu) and self.nu > 0):
            raise ParameterError(f"nu must be finite and > 0, got {nu!r}")

    @property
    def mu(self) -> np.ndarray:
        """The location (D,)."""
        return self.gaussian.mu

    @property
    def scale(self) -> np.ndarray:
        """The scale matrix (D, D)."""
        return self.gaussian.cov

    @property
    def missing(self) -> bool:
        """Whether rows may miss entries (NaN)."""
        return self.gaussian.missing

    @property
    def row_work(self) -> float:  # type: ignore[override]
        """Whitening a row by the D x D precision factor (and its outer product in the
        statistics) costs D^2 per row, a log and a digamma more."""
        return float(self.dim * self.dim + 3)

    @property
    def param_bytes(self) -> int:  # type: ignore[override]
        """Its Gaussian's: the location, the scale and its two Cholesky factors."""
        return self.gaussian.param_bytes

    def row_scales(self, enc: Encoded) -> RowScales:
        """Each row's Mahalanobis distance and what its latent scale's posterior needs."""
        return RowScales(self, enc)

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if has_missing(enc):
            require_native(precision, "MultivariateStudentT")
        return self.row_scales(enc).log_density(self.nu)

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, D) for k-means++ seeding, each column clipped to its
        central :data:`SEED_QUANTILES` (heavy tails: far rows would take centres of their own),
        a missing entry at its column's mean."""
        points = fill_for_points(enc)
        if len(points) == 0:
            return points
        low, high = np.quantile(points, SEED_QUANTILES, axis=0)
        return np.clip(points, low, high)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        z = rng.standard_normal((n, self.dim)) @ self.gaussian.cov_cholesky.T
        u = rng.gamma(0.5 * self.nu, 2.0 / self.nu, size=n)
        return self.mu + z / np.sqrt(u)[:, None]


class MultivariateStudentTEstimator(VectorLeafEstimator):
    """M-step for :class:`MultivariateStudentTDistribution`: EM through the latent precision
    scale (Liu & Rubin 1995, "ML estimation of the t distribution using EM and its extensions").

    The E-step weighs every row by the posterior mean of its scale, ``u = (nu + D) / (nu +
    delta^2)`` (``delta^2`` the row's squared Mahalanobis distance under the current
    parameters), so far rows pull the location and scale less; the M-step takes the weighted
    mean and scatter (``sum w u (x - mu)(x - mu)^T / sum w``) and, unless ``nu`` is given (then
    fixed), solves ``log(nu/2) - digamma(nu/2) = -(1 + mean(E[log u] - E[u]))`` by Newton's
    method (:func:`~mixfold.families.gamma.gamma_shape_mle`), capped at ``max_nu`` (a Gaussian
    in the limit). The start has ``nu = start_nu`` and the plain mean and covariance.

    ``dim`` is D (``None``: learnt from the data); ``reg_covar`` and ``reg_covar_mode`` floor
    the scale's diagonal as :class:`~mixfold.MultivariateGaussianEstimator`'s do;
    ``missing=True`` lets entries be NaN (exact EM: a missing block enters by its conditional
    mean and scale). With no weight at all the estimate is ``MultivariateStudentT(0, I, nu)``.

    >>> import mixfold
    >>> truth = MultivariateStudentTDistribution([1.0, -2.0], [[1.0, 0.6], [0.6, 2.0]], 4.0)
    >>> d = mixfold.optimize(truth.sampler(1).sample(20000), MultivariateStudentTEstimator(),
    ...                      max_iter=300, progress=False)
    >>> d.mu.round(1).tolist(), d.scale.round(1).tolist(), round(d.nu)
    ([1.0, -2.0], [[1.0, 0.6], [0.6, 2.0]], 4)
    """

    accumulator_class = MultivariateStudentTAccumulator
    missing_accumulator_class = MultivariateStudentTAccumulator
    distribution_class = MultivariateStudentTDistribution

    option_rules = {"dim": none_or(integer(1)), "nu": none_or(number(0, above=True)),
                    "start_nu": number(0, above=True), "max_nu": number(0, above=True),
                    "reg_covar": number(0), "reg_covar_mode": one_of(*FLOOR_MODES),
                    "missing": flag()}

    def __init__(self, dim: int | None = None, nu: float | None = None, start_nu: float = 10.0,
                 max_nu: float = 1e6, reg_covar: float = 1e-6, reg_covar_mode: str = "absolute",
                 missing: bool = False, keys: str | None = None):
        super().__init__(keys)
        self.check_options(dim=dim, nu=nu, start_nu=start_nu, max_nu=max_nu,
                           reg_covar=reg_covar, reg_covar_mode=reg_covar_mode, missing=missing)
        self.dim = None if dim is None else int(dim)
        self.nu = None if nu is None else float(nu)
        self.start_nu = float(start_nu)
        self.max_nu = float(max_nu)
        self.reg_covar = float(reg_covar)
        self.reg_covar_mode = reg_covar_mode
        self.missing = bool(missing)

    def from_statistics(self, stats: MultivariateStudentTStatistics
                        ) -> MultivariateStudentTDistribution:
        weight, sum_x, sum_xx, ref_mass, (s0, s_log, m0) = stats
        d = sum_x.size
        nu = self.start_nu if self.nu is None else self.nu
        if not (s0 > 0 and weight[0] > 0):
            return MultivariateStudentTDistribution(np.zeros(d), np.eye(d), nu, self.missing)
        su, mu, second = central_moments(weight, sum_x, sum_xx, ref_mass)
        scale = second * (su / s0)
        scale.flat[::d + 1] += covariance_floor(np.diagonal(scale), self.reg_covar,
                                                self.reg_covar_mode)
        if self.nu is None and m0 > 0:
            # log(k) - digamma(k) = gap >= 0 for k = nu/2 (E[log u] - E[u] <= -1 by Jensen)
            gap = max(-(1.0 + s_log / s0), 0.0)
            nu = 2.0 * gamma_shape_mle(gap, 0.5 * self.max_nu)
        return MultivariateStudentTDistribution(mu, scale, nu, self.missing)
