"""Univariate Gaussian N(mu, sigma2).

Its stacked scoring (K components at once) is :mod:`mixfold.families._gaussian_stack`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.compute.linear import LinearTerms, centred_gaussian, gaussian_centre
from mixfold.compute.logspace import LOG_2PI
from mixfold.errors import ParameterError
from mixfold.families._centred import (FLOOR_MODES, CentredMoments, central_moments,
                                       variance_floor, warn_collapsed_variance)
from mixfold.families._gaussian_stack import GaussianStack
from mixfold.families._intervals import IntervalLaw, scipy_stats, truncated_normal_moments
from mixfold.families.contract import (CompensatedAccumulation, Encoded, FieldSums,
                                       LeafDistribution, LeafEstimator, LinearInFeatures,
                                       RunsInBands, SeedsFromValues, StackedUpdate, family)
from mixfold.precision import log_density_in_band, native_dtype
from mixfold.precision.compensated import add_weighted_moments
from mixfold.options import number, one_of
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["GaussianDistribution", "GaussianEstimator", "GaussianAccumulator",
           "GaussianStatistics", "warn_collapsed_variance"]


class GaussianStatistics(NamedTuple):
    """A Gaussian's statistics of weighted rows about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`), one float64 array (1,) each."""

    weight: np.ndarray  #: the sum of the weights
    sum_x: np.ndarray  #: the weighted sum of ``x - c``
    sum_xx: np.ndarray  #: the weighted sum of ``(x - c)^2``
    ref_mass: np.ndarray  #: the weighted sum of ``c``


@family("Gaussian")
class GaussianDistribution(LeafDistribution, GaussianStack, SeedsFromValues, RunsInBands,
                           IntervalLaw):
    """Gaussian with mean ``mu`` and variance ``sigma2``.

    >>> d = GaussianDistribution(1.0, 4.0)
    >>> round(d.log_density(1.0), 6)
    -1.612086
    >>> d.sampler(0).sample(3).shape
    (3,)
    """

    domain = "real"
    parameter_coordinates = {"mu": "real", "sigma2": "positive"}
    location_spread = ("mu", "sigma2")  # a held mean re-centres the estimated variance
    Statistics = GaussianStatistics

    def __init__(self, mu: float, sigma2: float):
        self.mu = float(mu)
        self.sigma2 = float(sigma2)
        if not np.isfinite(self.mu):
            raise ParameterError(f"mu must be finite, got {mu!r}")
        if not (np.isfinite(self.sigma2) and self.sigma2 > 0):
            raise ParameterError(f"sigma2 must be finite and > 0, got {sigma2!r}")

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if not precision.native:
            return log_density_in_band(self, enc, precision)
        return self.log_densities(enc.values, native_dtype(precision)).astype(np.float64,
                                                                              copy=False)

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        z = (x.astype(dt, copy=False) - dt.type(self.mu)) ** 2
        norm = dt.type(0.5 * (LOG_2PI + np.log(self.sigma2)))
        return dt.type(-0.5) * z / dt.type(self.sigma2) - norm

    def band_log_density(self, enc: Encoded, ops: Any) -> Any:
        """``-(z^2 / s2 + log 2 pi + log s2) / 2`` with every operation in the band of ``ops``
        (a :class:`~mixfold.precision.emulation.BandOps`); the values stay in the band. The
        deviation ``z = x - mu`` enters the band rounded once from float64, so a band scores
        rows far from the origin (x = 1e8 overflows float16) as it scores them near it."""
        s2 = ops.array(self.sigma2)
        z = ops.array(enc.values - self.mu)
        inner = ops.add(ops.div(ops.mul(z, z), s2), ops.add(ops.log_2pi, ops.log(s2)))
        return ops.mul(ops.array(-0.5), inner)

    def scipy_law(self) -> Any:
        """``scipy.stats.norm(mu, sqrt(sigma2))``."""
        return scipy_stats().norm(self.mu, np.sqrt(self.sigma2))

    def interval_points(self, low: np.ndarray, high: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """``m -+ s`` at probability 1/2 each: the mean ``m`` and variance ``s^2`` of the
        truncated normal on each interval (closed form), all a Gaussian's statistics need."""
        sd = np.sqrt(self.sigma2)
        mean, var = truncated_normal_moments((low - self.mu) / sd, (high - self.mu) / sd)
        m, s = self.mu + sd * mean, sd * np.sqrt(var)
        return np.stack([m - s, m + s], axis=1), np.full((len(m), 2), 0.5)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(self.mu, np.sqrt(self.sigma2), size=n)


class GaussianAccumulator(CentredMoments, FieldSums, StackedUpdate, LinearInFeatures,
                          CompensatedAccumulation):
    """:class:`GaussianStatistics` about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`), one array a field."""

    family = GaussianDistribution

    @staticmethod
    def stack_reference(components: Sequence[GaussianDistribution]) -> np.ndarray:
        """The fused E-step's centre of these components (:func:`gaussian_centre`), for each."""
        centre = gaussian_centre(np.array([[c.mu] for c in components]),
                                 np.array([[c.sigma2] for c in components]))
        return np.repeat(centre[None], len(components), axis=0)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        c = self.point_for(x, w)
        d = x - c[0]
        wd = w * d
        s0 = w.sum()
        self.weight += s0
        self.sum_x += wd.sum()
        self.sum_xx += wd @ d
        self.ref_mass += s0 * c

    def _add_dd(self, x: np.ndarray, w_hi: np.ndarray, w_lo: np.ndarray) -> None:
        add_weighted_moments(self, x, w_hi, w_lo, reference=self.point_for(x, w_hi))

    @staticmethod
    def linear_terms(accs: Sequence[GaussianAccumulator],
                     components: Sequence[GaussianDistribution], enc: Encoded) -> LinearTerms:
        """The scores as :class:`~mixfold.compute.linear.LinearTerms` on the centred features
        ``[(x-c)^2, x-c]``, centred on the mean of the means (little cancels, even in float32
        far from the origin); the sums stay about that centre."""
        center, coef, const, peak = centred_gaussian(
            np.array([[c.mu] for c in components]), np.array([[c.sigma2] for c in components]))
        c0, x = float(center[0]), enc.values

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            np.subtract(x[lo:hi].reshape(out.shape[0], -1), c0, out=out[:, 1],
                        casting="same_kind")
            np.square(out[:, 1], out=out[:, 0])

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, w, sxx, sx in zip(accs, mass, sums[:, 0], sums[:, 1]):
                acc.add_about(center, w, sx, sxx)

        return LinearTerms(coef, const, features, add_sums, peak=peak, source=x,
                           key=("gaussian", c0))

    @staticmethod
    def stack_update(accs: Sequence[GaussianAccumulator], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights.

        Column by column, so any range of components can be added apart with the same bits;
        the rows are centred once per distinct reference point (one for a stack whose
        references :meth:`stack_reference` set); the dot products are ``einsum`` loops, not
        BLAS calls (no thread wake-ups per column).
        """
        x = enc.values
        at = d = dd = None
        for k, acc in enumerate(accs):
            r = resp[:, k]
            c = acc.point_for(x, r)
            if at is None or c[0] != at:
                at = c[0]
                d = x - at if at else x  # (about the origin: as they are)
                dd = d * d
            s0 = r.sum()
            acc.weight += s0
            acc.sum_x += np.einsum("i,i->", d, r)
            acc.sum_xx += np.einsum("i,i->", dd, r)
            acc.ref_mass += s0 * c


class GaussianEstimator(LeafEstimator):
    """M-step for :class:`GaussianDistribution`.

    ``reg_covar`` is added to the estimated variance (as scikit-learn does) and ``min_variance``
    floors it, so a collapsing component never yields a zero variance; when the floor is what
    remains (the rows sit on one value) a :class:`~mixfold.DegenerateFitWarning` says so.
    ``reg_covar_mode="relative"`` adds ``reg_covar`` times the estimated variance instead, a
    floor on the data's own scale (:func:`~mixfold.families._centred.variance_floor`). The
    statistics are summed about the model's mean, so the fit does not depend on where the
    data sits.

    >>> import mixfold
    >>> x = GaussianDistribution(2.0, 9.0).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, GaussianEstimator(), progress=False)
    >>> round(d.mu, 1), round(d.sigma2, 0)
    (2.0, 9.0)
    """

    distribution_class = GaussianDistribution
    accumulator_class = GaussianAccumulator
    empty_parameters = (0.0, 1.0)

    option_rules = {"reg_covar": number(0), "min_variance": number(0, above=True),
                    "reg_covar_mode": one_of(*FLOOR_MODES)}

    def __init__(self, reg_covar: float = 1e-6, min_variance: float = 1e-12,
                 keys: str | None = None, reg_covar_mode: str = "absolute"):
        super().__init__(keys)
        self.check_options(reg_covar=reg_covar, min_variance=min_variance,
                           reg_covar_mode=reg_covar_mode)
        self.reg_covar = float(reg_covar)
        self.min_variance = float(min_variance)
        self.reg_covar_mode = reg_covar_mode

    def from_statistics(self, stats: GaussianStatistics) -> GaussianDistribution:
        s0, mean, second = central_moments(*stats)
        mu, raw = float(mean[0]), float(second[0])
        floor = float(variance_floor(np.array(raw), self.reg_covar, self.reg_covar_mode))
        var = max(max(raw, 0.0) + floor, self.min_variance)
        if raw <= max(floor, self.min_variance):
            warn_collapsed_variance(raw, var, s0, mu, stacklevel=4)
        return GaussianDistribution(mu, var)
