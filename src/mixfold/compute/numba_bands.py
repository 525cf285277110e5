"""numba-compiled helpers of the CPU band engines, loaded by :mod:`mixfold.compute.kernels`
on the first such fold: a vectorisable float32 ``exp`` and ``log`` (:mod:`mixfold.compute.
numba_screen` normalises a row's few candidates with them) and :func:`band_pairs_layout` (and
:func:`band_rows_pairs_layout`, from a row's contiguous features), which lay a block's features
out as the bfloat16 bit patterns the AMX tiles read (:mod:`mixfold.compute.amx_tiles`).

The ``exp`` is Cody-Waite range reduction and a degree-5 polynomial on [-ln2/2, ln2/2]
(relative error about 3e-7, five float32 ulps); the ``log`` an atanh series about the
mantissa (under 3 float32 ulps, 2.83 the largest measured over [0.5, 2]). Rounding to
bfloat16 is to nearest, ties to even (torch's).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

__all__ = ["band_pairs_layout", "band_rows_pairs_layout", "exp32", "log32", "EXP_COEFFICIENTS"]

#: exp(f) on [-ln2/2, ln2/2], lowest degree first: a relative least-squares fit at Chebyshev
#: nodes, rounded to float32 (relative error 1.5e-7 before the float32 arithmetic)
EXP_COEFFICIENTS = (1.0000001192092896, 0.9999996423721313, 0.49998900294303894,
                    0.1666766256093979, 0.04191502928733826, 0.008291716687381268)
_C0, _C1, _C2, _C3, _C4, _C5 = (np.float32(c) for c in EXP_COEFFICIENTS)
_LOG2E = np.float32(1.0 / math.log(2.0))
_LN2_HI = np.float32(0.693359375)  # ln 2 in 9 bits: n * _LN2_HI is exact for |n| < 2**15
_LN2_LO = np.float32(math.log(2.0) - 0.693359375)
_SQRT_HALF_BITS = np.uint32(0x3F3504F3)  # sqrt(1/2) as float32 bits
_L3, _L5, _L7, _L9 = (np.float32(1.0 / n) for n in (3, 5, 7, 9))  # atanh's series
#: no NaN-or-infinity assumptions: a table's -inf and a dead row's zero total stay exact
_FLAGS = {"contract", "reassoc", "nsz", "arcp", "afn"}
# every njit here also takes error_model="numpy": a division then carries no zero check that
# raises, which would keep its loop from vectorising (the kernels guard their divisors)

_F4 = numba.float32
_SCORES = _F4[:, ::1]
LAYOUT_SIGNATURE = numba.void(_SCORES, numba.uint32[:, ::1])


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def exp32(x):
    # exp(x) = 2**n * exp(f), n = round(x / ln 2), the power of two added to p's exponent bits
    n = np.floor(x * _LOG2E + np.float32(0.5))
    f = (x - n * _LN2_HI) - n * _LN2_LO
    p = _C0 + f * (_C1 + f * (_C2 + f * (_C3 + f * (_C4 + f * _C5))))
    bits = np.float32(p).view(np.uint32) + np.uint32(np.int32(n) << 23)
    return np.uint32(bits).view(np.float32)


@numba.njit(inline="always")
def _bfloat16_bits(x):
    # the bfloat16 nearest x (ties to even: torch's rounding; x finite), as its high 16 bits
    u = np.float32(x).view(np.uint32)
    return (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> np.uint32(16)


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def log32(x):
    # log(x), x a normal float32 > 0: x = 2**e * m, m in [sqrt(1/2), sqrt(2)) (the exponent
    # bits shifted by sqrt(1/2)'s), log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172
    v = np.float32(x).view(np.uint32) - _SQRT_HALF_BITS
    e = np.float32(np.int32(v) >> 23)
    m = np.uint32((v & np.uint32(0x7FFFFF)) + _SQRT_HALF_BITS).view(np.float32)
    s = (m - np.float32(1.0)) / (m + np.float32(1.0))
    s2 = s * s
    p = s2 * (_L3 + s2 * (_L5 + s2 * (_L7 + s2 * _L9)))
    return e * _LN2_HI + (np.float32(2.0) * s * (np.float32(1.0) + p) + e * _LN2_LO)


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _bits_at(z, f, j):
    # z[f, j]'s bfloat16 bits, 0 outside z (the padding)
    f1, m = z.shape
    return _bfloat16_bits(z[f, j]) if f < f1 and j < m else np.uint32(0)


@numba.njit(LAYOUT_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def band_pairs_layout(z, pairs):
    # z (F1, m) float32 -> its bfloat16 bit patterns in the scoring tiles' layout, padded with
    # zeros: pairs (F1p/2, mp), each row's features in pairs, each pair one uint32 (the first in
    # the low half); writes run along the rows
    for p in range(pairs.shape[0]):
        for j in range(pairs.shape[1]):
            pairs[p, j] = _bits_at(z, 2 * p, j) | (_bits_at(z, 2 * p + 1, j) << np.uint32(16))


@numba.njit(LAYOUT_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def band_rows_pairs_layout(z, pairs):
    # the same from z (m, F1), a row's features contiguous (the features a fold keeps): reads
    # run along each row's features (about 3x the time of band_pairs_layout, for a block whose
    # pairs the feature cache had no room to keep)
    for j in range(pairs.shape[1]):
        for p in range(pairs.shape[0]):
            pairs[p, j] = _bits_at(z.T, 2 * p, j) | (_bits_at(z.T, 2 * p + 1, j) << np.uint32(16))
