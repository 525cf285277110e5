"""The reference point of weighted rows: their weighted mean, robust to what real rows hold
(no weight, missing entries, sums that overflow). Statistics summed about it lose nothing to
cancellation however far from the origin the rows sit (a centred Gaussian's sums, k-means'
expanded distances).

>>> weighted_centre(np.array([[1.0, 2.0], [3.0, np.nan]]), np.array([1.0, 3.0])).tolist()
[2.5, 2.0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["weighted_centre"]


def weighted_centre(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A reference point for rows ``x`` (n,) or (n, D) with weights ``w``: their weighted mean
    (the first row when the weights sum to 0; the origin with no rows). Where rows miss entries
    (NaN), each coordinate's mean over the rows that have it (0 where none does)."""
    if len(x) == 0:
        return np.zeros(x.shape[1] if x.ndim == 2 else 1)
    x2 = x.reshape(len(x), -1)
    seen = ~np.isnan(x2)
    if not seen.all():
        mass, total_x = w @ seen, w @ np.where(seen, x2, 0.0)
        return np.divide(total_x, mass, out=np.zeros_like(total_x), where=mass > 0)
    total = float(w.sum())
    if not total > 0:
        return x2[0].copy()
    # the mean of rows whose absolute sum overflows is still within their range
    with np.errstate(over="ignore", invalid="ignore"):
        c = (w / total) @ x2
    return np.where(np.isfinite(c), c, x2[0])
