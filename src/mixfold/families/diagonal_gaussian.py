"""Gaussian on vectors of length D with independent coordinates: N(mu, diag(sigma2)).

Its stacked scoring (K components at once) is :mod:`mixfold.families._diagonal_stack`'s, its
statistics' accumulation (for K at once, fused, double-double, missing entries)
:mod:`mixfold.families._diagonal_sums`'."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.capabilities import (RunsInBands, SharesCovariance, StackedEstimate,
                                  StackedStatistics)
from mixfold.compute.logspace import LOG_2PI
from mixfold.errors import ParameterError
from mixfold.families._centred import (FLOOR_MODES, central_moments, variance_floor,
                                       warn_collapsed_variance)
from mixfold.families._diagonal_stack import DiagonalStack
from mixfold.families._diagonal_sums import (DiagonalGaussianAccumulator,
                                             MissingDiagonalGaussianAccumulator)
from mixfold.families._gaussian_prior import PRIOR_RULES, GaussianPrior, plain
from mixfold.families._missing import (MissingPatterns, check_missing_flag, has_missing,
                                       require_native)
from mixfold.families.contract import (Distribution, Encoded, SeedsFromVectors,
                                       VectorLeafDistribution, VectorLeafEstimator, family)
from mixfold.families.stacked_gaussian import diagonal_estimate, diagonal_statistics
from mixfold.options import flag, instance_of, integer, none_or, number, one_of

__all__ = ["DiagonalGaussianDistribution", "DiagonalGaussianEstimator",
           "DiagonalGaussianStatistics", "DiagonalGaussianAccumulator",
           "MissingDiagonalGaussianAccumulator"]


def _vector(name: str, value: Any) -> np.ndarray:
    try:
        v = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a vector of numbers, got {value!r}") from None
    if v.ndim != 1 or v.size == 0:
        raise ParameterError(f"{name} must be a non-empty vector, got shape {v.shape}")
    v.setflags(write=False)
    return v


class DiagonalGaussianStatistics(NamedTuple):
    """A diagonal Gaussian's statistics of weighted rows about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`)."""

    weight: np.ndarray  #: (1,) the weights' sum; (D,) per coordinate where entries may miss
    sum_x: np.ndarray  #: (D,) the weighted sum of ``x - c``
    sum_xx: np.ndarray  #: (D,) the weighted sum of ``(x - c)^2``
    ref_mass: np.ndarray  #: (D,) the weighted sum of ``c``


@family("DiagonalGaussian")
class DiagonalGaussianDistribution(VectorLeafDistribution, DiagonalStack, SeedsFromVectors,
                                   RunsInBands):
    """Gaussian with mean vector ``mu`` and per-coordinate variances ``sigma2`` (both length D).

    Rows are vectors of length D (array of shape (n_rows, D), or a sequence of sequences).
    With ``missing=True`` (what ``DiagonalGaussianEstimator(missing=True)`` fits) an entry may
    be NaN, missing at random: a row is scored by the density of its observed coordinates.

    >>> d = DiagonalGaussianDistribution([0.0, 1.0], [1.0, 4.0])
    >>> round(d.log_density([0.5, 0.0]), 6)
    -2.781024
    >>> d.sampler(0).sample(3).shape
    (3, 2)
    >>> m = DiagonalGaussianDistribution([0.0, 1.0], [1.0, 4.0], missing=True)
    >>> round(m.log_density([float("nan"), 0.0]), 6)
    -1.737086
    """

    parameter_coordinates = {"mu": "real", "sigma2": "positive", "missing": "fixed"}
    location_spread = ("mu", "sigma2")
    Statistics = DiagonalGaussianStatistics

    def __init__(self, mu: Sequence[float] | np.ndarray, sigma2: Sequence[float] | np.ndarray,
                 missing: bool = False):
        self.mu = _vector("mu", mu)
        self.sigma2 = _vector("sigma2", sigma2)
        if self.sigma2.shape != self.mu.shape:
            raise ParameterError(f"mu and sigma2 must have the same length, got {self.mu.size} "
                                 f"and {self.sigma2.size}")
        if not np.isfinite(self.mu).all():
            raise ParameterError(f"mu must be finite, got {self.mu.tolist()}")
        if not (np.isfinite(self.sigma2).all() and (self.sigma2 > 0).all()):
            raise ParameterError(f"sigma2 must be finite and > 0, got {self.sigma2.tolist()}")
        self.missing = check_missing_flag(missing)

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        x = x.astype(dt, copy=False)
        z = (x - self.mu.astype(dt)) ** 2
        norm = 0.5 * (self.dim * LOG_2PI + np.log(self.sigma2).sum())
        return dt.type(-0.5) * (z @ (1.0 / self.sigma2).astype(dt)) - dt.type(norm)

    def observed_log_density(self, patterns: MissingPatterns) -> np.ndarray:
        """Log-density of every row's observed coordinates (the missing ones integrate to 1),
        array of shape (n_rows,); 0 for a row with every entry missing."""
        z = (patterns.zero_filled - self.mu) * patterns.observed
        return -0.5 * ((z * z) @ (1.0 / self.sigma2)
                       + patterns.observed @ (np.log(self.sigma2) + LOG_2PI))

    def band_log_density(self, enc: Encoded, ops: Any) -> Any:
        """``-(sum_j (z_j^2 / s2_j + log s2_j) + D log 2 pi) / 2``, every operation in the band
        of ``ops`` (one vectorized operation over the rows per coordinate); each deviation
        ``x_j - mu_j`` enters the band rounded once from float64 (rows far from the origin)."""
        if has_missing(enc):
            require_native(ops.band, "DiagonalGaussian")
        terms = []
        for j in range(self.dim):
            s2 = ops.array(self.sigma2[j])
            z = ops.array(enc.values[:, j] - self.mu[j])
            terms.append(ops.add(ops.div(ops.mul(z, z), s2), ops.log(s2)))
        norm = ops.mul(ops.array(float(self.dim)), ops.log_2pi)
        return ops.mul(ops.array(-0.5), ops.add(ops.total(terms), norm))

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(self.mu, np.sqrt(self.sigma2), size=(n, self.dim))


class DiagonalGaussianEstimator(VectorLeafEstimator, SharesCovariance, StackedEstimate,
                                StackedStatistics):
    """M-step for :class:`DiagonalGaussianDistribution`.

    ``dim`` is the vector length D; ``None`` learns it from the data when it is encoded.
    ``reg_covar`` is added to every estimated variance, as scikit-learn's
    ``GaussianMixture(covariance_type="diag")`` does (``reg_covar_mode="relative"``: times each
    estimated variance, a floor on the data's own scale), and ``min_variance`` floors them. With no
    weight at all the estimate is the standard normal ``DiagonalGaussianDistribution(0, 1)`` in D
    dimensions.

    ``spherical=True``: one variance for every coordinate, the mean of the estimated variances
    (scikit-learn's and hmmlearn's ``covariance_type="spherical"``). ``mean_prior``,
    ``mean_weight``, ``covariance_prior`` (a number or one per coordinate), ``covariance_weight``:
    a conjugate prior (Normal on the mean, inverse Gamma on each variance), the estimate is its
    maximum a posteriori, coordinate by coordinate as
    :class:`MultivariateGaussianEstimator`'s. ``covariance_keys``: components of one mixture or
    hidden Markov model that name the same key share their variances (pooled scatter).

    ``missing=True`` lets entries be NaN (missing at random; without it a NaN is a
    :class:`~mixfold.DataError`): a missing coordinate drops out of that coordinate's sums, so
    each coordinate is estimated from the rows that have it (a coordinate no row has gets mean
    0 and variance 1). It cannot run in the ``dd`` band.

    >>> import mixfold
    >>> x = DiagonalGaussianDistribution([1.0, -2.0], [0.5, 3.0]).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, DiagonalGaussianEstimator(), progress=False)
    >>> d.mu.round(1).tolist(), d.sigma2.round(1).tolist()
    ([1.0, -2.0], [0.5, 3.0])
    >>> s = mixfold.optimize(x, DiagonalGaussianEstimator(spherical=True), progress=False)
    >>> bool(np.allclose(s.sigma2, d.sigma2.mean())), s.sigma2.size   # one variance, the mean
    (True, 2)
    """

    accumulator_class = DiagonalGaussianAccumulator
    missing_accumulator_class = MissingDiagonalGaussianAccumulator
    distribution_class = DiagonalGaussianDistribution
    # a mixture's M-step of all K at once (families/stacked_gaussian.py)
    stack_estimate = staticmethod(diagonal_estimate)
    # ... and its E-step of one small chunk with no accumulator (the local backend's)
    stack_statistics = staticmethod(diagonal_statistics)

    option_rules = {"dim": none_or(integer(1)), "reg_covar": number(0),
                    "min_variance": number(0, above=True), "missing": flag(),
                    "reg_covar_mode": one_of(*FLOOR_MODES), "spherical": flag(), **PRIOR_RULES,
                    "covariance_keys": none_or(instance_of(str, what="a name"))}

    def __init__(self, dim: int | None = None, reg_covar: float = 1e-6,
                 min_variance: float = 1e-12, keys: str | None = None, missing: bool = False,
                 reg_covar_mode: str = "absolute", *, spherical: bool = False,
                 mean_prior: Any = 0.0, mean_weight: float = 0.0, covariance_prior: Any = 0.0,
                 covariance_weight: Any = 0.0, covariance_keys: str | None = None):
        super().__init__(keys)
        self.check_options(dim=dim, reg_covar=reg_covar, min_variance=min_variance,
                           missing=missing, reg_covar_mode=reg_covar_mode, spherical=spherical,
                           mean_prior=mean_prior, mean_weight=mean_weight,
                           covariance_prior=covariance_prior,
                           covariance_weight=covariance_weight, covariance_keys=covariance_keys)
        self.dim = None if dim is None else int(dim)
        self.reg_covar = float(reg_covar)
        self.min_variance = float(min_variance)
        self.missing = bool(missing)
        self.reg_covar_mode = reg_covar_mode
        self.spherical = bool(spherical)
        self.mean_prior = plain(mean_prior)
        self.mean_weight = float(mean_weight)
        self.covariance_prior = plain(covariance_prior)
        self.covariance_weight = plain(covariance_weight)
        self.covariance_keys = covariance_keys
        if self.missing and not (self._prior().is_flat and covariance_keys is None
                                 and not self.spherical):
            raise ParameterError("DiagonalGaussianEstimator: a prior, spherical or "
                                 "covariance_keys cannot be combined with missing=True")

    def _prior(self) -> GaussianPrior:
        return GaussianPrior(self.mean_prior, self.mean_weight, self.covariance_prior,
                             self.covariance_weight)

    def held_parameters(self, model: Distribution) -> int:
        """Frozen ones, and a spherical variance's D - 1 copies of one value."""
        copies = model.mu.size - 1 if self.spherical and "sigma2" not in self.frozen else 0
        return super().held_parameters(model) + copies

    def shared_parameters(self, model: Distribution) -> tuple[tuple[str, int], ...]:
        if self.covariance_keys is None or "sigma2" in self.frozen:
            return ()
        return ((f"covariance {self.covariance_keys}", 1 if self.spherical else model.mu.size),)

    def from_statistics(self, stats: DiagonalGaussianStatistics) -> DiagonalGaussianDistribution:
        if self.missing:
            return self._estimate_observed(*stats)
        prior = self._prior()
        if not stats.weight[0] > 0 and prior.is_flat:
            return DiagonalGaussianDistribution(np.zeros(stats.sum_x.size),
                                                np.ones(stats.sum_x.size))
        if prior.is_flat:
            s0, mu, raw = central_moments(*stats)
        else:
            s0, mu, scatter = self.covariance_scatter(0.0, (stats, ()))
            raw = prior.covariance(scatter, s0)
        return self._floored(s0, mu, raw)

    def covariance_scatter(self, nobs: float, stats: Any) -> tuple[float, np.ndarray,
                                                                     np.ndarray]:
        own, _ = stats
        prior = self._prior()
        if not own[0][0] > 0:
            d = own[1].size
            return 0.0, prior.mean(0.0, np.zeros(d)), np.zeros(d)
        s0, xbar, second = central_moments(*own)
        mu = prior.mean(s0, xbar)
        return s0, mu, prior.scatter(s0, xbar, second, mu)

    def estimate_shared(self, mu: np.ndarray, weight: float, scatter: np.ndarray,
                        made: list[Any]) -> DiagonalGaussianDistribution:
        if made:
            return DiagonalGaussianDistribution(mu, made[0].sigma2)
        raw = self._prior().pooled(scatter, weight, np.ones(mu.size))
        dist = self._floored(weight, mu, raw)
        made.append(dist)
        return dist

    def _floored(self, s0: float, mu: np.ndarray, raw: np.ndarray
                 ) -> DiagonalGaussianDistribution:
        """The distribution of the variances ``raw`` (their mean, spherical) plus
        ``reg_covar``, at least ``min_variance``."""
        if self.spherical:
            raw = np.full(raw.size, raw.mean())
        floor = variance_floor(raw, self.reg_covar, self.reg_covar_mode)
        var = np.maximum(np.maximum(raw, 0.0) + floor, self.min_variance)
        collapsed = np.flatnonzero(raw <= np.maximum(floor, self.min_variance))
        if collapsed.size:
            j = int(collapsed[0])
            warn_collapsed_variance(raw[j], var[j], s0, mu[j],
                                    f" in dimension {j} ({collapsed.size} of {raw.size})")
        return DiagonalGaussianDistribution(mu, var)

    def _estimate_observed(self, weight: np.ndarray, sum_x: np.ndarray, sum_xx: np.ndarray,
                           ref_mass: np.ndarray) -> DiagonalGaussianDistribution:
        """Each coordinate from the rows that have it (per-coordinate weights and reference)."""
        seen = weight > 0
        s = np.where(seen, weight, 1.0)
        m = np.where(seen, sum_x / s, 0.0)
        mu = np.where(seen, ref_mass / s + m, 0.0)
        raw = np.where(seen, sum_xx / s - m * m, 1.0)
        floor = variance_floor(raw, self.reg_covar, self.reg_covar_mode)
        var = np.maximum(np.maximum(raw, 0.0) + floor, self.min_variance)
        var[~seen] = 1.0
        collapsed = np.flatnonzero(seen & (raw <= np.maximum(floor, self.min_variance)))
        if collapsed.size:
            j = int(collapsed[0])
            warn_collapsed_variance(raw[j], var[j], weight[j], mu[j],
                                    f" in dimension {j} ({collapsed.size} of {raw.size})")
        return DiagonalGaussianDistribution(mu, var, missing=True)
