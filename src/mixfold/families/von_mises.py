"""Von Mises distribution on the circle: angles in radians, direction mu, concentration kappa."""

from __future__ import annotations

from collections.abc import Sequence
import warnings
from typing import NamedTuple

import numpy as np

from mixfold.compute.logspace import LOG_2PI
from mixfold.errors import DegenerateFitWarning, ParameterError
from mixfold.families._centred import ScalarReference
from mixfold.families.contract import (ColumnwiseUpdate, Encoded, LeafEstimator, LinearForm,
                                       LinearLeafDistribution, RecordSums, SeedsFromPoints, family)
from mixfold.families._scipy import i0e, i1e
from mixfold.options import number

__all__ = ["VonMisesDistribution", "VonMisesEstimator", "VonMisesAccumulator",
           "VonMisesStatistics", "von_mises_kappa_mle"]


#: From this concentration on, ``log I0(kappa) - kappa`` is its asymptotic series (the first
#: omitted term is below 3e-16 there) and a component is scored by the half-angle form.
SERIES_KAPPA = 1e3

#: ``((2j-1)!!)^2 / (j! 8^j)``, j = 1..4: ``I0(k) ~ e^k / sqrt(2 pi k) (1 + sum_j c_j / k^j)``.
_I0_SERIES = (1.0 / 8.0, 9.0 / 128.0, 225.0 / 3072.0, 11025.0 / 98304.0)


def log_norm_excess(kappa: np.ndarray | float) -> np.ndarray:
    """``log(2 pi I0(kappa)) - kappa``, exact at any concentration: ``log i0e`` below
    :data:`SERIES_KAPPA`, the asymptotic series of ``I0`` above (``I0(1e20)`` overflows and
    ``log I0 - kappa`` formed as a difference is all cancellation).

    >>> round(float(log_norm_excess(1e20)), 10)
    -22.1069123967
    """
    k = np.asarray(kappa, dtype=np.float64)
    small = np.minimum(k, SERIES_KAPPA)
    large = np.maximum(k, SERIES_KAPPA)
    inv = 1.0 / large
    tail = inv * (_I0_SERIES[0] + inv * (_I0_SERIES[1] + inv * (_I0_SERIES[2]
                                                                + inv * _I0_SERIES[3])))
    series = LOG_2PI - 0.5 * np.log(2.0 * np.pi * large) + np.log1p(tail)
    return np.where(k < SERIES_KAPPA, LOG_2PI + np.log(i0e(small)), series)


def _log_norm(kappa: np.ndarray | float) -> np.ndarray:
    """log(2 pi I0(kappa)), without overflow: I0(kappa) = i0e(kappa) exp(kappa)."""
    return log_norm_excess(kappa) + kappa


class VonMisesStatistics(NamedTuple):
    """A von Mises's statistics of weighted rows about a reference direction ``c`` (the
    model's mean direction when rows are added under a model, else the rows' circular mean).
    The resultant's shortfall ``1 - rbar``, which sets a large concentration, is then a sum of
    small terms, not ``1`` less a sum of cosines."""

    weight: float  #: the sum of the weights
    sines: float  #: the weighted sum of ``sin(x - c)``
    half_versines: float  #: the weighted sum of ``2 sin^2((x - c) / 2)`` (= ``1 - cos(x - c)``)
    reference_mass: float  #: the weighted sum of ``c``


@family("VonMises")
class VonMisesDistribution(LinearLeafDistribution, SeedsFromPoints):
    """Von Mises with density ``exp(kappa cos(x - mu)) / (2 pi I0(kappa))``.

    Angles are any finite reals in radians, read modulo 2 pi; ``kappa = 0`` is the uniform
    distribution on the circle.

    >>> d = VonMisesDistribution(0.5, 2.0)
    >>> round(d.log_density(1.0), 6)
    -0.906705
    >>> round(d.log_density(1.0 + 2 * np.pi), 6)
    -0.906705
    >>> d.sampler(0).sample(3).shape
    (3,)
    """

    domain = "real"
    parameter_coordinates = {"mu": "real", "kappa": "positive"}
    estimated_jointly = ("mu", "kappa")
    Statistics = VonMisesStatistics

    def __init__(self, mu: float, kappa: float):
        self.mu = float(mu)
        self.kappa = float(kappa)
        if not np.isfinite(self.mu):
            raise ParameterError(f"mu must be finite, got {mu!r}")
        if not (np.isfinite(self.kappa) and self.kappa >= 0):
            raise ParameterError(f"kappa must be finite and >= 0, got {kappa!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        x = x.astype(dt, copy=False)
        # kappa (cos d - 1) as -2 kappa sin(d/2)^2: no cancellation for concentrated laws
        half = np.sin((x - dt.type(self.mu)) * dt.type(0.5))
        return dt.type(-2.0 * self.kappa) * half * half - dt.type(log_norm_excess(self.kappa))

    @staticmethod
    def features(x: np.ndarray) -> tuple[np.ndarray, ...]:
        return np.cos(x), np.sin(x)

    def natural(self) -> LinearForm | None:
        """``kappa cos(x - mu) = cos x kappa cos mu + sin x kappa sin mu``, less the log of the
        normaliser; none from :data:`SERIES_KAPPA` on (``kappa cos - kappa`` would cancel)."""
        if self.kappa >= SERIES_KAPPA:
            return None
        return LinearForm((self.kappa * np.cos(self.mu), self.kappa * np.sin(self.mu)),
                          -float(_log_norm(self.kappa)))

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The angles as points on the unit circle (n_rows, 2), for k-means++ seeding."""
        return np.column_stack([np.cos(enc.values), np.sin(enc.values)])

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.vonmises(self.mu, self.kappa, size=n)


class VonMisesAccumulator(RecordSums, ColumnwiseUpdate, ScalarReference):
    """Statistics: :class:`VonMisesStatistics`, in one array ``sums``; K components are added
    column by column, each about its own direction."""

    family = VonMisesDistribution

    @staticmethod
    def stack_reference(components: Sequence[VonMisesDistribution]) -> np.ndarray:
        """Each component's own direction (a shared one would cancel for components apart)."""
        return np.array([[c.mu] for c in components])

    def _moved(self, shift: float) -> None:
        d = shift  # x - new = (x - old) + d
        s0, sin_sum, half = self.sums[0], self.sums[1], self.sums[2]
        cos_sum = s0 - half
        new_sin = sin_sum * np.cos(d) + cos_sum * np.sin(d)
        # 1 - cos(a + d) = (1 - cos a) cos d + 2 sin^2(d/2) - sin a sin d, summed
        self.sums[2] = half * np.cos(d) + s0 * 2.0 * np.sin(0.5 * d) ** 2 - sin_sum * np.sin(d)
        self.sums[1] = new_sin

    def _rows_point(self, x: np.ndarray, w: np.ndarray) -> float:
        return float(np.arctan2(w @ np.sin(x), w @ np.cos(x)))  # their circular mean

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        c = self.point_for(x, w)
        half = np.sin(0.5 * (x - c))
        s0 = w.sum()
        self.sums += (s0, w @ np.sin(x - c), 2.0 * (w @ (half * half)), s0 * c)


def _mean_resultant(kappa: float) -> float:
    """A(kappa) = I1(kappa) / I0(kappa), the mean resultant length of a von Mises."""
    return float(i1e(kappa) / i0e(kappa))


#: Below this shortfall ``1 - rbar`` (kappa above about 1e4) the concentration solves the
#: asymptotic series of ``1 - A(kappa)`` (the first omitted term is below 1e-16 of it there).
SERIES_GAP = 5e-5

#: ``1 - A(k) ~ sum_j c_j / k^j``, j = 1..4.
_A_SERIES = (0.5, 0.125, 0.125, 25.0 / 128.0)


def _shortfall(kappa: float) -> float:
    inv = 1.0 / kappa
    return inv * (_A_SERIES[0] + inv * (_A_SERIES[1] + inv * (_A_SERIES[2] + inv * _A_SERIES[3])))


def von_mises_kappa_mle(rbar: float, max_kappa: float = 1e8, max_iter: int = 20,
                        gap: float | None = None) -> float:
    """The kappa solving ``I1(kappa) / I0(kappa) = rbar`` (the von Mises MLE), at most max_kappa.

    ``rbar`` is the mean resultant length of the angles, in [0, 1]; ``gap``, when given, is
    ``1 - rbar`` to its own precision (a float ``rbar`` holds it only to 1e-16 absolute): below
    :data:`SERIES_GAP` kappa solves ``1 - A(kappa) = gap`` on the asymptotic series. Else
    Newton's method starts from Banerjee et al.'s approximation ``rbar (2 - rbar^2) / (1 -
    rbar^2)``.

    >>> k = von_mises_kappa_mle(0.7)
    >>> round(k, 6), round(float(i1e(k) / i0e(k)), 12)
    (2.013628, 0.7)
    >>> von_mises_kappa_mle(0.0), von_mises_kappa_mle(1.0)
    (0.0, 100000000.0)
    >>> von_mises_kappa_mle(1.0, 1e20, gap=5e-13)
    1000000000000.25
    """
    if gap is not None and gap < SERIES_GAP:
        if not gap > _shortfall(max_kappa):
            return float(max_kappa)
        k = 0.5 / gap
        for _ in range(max_iter):  # Newton on the series, decreasing and convex in kappa
            inv = 1.0 / k
            slope = -inv * inv * (_A_SERIES[0] + inv * (2 * _A_SERIES[1] + inv * (
                3 * _A_SERIES[2] + inv * 4 * _A_SERIES[3])))
            new = k - (_shortfall(k) - gap) / slope
            converged = abs(new - k) <= 1e-15 * k
            k = new
            if converged:
                break
        return float(min(k, max_kappa))
    if not rbar > 0:
        return 0.0
    # A(kappa) ~ 1 - 1/(2 kappa) for large kappa: a resultant this long is beyond max_kappa
    if rbar >= _mean_resultant(max_kappa):
        return float(max_kappa)
    k = min(rbar * (2.0 - rbar * rbar) / (1.0 - rbar * rbar), max_kappa)
    for _ in range(max_iter):
        a = _mean_resultant(k)
        new = k - (a - rbar) / (1.0 - a / k - a * a)
        # A is concave and increasing, so Newton only overshoots downward; halve instead of <= 0
        new = new if new > 0 else 0.5 * k
        converged = abs(new - k) <= 1e-14 * k
        k = new
        if converged:
            break
    return float(min(k, max_kappa))


class VonMisesEstimator(LeafEstimator):
    """M-step for :class:`VonMisesDistribution`: maximum likelihood direction and concentration.

    ``mu`` is the direction of the weighted resultant ``(sum w cos x, sum w sin x)``, in
    (-pi, pi]; ``kappa`` solves ``I1/I0 = rbar`` (:func:`von_mises_kappa_mle`). ``max_kappa``
    caps the concentration: angles that all coincide (infinite MLE) get ``max_kappa``, with a
    :class:`~mixfold.DegenerateFitWarning`. With no
    weight at all the estimate is the uniform ``VonMisesDistribution(0.0, 0.0)``.

    >>> import mixfold
    >>> x = VonMisesDistribution(2.0, 4.0).sampler(2).sample(20000)
    >>> d = mixfold.optimize(x, VonMisesEstimator(), progress=False)
    >>> round(d.mu, 1), round(d.kappa, 1)
    (2.0, 4.0)
    """

    accumulator_class = VonMisesAccumulator
    distribution_class = VonMisesDistribution

    option_rules = {"max_kappa": number(0, above=True)}

    def __init__(self, max_kappa: float = 1e8, keys: str | None = None):
        super().__init__(keys)
        self.check_options(max_kappa=max_kappa)
        self.max_kappa = float(max_kappa)

    def from_statistics(self, stats: VonMisesStatistics) -> VonMisesDistribution:
        s0, s, half = stats.weight, stats.sines, stats.half_versines
        if not s0 > 0:
            return VonMisesDistribution(0.0, 0.0)
        c = s0 - half  # the resultant about the reference direction: (c, s)
        length = float(np.hypot(c, s))
        # 1 - rbar = (s0^2 - |R|^2) / (s0 (s0 + |R|)), |R|^2 = (s0 - half)^2 + s^2: no 1 - rbar
        gap = max((half * (2.0 * s0 - half) - s * s) / (s0 * (s0 + length)), 0.0)
        rbar = min(length / s0, 1.0)
        kappa = von_mises_kappa_mle(rbar, self.max_kappa, gap=gap)
        if kappa >= self.max_kappa:
            warnings.warn(f"a von Mises concentration reached its cap max_kappa="
                          f"{self.max_kappa:g}; rows of total weight {s0:.6g} sit on (nearly) "
                          f"one angle", DegenerateFitWarning, stacklevel=3)  # estimate's caller
        turn = stats.reference_mass / s0 + np.arctan2(s, c)
        mu = float(np.angle(np.exp(1j * turn)))  # in (-pi, pi]
        return VonMisesDistribution(mu, kappa)
