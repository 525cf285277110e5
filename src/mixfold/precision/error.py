"""How far a band's statistics are from exact: the a-priori model and measurement on a sample.

The a-priori model is the classical bound for a chain of ``op_count`` rounded operations: a
relative error of at most ``op_count * u`` (``u`` the band's unit roundoff). A measurement runs
the real E-step of a model over a data sample in the band and in a reference band and compares
the sufficient statistics (:func:`mixfold.compute.accuracy.statistics_relative_error`).

>>> predicted_relative_error("float32", 100) == 100 * 2.0 ** -24
True
>>> relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
0.2
"""

from __future__ import annotations


import numpy as np

from mixfold.precision.bands import FLOAT32_PARTIAL_ROWS, UNIT_ROUNDOFF, band_of

__all__ = ["predicted_relative_error", "statistics_error_bound", "fused_statistics_bound",
           "relative_error"]


def predicted_relative_error(band: str, op_count: float) -> float:
    """The a-priori relative error bound ``op_count * u`` of ``band``."""
    return float(op_count) * UNIT_ROUNDOFF[band_of(band)]


def statistics_error_bound(band: str, op_count: float, n_rows: int) -> float:
    """The stated bound on the relative error of a band's sufficient statistics: the E-step
    chain's ``op_count * u`` plus the worst case of summing ``n_rows`` terms in the accumulation
    arithmetic (``(n_rows - 1) * u`` of float64, of double-double for ``dd``). In float32 the
    fused mixture E-step (:func:`~mixfold.compute.linear.linear_fold`) first sums up to
    ``FLOAT32_PARTIAL_ROWS`` rows in float32 (one GEMM), which adds
    ``(min(n_rows, FLOAT32_PARTIAL_ROWS) - 1) * 2**-24``.

    >>> statistics_error_bound("float16", 10, 1001) == 10 * 2.0 ** -11 + 1000 * 2.0 ** -53
    True
    >>> statistics_error_bound("float32", 10, 1001) == 10 * 2.0 ** -24 + 1000 * (2.0 ** -53
    ...                                                                          + 2.0 ** -24)
    True
    """
    band = band_of(band)
    accumulate = UNIT_ROUNDOFF["dd" if band == "dd" else "float64"]
    bound = predicted_relative_error(band, op_count) + max(int(n_rows) - 1, 0) * accumulate
    if band == "float32":
        bound += max(min(int(n_rows), FLOAT32_PARTIAL_ROWS) - 1, 0) * UNIT_ROUNDOFF["float32"]
    return bound


def fused_statistics_bound(band: str, op_count: float, n_rows: int, inner_rows: int) -> float:
    """The stated bound on the relative error of the statistics of the torch engine's fused
    E-step (:mod:`mixfold.compute.linear_torch`): the chain's ``op_count * u``, the features and
    the posteriors rounded to the band once each (``2u``), the statistics GEMM's float32
    accumulation over its inner dimension of ``inner_rows`` rows (a block; float64 in the
    float64 band), then the blocks' sums added in float64.

    >>> b = fused_statistics_bound("bfloat16", 10, 10**6, 32768)
    >>> b == 12 * 2.0 ** -8 + 32767 * 2.0 ** -24 + (10**6 // 32768) * 2.0 ** -53
    True
    """
    band = band_of(band)
    inner = max(min(int(n_rows), int(inner_rows)) - 1, 0)
    blocks = max(-(-int(n_rows) // max(int(inner_rows), 1)) - 1, 0)
    accumulate = UNIT_ROUNDOFF["float64" if band == "float64" else "float32"]
    return ((float(op_count) + 2) * UNIT_ROUNDOFF[band] + inner * accumulate
            + blocks * UNIT_ROUNDOFF["float64"])


def relative_error(value: np.ndarray, reference: np.ndarray) -> float:
    """Normwise relative error ``max|value - reference| / max|reference|`` (0 if both are 0)."""
    value = np.asarray(value, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    diff = float(np.abs(value - reference).max()) if reference.size else 0.0
    return diff / scale if scale > 0 else diff
