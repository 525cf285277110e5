"""Gaussian on vectors of length D with independent coordinates: N(mu, diag(sigma2))."""

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
    LinearInFeatures,
    RelativeScoring,
    RunsInBands,
    SeedsFromPoints,
    StackedScoring,
    StackedUpdate,
)
from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._centred import (FLOOR_MODES, CentredMoments, central_moments,
                                       variance_floor)
from mixfold.families._gaussian_prior import PRIOR_RULES, GaussianPrior, plain
from mixfold.families._encoders import VectorEncoder, VectorFamily, bound_vector, vector_encoder
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._missing import (MissingPatterns, check_missing_flag, fill_for_points,
                                       has_missing, require_native)
from mixfold.compute.linear import LinearTerms, centred_gaussian
from mixfold.families._frozen import recentred_spread
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families.stacked_gaussian import diagonal_estimate, diagonal_fold
from mixfold.families.gaussian import warn_collapsed_variance
from mixfold.precision import log_density_in_band, native_dtype
from mixfold.precision.compensated import add_weighted_moments
from mixfold.options import flag, instance_of, integer, none_or, number, one_of
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["DiagonalGaussianDistribution", "DiagonalGaussianEstimator",
           "DiagonalGaussianAccumulator", "MissingDiagonalGaussianAccumulator"]


def _vector(name: str, value: Any) -> np.ndarray:
    try:
        v = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a vector of numbers, got {value!r}") from None
    if v.ndim != 1 or v.size == 0:
        raise ParameterError(f"{name} must be a non-empty vector, got shape {v.shape}")
    v.setflags(write=False)
    return v


#: Rows a one-sub-block (float64) block of the fused E-step transposes at a time: NumPy's
#: strided copy is faster over cache-sized pieces than over a whole block ...
TRANSPOSE_ROWS = 4096
#: ... and over pieces of at most this many values (1 MiB of float64) when rows are wide.
TRANSPOSE_VALUES = 1 << 17


def transpose_rows(d: int) -> int:
    """Rows of D values per transposed piece: :data:`TRANSPOSE_ROWS`, or the power of two
    within :data:`TRANSPOSE_VALUES` for wider rows.

    >>> transpose_rows(10), transpose_rows(128)
    (4096, 1024)
    """
    rows = min(TRANSPOSE_ROWS, max(TRANSPOSE_VALUES // max(d, 1), 64))
    return 1 << (rows.bit_length() - 1)


def centred_transposed(rows: np.ndarray, center: np.ndarray, out: np.ndarray) -> None:
    """``out[i, :, j] = rows[i * w + j] - center`` for ``out`` of shape (s, D, w): ``rows``
    (s * w, D) transposed into s sub-blocks and centred, in ``out``'s dtype. One sub-block is
    transposed in pieces of :func:`transpose_rows` rows (one call for the whole pieces).

    >>> out, rows = np.empty((1, 2, 3)), np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    >>> centred_transposed(rows, np.array([1.0, 0.0]), out)
    >>> out[0].tolist()
    [[0.0, 1.0, 2.0], [10.0, 20.0, 30.0]]
    """
    s, d, w = out.shape
    piece = transpose_rows(d)
    whole = w // piece * piece if s == 1 else 0
    if whole > piece:
        pieces = rows[:whole].reshape(-1, piece, d).transpose(0, 2, 1)
        into = out[0, :, :whole].reshape(d, -1, piece).transpose(1, 0, 2)
        np.subtract(pieces, center[:, None], out=into, casting="same_kind")
        if whole < w:
            np.subtract(rows[whole:].T, center[:, None], out=out[0, :, whole:],
                        casting="same_kind")
        return
    np.subtract(rows.reshape(s, w, d).transpose(0, 2, 1), center[:, None], out=out,
                casting="same_kind")


@family("DiagonalGaussian", kind="diagonal_gaussian")
class DiagonalGaussianDistribution(VectorFamily, Distribution, StackedScoring, SeedsFromPoints,
                                   RunsInBands, RelativeScoring):
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

    #: model files leave ``missing`` out when it is False
    optional_params = ("missing",)

    parameter_coordinates = {"mu": "real", "sigma2": "positive", "missing": "fixed"}

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

    @classmethod
    def stack_of(cls, mu: np.ndarray, sigma2: np.ndarray) -> list[DiagonalGaussianDistribution]:
        """The K distributions of the rows of an M-step's own float64 arrays ``mu`` (K, D) and
        ``sigma2`` (K, D) or (1, D) (one row: shared by all), validated once for the stack; the
        arrays become read-only, each distribution holding its rows as views. Parameters the
        constructor refuses raise its error, naming the component's field."""
        if not (np.isfinite(mu).all() and np.isfinite(sigma2).all() and (sigma2 > 0).all()):
            return [cls(m, v) for m, v in zip(mu, np.broadcast_to(sigma2, mu.shape))]
        mu.setflags(write=False)
        sigma2.setflags(write=False)
        out = []
        for k, m in enumerate(mu):
            d = cls.__new__(cls)  # the checks of __init__, made above for the whole stack
            d.mu, d.sigma2, d.missing = m, sigma2[k if len(sigma2) > 1 else 0], False
            out.append(d)
        return out

    @property
    def dim(self) -> int:
        """The length D of the vectors."""
        return self.mu.size

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if has_missing(enc):
            require_native(precision, "DiagonalGaussian")
            return self.observed_log_density(enc.patterns)
        if not precision.native:
            return log_density_in_band(self, enc, precision)
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        z = (x - self.mu.astype(dt)) ** 2
        norm = 0.5 * (self.dim * LOG_2PI + np.log(self.sigma2).sum())
        out = dt.type(-0.5) * (z @ (1.0 / self.sigma2).astype(dt)) - dt.type(norm)
        return out.astype(np.float64, copy=False)

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
    #: ``stack_log_density`` takes ``units=(start, stop)`` (the centre is shared by the stack)
    stack_units = True

    @classmethod
    def stack_log_density(cls, components: Sequence[DiagonalGaussianDistribution], enc: Encoded,
                          precision: Precision = FLOAT64,
                          units: tuple[int, int] | None = None) -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K).

        ``log p_k(x) = [(x-c)^2, x-c] @ [-1/(2 s2_k); (mu_k-c)/s2_k] + c_k``, no (n_rows, K, D)
        temporary. Rows are centred on the mean of the component means ``c`` first, so the
        expansion cancels little even far from the origin or in float32. Each column is its
        own matrix-vector product, so ``units=(start, stop)`` computes only those columns with
        the bits of the full call (model-parallel workers score ranges apart).
        """
        start, stop = (0, len(components)) if units is None else units
        if has_missing(enc):
            require_native(precision, "DiagonalGaussian")
            return np.stack([c.observed_log_density(enc.patterns)
                             for c in components[start:stop]], axis=1)
        out = np.empty((stop - start, enc.n_rows), dtype=native_dtype(precision))
        _centred_scores(components, np.zeros(len(components)), enc.values, precision, start,
                        stop, out)
        return out.T  # (n, K) in Fortran order: the log-sum-exp reduces contiguous columns

    @classmethod
    def stack_relative_log_density(cls, components: Sequence[DiagonalGaussianDistribution],
                                   enc: Encoded) -> np.ndarray:
        """Log-densities less each row's largest quadratic part, (n_rows, K), finite for any
        finite row (:func:`~mixfold.compute.logspace.relative_affine_scores`)."""
        mu = np.array([c.mu for c in components])
        s2 = np.array([c.sigma2 for c in components])
        const = -0.5 * (mu.shape[1] * LOG_2PI + np.log(s2).sum(axis=1))
        return relative_affine_scores(enc.values, mu, 1.0 / np.sqrt(s2), const)

    @classmethod
    def stack_far_rows(cls, components: Sequence[DiagonalGaussianDistribution],
                       enc: Encoded) -> np.ndarray:
        """Rows the plain scores cannot rank
        (:func:`~mixfold.compute.logspace.affine_far_rows`)."""
        return affine_far_rows(enc.values, np.array([c.mu for c in components]),
                               1.0 / np.sqrt([c.sigma2 for c in components]))

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, D) for k-means++ seeding (a missing entry: its column's
        mean)."""
        return fill_for_points(enc)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(self.mu, np.sqrt(self.sigma2), size=(n, self.dim))

    def n_parameters(self) -> int:
        return 2 * self.mu.size

    def _params(self) -> dict[str, Any]:
        params = {"mu": self.mu.tolist(), "sigma2": self.sigma2.tolist()}
        return {**params, "missing": True} if self.missing else params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> DiagonalGaussianDistribution:
        return cls(p["mu"], p["sigma2"], p.get("missing", False))

    @classmethod
    def hold_parameters(cls, estimated: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
        """A held mean re-centres the estimated variance on it."""
        return recentred_spread(estimated, held, "mu", "sigma2")

    def decomposition(self) -> Decomposition:
        """Atomic: D coordinates to score and accumulate per row."""
        return Decomposition.atomic(row_work=float(self.dim),
                                    param_bytes=self.mu.nbytes + self.sigma2.nbytes)


def _centred_terms(components: Sequence[DiagonalGaussianDistribution]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~mixfold.compute.linear.centred_gaussian` of the components: (centre,
    coefficients (K, 2D) on ``[(x-c)^2, x-c]``, constants (K,), peaks (K,))."""
    return centred_gaussian(np.array([c.mu for c in components]),
                            np.array([c.sigma2 for c in components]))


def _centred_features(x: np.ndarray, center: np.ndarray,
                      dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """``((x - c)^2, x - c)``, two contiguous arrays (n_rows, D) in ``dt``."""
    xc = np.subtract(x, center, dtype=dt)
    with np.errstate(over="ignore"):  # far rows score -inf here; posteriors rank them apart
        return xc * xc, xc


def _centred_scores(components: Sequence[DiagonalGaussianDistribution], log_weights: np.ndarray,
                    x: np.ndarray, precision: Precision, start: int, stop: int,
                    out: np.ndarray) -> None:
    """Weighted log-densities of components ``[start, stop)`` into the rows of ``out``
    ((stop - start, n_rows)), one matrix-vector product per component and feature block."""
    dt = native_dtype(precision)
    center, coef, const, _ = _centred_terms(components)
    sq, xc = _centred_features(x, center, dt)
    d = xc.shape[1]
    bias = (const + log_weights).astype(dt)
    for j, c in enumerate(range(start, stop)):
        np.matmul(sq, coef[c, :d].astype(dt), out=out[j])
        out[j] += xc @ coef[c, d:].astype(dt)
        out[j] += bias[c]


class DiagonalGaussianAccumulator(CentredMoments, LeafAccumulator, StackedUpdate,
                                  LinearInFeatures, CompensatedAccumulation, FusedFold):
    """Statistics about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`): the sum of weights, and per coordinate
    the sums of ``w (x-c)``, ``w (x-c)^2`` and ``w c``."""

    # a mixture's E-step of all K at once (families/stacked_gaussian.py)
    stack_fold = staticmethod(diagonal_fold)

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(keys)
        self.weight = np.zeros(1)
        self.sum_x = np.zeros(dim)
        self.sum_xx = np.zeros(dim)
        self.ref_mass = np.zeros(dim)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.weight, self.sum_x, self.sum_xx, self.ref_mass]

    @staticmethod
    def stack_reference(components: Sequence[DiagonalGaussianDistribution]) -> np.ndarray:
        """The fused E-step's centre of these components
        (:func:`~mixfold.compute.linear.gaussian_centre`), for each."""
        return np.repeat(_centred_terms(components)[0][None], len(components), axis=0)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        c = self.point_for(x, w)
        d = x - c
        s0 = w.sum()
        self.weight += s0
        self.sum_x += w @ d
        self.sum_xx += w @ (d * d)
        self.ref_mass += s0 * c

    def _add_dd(self, x: np.ndarray, w_hi: np.ndarray, w_lo: np.ndarray) -> None:
        add_weighted_moments(self, x, w_hi, w_lo, reference=self.point_for(x, w_hi))

    @staticmethod
    def linear_terms(accs: Sequence[DiagonalGaussianAccumulator],
                     components: Sequence[DiagonalGaussianDistribution],
                     enc: Encoded) -> LinearTerms:
        """The scores as :class:`~mixfold.compute.linear.LinearTerms` on the centred
        features ``[(x-c)^2; x-c]`` (2D of them), centred on the mean of the means; the sums
        stay about that centre."""
        center, coef, const, peak = _centred_terms(components)
        x, d = enc.values, enc.values.shape[1]

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            centred_transposed(x[lo:hi], center, out[:, d:])
            np.square(out[:, d:], out=out[:, :d])  # np.square: faster than x * x, same bits

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, w, sx, sxx in zip(accs, mass, sums[:, d:], sums[:, :d]):
                acc.set_reference(center)
                acc.weight += w
                acc.sum_x += sx
                acc.sum_xx += sxx
                acc.ref_mass += w * center

        return LinearTerms(coef, const, features, add_sums, peak=peak, source=x,
                           key=("diagonal-gaussian", center.tobytes()))

    @staticmethod
    def stack_update(accs: Sequence[DiagonalGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights.

        Column by column (``r_k @ (x-c)``, ``r_k @ (x-c)^2``): a component's sums do not depend
        on the others in the call, so any range of components can be added apart with the same
        bits. The rows are centred once per distinct reference point (one for a stack whose
        references :meth:`stack_reference` set).
        """
        x = enc.values
        at = xc = xx = None
        for k, acc in enumerate(accs):
            r = resp[:, k]
            c = acc.point_for(x, r)
            if at is None or not np.array_equal(c, at):
                at, xc = c, (x - c if np.any(c) else x)  # (about the origin: as they are)
                xx = xc * xc
            s0 = r.sum()
            acc.weight += s0
            acc.sum_x += r @ xc
            acc.sum_xx += r @ xx
            acc.ref_mass += s0 * c


class MissingDiagonalGaussianAccumulator(DiagonalGaussianAccumulator):
    """Statistics of rows that may miss entries: per coordinate, the sum of the weights of the
    rows that have it, and the weighted sums of its deviations from the reference point and
    their squares, and the weighted reference (each length D). A missing coordinate drops out
    of its sums: with independent coordinates the observed ones carry all there is to learn
    (the M-step is exact for the observed-data likelihood)."""

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(dim, keys)
        self.weight = np.zeros(dim)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        seen = ~np.isnan(x)
        c = self.point_for(x, w)
        d = np.where(seen, x - c, 0.0)
        mass = w @ seen
        self.weight += mass
        self.sum_x += w @ d
        self.sum_xx += w @ (d * d)
        self.ref_mass += mass * c

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Any,
                   precision: Precision = FLOAT64) -> None:
        if has_missing(enc):
            require_native(precision, "DiagonalGaussian")
        return super().seq_update(enc, weights, model, precision)

    @staticmethod
    def linear_terms(accs: Sequence[DiagonalGaussianAccumulator],
                     components: Sequence[DiagonalGaussianDistribution],
                     enc: Encoded) -> LinearTerms | None:
        """The fused E-step's terms for complete rows (``None`` for rows that miss entries:
        the mixture then scores, normalises and adds in three steps); a component's mass
        adds to every coordinate's weight."""
        if has_missing(enc):
            return None
        return DiagonalGaussianAccumulator.linear_terms(accs, components, enc)

    @staticmethod
    def stack_update(accs: Sequence[DiagonalGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once, column by column; a missing coordinate adds to
        none of its sums."""
        if not has_missing(enc):
            DiagonalGaussianAccumulator.stack_update(accs, enc, resp)
            return
        p = enc.patterns
        seen = p.observed > 0
        for k, acc in enumerate(accs):
            r = resp[:, k]
            c = acc.point_for(np.where(seen, p.zero_filled, np.nan), r)
            d = np.where(seen, p.zero_filled - c, 0.0)
            mass = r @ p.observed
            acc.weight += mass
            acc.sum_x += r @ d
            acc.sum_xx += r @ (d * d)
            acc.ref_mass += mass * c


class DiagonalGaussianEstimator(LeafEstimator, SharesCovariance, StackedEstimate):
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
    distribution_class = DiagonalGaussianDistribution
    # a mixture's M-step of all K at once (families/stacked_gaussian.py)
    stack_estimate = staticmethod(diagonal_estimate)

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

    def _options(self) -> dict[str, Any]:
        """The keyword options a copy (``bind``) carries over."""
        return {"spherical": self.spherical, "mean_prior": self.mean_prior,
                "mean_weight": self.mean_weight, "covariance_prior": self.covariance_prior,
                "covariance_weight": self.covariance_weight,
                "covariance_keys": self.covariance_keys}

    def held_parameters(self, model: Distribution) -> int:
        """Frozen ones, and a spherical variance's D - 1 copies of one value."""
        copies = model.mu.size - 1 if self.spherical and "sigma2" not in self.frozen else 0
        return super().held_parameters(model) + copies

    def shared_parameters(self, model: Distribution) -> tuple[tuple[str, int], ...]:
        if self.covariance_keys is None or "sigma2" in self.frozen:
            return ()
        return ((f"covariance {self.covariance_keys}", 1 if self.spherical else model.mu.size),)

    def encoder(self) -> VectorEncoder:
        return vector_encoder(self.dim, self.missing)

    def bind(self, encoder: Encoder) -> DiagonalGaussianEstimator:
        dim, missing = bound_vector(self, encoder)
        return DiagonalGaussianEstimator(dim, self.reg_covar, self.min_variance, self.keys,
                                         missing, self.reg_covar_mode, **self._options())

    def _new_accumulator(self) -> DiagonalGaussianAccumulator:
        if self.dim is None:
            raise ValueError("DiagonalGaussianEstimator has no dim: give dim= or let optimize "
                             "learn it when it encodes the data")
        if self.missing:
            return MissingDiagonalGaussianAccumulator(self.dim, self.keys)
        return DiagonalGaussianAccumulator(self.dim, self.keys)

    def estimate(self, nobs: float, stats: Any) -> DiagonalGaussianDistribution:
        own, _ = stats
        if self.missing:
            return self._estimate_observed(*own)
        prior = self._prior()
        if not own[0][0] > 0 and prior.is_flat:
            return DiagonalGaussianDistribution(np.zeros(own[1].size), np.ones(own[1].size))
        if prior.is_flat:
            s0, mu, raw = central_moments(*own)
        else:
            s0, mu, scatter = self.covariance_scatter(nobs, stats)
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
