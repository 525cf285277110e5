"""Student's t on vectors of length D: location ``mu``, scale matrix ``scale`` (D x D) and ``nu``
degrees of freedom (scipy's ``multivariate_t(loc=mu, shape=scale, df=nu)``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import SeedsFromPoints
from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._centred import (FLOOR_MODES, ROUNDOFF_FLOOR, CentredMoments,
                                       central_moments, variance_floor)
from mixfold.families._encoders import VectorEncoder, VectorFamily, bound_vector, vector_encoder
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._missing import (MissingPatterns, add_weighted_outer, fill_for_points,
                                       has_missing, require_native)
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families._scipy import digamma, gammaln
from mixfold.families.gamma import gamma_shape_mle
from mixfold.families.multivariate_gaussian import MultivariateGaussianDistribution
from mixfold.options import flag, integer, none_or, number, one_of
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["MultivariateStudentTDistribution", "MultivariateStudentTEstimator",
           "MultivariateStudentTAccumulator"]

#: The quantiles of each column the seeding points are clipped to: k-means's squared
#: distances would give the far rows of a heavy tail their own centres.
SEED_QUANTILES = (0.02, 0.98)


class _RowScales:
    """What the latent precision scale ``u`` of each row is under a model: ``observed`` (n,)
    the coordinates seen, ``distance`` (n,) the squared Mahalanobis distance ``delta^2`` of
    the seen coordinates, ``half_log_det`` (n,) half the log-determinant of their scale block,
    and for rows that miss entries the rows ``filled`` with their conditional means and the
    conditional scales ``covs`` of the missing blocks (per group of patterns)."""

    def __init__(self, dist: MultivariateStudentTDistribution, enc: Encoded):
        g = dist.gaussian
        self.covs: list[np.ndarray] = []
        if not has_missing(enc):
            self.filled = enc.values
            y = (enc.values - g.mu) @ g.precision_cholesky
            self.distance = np.einsum("ij,ij->i", y, y)
            self.observed = np.full(enc.n_rows, float(g.dim))
            self.half_log_det = np.full(enc.n_rows, -g.log_det_precision_cholesky)
            self.patterns: MissingPatterns | None = None
            return
        p = self.patterns = enc.patterns
        cond = g.conditionals(p)
        self.covs = cond.covs
        self.filled = cond.filled(g.mu, p)
        # the conditional term vanishes at the filled row: its distance is the observed one's
        y = (self.filled - g.mu) @ g.precision_cholesky
        self.distance = np.einsum("ij,ij->i", y, y)
        self.observed = p.observed.sum(axis=1)
        # log det scale_oo = log det scale + log det (scale^-1)_mm, one per pattern
        self.half_log_det = np.full(enc.n_rows, -g.log_det_precision_cholesky)
        lam = g.precision_cholesky @ g.precision_cholesky.T
        for group in p.groups:
            lam_mm = lam[group.index[:, :, None], group.index[:, None, :]]
            half = np.log(np.diagonal(np.linalg.cholesky(lam_mm), axis1=1, axis2=2)).sum(axis=1)
            self.half_log_det[group.rows] += half[group.local]

    def log_density(self, nu: float) -> np.ndarray:
        """``log t_{p}(x_o)`` with ``p`` the coordinates seen (0 for a row with none)."""
        half = 0.5 * (nu + self.observed)
        return (gammaln(half) - gammaln(0.5 * nu) - 0.5 * self.observed * np.log(nu * np.pi)
                - self.half_log_det - half * np.log1p(self.distance / nu))

    def posterior_scale(self, nu: float) -> tuple[np.ndarray, np.ndarray]:
        """``E[u]`` and ``E[log u]`` per row: ``u`` is Gamma((nu + p) / 2, rate (nu + delta^2)
        / 2) given the row."""
        shape, rate = 0.5 * (nu + self.observed), 0.5 * (nu + self.distance)
        return shape / rate, digamma(shape) - np.log(rate)


@family("MultivariateStudentT", kind="multivariate_student_t")
class MultivariateStudentTDistribution(VectorFamily, Distribution, SeedsFromPoints):
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

    #: model files leave ``missing`` out when it is False
    optional_params = ("missing",)

    parameter_coordinates = {"mu": "real", "scale": "covariance", "nu": "positive",
                             "missing": "fixed"}
    estimated_jointly = ("mu", "scale", "nu")

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
    def dim(self) -> int:
        """The length D of the vectors."""
        return self.gaussian.dim

    def row_scales(self, enc: Encoded) -> _RowScales:
        """Each row's Mahalanobis distance and what its latent scale's posterior needs."""
        return _RowScales(self, enc)

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

    def n_parameters(self) -> int:
        return self.dim + self.dim * (self.dim + 1) // 2 + 1

    def _params(self) -> dict[str, Any]:
        params = {"mu": self.mu.tolist(), "scale": self.scale.tolist(), "nu": self.nu}
        return {**params, "missing": True} if self.missing else params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> MultivariateStudentTDistribution:
        return cls(p["mu"], p["scale"], p["nu"], p.get("missing", False))

    def decomposition(self) -> Decomposition:
        """Atomic: whitening a row by the D x D precision factor (and its outer product in the
        statistics) costs D^2 per row, a log and a digamma more."""
        return Decomposition.atomic(row_work=float(self.dim * self.dim + 3),
                                    param_bytes=self.gaussian.decomposition().param_bytes)


class MultivariateStudentTAccumulator(CentredMoments, LeafAccumulator):
    """Statistics: the moments of :class:`~mixfold.families._centred.CentredMoments` with row
    weights ``w u`` (``u`` the posterior mean of each row's precision scale) — ``sum w u``,
    ``sum w u (x-c)`` (D), ``sum w u (x-c)(x-c)^T`` (D x D), ``sum w u c`` (D) — and
    ``scale_sums`` = ``[sum w, sum w (E[log u] - u), model weight]``, whose middle sum is what
    the equation of ``nu`` needs: every entry adds across shards. A missing block enters by its
    conditional mean, its outer products gaining the conditional scale (weight ``w``, since
    ``E[u (scale / u)] = scale``). The start (no model) has ``u = 1``."""

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(keys)
        self.weight = np.zeros(1)
        self.sum_x = np.zeros(dim)
        self.sum_xx = np.zeros((dim, dim))
        self.ref_mass = np.zeros(dim)
        self.scale_sums = np.zeros(3)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.weight, self.sum_x, self.sum_xx, self.ref_mass, self.scale_sums]

    @staticmethod
    def stack_reference(components: Sequence[MultivariateStudentTDistribution]) -> np.ndarray:
        """Each component's own location (components are updated one at a time)."""
        return np.array([c.mu for c in components])

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        self._add_moments(x, w, w)
        self.scale_sums[0] += w.sum()

    def seq_update(self, enc: Encoded, weights: np.ndarray,
                   model: MultivariateStudentTDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray:
        if precision.compensated:
            self.seq_update_dd(enc, weights, np.zeros_like(weights), model)  # raises: no dd sums
        if has_missing(enc):
            require_native(precision, "MultivariateStudentT")
        rows = model.row_scales(enc)
        w = weights if rows.patterns is None else np.where(rows.observed > 0, weights, 0.0)
        u, log_u = rows.posterior_scale(model.nu)
        if not self.has_point():
            self.set_reference(model.mu)
        self._add_moments(rows.filled, w, w * u)
        if rows.patterns is not None:
            for g, cov in zip(rows.patterns.groups, rows.covs):
                mass = np.bincount(g.local, weights=w[g.rows], minlength=cov.shape[0])
                np.add.at(self.sum_xx, (g.index[:, :, None], g.index[:, None, :]),
                          mass[:, None, None] * cov)
        s0 = w.sum()
        self.scale_sums += (s0, np.einsum("i,i->", w, log_u - u), s0)
        return rows.log_density(model.nu)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: Any) -> None:
        self._add(fill_for_points(enc), weights)

    def _add_moments(self, x: np.ndarray, w: np.ndarray, wu: np.ndarray) -> None:
        c = self.point_for(x, w)
        s = wu.sum()
        self.weight += s
        self.ref_mass += s * c
        add_weighted_outer(self.sum_x, self.sum_xx, x - c if np.any(c) else x, wu)


class MultivariateStudentTEstimator(LeafEstimator):
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

    def _options(self) -> dict[str, Any]:
        return {"nu": self.nu, "start_nu": self.start_nu, "max_nu": self.max_nu,
                "reg_covar": self.reg_covar, "reg_covar_mode": self.reg_covar_mode,
                "keys": self.keys}

    def encoder(self) -> VectorEncoder:
        return vector_encoder(self.dim, self.missing)

    def bind(self, encoder: Encoder) -> MultivariateStudentTEstimator:
        dim, missing = bound_vector(self, encoder)
        return MultivariateStudentTEstimator(dim=dim, missing=missing, **self._options())

    def _new_accumulator(self) -> MultivariateStudentTAccumulator:
        if self.dim is None:
            raise ValueError("MultivariateStudentTEstimator has no dim: give dim= or let "
                             "optimize learn it when it encodes the data")
        return MultivariateStudentTAccumulator(self.dim, self.keys)

    def estimate(self, nobs: float, stats: Any) -> MultivariateStudentTDistribution:
        (weight, sum_x, sum_xx, ref_mass, (s0, s_log, m0)), _ = stats
        d = sum_x.size
        nu = self.start_nu if self.nu is None else self.nu
        if not (s0 > 0 and weight[0] > 0):
            return MultivariateStudentTDistribution(np.zeros(d), np.eye(d), nu, self.missing)
        su, mu, second = central_moments(weight, sum_x, sum_xx, ref_mass)
        scale = second * (su / s0)
        diag = np.diagonal(scale)
        floor = variance_floor(diag, self.reg_covar, self.reg_covar_mode)
        if self.reg_covar_mode == "relative":  # a collapsed column: the component's own scale
            floor = np.where(diag > 0, floor, self.reg_covar * max(float(diag.max()), 1.0))
        scale.flat[::d + 1] += np.maximum(floor, ROUNDOFF_FLOOR * np.maximum(diag, 0.0))
        if self.nu is None and m0 > 0:
            # log(k) - digamma(k) = gap >= 0 for k = nu/2 (E[log u] - E[u] <= -1 by Jensen)
            gap = max(-(1.0 + s_log / s0), 0.0)
            nu = 2.0 * gamma_shape_mle(gap, 0.5 * self.max_nu)
        return MultivariateStudentTDistribution(mu, scale, nu, self.missing)
