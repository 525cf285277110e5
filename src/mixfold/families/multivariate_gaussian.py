"""Gaussian on vectors of length D with a full covariance matrix: N(mu, cov).

Its covariance is held with its Cholesky factors (:mod:`mixfold.families._covariance`), its
stacked scoring is :mod:`mixfold.families._full_gaussian_stack`'s, its statistics' accumulation
(for K at once, fused, double-double, missing entries) :mod:`mixfold.families._full_gaussian_sums`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.capabilities import (RunsInBands, SharesCovariance, StackedEstimate,
                                  StackedStatistics)
from mixfold.compute.logspace import LOG_2PI
from mixfold.errors import ParameterError
from mixfold.families._centred import FLOOR_MODES, central_moments, warn_collapsed_variance
from mixfold.families._covariance import (SYMMETRY_TOLERANCE, FactoredCovariance, checked_array,
                                          covariance_floor)
from mixfold.families._full_gaussian_stack import FullGaussianStack
from mixfold.families._full_gaussian_sums import (MissingMultivariateGaussianAccumulator,
                                                  MultivariateGaussianAccumulator)
from mixfold.families._gaussian_prior import PRIOR_RULES, GaussianPrior, plain
from mixfold.families._tied_gaussian_sums import TiedGaussianAccumulator
from mixfold.families._missing import (Conditionals, MissingPatterns, check_missing_flag,
                                       gaussian_conditionals, has_missing, require_native)
from mixfold.families.contract import (Distribution, Encoded, SeedsFromVectors,
                                       VectorLeafDistribution, VectorLeafEstimator, family)
from mixfold.families.stacked_gaussian import full_estimate, full_statistics
from mixfold.options import flag, instance_of, integer, none_or, number, one_of

__all__ = ["MultivariateGaussianDistribution", "MultivariateGaussianEstimator",
           "MultivariateGaussianStatistics", "MultivariateGaussianAccumulator",
           "MissingMultivariateGaussianAccumulator"]


class MultivariateGaussianStatistics(NamedTuple):
    """A full Gaussian's statistics of weighted rows about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`)."""

    weight: np.ndarray  #: (1,) the weights' sum
    sum_x: np.ndarray  #: (D,) the weighted sum of ``x - c``
    sum_xx: np.ndarray  #: (D, D) the weighted sum of the outer products ``(x - c)(x - c)^T``
    ref_mass: np.ndarray  #: (D,) the weighted sum of ``c``


@family("MultivariateGaussian")
class MultivariateGaussianDistribution(VectorLeafDistribution, FactoredCovariance,
                                       FullGaussianStack, SeedsFromVectors, RunsInBands):
    """Gaussian with mean vector ``mu`` (length D) and covariance ``cov`` (D x D).

    ``cov`` must be symmetric (within a relative 1e-10, then symmetrised) and positive definite.
    Rows are vectors of length D (array of shape (n_rows, D), or a sequence of sequences).
    Scoring uses the upper-triangular precision Cholesky factor ``U`` (``U U^T = cov^-1``):
    ``log p(x) = -|(x - mu) U|^2 / 2 + sum log diag U - D log(2 pi) / 2``.

    With ``missing=True`` (what ``MultivariateGaussianEstimator(missing=True)`` fits) an entry
    may be NaN, missing at random: a row is scored by the marginal density of its observed
    coordinates. Such components score one at a time in a mixture (their E-step needs each
    component's conditional expectations).

    >>> d = MultivariateGaussianDistribution([0.0, 1.0], [[2.0, 0.5], [0.5, 1.0]])
    >>> round(d.log_density([0.5, 0.0]), 6)
    -2.903399
    >>> d.sampler(0).sample(3).shape
    (3, 2)
    >>> m = MultivariateGaussianDistribution([0.0, 1.0], [[2.0, 0.5], [0.5, 1.0]], missing=True)
    >>> round(m.log_density([0.5, float("nan")]), 6)  # N(0, 2) at 0.5
    -1.328012
    """

    parameter_coordinates = {"mu": "real", "cov": "covariance", "missing": "fixed"}
    location_spread = ("mu", "cov")
    Statistics = MultivariateGaussianStatistics

    def __init__(self, mu: Sequence[float] | np.ndarray,
                 cov: Sequence[Sequence[float]] | np.ndarray, missing: bool = False):
        mu_arr = checked_array("mu", mu, 1)
        cov_arr = checked_array("cov", cov, 2)
        d = mu_arr.size
        if cov_arr.shape != (d, d):
            raise ParameterError(f"cov must have shape ({d}, {d}) for a mean of length {d}, got "
                                 f"{cov_arr.shape}")
        if np.abs(cov_arr - cov_arr.T).max() > SYMMETRY_TOLERANCE * np.abs(cov_arr).max():
            raise ParameterError(f"cov must be symmetric, got {cov_arr.tolist()}")
        self._factor(0.5 * (cov_arr + cov_arr.T), np.eye(d))
        self.mu = mu_arr
        self.missing = check_missing_flag(missing)
        self.mu.setflags(write=False)

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        x = x.astype(dt, copy=False)
        y = (x - self.mu.astype(dt)) @ self.precision_cholesky.astype(dt)
        norm = 0.5 * self.dim * LOG_2PI - self.log_det_precision_cholesky
        return dt.type(-0.5) * np.einsum("ij,ij->i", y, y) - dt.type(norm)

    def observed_log_density(self, patterns: MissingPatterns) -> np.ndarray:
        return self.conditionals(patterns).log_density

    def conditionals(self, patterns: MissingPatterns) -> Conditionals:
        """For rows that may miss entries: the log-density of the observed coordinates and the
        conditional means and covariances of the missing ones
        (:func:`~mixfold.families._missing.gaussian_conditionals`), computed once per block
        of rows while this distribution lives."""
        return patterns.conditionals(self, lambda: gaussian_conditionals(
            self.mu, self.precision_cholesky, self.log_det_precision_cholesky, patterns))

    def band_log_density(self, enc: Encoded, ops: Any) -> Any:
        """``-(|(x - mu) U|^2 + D log 2 pi - 2 sum log diag U) / 2`` with every operation in the
        band of ``ops``. ``U`` (upper triangular) enters the band as a parameter, computed once
        in float64 from ``cov``; the whitening ``y_m = sum_{j<=m} z_j U_jm`` is one vectorized
        operation over the rows per term."""
        if has_missing(enc):
            require_native(ops.band, "MultivariateGaussian")
        u = self.precision_cholesky
        z = [ops.array(enc.values[:, j] - self.mu[j])  # rounded into the band once
             for j in range(self.dim)]
        squares = []
        for m in range(self.dim):
            y = ops.total([ops.mul(z[j], ops.array(u[j, m])) for j in range(m + 1)])
            squares.append(ops.mul(y, y))
        log_det = ops.total([ops.log(ops.array(u[m, m])) for m in range(self.dim)])
        norm = ops.sub(ops.mul(ops.array(float(self.dim)), ops.log_2pi),
                       ops.mul(ops.array(2.0), log_det))
        return ops.mul(ops.array(-0.5), ops.add(ops.total(squares), norm))

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mu + rng.standard_normal((n, self.dim)) @ self.cov_cholesky.T

    @property
    def row_work(self) -> float:  # type: ignore[override]
        """Whitening a row by the D x D precision factor (and its outer product in the
        statistics) costs D^2 per row."""
        return float(self.dim * self.dim)


class MultivariateGaussianEstimator(VectorLeafEstimator, SharesCovariance, StackedEstimate,
                                    StackedStatistics):
    """M-step for :class:`MultivariateGaussianDistribution`.

    ``dim`` is the vector length D; ``None`` learns it from the data when it is encoded.
    ``reg_covar`` is added to the diagonal of the estimated covariance, as scikit-learn's
    ``GaussianMixture(covariance_type="full")`` does, so a component on fewer than D + 1 distinct
    rows stays positive definite; ``reg_covar_mode="relative"`` adds ``reg_covar`` times each
    diagonal entry instead (a floor on the data's own scale: a fit in metres and in kilometres
    agree). Either way at least :data:`~mixfold.families._centred.ROUNDOFF_FLOOR` of each
    diagonal entry is added, so collinear columns at a large scale stay positive definite. With
    no weight at all the estimate is the standard normal ``MultivariateGaussianDistribution(0,
    I)`` in D dimensions.

    ``mean_prior``, ``mean_weight``, ``covariance_prior``, ``covariance_weight``: a conjugate
    prior, the estimate is then its maximum a posteriori
    (:class:`~mixfold.families._gaussian_prior.GaussianPrior`: ``mu = (mean_weight *
    mean_prior + sum w x) / (mean_weight + n)``, ``cov = (covariance_prior + S) / (n +
    covariance_weight)``, ``S`` the scatter about ``mu`` plus the mean prior's term).
    ``covariance_keys``: components of one mixture or hidden Markov model that name the same key
    share one covariance (scikit-learn's and hmmlearn's ``covariance_type="tied"``): their
    scatters and weights are pooled, the prior counted once, each keeps its own mean.

    ``missing=True`` lets entries be NaN (missing at random; without it a NaN is a
    :class:`~mixfold.DataError`): the E-step fills a row's missing block with its conditional
    mean given the observed entries and adds the conditional covariance to the outer products
    (exact EM). It cannot run in the ``dd`` band.

    >>> import mixfold
    >>> truth = MultivariateGaussianDistribution([1.0, -2.0], [[1.0, 0.6], [0.6, 2.0]])
    >>> d = mixfold.optimize(truth.sampler(1).sample(20000), MultivariateGaussianEstimator(),
    ...                      progress=False)
    >>> d.mu.round(1).tolist(), d.cov.round(1).tolist()
    ([1.0, -2.0], [[1.0, 0.6], [0.6, 2.0]])
    >>> x = np.array([[0.0, 1.0], [2.0, 3.0]])      # a prior of 2 rows at the origin, scatter I
    >>> e = MultivariateGaussianEstimator(mean_weight=2.0, covariance_prior=1.0,
    ...                                   covariance_weight=2.0, reg_covar=0.0)
    >>> d = mixfold.optimize(x, e, progress=False)
    >>> d.mu.tolist(), d.cov.round(6).tolist()
    ([0.5, 1.0], [[1.0, 1.0], [1.0, 1.75]])
    """

    accumulator_class = MultivariateGaussianAccumulator
    missing_accumulator_class = MissingMultivariateGaussianAccumulator
    distribution_class = MultivariateGaussianDistribution
    # a mixture's M-step of all K at once (families/stacked_gaussian.py)
    stack_estimate = staticmethod(full_estimate)
    # ... and its E-step of one chunk with no accumulator (the local backend's small fits)
    stack_statistics = staticmethod(full_statistics)

    option_rules = {"dim": none_or(integer(1)), "reg_covar": number(0), "missing": flag(),
                    "reg_covar_mode": one_of(*FLOOR_MODES), **PRIOR_RULES,
                    "covariance_keys": none_or(instance_of(str, what="a name"))}

    def __init__(self, dim: int | None = None, reg_covar: float = 1e-6, keys: str | None = None,
                 missing: bool = False, reg_covar_mode: str = "absolute", *,
                 mean_prior: Any = 0.0, mean_weight: float = 0.0, covariance_prior: Any = 0.0,
                 covariance_weight: float = 0.0, covariance_keys: str | None = None):
        super().__init__(keys)
        self.check_options(dim=dim, reg_covar=reg_covar, missing=missing,
                           reg_covar_mode=reg_covar_mode, mean_prior=mean_prior,
                           mean_weight=mean_weight, covariance_prior=covariance_prior,
                           covariance_weight=covariance_weight, covariance_keys=covariance_keys)
        self.dim = None if dim is None else int(dim)
        self.reg_covar = float(reg_covar)
        self.missing = bool(missing)
        self.reg_covar_mode = reg_covar_mode
        self.mean_prior = plain(mean_prior)
        self.mean_weight = float(mean_weight)
        self.covariance_prior = plain(covariance_prior)
        self.covariance_weight = plain(covariance_weight)
        self.covariance_keys = covariance_keys
        if np.ndim(self.covariance_weight):
            raise ParameterError(f"MultivariateGaussianEstimator: covariance_weight must be a "
                                 f"number, got {covariance_weight!r:.80}")
        scatter = np.asarray(self.covariance_prior)
        if scatter.ndim == 2 and not np.allclose(scatter, scatter.T, rtol=SYMMETRY_TOLERANCE,
                                                 atol=0):
            raise ParameterError(f"MultivariateGaussianEstimator: covariance_prior must be "
                                 f"symmetric, got {self.covariance_prior!r:.80}")
        if self.missing and not (self._prior().is_flat and covariance_keys is None):
            raise ParameterError("MultivariateGaussianEstimator: a prior or covariance_keys "
                                 "cannot be combined with missing=True")

    def _new_accumulator(self) -> MultivariateGaussianAccumulator:
        """A tied estimator's accumulator names its key (its mixture's small-data fold pools
        the scatter once)."""
        if self.covariance_keys is None or self.missing or self.dim is None:
            return super()._new_accumulator()
        return TiedGaussianAccumulator(self.dim, self.keys, self.covariance_keys)

    def _prior(self) -> GaussianPrior:
        return GaussianPrior(self.mean_prior, self.mean_weight, self.covariance_prior,
                             self.covariance_weight)

    def shared_parameters(self, model: Distribution) -> tuple[tuple[str, int], ...]:
        if self.covariance_keys is None or "cov" in self.frozen:
            return ()
        d = model.mu.size
        return ((f"covariance {self.covariance_keys}", d * (d + 1) // 2),)

    def from_statistics(self, stats: MultivariateGaussianStatistics
                        ) -> MultivariateGaussianDistribution:
        d = stats.sum_x.size
        if not stats.weight[0] > 0 and self._prior().is_flat:
            return MultivariateGaussianDistribution(np.zeros(d), np.eye(d), self.missing)
        s0, mu, cov = self._moments(stats)
        return self._floored(s0, mu, cov)

    def _moments(self, own: Any) -> tuple[float, np.ndarray, np.ndarray]:
        """(weight, mean, covariance) of the statistics ``own``: the maximum likelihood, or
        with a prior its maximum a posteriori."""
        prior = self._prior()
        if prior.is_flat:
            return central_moments(*own)
        s0, mu, scatter = self.covariance_scatter(0.0, (own, ()))
        return s0, mu, prior.covariance(scatter, s0)

    def covariance_scatter(self, nobs: float, stats: Any) -> tuple[float, np.ndarray,
                                                                     np.ndarray]:
        own, _ = stats
        d = own[1].size
        if not own[0][0] > 0:
            prior = self._prior()
            return 0.0, prior.mean(0.0, np.zeros(d)), np.zeros((d, d))
        s0, xbar, second = central_moments(*own)
        prior = self._prior()
        mu = prior.mean(s0, xbar)
        return s0, mu, prior.scatter(s0, xbar, second, mu)

    def estimate_shared(self, mu: np.ndarray, weight: float, scatter: np.ndarray,
                        made: list[Any]) -> MultivariateGaussianDistribution:
        if made:  # the group's covariance is factored once: the others share its factors
            return made[0].with_mean(mu)
        cov = self._prior().pooled(scatter, weight, np.eye(mu.size))
        dist = self._floored(weight, mu, cov)
        made.append(dist)
        return dist

    def _floored(self, s0: float, mu: np.ndarray, cov: np.ndarray
                 ) -> MultivariateGaussianDistribution:
        """The distribution of ``cov`` with ``reg_covar`` (at least the round-off floor) on its
        diagonal."""
        d = mu.size
        diag = np.diagonal(cov)
        floor = covariance_floor(diag, self.reg_covar, self.reg_covar_mode)
        collapsed = np.flatnonzero(diag <= floor)
        if collapsed.size:
            j = int(collapsed[0])
            warn_collapsed_variance(cov[j, j], cov[j, j] + floor[j], s0, mu[j],
                                    f" in dimension {j} ({collapsed.size} of {d})")
        cov = cov.copy()
        cov.flat[::d + 1] += floor
        return MultivariateGaussianDistribution(mu, cov, self.missing)
