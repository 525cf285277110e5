"""Von Mises distribution on the circle: angles in radians, direction mu, concentration kappa."""

from __future__ import annotations

from collections.abc import Sequence
import warnings
from typing import Any

import numpy as np

from mixfold.compute.logspace import LOG_2PI
from mixfold.capabilities import SeedsFromPoints, StackedScoring, StackedUpdate
from mixfold.errors import DegenerateFitWarning, ParameterError
from mixfold.families._centred import ScalarReference
from mixfold.families._encoders import NumericEncoder
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families._scipy import i0e, i1e
from mixfold.precision import native_dtype
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["VonMisesDistribution", "VonMisesEstimator", "VonMisesAccumulator",
           "von_mises_kappa_mle"]


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


@family("VonMises", kind="von_mises")
class VonMisesDistribution(Distribution, StackedScoring, SeedsFromPoints):
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

    parameter_coordinates = {"mu": "real", "kappa": "positive"}
    estimated_jointly = ("mu", "kappa")

    def __init__(self, mu: float, kappa: float):
        self.mu = float(mu)
        self.kappa = float(kappa)
        if not np.isfinite(self.mu):
            raise ParameterError(f"mu must be finite, got {mu!r}")
        if not (np.isfinite(self.kappa) and self.kappa >= 0):
            raise ParameterError(f"kappa must be finite and >= 0, got {kappa!r}")

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        # kappa (cos d - 1) as -2 kappa sin(d/2)^2: no cancellation for concentrated laws
        half = np.sin((x - dt.type(self.mu)) * dt.type(0.5))
        out = dt.type(-2.0 * self.kappa) * half * half - dt.type(log_norm_excess(self.kappa))
        return out.astype(np.float64, copy=False)

    @classmethod
    def stack_log_density(cls, components: Sequence[VonMisesDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K).

        ``kappa cos(x - mu) = cos x kappa cos mu + sin x kappa sin mu``, for all K at once, each
        column on its own (a GEMM would round a column differently with other columns beside it,
        and model-parallel workers score ranges of components apart).
        """
        dt = native_dtype(precision)
        mu = np.array([c.mu for c in components])
        kappa = np.array([c.kappa for c in components])
        coef = (kappa * np.stack([np.cos(mu), np.sin(mu)])).astype(dt)
        points = cls.stack_points(enc).astype(dt, copy=False)
        out = np.multiply.outer(points[:, 0], coef[0])
        out += np.multiply.outer(points[:, 1], coef[1])
        out -= _log_norm(kappa).astype(dt)
        for k in np.flatnonzero(kappa >= SERIES_KAPPA):  # kappa cos - kappa would cancel
            half = np.sin((enc.values.astype(dt, copy=False) - dt.type(mu[k])) * dt.type(0.5))
            out[:, k] = dt.type(-2.0 * kappa[k]) * half * half - dt.type(log_norm_excess(kappa[k]))
        return out

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The angles as points on the unit circle (n_rows, 2), for k-means++ seeding."""
        return np.column_stack([np.cos(enc.values), np.sin(enc.values)])

    def encoder(self) -> Encoder:
        return NumericEncoder("real")

    def estimator(self, **options: Any) -> VonMisesEstimator:
        return VonMisesEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.vonmises(self.mu, self.kappa, size=n)

    def n_parameters(self) -> int:
        return 2

    def _params(self) -> dict[str, Any]:
        return {"mu": self.mu, "kappa": self.kappa}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> VonMisesDistribution:
        return cls(p["mu"], p["kappa"])


class VonMisesAccumulator(LeafAccumulator, StackedUpdate, ScalarReference):
    """Statistics about a reference direction ``c`` (the model's mean direction when rows are
    added under a model, else the rows' circular mean): the sums of ``w``, ``w sin(x - c)``,
    ``w 2 sin^2((x - c) / 2)`` (= ``w (1 - cos(x - c))``, without its cancellation) and
    ``w c``. The resultant's shortfall ``1 - rbar``, which sets a large concentration, is then a
    sum of small terms, not ``1`` less a sum of cosines."""

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(4)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]

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

    @staticmethod
    def stack_update(accs: Sequence[VonMisesAccumulator], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights.

        Column by column (each about its own direction), so any range of components can be
        added apart with the same bits.
        """
        for k, acc in enumerate(accs):
            acc._add(enc.values, resp[:, k])


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

    def encoder(self) -> Encoder:
        return NumericEncoder("real")

    def estimate(self, nobs: float, stats: Any) -> VonMisesDistribution:
        (sums,), _ = stats
        s0, s, half, ref_mass = sums
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
                          f"one angle", DegenerateFitWarning, stacklevel=2)
        mu = float(np.angle(np.exp(1j * (ref_mass / s0 + np.arctan2(s, c)))))  # in (-pi, pi]
        return VonMisesDistribution(mu, kappa)
