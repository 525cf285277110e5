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
  ``y = x - point`` (the upper triangle, mirrored), each summed in :data:`LANES` interleaved
  partial sums;
- :func:`normalise_scores`: each row's K scores into posteriors times the row weight, with
  the vectorised ``exp64`` (:mod:`mixfold.compute.numba_math`), the row's largest score and
  the sum of its exps written for the log-sum-exp;
- :func:`full_fold`: the three at once, chunk by chunk: the (rows, K) scores never leave the
  cache, the posteriors are written once.

Wider rows are whitened by BLAS (a GEMM per component of the centred rows laid out coordinate by
coordinate, :func:`centred_columns`: ``yt[k] = U_k^T (x - c)^T`` (K, D, rows)), and these kernels
make the thin passes around it:

- :func:`whitened_squares`: each row's ``|y - o_k|^2`` per component (``o_k = (mu_k - c) U_k``),
  summed coordinate by coordinate;
- :func:`whitened_fold`: those squares made into scores and normalised as
  :func:`normalise_scores` does, then :func:`weighted_rows` of the posteriors, in one call;
- :func:`weighted_rows`: per component ``sum r``, ``sum r y`` and the rows ``sqrt(r) y``
  (``y = x - point``) whose rank-k update BLAS makes.

:func:`reference_point` is :func:`~mixfold.compute.linear.gaussian_centre` in one call, with
its operations in its order (no fast-math): the point the stack's sums are about.

:func:`factor_covariances` factors K small covariances at once (an M-step's): each symmetrised,
its Cholesky factor ``L`` (LAPACK's unblocked column order), ``U = (L^-1)^T`` by forward
substitution and ``log|U|``: one call where LAPACK's are two per component, each costing more than
a small factorisation.

No fast-math (exp64 alone contracts its polynomial into FMAs), and every component's results
come from its own loops over the rows in row order: a range of components gets the bits the
whole stack gets (the model-parallel column fold). The three steps and the fused pass share
their helpers, so the fused pass gives the bits of the three.
"""

from __future__ import annotations

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk
from mixfold.compute.numba_math import exp64

__all__ = ["full_squares", "full_moments", "full_fold", "normalise_scores", "centred_columns",
           "whitened_squares", "whitened_fold", "weighted_rows", "reference_point",
           "factor_covariances", "CHUNK",
           "LANES"]

#: rows laid out per coordinate at a time: a few hundred, so that the layout stays in cache while
#: every component reads it
CHUNK = 256
#: partial sums per statistic, interleaved: a loop this long over them vectorises (8, a
#: register's worth, is unrolled into scalar adds), and its adds do not wait on one another
LANES = 64

_ROWS = numba.float64[:, ::1]
_VECTOR = numba.float64[::1]
_CUBE = numba.float64[:, :, ::1]
# the data rows as read-only (a writable array converts to it at the call): one compiled
# signature takes an Arrow table's or a memory map's buffer and any other
_DATA = numba.types.Array(numba.float64, 2, "C", readonly=True)
# ... and so is every other input (a weight column read from Arrow is read-only too)
_IN_VECTOR = numba.types.Array(numba.float64, 1, "C", readonly=True)
_IN_ROWS = _DATA
_IN_CUBE = numba.types.Array(numba.float64, 3, "C", readonly=True)
SQUARES_SIGNATURE = numba.void(_DATA, _IN_VECTOR, _IN_ROWS, _IN_CUBE, _ROWS)
MOMENTS_SIGNATURE = numba.void(_DATA, _IN_VECTOR, _IN_ROWS, numba.int64, numba.int64, _VECTOR,
                               _ROWS, _CUBE)
NORMALISE_SIGNATURE = numba.boolean(_ROWS, _IN_VECTOR, _VECTOR, _VECTOR)
FOLD_SIGNATURE = numba.boolean(_DATA, _IN_VECTOR, _IN_ROWS, _IN_CUBE, _IN_VECTOR, _IN_VECTOR,
                               _IN_VECTOR, _IN_VECTOR, numba.int64, numba.int64, _ROWS, _VECTOR,
                               _VECTOR, _VECTOR, _ROWS, _CUBE)
FACTOR_SIGNATURE = numba.int64(_IN_CUBE, _CUBE, _CUBE, _CUBE, _VECTOR)
REFERENCE_SIGNATURE = numba.void(_IN_ROWS, _IN_ROWS, _VECTOR)
CENTRED_COLUMNS_SIGNATURE = numba.void(_DATA, _IN_VECTOR, numba.int64, numba.int64, _ROWS)
WHITENED_SQUARES_SIGNATURE = numba.void(_IN_CUBE, _IN_ROWS, numba.int64, _ROWS)
WHITENED_FOLD_SIGNATURE = numba.boolean(_IN_CUBE, _IN_ROWS, _IN_VECTOR, _IN_VECTOR, _IN_VECTOR,
                                        _ROWS, _VECTOR, _VECTOR, _DATA, _IN_VECTOR, _VECTOR,
                                        _ROWS, _CUBE)
WEIGHTED_ROWS_SIGNATURE = numba.void(_DATA, _IN_VECTOR, _IN_ROWS, numba.int64, numba.int64,
                                     _VECTOR, _ROWS, _CUBE)


@numba.njit
def _lane_sum(parts):
    total = 0.0
    for p in parts:
        total += p
    return total


@numba.njit
def _layout(x, start, m, origin, y):
    # rows [start, start + m) of x less origin, coordinate by coordinate: y (D, CHUNK)
    for i in range(m):
        for a in range(x.shape[1]):
            y[a, i] = x[start + i, a] - origin[a]


@numba.njit
def _component_squares(y, m, offsets, whitening, k, v, z, total):
    # total[:m] = |(y - offsets[k]) whitening[k]|^2 of the chunk laid out in y (each sum's
    # first term assigned: 0 + t is t)
    d = y.shape[0]
    for a in range(d):
        o = offsets[k, a]
        for i in range(m):
            v[a, i] = y[a, i] - o
    for j in range(d):
        w = whitening[k, 0, j]
        for i in range(m):
            z[i] = v[0, i] * w
        for a in range(1, d):
            w = whitening[k, a, j]
            if w != 0.0:  # a triangular factor: half the products
                for i in range(m):
                    z[i] += v[a, i] * w
        if j == 0:
            for i in range(m):
                total[i] = z[i] * z[i]
        else:
            for i in range(m):
                total[i] += z[i] * z[i]


@numba.njit
def _features(x, start, m, point, features):
    # [1, y_a, y_a y_b (a <= b)] of rows [start, start + m), y = x - point; 0 past m (weight 0)
    d = x.shape[1]
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


@numba.njit
def _add_features(lanes, k, r, features):
    # lanes[k] += the chunk's features weighted by r (CHUNK,), LANES partial sums each
    for f in range(features.shape[0]):
        for g in range(0, CHUNK, LANES):
            for lane in range(LANES):
                lanes[k, f, lane] += r[g + lane] * features[f, g + lane]


@numba.njit
def _hand_out(lanes, d, mass, sum_x, sum_xx):
    # the partial sums added up: mass (K,), sum_x (K, D), sum_xx (K, D, D) mirrored
    for k in range(lanes.shape[0]):
        mass[k] = _lane_sum(lanes[k, 0])
        f = 1 + d
        for a in range(d):
            sum_x[k, a] = _lane_sum(lanes[k, 1 + a])
            for b in range(a, d):
                sum_xx[k, a, b] = sum_xx[k, b, a] = _lane_sum(lanes[k, f])
                f += 1


@numba.njit
def _raise_top(top, s, k, m):
    # top[:m] = max(top, s[k]) row by row (NaN kept: NumPy's max); with k = 0, s[0]
    if k == 0:
        top[:m] = s[0, :m]
        return
    for i in range(m):
        v = s[k, i]
        top[i] = v if (v > top[i] or v != v) else top[i]


@numba.njit
def _all_finite(top, m):
    dead = 0
    for i in range(m):
        dead += not (np.abs(top[i]) < np.inf)
    return dead == 0


@numba.njit
def _exp_factors(s, m, weights, start, top, total, factor):
    # s[:, :m] (every row's top finite) -> exp(s - top) in place; total[:m] = their sums,
    # factor[:m] = weights[start + i] / total (the posteriors are s times factor)
    total[:m] = 0.0
    for k in range(s.shape[0]):
        for i in range(m):
            e = exp64(s[k, i] - top[i])
            s[k, i] = e
            total[i] += e
    for i in range(m):
        factor[i] = weights[start + i] / total[i]


@numba.njit(SQUARES_SIGNATURE, nogil=True, cache=on_disk())
def full_squares(x, center, offsets, whitening, out):
    # x (n, D), center (D,), offsets (K, D) = mu_k - c, whitening (K, D, D), out (K, n)
    n, d = x.shape
    y = np.empty((d, CHUNK))
    v = np.empty((d, CHUNK))
    z = np.empty(CHUNK)
    total = np.empty(CHUNK)
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        _layout(x, lo, m, center, y)
        for k in range(offsets.shape[0]):
            _component_squares(y, m, offsets, whitening, k, v, z, total)
            out[k, lo:lo + m] = total[:m]


@numba.njit(MOMENTS_SIGNATURE, nogil=True, cache=on_disk())
def full_moments(x, point, resp, lo, hi, mass, sum_x, sum_xx):
    # rows [lo, hi) of x (n, D) about point (D,), weighted by resp (K, n); writes mass (K,),
    # sum_x (K, D), sum_xx (K, D, D)
    d = x.shape[1]
    k_count = resp.shape[0]
    width = 1 + d + d * (d + 1) // 2  # [1, y_a, y_a y_b (a <= b)]
    features = np.zeros((width, CHUNK))
    r = np.zeros(CHUNK)
    lanes = np.zeros((k_count, width, LANES))
    for start in range(lo, hi, CHUNK):
        m = min(CHUNK, hi - start)
        _features(x, start, m, point, features)
        for k in range(k_count):
            r[:m] = resp[k, start:start + m]
            r[m:] = 0.0
            _add_features(lanes, k, r, features)
    _hand_out(lanes, d, mass, sum_x, sum_xx)


@numba.njit
def _normalise(scores, weights, top, total):
    # scores (K, n): each column a row's K scores, turned into its posteriors times weights (n,)
    # in place; top (n,) and total (n,) written (the log-sum-exp is top + log(total)). False,
    # nothing written, where a row has no finite largest score
    k_count, n = scores.shape
    s = np.empty((k_count, CHUNK))
    factor = np.empty(CHUNK)
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        for k in range(k_count):
            _raise_top(top[lo:lo + m], scores[:, lo:lo + m], k, m)
        if not _all_finite(top[lo:lo + m], m):
            return False
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        s[:, :m] = scores[:, lo:lo + m]
        _exp_factors(s, m, weights, lo, top[lo:lo + m], total[lo:lo + m], factor)
        for k in range(k_count):
            for i in range(m):
                scores[k, lo + i] = s[k, i] * factor[i]
    return True


@numba.njit(NORMALISE_SIGNATURE, nogil=True, error_model="numpy", cache=on_disk())
def normalise_scores(scores, weights, top, total):
    # _normalise: the three steps' normalisation of the stack's scores
    return _normalise(scores, weights, top, total)


@numba.njit(FOLD_SIGNATURE, nogil=True, error_model="numpy", cache=on_disk())
def full_fold(x, center, offsets, whitening, const, log_weights, weights, point, lo, hi,
              resp, top, total, mass, sum_x, sum_xx):
    # rows [lo, hi) of x (n, D): scores (log_weights[k] + const[k] - |..|^2 / 2, as
    # full_squares, the stack and the mixture add them), posteriors times weights (n,) as
    # normalise_scores makes them, into resp (K, n), top and total (n,), and the sums about
    # point as full_moments adds them. False where a row has no finite largest score
    d = x.shape[1]
    k_count = offsets.shape[0]
    width = 1 + d + d * (d + 1) // 2
    y, v = np.empty((d, CHUNK)), np.empty((d, CHUNK))
    z, squares, factor = np.empty(CHUNK), np.empty(CHUNK), np.empty(CHUNK)
    s = np.zeros((k_count, CHUNK))  # past a short last chunk: weight 0 for the sums
    features = np.zeros((width, CHUNK))
    lanes = np.zeros((k_count, width, LANES))
    for start in range(lo, hi, CHUNK):
        m = min(CHUNK, hi - start)
        t = top[start:start + m]
        _layout(x, start, m, center, y)
        for k in range(k_count):
            _component_squares(y, m, offsets, whitening, k, v, z, squares)
            c, w = const[k], log_weights[k]
            for i in range(m):
                s[k, i] = (squares[i] * -0.5 + c) + w
            _raise_top(t, s, k, m)
        if not _all_finite(t, m):
            return False
        _exp_factors(s, m, weights, start, t, total[start:start + m], factor)
        for k in range(k_count):
            for i in range(m):
                s[k, i] *= factor[i]
                resp[k, start + i] = s[k, i]
        s[:, m:] = 0.0
        _features(x, start, m, point, features)
        for k in range(k_count):
            _add_features(lanes, k, s[k], features)
    _hand_out(lanes, d, mass, sum_x, sum_xx)
    return True


@numba.njit(CENTRED_COLUMNS_SIGNATURE, nogil=True, cache=on_disk())
def centred_columns(x, center, lo, hi, out):
    # out (D, hi - lo) = rows [lo, hi) of x (n, D) less center, coordinate by coordinate
    _layout(x, lo, hi - lo, center, out)


@numba.njit
def _whitened_squares(yt, offsets, k, start, m, total):
    # total[:m] = |y - offsets[k]|^2 of rows [start, start + m) of component k's whitened rows
    # yt[k] (D, n), each row's squares summed coordinate by coordinate (0 + t is t)
    o = offsets[k, 0]
    for i in range(m):
        v = yt[k, 0, start + i] - o
        total[i] = v * v
    for a in range(1, yt.shape[1]):
        o = offsets[k, a]
        for i in range(m):
            v = yt[k, a, start + i] - o
            total[i] += v * v


@numba.njit(WHITENED_SQUARES_SIGNATURE, nogil=True, cache=on_disk())
def whitened_squares(yt, offsets, lo, out):
    # yt (K, D, m) whitened rows, coordinate by coordinate, offsets (K, D) each component's
    # whitened mean; out[k, lo:lo + m] = |y - offsets[k]|^2
    m = yt.shape[2]
    for k in range(yt.shape[0]):
        _whitened_squares(yt, offsets, k, 0, m, out[k, lo:lo + m])


@numba.njit
def _weighted_rows(x, point, resp, lo, hi, mass, sum_x, rooted):
    # rows [lo, hi) of x (n, D) less point (D,), component k weighted by resp (K, n): mass[k] =
    # sum r, sum_x[k] = sum r y (row by row, in order), rooted[k, i - lo] = sqrt(r_i) y_i
    d = x.shape[1]
    y = np.empty(d)
    mass[:] = 0.0
    sum_x[:] = 0.0
    for i in range(lo, hi):
        for a in range(d):
            y[a] = x[i, a] - point[a]
        for k in range(resp.shape[0]):
            r = resp[k, i]
            root = np.sqrt(r)  # responsibilities are never negative
            mass[k] += r
            for a in range(d):
                sum_x[k, a] += r * y[a]
                rooted[k, i - lo, a] = root * y[a]


@numba.njit(WEIGHTED_ROWS_SIGNATURE, nogil=True, error_model="numpy", cache=on_disk())
def weighted_rows(x, point, resp, lo, hi, mass, sum_x, rooted):
    # _weighted_rows: the stacked update's first sums and weighted rows
    _weighted_rows(x, point, resp, lo, hi, mass, sum_x, rooted)


@numba.njit(WHITENED_FOLD_SIGNATURE, nogil=True, error_model="numpy", cache=on_disk())
def whitened_fold(yt, offsets, const, log_weights, weights, resp, top, total, x, point, mass,
                  sum_x, rooted):
    # yt (K, D, n) whitened rows, offsets (K, D): scores (log_weights[k] + const[k] - |y|^2 / 2, as
    # whitened_squares, the stack and the mixture add them) into resp (K, n), turned into
    # posteriors times weights (n,) as normalise_scores turns them; top and total (n,); then the
    # rows x (n, D) about point weighted by them, as weighted_rows weights them (mass (K,),
    # sum_x (K, D), rooted (K, n, D)). False, no sums, where a row has no finite largest score
    n = yt.shape[2]
    for k in range(yt.shape[0]):
        row = resp[k]
        _whitened_squares(yt, offsets, k, 0, n, row)
        c, w = const[k], log_weights[k]
        for i in range(n):
            row[i] = (row[i] * -0.5 + c) + w
    if not _normalise(resp, weights, top, total):
        return False
    _weighted_rows(x, point, resp, 0, n, mass, sum_x, rooted)
    return True


@numba.njit(REFERENCE_SIGNATURE, nogil=True, error_model="numpy", cache=on_disk())
def reference_point(mu, s2, out):
    # out (D,) = gaussian_centre(mu (K, D), s2 (K, D)): the mean of the means rounded to a
    # power-of-two grid no finer than the spread, each sum over K in order as NumPy's
    k, d = mu.shape
    for j in range(d):
        c = mu[0, j]
        for i in range(1, k):
            c += mu[i, j]
        c /= k
        t = mu[0, j] - c
        spread = s2[0, j] + t * t
        for i in range(1, k):
            t = mu[i, j] - c
            spread += s2[i, j] + t * t
        spread = np.sqrt(spread / k)
        out[j] = c
        if spread > 0.0:  # (0 or NaN: NumPy's grid is 0 or NaN, the mean kept)
            grid = np.exp2(np.ceil(np.log2(spread)))
            snapped = np.round(c / grid) * grid
            if np.isfinite(snapped) and grid > 0.0:
                out[j] = snapped


@numba.njit
def _cholesky(a, low):
    # low (D, D) = L, lower triangular, L L^T = a; False where a is not positive definite (a
    # pivot <= 0 or NaN, as LAPACK's dpotrf finds it)
    d = a.shape[0]
    low[:] = 0.0
    for j in range(d):
        pivot = a[j, j]
        for k in range(j):
            pivot -= low[j, k] * low[j, k]
        if not pivot > 0.0:
            return False
        root = np.sqrt(pivot)
        low[j, j] = root
        for i in range(j + 1, d):
            t = a[i, j]
            for k in range(j):
                t -= low[i, k] * low[j, k]
            low[i, j] = t / root
    return True


@numba.njit
def _precision_factor(low, up):
    # up (D, D) = (L^-1)^T, upper triangular: column j of L^-1 by forward substitution of
    # L x = e_j, written as row j of up; returns log|U| = sum log U_jj
    d = low.shape[0]
    up[:] = 0.0
    log_det = 0.0
    for j in range(d):
        up[j, j] = 1.0 / low[j, j]
        log_det += np.log(up[j, j])
        for i in range(j + 1, d):
            t = 0.0
            for k in range(j, i):
                t += low[i, k] * up[j, k]
            up[j, i] = -t / low[i, i]
    return log_det


@numba.njit(FACTOR_SIGNATURE, nogil=True, error_model="numpy", cache=on_disk())
def factor_covariances(cov, sym, low, up, log_det):
    # cov (K, D, D): sym[k] = (cov[k] + cov[k]^T) / 2, low[k] its Cholesky factor, up[k] =
    # (low[k]^-1)^T, log_det[k] = log|up[k]|; returns the first k not positive definite, or -1
    d = cov.shape[1]
    for k in range(cov.shape[0]):
        for i in range(d):
            for j in range(d):
                sym[k, i, j] = 0.5 * (cov[k, i, j] + cov[k, j, i])
        if not _cholesky(sym[k], low[k]):
            return k
        log_det[k] = _precision_factor(low[k], up[k])
    return -1
