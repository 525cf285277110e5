"""Measured accuracy of a band: one E-step of a model over a sample in the band and in a
reference band, statistics compared (the a-priori bounds are in :mod:`mixfold.precision.error`).
Its functions are entry points: they take precision names, as a user measuring a band writes
them, and resolve each once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mixfold.capabilities import CentredStatistics
from mixfold.compute.fold import fold_rows
from mixfold.decomposition import decomposition_for
from mixfold.precision.bands import Precision, resolve_precision
from mixfold.precision.compensated import tree_low_parts
from mixfold.precision.error import relative_error

__all__ = ["fold_statistics", "statistics_relative_error", "estep_op_count", "StepError",
           "step_error", "density_distance"]


def fold_statistics(model: Any, enc: Any, precision: str, weights: np.ndarray | None = None,
                    chunk_rows: int = 65536, raw: bool = False) -> list[np.ndarray]:
    """The sufficient statistics of one E-step of ``model`` over ``enc`` in ``precision``: the
    accumulator's buffers (float64; for ``dd`` each is ``hi + lo``, exact to 2^-106). ``raw``:
    sums kept about a reference point moved to the origin, so that folds which summed about
    different points compare."""
    acc = _folded(model, enc, resolve_precision(precision), weights, chunk_rows)
    return [a.copy() for a in (_about_the_origin(acc) if raw else acc).arrays()]


def _folded(model: Any, enc: Any, precision: Precision, weights: np.ndarray | None,
            chunk_rows: int = 65536) -> Any:
    """The accumulator of one E-step of ``model`` over ``enc`` (``dd``: ``hi + lo`` in it)."""
    acc = model.estimator().accumulator_factory().make()
    w = np.ones(enc.n_rows) if weights is None else weights
    fold_rows(acc, enc, w, model, precision, chunk_rows)
    if precision.compensated:
        for a, lo in zip(acc.arrays(), tree_low_parts(acc)):
            a += lo
    return acc


def _about_the_origin(acc: Any) -> Any:
    """``acc`` with every statistic summed about a reference point moved to the origin (the
    raw moments: a sum about the model's mean is near 0 by design, and its normwise error
    says nothing of the band's); returns acc."""
    if isinstance(acc, CentredStatistics) and acc.reference() is not None:
        acc.recentre(np.zeros_like(acc.reference()))
    for child in acc.children():
        _about_the_origin(child)
    return acc


def statistics_relative_error(model: Any, enc: Any, precision: str, reference: str = "dd",
                              weights: np.ndarray | None = None) -> float:
    """The largest normwise relative error over the statistic buffers of one E-step in
    ``precision``, against the same E-step in ``reference`` (statistics summed about a
    reference point compared as raw moments).

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> m = MixtureDistribution([GaussianDistribution(-1, 1), GaussianDistribution(2, 1)],
    ...                         [0.5, 0.5])
    >>> enc = m.encoder().encode(m.sampler(0).sample(500))
    >>> statistics_relative_error(m, enc, "float32") < 1e-5
    True
    """
    got = _about_the_origin(_folded(model, enc, resolve_precision(precision), weights)).arrays()
    ref = _about_the_origin(_folded(model, enc, resolve_precision(reference), weights)).arrays()
    return max(relative_error(np.asarray(g, dtype=np.float64), np.asarray(r, dtype=np.float64))
               for g, r in zip(got, ref))


@dataclass(frozen=True)
class StepError:
    """One EM step of a model in a band against the same step in a reference band:
    ``log_likelihood``, the relative difference of the mean log-likelihood the two E-steps
    report; ``density``, the mean absolute difference of the two stepped models' log-densities
    (nats per row, scored in float64) relative to the reference's mean log-likelihood. What a
    user gets of the step is both: ``error`` is the larger."""

    log_likelihood: float
    density: float

    @property
    def error(self) -> float:
        return max(self.log_likelihood, self.density)


def step_error(model: Any, enc: Any, precision: str, reference: str = "float64",
               weights: np.ndarray | None = None, estimator: Any = None) -> StepError:
    """:class:`StepError` of one EM step of ``model`` over ``enc`` in ``precision`` against
    ``reference`` (``estimator``: the fit's, else the model's own).

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> m = MixtureDistribution([GaussianDistribution(-1, 1), GaussianDistribution(2, 1)],
    ...                         [0.5, 0.5])
    >>> enc = m.encoder().encode(m.sampler(0).sample(500))
    >>> step_error(m, enc, "float32").error < 1e-6
    True
    """
    w = np.ones(enc.n_rows) if weights is None else np.asarray(weights, dtype=np.float64)
    estimator = model.estimator() if estimator is None else estimator
    band_ll, band_model = _one_step(model, estimator, enc, w, resolve_precision(precision))
    ref_ll, ref_model = _one_step(model, estimator, enc, w, resolve_precision(reference))
    scale = max(abs(ref_ll), 1e-300)
    return StepError(abs(band_ll - ref_ll) / scale,
                     density_distance(band_model, ref_model, enc, w) / scale)


def _one_step(model: Any, estimator: Any, enc: Any, w: np.ndarray,
              precision: Precision) -> tuple[float, Any]:
    """(the E-step's mean log-likelihood, the M-step's model) of one EM step in ``precision``."""
    acc = estimator.accumulator_factory().make()
    total = fold_rows(acc, enc, w, model, precision, 65536)
    if precision.compensated:
        for a, lo in zip(acc.arrays(), tree_low_parts(acc)):
            a += lo
    acc.tie_keys()
    return total / float(w.sum()), estimator.estimate(float(w.sum()), acc.value())


def density_distance(a: Any, b: Any, enc: Any, weights: np.ndarray | None = None) -> float:
    """The weighted mean absolute difference of two models' log-densities over ``enc``, in
    float64 (nats per row): how far apart two fits are where the data is."""
    w = np.ones(enc.n_rows) if weights is None else weights
    la, lb = a.seq_log_density(enc), b.seq_log_density(enc)
    with np.errstate(invalid="ignore"):  # (a row both models rule out is no difference)
        diff = np.where(la == lb, 0.0, np.abs(la - lb))
    return float(w @ diff / w.sum())


def estep_op_count(model: Any) -> int:
    """Rounded operations on one row's dependent chain in ``model``'s E-step (the a-priori
    model's ``op_count``), from the model tree: a D-dimensional Gaussian leaf costs 3D + 3
    (D^2 + 3D + 3 with a full covariance), a mixture of K components adds K + 5 to its
    components' longest chain (log-weight, shift, exp, K-term running total, divide, log).

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> estep_op_count(MixtureDistribution([GaussianDistribution(0, 1)] * 3, [0.2, 0.3, 0.5]))
    14
    """
    dc = decomposition_for(model)
    units = (*dc.units, *dc.shared_children)
    if units:
        return 5 + len(dc.units) + max(estep_op_count(u) for u in units)
    d = int(getattr(model, "dim", 1) or 1)
    if getattr(model, "cov", None) is not None:
        return d * d + 3 * d + 3
    return 3 * d + 3
