"""Gaussian on vectors of length D with a full covariance matrix: N(mu, cov)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.logspace import LOG_2PI, affine_far_rows, relative_affine_scores
from mixfold.capabilities import (
    CompensatedAccumulation,
    FusedFold,
    SharesCovariance,
    StackedEstimate,
    LinearInFeaturesInBands,
    RelativeScoring,
    RunsInBands,
    SeedsFromPoints,
    StackedScoring,
    StackedUpdate,
)
from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.compute.linear import LinearTerms, gaussian_centre
from mixfold.families._centred import (FLOOR_MODES, ROUNDOFF_FLOOR, CentredMoments,
                                       central_moments, variance_floor)
from mixfold.families._gaussian_prior import PRIOR_RULES, GaussianPrior, plain
from mixfold.families._encoders import VectorEncoder, VectorFamily, bound_vector, vector_encoder
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._missing import (Conditionals, MissingPatterns, add_weighted_outer,
                                       check_missing_flag, fill_for_points,
                                       gaussian_conditionals, has_missing, require_native)
from mixfold.families._frozen import recentred_spread
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families._scipy import dpotrf, dtrtrs
from mixfold.families.gaussian import warn_collapsed_variance
from mixfold.families.stacked_gaussian import (add_outer_sums, full_estimate, full_fold,
                                               update_block_rows)
from mixfold.precision import log_density_in_band, native_dtype
from mixfold.precision.compensated import add_weighted_moments
from mixfold.compute.feature_cache import cache_for
from mixfold.compute.scratch import scratch
from mixfold.options import flag, instance_of, integer, none_or, number, one_of
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["MultivariateGaussianDistribution", "MultivariateGaussianEstimator",
           "MultivariateGaussianAccumulator", "MissingMultivariateGaussianAccumulator"]


#: How far from symmetric (relative to the largest entry) a given covariance may be.
SYMMETRY_TOLERANCE = 1e-10


def _array(name: str, value: Any, ndim: int) -> np.ndarray:
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be an array of numbers, got {value!r}") from None
    if a.ndim != ndim or a.size == 0:
        raise ParameterError(f"{name} must be a non-empty {ndim}-d array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ParameterError(f"{name} must be finite, got {a.tolist()}")
    return a


@family("MultivariateGaussian", kind="multivariate_gaussian")
class MultivariateGaussianDistribution(VectorFamily, Distribution, StackedScoring,
                                       SeedsFromPoints, RunsInBands, RelativeScoring):
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

    #: model files leave ``missing`` out when it is False
    optional_params = ("missing",)

    parameter_coordinates = {"mu": "real", "cov": "covariance", "missing": "fixed"}

    def __init__(self, mu: Sequence[float] | np.ndarray,
                 cov: Sequence[Sequence[float]] | np.ndarray, missing: bool = False):
        mu_arr = _array("mu", mu, 1)
        cov_arr = _array("cov", cov, 2)
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

    def _factor(self, cov: np.ndarray, eye: np.ndarray) -> None:
        """Hold the symmetric ``cov`` (D, D) and its factors, read-only: L (LAPACK directly, as
        scipy.linalg's cholesky and solve_triangular call it; their checks cost more than a
        small factorisation), then U = (L^-1)^T from ``eye``, the identity (D, D)."""
        cov_chol, info = dpotrf(cov, lower=1, clean=1)
        if info != 0:
            raise ParameterError(f"cov must be positive definite, got {cov.tolist()}")
        self.cov = cov
        self.cov_cholesky = cov_chol
        self.precision_cholesky = dtrtrs(cov_chol, eye, lower=1)[0].T
        self.log_det_precision_cholesky = float(np.log(self.precision_cholesky.diagonal()).sum())
        for a in (self.cov, self.cov_cholesky, self.precision_cholesky):
            a.setflags(write=False)

    @classmethod
    def stack_of(cls, mu: np.ndarray, cov: np.ndarray) -> list[MultivariateGaussianDistribution]:
        """The K distributions of an M-step's own float64 arrays ``mu`` (K, D) and ``cov``
        (K, D, D), or (1, D, D): one covariance shared by all, factored once (a tied mixture's
        components, as :meth:`tied` makes them). Validated once for the stack (finite; each
        covariance symmetrised as the constructor does, then factored); each distribution holds
        its row of ``mu``, made read-only. Parameters the constructor refuses raise its error.

        >>> a, b = MultivariateGaussianDistribution.stack_of(np.array([[0.0], [1.0]]),
        ...                                                  np.array([[[4.0]]]))
        >>> b.mu.tolist(), b.precision_cholesky is a.precision_cholesky
        ([1.0], True)
        """
        if not (np.isfinite(mu).all() and np.isfinite(cov).all()):
            if len(cov) == 1:
                return cls(mu[0], cov[0]).sharing_covariance(mu)
            return [cls(m, c) for m, c in zip(mu, cov)]
        eye = np.eye(mu.shape[1])
        factored = []
        for c in 0.5 * (cov + cov.transpose(0, 2, 1)):
            one = cls.__new__(cls)  # the checks of __init__, made above for the whole stack
            one._factor(c, eye)
            one.missing = False
            factored.append(one)
        mu.setflags(write=False)
        return [factored[k if len(factored) > 1 else 0]._moved(m) for k, m in enumerate(mu)]

    @classmethod
    def tied(cls, means: Sequence[Sequence[float]] | np.ndarray,
             cov: Sequence[Sequence[float]] | np.ndarray,
             missing: bool = False) -> list[MultivariateGaussianDistribution]:
        """Distributions with these means (array of shape (K, D)) and one covariance (D, D), as
        a tied mixture's components: the covariance is factored once and its factors shared,
        so the stacked scoring whitens each block of rows once for all of them.

        >>> a, b = MultivariateGaussianDistribution.tied([[0.0, 0.0], [1.0, 2.0]], np.eye(2))
        >>> a.precision_cholesky is b.precision_cholesky, b.mu.tolist()
        (True, [1.0, 2.0])
        """
        means_arr = _array("means", means, 2)
        return cls(means_arr[0], cov, missing).sharing_covariance(means_arr)

    def sharing_covariance(self, means: Sequence[Sequence[float]] | np.ndarray
                           ) -> list[MultivariateGaussianDistribution]:
        """Distributions with these means (array of shape (K, D)), each sharing this one's
        covariance and its (read-only) factors: a tied mixture's components from one
        factorisation.

        >>> d = MultivariateGaussianDistribution([0.0, 0.0], [[2.0, 0.5], [0.5, 1.0]])
        >>> a, b = d.sharing_covariance([[1.0, 2.0], [3.0, 4.0]])
        >>> b.mu.tolist(), b.cov is d.cov
        ([3.0, 4.0], True)
        """
        means_arr = _array("means", means, 2)
        if means_arr.shape[1] != self.dim:
            raise ParameterError(f"means must have shape (K, {self.dim}) for a ({self.dim}, "
                                 f"{self.dim}) cov, got {means_arr.shape}")
        means_arr.setflags(write=False)  # checked once: each component holds its row (a view)
        return [self._moved(mu) for mu in means_arr]

    def with_mean(self, mu: Sequence[float] | np.ndarray) -> MultivariateGaussianDistribution:
        """This distribution moved to the mean ``mu`` (length D), its covariance's factors
        shared, not recomputed (a tied covariance's components).

        >>> a = MultivariateGaussianDistribution([0.0, 0.0], np.eye(2))
        >>> b = a.with_mean([1.0, 2.0])
        >>> b.precision_cholesky is a.precision_cholesky, b.mu.tolist()
        (True, [1.0, 2.0])
        """
        mu_arr = _array("mu", mu, 1)
        if mu_arr.size != self.dim:
            raise ParameterError(f"mu must have length {self.dim}, got {mu_arr.size}")
        mu_arr.setflags(write=False)
        return self._moved(mu_arr)

    def _moved(self, mu: np.ndarray) -> MultivariateGaussianDistribution:
        """A shallow copy at the checked, read-only mean ``mu`` (as ``copy.copy`` makes it, a
        plain instance dict, without its protocol's cost: a tied M-step makes K each
        iteration)."""
        moved = object.__new__(type(self))
        moved.__dict__.update(self.__dict__)
        moved.mu = mu
        return moved

    @property
    def dim(self) -> int:
        """The length D of the vectors."""
        return self.mu.size

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if has_missing(enc):
            require_native(precision, "MultivariateGaussian")
            return self.conditionals(enc.patterns).log_density
        if not precision.native:
            return log_density_in_band(self, enc, precision)
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        y = (x - self.mu.astype(dt)) @ self.precision_cholesky.astype(dt)
        norm = 0.5 * self.dim * LOG_2PI - self.log_det_precision_cholesky
        out = dt.type(-0.5) * np.einsum("ij,ij->i", y, y) - dt.type(norm)
        return out.astype(np.float64, copy=False)

    def conditionals(self, patterns: MissingPatterns) -> Conditionals:
        """For rows that may miss entries: the log-density of the observed coordinates and the
        conditional means and covariances of the missing ones
        (:func:`~mixfold.families._missing.gaussian_conditionals`), computed once per block
        of rows while this distribution lives."""
        return patterns.conditionals(self, lambda: gaussian_conditionals(
            self.mu, self.precision_cholesky, self.log_det_precision_cholesky, patterns))

    @classmethod
    def can_stack(cls, components: Sequence[MultivariateGaussianDistribution]) -> bool:
        """Components fitted with missing entries do not stack: their update reads each
        component's parameters (conditional expectations), one component at a time."""
        return not any(c.missing for c in components)

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
    #: ``stack_log_density`` takes ``units=(start, stop)`` (the centre is shared by the stack)
    stack_units = True

    @classmethod
    def stack_log_density(cls, components: Sequence[MultivariateGaussianDistribution],
                          enc: Encoded, precision: Precision = FLOAT64,
                          units: tuple[int, int] | None = None) -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K).

        Rows are centred on the mean of the component means (so the subtraction cancels
        little), then, block by block of rows (each block read from memory once), whitened by
        each component's ``U_k`` and offset by ``(mu_k - c) U_k`` (one GEMM per component and
        block: the block with a ones column times ``[U_k; -(mu_k - c) U_k]``), squared and
        summed. A component's column is computed by the same calls whatever other components
        are stacked with it, so ``units=(start, stop)`` computes only those columns with the
        bits of the full call (model-parallel workers score ranges apart).
        """
        start, stop = (0, len(components)) if units is None else units
        if has_missing(enc):
            require_native(precision, "MultivariateGaussian")
            return np.stack([c.conditionals(enc.patterns).log_density
                             for c in components[start:stop]], axis=1)
        dt = native_dtype(precision)
        d = components[0].dim
        center = np.add.reduce(np.array([c.mu for c in components])) / len(components)  # (mean)
        n = enc.n_rows
        out = np.empty((stop - start, n), dtype=dt)
        step = max(64, (1 << 17) // d)  # a block of rows (rows, D) and its whitened copy: ~2 MB
        shared = components[0].precision_cholesky  # a tied mixture: whiten each block once
        if len(components) > 1 and all(c.precision_cholesky is shared for c in components):
            _tied_squares(components[start:stop], enc.values, center, dt, step, out)
        else:
            _squares(components[start:stop], enc.values, center, dt, step, out)
        const = np.array([c.log_det_precision_cholesky for c in components[start:stop]])
        out *= dt.type(-0.5)
        out += (const - 0.5 * d * LOG_2PI).astype(dt)[:, None]
        return out.T  # (n, K) in Fortran order: the log-sum-exp reduces contiguous columns

    @classmethod
    def stack_relative_log_density(cls, components: Sequence[MultivariateGaussianDistribution],
                                   enc: Encoded) -> np.ndarray:
        """Log-densities less each row's largest quadratic part, (n_rows, K), finite for any
        finite row (:func:`~mixfold.compute.logspace.relative_affine_scores`)."""
        const = np.array([c.log_det_precision_cholesky for c in components]) \
            - 0.5 * enc.values.shape[1] * LOG_2PI
        return relative_affine_scores(enc.values, np.array([c.mu for c in components]),
                                      np.array([c.precision_cholesky for c in components]), const)

    @classmethod
    def stack_far_rows(cls, components: Sequence[MultivariateGaussianDistribution],
                       enc: Encoded) -> np.ndarray:
        """Rows the plain scores cannot rank
        (:func:`~mixfold.compute.logspace.affine_far_rows`)."""
        return affine_far_rows(enc.values, np.array([c.mu for c in components]),
                               np.array([c.precision_cholesky for c in components]))

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, D) for k-means++ seeding (a missing entry: its column's
        mean)."""
        return fill_for_points(enc)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mu + rng.standard_normal((n, self.dim)) @ self.cov_cholesky.T

    def n_parameters(self) -> int:
        return self.mu.size + self.mu.size * (self.mu.size + 1) // 2

    def _params(self) -> dict[str, Any]:
        params = {"mu": self.mu.tolist(), "cov": self.cov.tolist()}
        return {**params, "missing": True} if self.missing else params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> MultivariateGaussianDistribution:
        return cls(p["mu"], p["cov"], p.get("missing", False))

    @classmethod
    def hold_parameters(cls, estimated: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
        """A held mean re-centres the estimated variance on it."""
        return recentred_spread(estimated, held, "mu", "cov")

    def decomposition(self) -> Decomposition:
        """Atomic: whitening a row by the D x D precision factor (and its outer product in the
        statistics) costs D^2 per row; the covariance is held with both Cholesky factors."""
        held = (self.mu, self.cov, self.cov_cholesky, self.precision_cholesky)
        return Decomposition.atomic(row_work=float(self.dim * self.dim),
                                    param_bytes=sum(a.nbytes for a in held))


def _squares(components: Sequence[MultivariateGaussianDistribution], x: np.ndarray,
             center: np.ndarray, dt: np.dtype, step: int, out: np.ndarray) -> None:
    """``out[k] = |(x - mu_k) U_k|^2`` per row, block by block of rows (each block stays in
    cache while every component reads it)."""
    n, d = x.shape
    # [U_k; -(mu_k - c) U_k]: one GEMM of the block with a ones column whitens and offsets
    whitening = np.empty((len(components), d + 1, d), dt)
    for w, comp in zip(whitening, components):
        w[:d] = comp.precision_cholesky
        w[d] = -((comp.mu - center) @ comp.precision_cholesky)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = scratch("mvg.block", (hi - lo, d + 1), dt)
        np.subtract(x[lo:hi], center, dtype=dt, out=block[:, :d])
        block[:, d] = 1.0
        y = scratch("mvg.y", (hi - lo, d), dt)
        for j, whiten in enumerate(whitening):
            np.matmul(block, whiten, out=y)
            np.einsum("ij,ij->i", y, y, out=out[j, lo:hi])  # one pass: square and sum


def _tied_squares(components: Sequence[MultivariateGaussianDistribution], x: np.ndarray,
                  center: np.ndarray, dt: np.dtype, step: int, out: np.ndarray) -> None:
    """:func:`_squares` where every component has the same ``U``: one GEMM per block whitens
    the rows, each component then subtracts its whitened mean ``(mu_k - c) U``."""
    n, d = x.shape
    u = components[0].precision_cholesky.astype(dt)
    offsets = [((comp.mu - center) @ components[0].precision_cholesky).astype(dt)
               for comp in components]
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = scratch("mvg.block", (hi - lo, d), dt)
        np.subtract(x[lo:hi], center, dtype=dt, out=block)
        white = scratch("mvg.white", (hi - lo, d), dt)
        np.matmul(block, u, out=white)
        y = scratch("mvg.y", (hi - lo, d), dt)
        for j, offset in enumerate(offsets):
            np.subtract(white, offset, out=y)
            np.einsum("ij,ij->i", y, y, out=out[j, lo:hi])


#: The most features (``D (D + 3) / 2``: the products, the coordinates) the fused band E-step takes
#: from a full covariance; beyond it (D > 30) the band's rows are scored in float64.
MAX_LINEAR_FEATURES = 512


class MultivariateGaussianAccumulator(CentredMoments, LeafAccumulator, StackedUpdate,
                                      CompensatedAccumulation, LinearInFeaturesInBands,
                                      FusedFold):
    """Statistics about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`): the sum of weights, of ``w (x-c)``
    (D), of the outer products ``w (x-c)(x-c)^T`` (D x D)
    and of ``w c`` (D)."""

    # a mixture's E-step of all K at once on small data (families/stacked_gaussian.py)
    stack_fold = staticmethod(full_fold)

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(keys)
        self.weight = np.zeros(1)
        self.sum_x = np.zeros(dim)
        self.sum_xx = np.zeros((dim, dim))
        self.ref_mass = np.zeros(dim)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.weight, self.sum_x, self.sum_xx, self.ref_mass]

    @staticmethod
    def stack_reference(components: Sequence[MultivariateGaussianDistribution]) -> np.ndarray:
        """The mean of the components' means on a grid no finer than their spread
        (:func:`~mixfold.compute.linear.gaussian_centre`), for each."""
        centre = gaussian_centre(np.array([c.mu for c in components]),
                                 np.array([np.diagonal(c.cov) for c in components]))
        return np.repeat(centre[None], len(components), axis=0)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        c = self.point_for(x, w)
        d = x - c
        s0 = w.sum()
        self.weight += s0
        self.sum_x += w @ d
        self.sum_xx += d.T @ (w[:, None] * d)
        self.ref_mass += s0 * c

    @staticmethod
    def linear_terms(accs: Sequence[MultivariateGaussianAccumulator],
                     components: Sequence[MultivariateGaussianDistribution],
                     enc: Encoded) -> LinearTerms | None:
        """The scores as :class:`~mixfold.compute.linear.LinearTerms` on the centred features
        ``[y_i y_j (i <= j), y_i]``, ``y = x - c`` (c the stack's centre); the sums stay about
        c. ``None`` beyond :data:`MAX_LINEAR_FEATURES` or where rows miss entries."""
        x = enc.values
        d = x.shape[1]
        if d * (d + 3) // 2 > MAX_LINEAR_FEATURES or has_missing(enc):
            return None
        center = MultivariateGaussianAccumulator.stack_reference(components)[0]
        upper = np.triu_indices(d)
        twice = np.where(upper[0] == upper[1], 1.0, 2.0)  # an off-diagonal product counts twice
        prec = np.array([c.precision_cholesky @ c.precision_cholesky.T for c in components])
        m = np.array([c.mu for c in components]) - center
        pm = np.einsum("kij,kj->ki", prec, m)
        norm = np.array([c.log_det_precision_cholesky for c in components]) - 0.5 * d * LOG_2PI
        coef = np.concatenate([-0.5 * twice * prec[:, upper[0], upper[1]], pm], axis=1)
        const = norm - 0.5 * np.einsum("ki,ki->k", m, pm)
        n_pairs = len(upper[0])

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            s, _, w = out.shape
            y = (x[lo:hi] - center).reshape(s, w, d).transpose(0, 2, 1)  # (s, D, w)
            out[:, n_pairs:] = y
            np.multiply(y[:, upper[0]], y[:, upper[1]], out=out[:, :n_pairs])

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, w, sx, sxx in zip(accs, mass, sums[:, n_pairs:], sums[:, :n_pairs]):
                acc.set_reference(center)
                acc.weight += w
                acc.sum_x += sx
                acc.sum_xx[upper] += sxx
                acc.sum_xx[upper[1], upper[0]] = acc.sum_xx[upper]
                acc.ref_mass += w * center

        return LinearTerms(coef, const, features, add_sums, peak=norm, source=x,
                           key=("multivariate-gaussian", center.tobytes()))

    def _add_dd(self, x: np.ndarray, w_hi: np.ndarray, w_lo: np.ndarray) -> None:
        add_weighted_moments(self, x, w_hi, w_lo, cross=True,
                             reference=self.point_for(x, w_hi))

    @staticmethod
    def stack_update(accs: Sequence[MultivariateGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights.

        Block by block of rows (the block, centred once per distinct reference point, stays in
        cache while every component reads it), then component by component: ``r_k @ (x-c)``
        and ``(x-c).T @ (r_k (x-c))``, the latter as ``s.T @ s`` for ``s = sqrt(r_k) (x-c)`` (a
        symmetric rank-k update; responsibilities are never negative). A component's sums do not
        depend on the others in the call, so any range of components can be added apart with the
        same bits (a GEMM over K columns would sum the rows in a K-dependent order).
        """
        x = enc.values
        points = [acc.point_for(x, resp[:, k]) for k, acc in enumerate(accs)]
        shared = all(c is points[0] or (c == points[0]).all() for c in points)
        if shared and not np.any(points[0]):
            centred = x  # about the origin: nothing to subtract
        elif shared:
            centred = _centred_rows(x, points[0])
        step = update_block_rows(x.shape[1])
        for lo in range(0, x.shape[0], step):
            rb = resp[lo:lo + step]
            rx = scratch("mvg.rx", (len(rb), x.shape[1]))
            if shared:
                add_outer_sums(accs, centred[lo:lo + step], rb, points[0], rx)
                continue
            xb = x[lo:lo + step]
            xc = scratch("mvg.xc_block", xb.shape)
            at = None
            for k, (acc, c) in enumerate(zip(accs, points)):
                if at is None or (c is not at and not (c == at).all()):
                    at = c
                    np.subtract(xb, c, out=xc)
                add_outer_sums([acc], xc, rb[:, k:k + 1], c, rx)


def _centred_rows(x: np.ndarray, point: np.ndarray) -> np.ndarray:
    """``x - point`` (n_rows, D), kept with the rows between EM iterations when the feature
    cache has room (the point, a snapped centre, stays put from one iteration to the next)."""
    store = cache_for(("mvg.centred", point.tobytes()), [x], x.nbytes, x.nbytes)
    got = None if store is None else store.get(0)
    if got is None:
        got = x - point
        if store is not None:
            store[0] = got
    return got


class MissingMultivariateGaussianAccumulator(MultivariateGaussianAccumulator):
    """The statistics of :class:`MultivariateGaussianAccumulator` (same payload) from rows that
    may miss entries, by exact EM (Ghahramani and Jordan, 1994): a missing block enters the
    sums by its conditional mean given the row's observed entries under the current
    component, and its outer products gain the conditional covariance. Rows with every entry
    missing add nothing."""

    def seq_update(self, enc: Encoded, weights: np.ndarray,
                   model: MultivariateGaussianDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        if not has_missing(enc):
            return super().seq_update(enc, weights, model, precision)
        require_native(precision, "MultivariateGaussian")
        p = enc.patterns
        cond = model.conditionals(p)
        w = np.where(p.n_missing < p.dim, weights, 0.0)
        self.set_reference(self.stack_reference([model])[0])
        filled = cond.filled(model.mu, p)
        c = self.point_for(filled, w)
        s0 = w.sum()
        self.weight += s0
        self.ref_mass += s0 * c
        # about the reference point: the conditional covariances do not move with it
        add_weighted_outer(self.sum_x, self.sum_xx, filled - c if np.any(c) else filled, w)
        for g, cov in zip(p.groups, cond.covs):
            mass = np.bincount(g.local, weights=w[g.rows], minlength=cov.shape[0])
            np.add.at(self.sum_xx, (g.index[:, :, None], g.index[:, None, :]),
                      mass[:, None, None] * cov)
        return cond.log_density

    def seq_update_dd(self, enc: Encoded, w_hi: np.ndarray, w_lo: np.ndarray, model: Any,
                      ops: Any = None) -> None:
        if has_missing(enc):
            require_native("dd", "MultivariateGaussian")
        super().seq_update_dd(enc, w_hi, w_lo, model, ops)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: Any) -> None:
        """Seeded starts (no model yet): a missing entry takes its column's weighted mean over
        the rows that have it, and its square that column's variance besides."""
        if not has_missing(enc):
            super().seq_initialize(enc, weights, rng)
            return
        p = enc.patterns
        seen = weights @ p.observed
        mean = np.divide(weights @ p.zero_filled, seen, out=np.zeros_like(seen),
                         where=seen > 0)
        spread = (p.zero_filled - mean) ** 2 * p.observed
        var = np.divide(weights @ spread, seen, out=np.zeros_like(seen), where=seen > 0)
        w = np.where(p.n_missing < p.dim, weights, 0.0)
        self._add(np.where(p.observed > 0, p.zero_filled, mean), w)
        self.sum_xx.flat[::p.dim + 1] += w @ ((1.0 - p.observed) * var)

    @staticmethod
    def stack_update(accs: Sequence[MultivariateGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Complete rows only: rows that miss entries need each component's parameters, which
        a stacked update does not see (a start made with ``missing=True`` never stacks)."""
        if has_missing(enc):
            raise ValueError("rows with missing entries reached a stacked update of "
                             "MultivariateGaussian components made with missing=False: give "
                             "the starting model missing=True")
        MultivariateGaussianAccumulator.stack_update(accs, enc, resp)


class MultivariateGaussianEstimator(LeafEstimator, SharesCovariance, StackedEstimate):
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
    distribution_class = MultivariateGaussianDistribution
    # a mixture's M-step of all K at once (families/stacked_gaussian.py)
    stack_estimate = staticmethod(full_estimate)

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

    def _prior(self) -> GaussianPrior:
        return GaussianPrior(self.mean_prior, self.mean_weight, self.covariance_prior,
                             self.covariance_weight)

    def _options(self) -> dict[str, Any]:
        """The keyword options a copy (``bind``) carries over."""
        return {"mean_prior": self.mean_prior, "mean_weight": self.mean_weight,
                "covariance_prior": self.covariance_prior,
                "covariance_weight": self.covariance_weight,
                "covariance_keys": self.covariance_keys}

    def shared_parameters(self, model: Distribution) -> tuple[tuple[str, int], ...]:
        if self.covariance_keys is None or "cov" in self.frozen:
            return ()
        d = model.mu.size
        return ((f"covariance {self.covariance_keys}", d * (d + 1) // 2),)

    def encoder(self) -> VectorEncoder:
        return vector_encoder(self.dim, self.missing)

    def bind(self, encoder: Encoder) -> MultivariateGaussianEstimator:
        dim, missing = bound_vector(self, encoder)
        return MultivariateGaussianEstimator(dim, self.reg_covar, self.keys, missing,
                                             self.reg_covar_mode, **self._options())

    def _new_accumulator(self) -> MultivariateGaussianAccumulator:
        if self.dim is None:
            raise ValueError("MultivariateGaussianEstimator has no dim: give dim= or let "
                             "optimize learn it when it encodes the data")
        if self.missing:
            return MissingMultivariateGaussianAccumulator(self.dim, self.keys)
        return MultivariateGaussianAccumulator(self.dim, self.keys)

    def estimate(self, nobs: float, stats: Any) -> MultivariateGaussianDistribution:
        own, _ = stats
        d = own[1].size
        if not own[0][0] > 0 and self._prior().is_flat:
            return MultivariateGaussianDistribution(np.zeros(d), np.eye(d), self.missing)
        s0, mu, cov = self._moments(own)
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
        floor = variance_floor(diag, self.reg_covar, self.reg_covar_mode)
        if self.reg_covar_mode == "relative":  # a collapsed column: the component's own scale
            floor = np.where(diag > 0, floor, self.reg_covar * max(float(diag.max()), 1.0))
        floor = np.maximum(floor, ROUNDOFF_FLOOR * np.maximum(diag, 0.0))
        collapsed = np.flatnonzero(diag <= floor)
        if collapsed.size:
            j = int(collapsed[0])
            warn_collapsed_variance(cov[j, j], cov[j, j] + floor[j], s0, mu[j],
                                    f" in dimension {j} ({collapsed.size} of {d})")
        cov = cov.copy()
        cov.flat[::d + 1] += floor
        return MultivariateGaussianDistribution(mu, cov, self.missing)
