"""numba-compiled passes of stacked full-covariance Gaussians in float64, loaded by
:mod:`mixfold.compute.kernels` on the first such fold.

At small D the NumPy path makes several memory-bound passes over thin (rows, D) arrays per
component (a GEMM and a square-and-sum to score; a sum, a GEMV, a scaled copy and a rank-k
update to add). These kernels take the rows a chunk of :data:`CHUNK` at a time, laid out
coordinate by coordinate in a buffer that stays in L1, and run every component of the call over
it, each loop over the chunk's rows vectorising without reassociation (one lane per row):

- :func:`full_squares`: ``out[k, i] = |(x_i - c - m_k) W_k|^2``, the whitening form (the row
  and the mean differenced before the product: the expanded quadratic would cancel);
- :func:`full_moments`: per component ``sum r``, ``sum r y`` and ``sum r y y^T`` of
  ``y = x - point`` (both triangles), each summed in :data:`LANES` interleaved partial sums.

No fast-math, and every component's results come from its own loops over the rows in row
order: a range of components gets the bits the whole stack gets (the model-parallel column
fold).
"""

from __future__ import annotations

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

__all__ = ["full_squares", "full_moments", "CHUNK", "LANES"]

#: rows laid out per coordinate at a time: a few hundred, so that the layout stays in cache while
#: every component reads it
CHUNK = 256
#: partial sums per statistic (one SIMD register's worth twice over: adds do not wait on adds)
LANES = 8

_ROWS = numba.float64[:, ::1]
_VECTOR = numba.float64[::1]
_CUBE = numba.float64[:, :, ::1]
# the data rows writable or not (a read-only buffer: an Arrow table's, a memory map's)
_DATA = (_ROWS, numba.types.Array(numba.float64, 2, "C", readonly=True))
SQUARES_SIGNATURES = [numba.void(x, _VECTOR, _ROWS, _CUBE, _ROWS) for x in _DATA]
MOMENTS_SIGNATURES = [numba.void(x, _VECTOR, _ROWS, numba.int64, numba.int64, _VECTOR, _ROWS,
                                 _CUBE) for x in _DATA]


@numba.njit(inline="always")
def _lane_sum(parts):
    total = 0.0
    for p in parts:
        total += p
    return total


@numba.njit(SQUARES_SIGNATURES, nogil=True, cache=on_disk())
def full_squares(x, center, offsets, whitening, out):
    # x (n, D), center (D,), offsets (K, D) = mu_k - c, whitening (K, D, D), out (K, n)
    n, d = x.shape
    y = np.empty((d, CHUNK))
    v = np.empty((d, CHUNK))
    z = np.empty(CHUNK)
    total = np.empty(CHUNK)
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        for i in range(m):
            for a in range(d):
                y[a, i] = x[lo + i, a] - center[a]
        for k in range(offsets.shape[0]):
            for a in range(d):
                o = offsets[k, a]
                for i in range(m):
                    v[a, i] = y[a, i] - o
            total[:m] = 0.0
            for j in range(d):
                z[:m] = 0.0
                for a in range(d):
                    w = whitening[k, a, j]
                    if w != 0.0:  # a triangular factor: half the products
                        for i in range(m):
                            z[i] += v[a, i] * w
                for i in range(m):
                    total[i] += z[i] * z[i]
            out[k, lo:lo + m] = total[:m]


@numba.njit(MOMENTS_SIGNATURES, nogil=True, cache=on_disk())
def full_moments(x, point, resp, lo, hi, mass, sum_x, sum_xx):
    # rows [lo, hi) of x (n, D) about point (D,), weighted by resp (K, n); writes mass (K,),
    # sum_x (K, D), sum_xx (K, D, D)
    d = x.shape[1]
    k_count = resp.shape[0]
    width = 1 + d + d * (d + 1) // 2  # [1, y_a, y_a y_b (a <= b)]
    features = np.zeros((width, CHUNK))  # rows past a short last chunk stay 0 (weight 0)
    r = np.zeros(CHUNK)
    lanes = np.zeros((k_count, width, LANES))
    for start in range(lo, hi, CHUNK):
        m = min(CHUNK, hi - start)
        if m < CHUNK:
            features[:, m:] = 0.0
        for i in range(m):
            features[0, i] = 1.0
            for a in range(d):
                features[1 + a, i] = x[start + i, a] - point[a]
        f = 1 + d
        for a in range(d):
            for b in range(a, d):
                for i in range(m):
                    features[f, i] = features[1 + a, i] * features[1 + b, i]
                f += 1
        for k in range(k_count):
            r[:m] = resp[k, start:start + m]
            r[m:] = 0.0
            for f in range(width):
                for g in range(0, CHUNK, LANES):
                    for lane in range(LANES):
                        lanes[k, f, lane] += r[g + lane] * features[f, g + lane]
    for k in range(k_count):
        mass[k] = _lane_sum(lanes[k, 0])
        f = 1 + d
        for a in range(d):
            sum_x[k, a] = _lane_sum(lanes[k, 1 + a])
            for b in range(a, d):
                sum_xx[k, a, b] = sum_xx[k, b, a] = _lane_sum(lanes[k, f])
                f += 1
