"""Accelerated EM: SQUAREM (Varadhan & Roland 2008), which the one EM loop asks for the model
it folds next.

Each cycle takes two plain EM steps from ``theta0`` (``theta1 = M(theta0)``,
``theta2 = M(theta1)``), then folds the squared extrapolation

    ``theta' = theta0 + 2 a r + a**2 v``,  ``r = theta1 - theta0``,
    ``v = theta2 - 2 theta1 + theta0``

with the S3 step length ``a = |r| / |v|`` (``a = 1`` gives ``theta2``), in the coordinates of
:mod:`mixfold.families._flat` (every parameter as the M-step writes it); a point outside the
parameter space (a probability or a variance below zero, a covariance that is not positive
definite) backs the step off halfway toward 1 until it is inside. That fold also makes the
cycle's stabilising EM step ``M(theta')``, where the next cycle starts. The safeguard: an
extrapolated point that scores below ``theta1`` is dropped and the cycle goes on from
``theta2``, so the log-likelihoods the loop records never fall. The step length is capped, the
cap starting at 4, growing fourfold each time a step reaches it and shrinking fourfold each time
one is dropped (the SQUAREM package's factor; its first cap, 1, spends the first cycle on plain EM).

The fit converges when an EM step changes the log-likelihood by at most ``tol`` (relative, as
plain EM) and EM's remaining climb from there is at most ``tol`` too. Plain EM's error shrinks
by its slowest rate ``lam`` per step, and a cycle's step length estimates ``1 / (1 - lam)``
(exactly so for a linear map: ``r = (lam - 1) e``, ``v = (lam - 1)**2 e``), so a step that
gained ``d`` leaves about ``d lam**2 / (1 - lam**2)`` to climb (exactly so where the
log-likelihood is quadratic in that direction); ``lam`` comes from the longer of the last two
cycles' step lengths, which swing from cycle to cycle where EM crawls.
Where EM contracts fast the test is plain EM's (``lam**2 / (1 - lam**2) < 1``); where it crawls,
the test waits for the climb that a step's small gain hides (``benchmarks/README.md``, SQUAREM).

A cycle costs three folds and moves as far as several plain EM steps where EM crawls:

>>> import numpy as np, mixfold
>>> x = np.concatenate([np.random.default_rng(0).normal(m, 1.0, 300) for m in (0, 1.5, 4)])
>>> est = mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 3)
>>> plain = mixfold.fit(x, est, tol=1e-9, max_iter=5000, progress=False)
>>> fast = mixfold.fit(x, est, tol=1e-9, max_iter=5000, accelerate="squarem", progress=False)
>>> fast.folds < plain.folds / 2, fast.final_log_likelihood >= plain.final_log_likelihood - 1e-8
(True, True)
"""

from __future__ import annotations

import math

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._flat import from_flat, to_flat, undeclared_families
from mixfold.families._protocol import Distribution

__all__ = ["ACCELERATIONS", "Squarem", "squarem_for"]

#: The values ``optimize(accelerate=...)`` takes besides None.
ACCELERATIONS = ("squarem",)
#: The cap's growth when a step reaches it, and its shrinking when one is dropped.
STEP_FACTOR = 4.0
#: The first cap: the first cycle may extrapolate (a cap of 1 spends it on plain EM).
FIRST_STEP_CAP = 4.0
#: EM's slowest rate is read from the longest step length of this many last cycles.
RATE_MEMORY = 2
#: Backing off from a step outside the parameter space ends within this of a plain step.
BACKTRACK_FLOOR = 0.01


def squarem_for(model: Distribution) -> tuple[Squarem | None, str | None]:
    """SQUAREM's state for a fit of ``model``'s structure, or (None, why) where a family of
    the tree does not map its parameters to a flat vector (the fit runs plain EM)."""
    missing = undeclared_families(model)
    if missing:
        return None, (f"accelerate='squarem': {', '.join(missing)} declares no "
                      f"parameter_coordinates (no flat parameter vector to extrapolate in); "
                      f"running plain EM")
    return Squarem(), None


class Squarem:
    """SQUAREM's state between folds: where the cycle stands and the step cap.

    The loop calls :meth:`after_fold` with the model it folded and the model the fold's
    M-step made, and folds what it returns; ``extrapolating`` says whether the model it is
    about to fold is an extrapolated point (whose fold the loop judges with :meth:`rejected`).
    """

    def __init__(self) -> None:
        self.step_cap = FIRST_STEP_CAP
        self._lengths: list[float] = []  # the last cycles' S3 step lengths |r| / |v|, uncapped
        self.extrapolating = False
        self.extrapolations = 0  # extrapolated points folded and kept
        self.dropped = 0  # extrapolated points whose fold scored below theta1
        self._points: list[np.ndarray] = []  # theta0, theta1 (coordinates) of the cycle
        self._theta2: Distribution | None = None

    def after_fold(self, folded: Distribution, produced: Distribution,
                   log_likelihood: float) -> Distribution:
        """The model to fold next, given that ``folded`` was folded, scoring
        ``log_likelihood``, and its M-step made ``produced``."""
        if self.extrapolating:  # the extrapolated point was kept: its EM step starts a cycle
            self.extrapolating, self.extrapolations = False, self.extrapolations + 1
            self._points = []
            return produced
        self._points.append(to_flat(folded))
        if len(self._points) == 1:  # folded theta0: fold theta1 next
            return produced
        theta0, theta1 = self._points
        self._points, self._theta2 = [], produced
        jump = self._extrapolate(theta0, theta1, to_flat(produced), produced)
        if jump is None:
            return produced
        self.extrapolating = True
        return jump

    def rejected(self) -> Distribution:
        """The fold of the extrapolated point scored below theta1: drop it, shrink the cap, and
        go on from theta2 (the start of the next cycle)."""
        self.extrapolating, self.dropped = False, self.dropped + 1
        self.step_cap = max(1.0, self.step_cap / STEP_FACTOR)
        assert self._theta2 is not None
        return self._theta2

    def settled(self, tol: float, step_change: float) -> bool:
        """Whether EM's remaining climb after an EM step that changed the log-likelihood by
        ``step_change`` (relative) is at most ``tol``, its slowest rate read from the longest
        of the last cycles' step lengths: where EM crawls, a step gains little of what is left."""
        rate = 1.0 - 1.0 / max(max(self._lengths, default=1.0), 1.0)
        return step_change * rate * rate <= tol * (1.0 - rate * rate)

    def restart(self) -> None:
        """Begin a new cycle at the next model folded (after a band promotion)."""
        self.extrapolating, self._points = False, []

    def _extrapolate(self, theta0: np.ndarray, theta1: np.ndarray, theta2: np.ndarray,
                     template: Distribution) -> Distribution | None:
        """The squared extrapolation from the cycle's three points, or None where it is theta2
        itself or maps to no valid model."""
        r = theta1 - theta0
        v = theta2 - 2.0 * theta1 + theta0
        r_norm, v_norm = float(np.linalg.norm(r)), float(np.linalg.norm(v))
        if not (math.isfinite(r_norm) and math.isfinite(v_norm)) or v_norm == 0.0:
            return None
        self._lengths = (self._lengths + [r_norm / v_norm])[-RATE_MEMORY:]
        step = min(max(r_norm / v_norm, 1.0), self.step_cap)
        if step >= self.step_cap:
            self.step_cap *= STEP_FACTOR
        while step > 1.0:  # a point outside the parameter space: back off toward theta2
            point = theta0 + 2.0 * step * r + step * step * v
            try:
                if np.isfinite(point).all():
                    return from_flat(template, point)
            except (ParameterError, ValueError, FloatingPointError, np.linalg.LinAlgError):
                pass
            step = 1.0 + (step - 1.0) / 2.0 if step > 1.0 + BACKTRACK_FLOOR else 1.0
        return None  # the extrapolation is theta2: nothing to gain from folding it
