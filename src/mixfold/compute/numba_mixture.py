"""numba-compiled E-steps of a small mixture of diagonal Gaussians and of a tied mixture
(full-covariance Gaussians sharing one covariance), loaded by :mod:`mixfold.compute.kernels` on
the first such fold.

On small data (a notebook's few hundred rows) the NumPy E-step is some thirty calls on (K, D)
and (rows, K) arrays, each costing more than its arithmetic; each kernel is that E-step in one
call. Diagonal: the stack's centre (:func:`~mixfold.compute.linear.gaussian_centre`'s), each
component's coefficients on ``[(x-c)^2, x-c]``, every row's scores, their log-sum-exp and the
posteriors' weighted sums about the centre, row by row. Tied: from the rows whitened once by the
shared factor (a GEMM the caller makes: ``|(x - mu_k) U|^2 = |(x - c) U - (mu_k - c) U|^2``),
each component's squared distance, the log-sum-exp, the posterior masses and first sums about
``c``; the second sums do not depend on the posteriors (the pooled scatter), so the caller makes
them once. ``stack_centre`` is the diagonal E-step's centre alone. ``diagonal_moments`` is the
diagonal M-step's means, central second moments and floored variances (NumPy's operations in
NumPy's order, no fastmath: the same bits), some fifteen calls on (K, D) arrays in one.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

__all__ = ["diagonal_estep", "tied_estep", "stack_centre", "diagonal_moments",
           "DIAGONAL_ESTEP_SIGNATURE", "TIED_ESTEP_SIGNATURE", "STACK_CENTRE_SIGNATURE",
           "DIAGONAL_MOMENTS_SIGNATURE"]

_LOG_2PI = math.log(2.0 * math.pi)
#: no NaN-or-infinity assumptions: a far row's -inf score must stay -inf
_FLAGS = {"contract", "reassoc", "nsz", "arcp"}
_F8 = numba.float64
_IN1, _IN2 = (numba.types.Array(_F8, n, "C", readonly=True) for n in (1, 2))  # (or writable)
#: (x (n, D), w (n,), mu (K, D), s2 (K, D), log_weights (K,), centre (D,) out,
#:  sums (K, 2D + 1) out, lse (n,) out) -> whether every row has a finite score
DIAGONAL_ESTEP_SIGNATURE = numba.boolean(_IN2, _IN1, _IN2, _IN2, _IN1, _F8[::1], _F8[:, ::1],
                                         _F8[::1])
#: (x - c (n, D), (x - c) U (n, D), w (n,), (mu_k - c) U (K, D),
#:  const (K,) = log w_k + log|U| - D/2 log 2 pi, sums (K, D + 1) out, lse (n,) out)
#: -> whether every row has a finite score
TIED_ESTEP_SIGNATURE = numba.boolean(_IN2, _IN2, _IN1, _IN2, _IN1, _F8[:, ::1], _F8[::1])
#: (mu (K, D), s2 (K, D), centre (D,) out)
STACK_CENTRE_SIGNATURE = numba.void(_IN2, _IN2, _F8[::1])
#: (s0 (K,), sum_x, sum_xx, ref_mass (K, D), reg_covar, relative floor, min_variance,
#:  mean, raw, var (K, D) out) -> whether a variance fell onto its floor
DIAGONAL_MOMENTS_SIGNATURE = numba.boolean(_IN1, _IN2, _IN2, _IN2, _F8, numba.boolean, _F8,
                                           _F8[:, ::1], _F8[:, ::1], _F8[:, ::1])


@numba.njit(fastmath=_FLAGS, error_model="numpy")
def _centre(mu, s2, out):
    # gaussian_centre: the mean of the means snapped to a power-of-two grid no finer than the
    # components' spread (the same centre from one iteration to the next)
    k, d = mu.shape
    for j in range(d):
        c = 0.0
        for i in range(k):
            c += mu[i, j]
        c /= k
        spread = 0.0
        for i in range(k):
            spread += s2[i, j] + (mu[i, j] - c) ** 2
        spread = math.sqrt(spread / k)
        out[j] = c
        if spread > 0.0 and spread < np.inf:
            grid = 2.0 ** math.ceil(math.log2(spread))
            snapped = np.round(c / grid) * grid
            if math.isfinite(snapped):
                out[j] = snapped


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _posteriors(score, weight):
    # one row's K scores made exp(score - top) in place: (their log-sum-exp, weight / their
    # sum, the factor that makes them its posteriors times its weight); NaN for both, the
    # scores unchanged, where a score is NaN or none is finite
    top = -np.inf
    for s in score:
        if s != s:
            return np.nan, np.nan
        top = max(top, s)
    if not math.isfinite(top):
        return np.nan, np.nan
    total = 0.0
    for i in range(score.size):
        score[i] = math.exp(score[i] - top)
        total += score[i]
    return top + math.log(total), weight / total


@numba.njit(DIAGONAL_ESTEP_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy",
            cache=on_disk())
def diagonal_estep(x, w, mu, s2, log_weights, centre, sums, lse):
    n, d = x.shape
    k = mu.shape[0]
    _centre(mu, s2, centre)
    # log w_k + log p_k(x) = sum_j a_kj (x_j-c_j)^2 + b_kj (x_j-c_j) + const_k
    a = np.empty((k, d))
    b = np.empty((k, d))
    const = np.empty(k)
    for i in range(k):
        q = 0.0
        logs = 0.0
        for j in range(d):
            m = mu[i, j] - centre[j]
            a[i, j] = -0.5 / s2[i, j]
            b[i, j] = m / s2[i, j]
            q += m * b[i, j]
            logs += math.log(s2[i, j])
        const[i] = log_weights[i] - 0.5 * (q + d * _LOG_2PI + logs)
    sums[:] = 0.0
    xc = np.empty(d)
    sq = np.empty(d)
    score = np.empty(k)
    for r in range(n):
        for j in range(d):
            xc[j] = x[r, j] - centre[j]
            sq[j] = xc[j] * xc[j]
        for i in range(k):
            s = const[i]
            for j in range(d):
                s += a[i, j] * sq[j] + b[i, j] * xc[j]
            score[i] = s
        lse[r], scale = _posteriors(score, w[r])
        if scale != scale:  # a row the generic path must name (an infinite value)
            return False
        for i in range(k):
            p = score[i] * scale
            for j in range(d):
                sums[i, j] += p * sq[j]
                sums[i, d + j] += p * xc[j]
            sums[i, 2 * d] += p
    return True


@numba.njit(inline="always", error_model="numpy")
def _maximum(a, b):
    # np.maximum's: a NaN wins, and of two equal values the first
    if a != a or b != b:
        return a + b
    return a if a >= b else b


@numba.njit(DIAGONAL_MOMENTS_SIGNATURE, nogil=True, error_model="numpy", cache=on_disk())
def diagonal_moments(s0, sum_x, sum_xx, ref_mass, reg_covar, relative, min_variance, mean, raw,
                     var):
    # stacked_gaussian's diagonal M-step (no fastmath: NumPy's operations, so its bits): the
    # means and central second moments from sums about a reference point, the floored variances
    k, d = sum_x.shape
    collapsed = False
    for i in range(k):
        for j in range(d):
            m = sum_x[i, j] / s0[i]
            mean[i, j] = ref_mass[i, j] / s0[i] + m
            r = sum_xx[i, j] / s0[i] - m * m
            raw[i, j] = r
            floor = reg_covar * _maximum(r, 0.0) if relative else reg_covar
            var[i, j] = _maximum(_maximum(r, 0.0) + floor, min_variance)
            collapsed |= r <= _maximum(floor, min_variance)
    return collapsed


@numba.njit(STACK_CENTRE_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy",
            cache=on_disk())
def stack_centre(mu, s2, centre):
    _centre(mu, s2, centre)


@numba.njit(TIED_ESTEP_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy",
            cache=on_disk())
def tied_estep(xc, white, w, offsets, const, sums, lse):
    n, d = xc.shape
    k = offsets.shape[0]
    sums[:] = 0.0
    score = np.empty(k)
    for r in range(n):
        for i in range(k):
            q = 0.0
            for j in range(d):
                t = white[r, j] - offsets[i, j]
                q += t * t
            score[i] = const[i] - 0.5 * q
        lse[r], scale = _posteriors(score, w[r])
        if scale != scale:  # a row the generic path must name (an infinite value)
            return False
        for i in range(k):
            p = score[i] * scale
            sums[i, d] += p
            for j in range(d):
                sums[i, j] += p * xc[r, j]
    return True
