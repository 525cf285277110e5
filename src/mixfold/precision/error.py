"""How far a band's statistics are from exact: the a-priori model and measurement on a sample.

The a-priori model is the classical bound for a chain of ``op_count`` rounded operations: a
relative error of at most ``op_count * u`` (``u`` the band's unit roundoff). A measurement runs
the real E-step of a model over a data sample in the band and in a reference band and compares
the sufficient statistics (:func:`statistics_relative_error`).

>>> predicted_relative_error("float32", 100) == 100 * 2.0 ** -24
True
>>> relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
0.2
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.precision.bands import UNIT_ROUNDOFF, band_of

__all__ = ["predicted_relative_error", "statistics_error_bound", "relative_error",
           "statistics_relative_error", "fold_statistics", "estep_op_count"]


def predicted_relative_error(band: str, op_count: float) -> float:
    """The a-priori relative error bound ``op_count * u`` of ``band``."""
    return float(op_count) * UNIT_ROUNDOFF[band_of(band)]


def statistics_error_bound(band: str, op_count: float, n_rows: int) -> float:
    """The stated bound on the relative error of a band's sufficient statistics: the E-step
    chain's ``op_count * u`` plus the worst case of summing ``n_rows`` terms in the accumulation
    arithmetic (``(n_rows - 1) * u`` of float64, of double-double for ``dd``). In float32 the
    fused mixture E-step (:func:`~mixfold.families._linear.linear_fold`) first sums up to
    :data:`~mixfold.families._linear.PARTIAL_ROWS` rows in float32 (one GEMM), which adds
    ``(min(n_rows, PARTIAL_ROWS) - 1) * 2**-24``.

    >>> statistics_error_bound("float16", 10, 1001) == 10 * 2.0 ** -11 + 1000 * 2.0 ** -53
    True
    >>> statistics_error_bound("float32", 10, 1001) == 10 * 2.0 ** -24 + 1000 * (2.0 ** -53
    ...                                                                          + 2.0 ** -24)
    True
    """
    from mixfold.families._linear import PARTIAL_ROWS

    band = band_of(band)
    accumulate = UNIT_ROUNDOFF["dd" if band == "dd" else "float64"]
    bound = predicted_relative_error(band, op_count) + max(int(n_rows) - 1, 0) * accumulate
    if band == "float32":
        bound += max(min(int(n_rows), PARTIAL_ROWS) - 1, 0) * UNIT_ROUNDOFF["float32"]
    return bound


def relative_error(value: np.ndarray, reference: np.ndarray) -> float:
    """Normwise relative error ``max|value - reference| / max|reference|`` (0 if both are 0)."""
    value = np.asarray(value, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    diff = float(np.abs(value - reference).max()) if reference.size else 0.0
    return diff / scale if scale > 0 else diff


def fold_statistics(model: Any, enc: Any, precision: str, weights: np.ndarray | None = None,
                    chunk_rows: int = 65536) -> list[np.ndarray]:
    """The sufficient statistics of one E-step of ``model`` over ``enc`` in ``precision``: the
    accumulator's buffers (float64; for ``dd`` each is ``hi + lo``, exact to 2^-106)."""
    from mixfold.backends.local import fold_rows
    from mixfold.precision.compensated import tree_low_parts

    acc = model.estimator().accumulator_factory().make()
    w = np.ones(enc.n_rows) if weights is None else weights
    fold_rows(acc, enc, w, model, precision, chunk_rows)
    arrays = [a.copy() for a in acc.arrays()]
    if band_of(precision) == "dd":
        return [a + lo for a, lo in zip(arrays, tree_low_parts(acc))]
    return arrays


def statistics_relative_error(model: Any, enc: Any, precision: str, reference: str = "dd",
                              weights: np.ndarray | None = None) -> float:
    """The largest normwise relative error over the statistic buffers of one E-step in
    ``precision``, against the same E-step in ``reference``.

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> m = MixtureDistribution([GaussianDistribution(-1, 1), GaussianDistribution(2, 1)],
    ...                         [0.5, 0.5])
    >>> enc = m.encoder().encode(m.sampler(0).sample(500))
    >>> statistics_relative_error(m, enc, "float32") < 1e-5
    True
    """
    got = fold_statistics(model, enc, precision, weights)
    ref = fold_statistics(model, enc, reference, weights)
    return max(relative_error(np.asarray(g, dtype=np.float64), np.asarray(r, dtype=np.float64))
               for g, r in zip(got, ref))


def estep_op_count(model: Any) -> int:
    """Rounded operations on one row's dependent chain in ``model``'s E-step (the a-priori
    model's ``op_count``), from the model tree: a D-dimensional Gaussian leaf costs 3D + 3
    (D^2 + 3D + 3 with a full covariance), a mixture of K components adds K + 5 to its
    components' longest chain (log-weight, shift, exp, K-term running total, divide, log).

    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> estep_op_count(MixtureDistribution([GaussianDistribution(0, 1)] * 3, [0.2, 0.3, 0.5]))
    14
    """
    from mixfold.decomposition import decomposition_for

    dc = decomposition_for(model)
    units = (*dc.units, *dc.shared_children)
    if units:
        return 5 + len(dc.units) + max(estep_op_count(u) for u in units)
    d = int(getattr(model, "dim", 1) or 1)
    if getattr(model, "cov", None) is not None:
        return d * d + 3 * d + 3
    return 3 * d + 3
