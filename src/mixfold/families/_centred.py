"""Gaussian statistics summed about a reference point: what makes a Gaussian fit independent of
where its data sits.

Raw moments ``sum w x^2`` of rows at an offset of 1e8 keep nothing of a unit spread once the
M-step subtracts ``mu^2``. Summed about a point ``c`` near the rows -- ``sum w``, ``sum w (x-c)``,
``sum w (x-c)^2`` (or the outer products) -- the variance is ``B/s0 - (A/s0)^2`` with nothing to
cancel. ``c`` travels in the payload as ``sum w c``: payloads still add (every shard of a fold
sums about the same point, the model's), and the M-step reads ``c`` back as ``sum w c / sum w``.

>>> from mixfold.families.gaussian import GaussianAccumulator
>>> acc = GaussianAccumulator()
>>> acc.set_reference(np.array([1e8]))
>>> acc._add(1e8 + np.array([-1.0, 0.0, 1.0]), np.ones(3))
>>> acc.sum_x.tolist(), acc.sum_xx.tolist()
([0.0], [2.0])
>>> central_moments(acc.weight, acc.sum_x, acc.sum_xx, acc.ref_mass)
(3.0, array([1.e+08]), array([0.66666667]))
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from mixfold.capabilities import CentredStatistics
from mixfold.compute.centre import weighted_centre
from mixfold.errors import DegenerateFitWarning
from mixfold.families._protocol import NodeStatistics

__all__ = ["CentredMoments", "VectorMoments", "ScalarReference", "central_moments",
           "weighted_centre", "warn_collapsed_variance"]


def central_moments(weight: np.ndarray, sum_x: np.ndarray, sum_xx: np.ndarray,
                    ref_mass: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(total weight, mean (D,), central second moment (D,) or (D, D)) from sums about the
    reference point ``ref_mass / weight``; the second moment is not floored (it may round
    below 0 for rows on one value)."""
    s0 = float(weight[0])
    m = sum_x / s0
    mean = ref_mass / s0 + m
    if sum_xx.ndim == 2:
        second = sum_xx / s0 - np.outer(m, m)
        return s0, mean, 0.5 * (second + second.T)  # the sums are symmetric up to rounding
    return s0, mean, sum_xx / s0 - m * m


class CentredMoments(CentredStatistics):
    """The statistics ``weight`` (1,), ``sum_x`` (D,) = ``sum w (x-c)``, ``sum_xx`` (D,) or
    (D, D) = ``sum w (x-c)^2`` (or the outer products) and ``ref_mass`` (D,) = ``sum w c`` of a
    Gaussian-like family, summed about the reference ``c``: the model's mean when rows are added
    under a model, the point :meth:`set_reference` gave for a stacked update, the weighted mean
    of the rows of a seeded start. Subclasses hold the four arrays (:class:`VectorMoments` for
    rows of D values; the Gaussian's in its field sums) and say which point a stack of their
    components shares (``stack_reference``)."""

    weight: np.ndarray
    sum_x: np.ndarray
    sum_xx: np.ndarray
    ref_mass: np.ndarray
    _point: np.ndarray | None = None

    def set_reference(self, point: np.ndarray) -> None:
        self._point = np.asarray(point, dtype=np.float64).reshape(self.sum_x.shape)

    def has_point(self) -> bool:
        return self._point is not None

    def reference(self) -> np.ndarray | None:
        """``ref_mass / weight`` (per coordinate where rows miss entries: 0 where none has it);
        ``None`` before any weight."""
        if not (self.weight > 0).any():
            return None
        return np.divide(self.ref_mass, self.weight, out=np.zeros_like(self.ref_mass),
                         where=self.weight > 0)

    def point_for(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The point rows are summed about now: the one set, else the statistics' own, else
        the rows' weighted mean (kept for the rows that follow)."""
        if self._point is None:
            own = self.reference()
            self._point = weighted_centre(x, w) if own is None else own
        return self._point

    def add_about(self, center: np.ndarray, w: float, sum_x: np.ndarray,
                  sum_xx: np.ndarray) -> None:
        """Add sums of weight ``w`` taken about ``center`` (the fused E-step's), which becomes
        this accumulator's reference point."""
        self.set_reference(center)
        self.weight += w
        self.sum_x += sum_x
        self.sum_xx += sum_xx
        self.ref_mass += w * center

    def recentre(self, point: np.ndarray) -> None:
        old = self.reference()
        point = np.asarray(point, dtype=np.float64).reshape(self.sum_x.shape)
        self._point = point
        if old is None:
            return
        d = old - point
        if not np.any(np.abs(d) > 8 * np.finfo(float).eps * np.abs(point)):
            return  # the same point read back through sum w c / sum w: nothing to move
        s0 = self.weight  # one total, or one per coordinate where rows miss entries
        if self.sum_xx.ndim == 2:
            self.sum_xx += np.outer(d, self.sum_x) + np.outer(self.sum_x, d) + s0 * np.outer(d, d)
        else:
            self.sum_xx += d * (2.0 * self.sum_x + s0 * d)
        self.sum_x += s0 * d
        self.ref_mass[...] = s0 * point


class VectorMoments(CentredMoments):
    """:class:`CentredMoments` of rows of D values in four arrays of their own: ``sum_xx`` holds
    the squares (D,) or, where ``outer_products``, the outer products (D, D)."""

    outer_products: ClassVar[bool] = False

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(keys)
        self.weight = np.zeros(1)
        self.sum_x = np.zeros(dim)
        self.sum_xx = np.zeros((dim, dim) if self.outer_products else dim)
        self.ref_mass = np.zeros(dim)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.weight, self.sum_x, self.sum_xx, self.ref_mass]

    @staticmethod
    def value_of(weight: np.ndarray, sum_x: np.ndarray, sum_xx: np.ndarray,
                 ref_mass: np.ndarray) -> NodeStatistics:
        """What :meth:`value` gives for these sums (the arrays themselves, in
        :meth:`own_arrays` order): statistics made without an accumulator."""
        return NodeStatistics((weight, sum_x, sum_xx, ref_mass), ())


class ScalarReference(CentredStatistics):
    """Statistics ``sums`` summed about a reference that is one number ``c`` (a log scale, a
    direction): the weight first, ``sum w c`` last, the family's own sums between. Subclasses
    say how those move when the reference does (:meth:`_moved`) and, where it is not the rows'
    weighted mean, which point their rows give (:meth:`_rows_point`)."""

    sums: np.ndarray
    _point: float | None = None

    def set_reference(self, point: np.ndarray) -> None:
        self._point = float(np.reshape(point, -1)[0])

    def has_point(self) -> bool:
        return self._point is not None

    def reference(self) -> np.ndarray | None:
        return np.array([self.sums[-1] / self.sums[0]]) if self.sums[0] > 0 else None

    def point_for(self, x: np.ndarray, w: np.ndarray) -> float:
        """The point rows are summed about now: the one set, else the statistics' own, else
        the rows' (kept for the rows that follow)."""
        if self._point is None:
            own = self.reference()
            self._point = float(own[0]) if own is not None else self._rows_point(x, w)
        return self._point

    def recentre(self, point: np.ndarray) -> None:
        old = self.reference()
        self.set_reference(point)
        if old is not None:
            self._moved(float(old[0]) - self._point)
            self.sums[-1] = self.sums[0] * self._point

    @abstractmethod
    def _moved(self, shift: float) -> None:
        """Move the family's sums from the old reference to the new, ``shift`` = old - new."""

    def _rows_point(self, x: np.ndarray, w: np.ndarray) -> float:
        """The reference the rows ``x`` of weights ``w`` give when nothing else does: their
        weighted mean."""
        return float(weighted_centre(x, w)[0])


#: How a variance floor ``reg_covar`` is read: as is, or times the variance it floors.
FLOOR_MODES = ("absolute", "relative")

#: A covariance formed in float64 is known to a few hundred ulps of its diagonal: at least
#: this much of each diagonal entry is added, so round-off alone never breaks its Cholesky.
ROUNDOFF_FLOOR = 2.0 ** -40


def variance_floor(variances: np.ndarray, reg_covar: float, mode: str) -> np.ndarray:
    """What is added to each variance (or covariance diagonal entry): ``reg_covar`` itself
    (``"absolute"``, scikit-learn's), or ``reg_covar`` times the variance (``"relative"``: the
    floor scales with the data, so a fit in metres and the same fit in kilometres agree).

    >>> variance_floor(np.array([4.0, 4e6]), 1e-6, "absolute").tolist()
    [1e-06, 1e-06]
    >>> variance_floor(np.array([4.0, 4e6]), 1e-6, "relative").tolist()
    [4e-06, 4.0]
    """
    if mode == "relative":
        return reg_covar * np.maximum(variances, 0.0)
    return np.full(np.shape(variances), reg_covar)


def warn_collapsed_variance(raw: Any, floored: Any, weight: float, mu: Any,
                            where: str = "", stacklevel: int = 3) -> None:
    """Warn that an estimated variance collapsed onto the floor (rows on one value), at the
    line ``stacklevel`` frames up (3: the caller of the ``estimate`` that calls this)."""
    warnings.warn(f"a Gaussian variance collapsed{where}; {float(raw):.3g} from rows of total "
                  f"weight {weight:.6g} at mean {float(mu):.6g}; floored to {float(floored):.3g}"
                  f" (reg_covar / min_variance)", DegenerateFitWarning, stacklevel=stacklevel)
