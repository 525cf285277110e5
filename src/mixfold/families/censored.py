"""Censored and truncated values of a univariate continuous family: each row an interval known to
hold the value, the family possibly truncated to a window.

**Encoding.** A row is a number (observed exactly) or a pair ``(low, high)``: the value lies in
``[low, high]``. ``low == high`` is an exact value, ``high`` = ``None`` / NaN / inf a value
*right-censored* at ``low`` (a duration still running, a sensor saturating at ``low``), ``low``
= ``None`` / NaN / -inf one *left-censored* at ``high`` (below a detection limit), both finite
an *interval-censored* value, both open a value about which nothing is known (it adds
nothing). An array of shape (n_rows, 2) holds the same pairs; a 1-D array is exact values.
Survival data as ``(duration, event)`` is ``(t, t)`` for an event and ``(t, None)`` for a
censored row: :func:`~mixfold.survival_rows` makes the pairs. ``truncate=(a, b)`` says the
family is only ever seen inside ``[a, b]`` (values outside were never recorded): its density is
renormalised to the window, every row must lie in it and intervals are cut to it.

**EM.** The censored (and, under truncation, the never-recorded) values are latent: the E-step
adds to the family's own accumulator, for each interval row, the expected sufficient statistics
of the family restricted to that interval under the current parameters
(:meth:`~mixfold.families._intervals.IntervalLaw.interval_points`: closed form for Gaussian,
LogGaussian and Exponential, tanh-sinh quadrature otherwise), and for truncation the expected
number of values outside the window, ``w (1 - P) / P`` per row, with the statistics of the law
outside it (Dempster, Laird and Rubin 1977, section 4.4). The M-step is the family's own.

How the rows are read is :mod:`mixfold.families._interval_rows`; what Censored writes like the
other wrappers of one child (missing values, zero inflation) is :mod:`mixfold.families._wrapper`.

>>> import numpy as np, mixfold
>>> from mixfold import CensoredEstimator, ExponentialEstimator
>>> times = mixfold.ExponentialDistribution(0.5).sampler(0).sample(20000)
>>> rows = survival_rows(np.minimum(times, 3.0), times < 3.0)  # follow-up stops at t = 3
>>> d = mixfold.optimize(rows, CensoredEstimator(ExponentialEstimator()), tol=1e-12,
...                      progress=False)
>>> mle = (times < 3.0).sum() / np.minimum(times, 3.0).sum()  # events / time at risk
>>> bool(abs(d.base.rate - mle) < 1e-6)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.decomposition import Decomposition
from mixfold.errors import DataTypeError, ParameterError
from mixfold.families._interval_rows import (SUPPORT_LOW, WINDOW, CensoredEncoder, as_window,
                                             window_json)
from mixfold.families._intervals import IntervalLaw
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, ArrayEncoded,
                                        Distribution, Encoded, Estimator, InitRandom, family)
from mixfold.families._wrapper import WrapperAccumulator, WrapperDistribution, WrapperEstimator
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["CensoredDistribution", "CensoredEstimator", "CensoredEncoder", "CensoredAccumulator",
           "survival_rows"]


def survival_rows(durations: Any, observed: Any) -> np.ndarray:
    """Survival data as rows of this family: ``(t, t)`` where the event was ``observed``,
    ``(t, inf)`` where the row was censored at ``t``; array of shape (n_rows, 2).

    >>> survival_rows([2.0, 5.0], [True, False]).tolist()
    [[2.0, 2.0], [5.0, inf]]
    """
    t = np.asarray(durations, dtype=np.float64)
    seen = np.asarray(observed, dtype=bool)
    if t.ndim != 1 or seen.shape != t.shape:
        raise DataTypeError(f"durations and observed must be 1-D of one length, got shapes "
                            f"{t.shape} and {seen.shape}")
    return np.column_stack([t, np.where(seen, t, np.inf)])


# ---------------------------------------------------------------------------------------------
# Distribution


@family("Censored")
class CensoredDistribution(WrapperDistribution):
    """A univariate continuous family ``base`` (one with a CDF: Gaussian, LogGaussian,
    Exponential, Gamma, Weibull) whose values may be censored, truncated to ``truncate =
    (low, high)`` (``None`` for an open end). A row's log-likelihood is the base's
    log-density at an exact value, the log of the base's mass of its interval otherwise, less
    the log of the window's mass.

    >>> from mixfold import GaussianDistribution
    >>> d = CensoredDistribution(GaussianDistribution(0.0, 1.0), truncate=(0.0, None))
    >>> [round(float(v), 6) for v in d.seq_log_density([1.0, (1.0, None), (None, 1.0)])]
    [-0.725791, -1.147874, -0.381715]
    """

    child_name = "base"
    parameter_coordinates = {"base": "part", "truncate": "fixed"}
    json_forms = {"truncate": (window_json, as_window)}

    def __init__(self, base: Distribution, truncate: Sequence[float | None] = (None, None)):
        if not isinstance(base, IntervalLaw):
            raise ParameterError(f"Censored needs a univariate family with a CDF (Gaussian, "
                                 f"LogGaussian, Exponential, Gamma, Weibull), got "
                                 f"{type(base).__name__}")
        self.base = base
        self.truncate = as_window(truncate)
        self.log_window = float(base.log_mass(np.array([self.truncate[0]]),
                                              np.array([self.truncate[1]]))[0])
        if not np.isfinite(self.log_window):
            raise ParameterError(f"the window {self.truncate} holds no mass of {base!r}")

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        low, high = enc.values[:, 0], enc.values[:, 1]
        exact = low == high
        out = np.empty(len(low))
        out[exact] = self.base.seq_log_density(ArrayEncoded(low[exact]), precision)
        out[~exact] = self.base.log_mass(low[~exact], high[~exact])
        return out - self.log_window

    def encoder(self) -> CensoredEncoder:
        return CensoredEncoder(self.base.encoder(), self.truncate)

    def estimator(self, **options: Any) -> CensoredEstimator:
        """The refit's estimator: ``options`` are the base family's estimator's."""
        return CensoredEstimator(self.base.estimator(**options), truncate=self.truncate)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Exact values from the base law inside the window (by its quantile function)."""
        law = self.base.scipy_law()
        lo, hi = law.cdf(self.truncate[0]), law.cdf(self.truncate[1])
        return law.ppf(lo + (hi - lo) * rng.random(n))

    def decomposition(self) -> Decomposition:
        """Atomic: an interval row costs a few CDF calls and the base's statistics of its
        representative points."""
        return Decomposition.atomic(row_work=8.0, param_bytes=16 + 8 * len(self.base._params()))


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


def _grouped(low: np.ndarray, high: np.ndarray, w: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct intervals and their summed weights (survival data shares its censoring
    times: each interval's law is worked out once)."""
    pairs, where = np.unique(np.column_stack([low, high]), axis=0, return_inverse=True)
    return pairs[:, 0], pairs[:, 1], np.bincount(where.reshape(-1), weights=w,
                                                  minlength=len(pairs))


class CensoredAccumulator(WrapperAccumulator):
    """No statistics of its own: the base accumulator's, fed the exact values and, for every
    interval row and for the values truncation hid, the base law's representative points on
    the interval with the row's weight spread over them. ``window`` is where rows can lie
    (the truncation window cut to the family's support): a row spanning it tells nothing."""

    counted = False

    def __init__(self, base: Accumulator, window: tuple[float, float], support_low: float,
                 keys: str | None = None):
        super().__init__(base, keys)
        self.window = window
        self.support_low = support_low

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: CensoredDistribution,
                   precision: Precision = FLOAT64) -> None:
        values, w = self.completed_rows(enc, weights, model)
        self.child.seq_update(ArrayEncoded(values), w, model.base, precision)
        return None

    def completed_rows(self, enc: Encoded, weights: np.ndarray, model: CensoredDistribution
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The E-step as weighted rows of the base family: values (m,) and weights (m,)."""
        low, high = enc.values[:, 0], enc.values[:, 1]
        exact = low == high
        whole = (low <= self.window[0]) & (high >= self.window[1])  # tells nothing
        ranged = ~exact & ~whole
        values, w = [low[exact]], [weights[exact]]
        lo, hi, mass = _grouped(low[ranged], high[ranged], weights[ranged])
        informative = float(weights[exact].sum() + mass.sum())
        for a, b, share in self._hidden(model):  # what the window hid, per row seen
            lo, hi = np.append(lo, a), np.append(hi, b)
            mass = np.append(mass, informative * share)
        if len(lo):
            points, probs = model.base.interval_points(lo, hi)
            values.append(points.ravel())
            w.append((mass[:, None] * probs).ravel())
        return np.concatenate(values), np.concatenate(w)

    def _hidden(self, model: CensoredDistribution) -> list[tuple[float, float, float]]:
        """The tails of the support outside the window, each with its mass relative to the
        window's."""
        a, b = self.window
        out = []
        for tail in ((self.support_low, a), (b, np.inf)):
            if tail[0] < tail[1]:
                log_mass = model.base.log_mass(np.array([tail[0]]), np.array([tail[1]]))[0]
                if np.isfinite(log_mass):
                    out.append((*tail, float(np.exp(log_mass - model.log_window))))
        return out

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        """No model yet: an interval row enters at its midpoint, or at its finite end (not at
        a positive family's 0)."""
        low, high = enc.values[:, 0], enc.values[:, 1]
        exact = low == high
        with np.errstate(invalid="ignore"):  # (-inf, inf): no point, left out below
            point = np.where(np.isfinite(low) & np.isfinite(high), 0.5 * (low + high),
                             np.where(np.isfinite(low), low, high))
        use = np.isfinite(point) & (exact | (point > self.window[0]))
        self.child.seq_initialize(ArrayEncoded(point[use]), weights[use], rng)


class CensoredEstimator(WrapperEstimator):
    """Exact EM for ``base`` (an estimator of a univariate family with a CDF) from censored and
    truncated rows (the encoding and the E-step: :mod:`mixfold.families.censored`).
    ``truncate=(low, high)`` fixes the window the values were recorded in (``None``: open).

    >>> import mixfold
    >>> from mixfold import GaussianDistribution, GaussianEstimator
    >>> x = GaussianDistribution(1.0, 4.0).sampler(0).sample(50000)
    >>> kept = x[x > 0]  # a detector that records positive values only
    >>> d = mixfold.optimize(kept, CensoredEstimator(GaussianEstimator(), truncate=(0, None)),
    ...                      max_iter=2000, tol=1e-12, progress=False)
    >>> round(d.base.mu, 1), round(d.base.sigma2, 1)
    (1.0, 4.0)
    """

    option_rules = {"truncate": WINDOW}
    child_name = "base"
    model_class = CensoredDistribution
    accumulator_class = CensoredAccumulator

    def __init__(self, base: Estimator, truncate: Sequence[float | None] = (None, None),
                 keys: str | None = None):
        self.check_options(truncate=truncate)
        law = getattr(base, "distribution_class", None)
        if not (isinstance(law, type) and issubclass(law, IntervalLaw)):
            raise ParameterError(f"CensoredEstimator needs the estimator of a univariate "
                                 f"family with a CDF (Gaussian, LogGaussian, Exponential, "
                                 f"Gamma, Weibull), got {base!r}")
        self.base = base
        self.truncate = as_window(truncate)
        self.keys = keys

    def encoder(self) -> CensoredEncoder:
        return CensoredEncoder(self.base.encoder(), self.truncate)

    def accumulator_factory(self) -> AccumulatorFactory:
        make = self.base.accumulator_factory().make
        encoder = self.encoder()
        window, support_low = encoder.window, SUPPORT_LOW[encoder.base.domain]
        return AccumulatorFactory(lambda: CensoredAccumulator(make(), window, support_low,
                                                              self.keys))

    def estimate(self, nobs: float, stats: Any) -> CensoredDistribution:
        _, (base,) = stats  # no statistics of its own: the base family's M-step
        return CensoredDistribution(self.base.estimate(nobs, base), window_json(self.truncate))

    def __repr__(self) -> str:
        return f"CensoredEstimator({self.base!r}, truncate={window_json(self.truncate)!r})"
