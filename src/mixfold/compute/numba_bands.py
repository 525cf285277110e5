"""numba-compiled normalisation of a row block's scores for the CPU torch engines of the bands
below float64 (:class:`~mixfold.compute.linear_torch.CpuTorchFusedEStep` and its AMX subclass),
loaded by :mod:`mixfold.compute.kernels` on the first such fold.

Between its two GEMMs a block's scores (K, rows) in float32 go through floor, exp, totals, the
log-densities, scaling by ``w / total`` and rounding to the band: one pass each in torch, over a
cache-sized block. Here :func:`band_normalise` does it in one call of two passes, each
vectorised across rows (the inner loops run over contiguous rows, so every per-row quantity is
a lane of its own):

- :func:`band_exp_totals` -- each row's maximum taken off where asked, the floor, ``exp`` and
  the totals over the components, in place; returns the least total (the engine scores a block
  again against each row's maximum when a row sits far below the shift: ``band_normalise``
  then returns ``False``); each row's log-density, ``log(total) + top``, follows in float64
  with the shift added (a vectorised log: the exponent's bits and an atanh series);
- :func:`band_posteriors` -- ``r = e * w / total`` in place, rounded to bfloat16's values
  where the band is bfloat16 (to nearest, ties to even: torch's rounding), so that the
  statistics GEMM multiplies the band's values.

For the AMX tiles (:mod:`mixfold.compute.amx_tiles`), whose operands are bfloat16 bit patterns:
:func:`band_normalise_bits` writes the posteriors as bit patterns instead, and
:func:`band_tile_layouts` lays a block's features out in the tiles' two layouts.

The ``exp`` is Cody-Waite range reduction and a degree-5 polynomial on [-ln2/2, ln2/2]
(relative error about 3e-7, five float32 ulps), written out so that it vectorises with the
rest of the pass: the bands' inputs carry errors of 2**-9 (bfloat16), 2**-12 (float16) and
2**-24 times the GEMM's length (float32). Scores at or below the floor give exactly 0 and the
rest are capped at 80: no subnormal or overflowing power of two is formed. The fastmath flags
allow contraction and reordering but not the absence of infinities: a table's -inf score and a
dead row stay what they are.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

__all__ = ["band_exp_totals", "band_posteriors", "band_normalise", "band_normalise_bits",
           "band_tile_layouts", "EXP_COEFFICIENTS"]

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
_EXP_CEILING = np.float32(80.0)  # exp(80) * K stays finite in float32
#: no NaN-or-infinity assumptions: a table's -inf and a dead row's zero total stay exact
_FLAGS = {"contract", "reassoc", "nsz", "arcp", "afn"}
# every njit here also takes error_model="numpy": a division then carries no zero check that
# raises, which would keep its loop from vectorising (the kernels guard their divisors)

_F4 = numba.float32
_SCORES = _F4[:, ::1]
_VECTOR = _F4[::1]
EXP_TOTALS_SIGNATURE = _F4(_SCORES, _VECTOR, numba.boolean, _F4, _F4, _VECTOR)
POSTERIORS_SIGNATURE = numba.void(_SCORES, _VECTOR, _VECTOR, _VECTOR, numba.boolean)
_BITS = numba.uint16[:, ::1]
NORMALISE_SIGNATURE = numba.boolean(_SCORES, _VECTOR, numba.boolean, _F4, _F4, _VECTOR, _F4,
                                    _VECTOR, _VECTOR, numba.boolean, numba.float64[::1],
                                    numba.float64)
NORMALISE_BITS_SIGNATURE = numba.boolean(_SCORES, _VECTOR, numba.boolean, _F4, _F4, _VECTOR, _F4,
                                         _VECTOR, _VECTOR, _BITS, numba.float64[::1],
                                         numba.float64)
LAYOUTS_SIGNATURE = numba.void(_SCORES, numba.uint32[:, ::1], numba.uint32[:, ::1])


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _exp(x):
    # exp(x) = 2**n * exp(f), n = round(x / ln 2), the power of two added to p's exponent bits
    n = np.floor(x * _LOG2E + np.float32(0.5))
    f = (x - n * _LN2_HI) - n * _LN2_LO
    p = _C0 + f * (_C1 + f * (_C2 + f * (_C3 + f * (_C4 + f * _C5))))
    bits = np.float32(p).view(np.uint32) + np.uint32(np.int32(n) << 23)
    return np.uint32(bits).view(np.float32)


@numba.njit(EXP_TOTALS_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def band_exp_totals(scores, top, centre, floor, floor_exp, total):
    # scores (K, m) -> exp(score - top) - exp(floor) above the floor, else 0, in place; total
    # (m,) their sums; top (m,) each row's maximum when centre (0 for a row no component
    # scores), else 0
    k, m = scores.shape
    for j in range(m):
        top[j] = -np.inf if centre else np.float32(0.0)
        total[j] = 0.0
    if centre:
        for c in range(k):
            row = scores[c]
            for j in range(m):
                top[j] = max(top[j], row[j])
        for j in range(m):
            if top[j] == -np.inf:
                top[j] = 0.0
    for c in range(k):
        row = scores[c]
        for j in range(m):
            x = min(row[j] - top[j], _EXP_CEILING)
            # what sits at the floor (a -inf included) is exactly 0, as in the NumPy fold
            e = _exp(x) - floor_exp if x > floor else np.float32(0.0)
            row[j] = e
            total[j] += e
    least = np.float32(np.inf)
    for j in range(m):
        least = min(least, total[j])
    return least


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _scales(w, total, scale):
    # w / total per row; a dead row (total 0) gets posteriors 0, not NaN
    for j in range(total.size):
        t = total[j]
        scale[j] = w[j] / t if t > 0 else np.float32(0.0)


@numba.njit(inline="always")
def _bfloat16_bits(x):
    # the bfloat16 nearest x (ties to even: torch's rounding; x finite), as its high 16 bits
    u = np.float32(x).view(np.uint32)
    return (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> np.uint32(16)


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _posteriors(scores, w, total, scale, to_bfloat16):
    # scores *= w / total in place, rounded to bfloat16's values where asked (posteriors are
    # finite and >= 0)
    _scales(w, total, scale)
    k, m = scores.shape
    for c in range(k):
        row = scores[c]
        if to_bfloat16:
            for j in range(m):
                u = _bfloat16_bits(row[j] * scale[j]) << np.uint32(16)
                row[j] = np.uint32(u).view(np.float32)
        else:
            for j in range(m):
                row[j] *= scale[j]


@numba.njit(POSTERIORS_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def band_posteriors(scores, w, total, scale, to_bfloat16):
    # the second pass alone (the tests' two-pass reference of the normalisations below)
    _posteriors(scores, w, total, scale, to_bfloat16)


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _posterior_bits(scores, w, total, scale, bits):
    # bits = the bfloat16 bit patterns of scores * w / total
    _scales(w, total, scale)
    k, m = scores.shape
    for c in range(k):
        row, out = scores[c], bits[c]
        for j in range(m):
            out[j] = np.uint16(_bfloat16_bits(row[j] * scale[j]))


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _log(x):
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
def _log_densities(total, top, shift, lse):
    # lse = log(total) + top in float64, the shift added; a total is 0 (a dead row: -inf) or
    # a normal number (at least the least total the caller checked, or 1 less the floor's exp)
    for j in range(total.size):
        t = total[j]
        lse[j] = np.float64(_log(t) + top[j]) + shift if t > 0 else -np.inf


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _exp_totals_logs(scores, top, centre, floor, floor_exp, total, least_total, lse, shift):
    # band_exp_totals, then each row's log-density (float64, the shift added) into lse; False,
    # with lse untouched, when a row's total fell below least_total without centre
    least = band_exp_totals(scores, top, centre, floor, floor_exp, total)
    if not centre and least < least_total:
        return False
    _log_densities(total, top, shift, lse)
    return True


@numba.njit(NORMALISE_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def band_normalise(scores, top, centre, floor, floor_exp, total, least_total, w, scale,
                   to_bfloat16, lse, shift):
    # a block's whole normalisation in one call: exp and totals, each row's log-density into
    # lse and the posteriors in place (rounded to bfloat16's values where asked); False, with
    # lse and the posteriors not written, when a row's total fell below least_total without
    # centre (the caller scores the block again and asks with centre)
    if not _exp_totals_logs(scores, top, centre, floor, floor_exp, total, least_total, lse,
                            shift):
        return False
    _posteriors(scores, w, total, scale, to_bfloat16)
    return True


@numba.njit(NORMALISE_BITS_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy",
            cache=on_disk())
def band_normalise_bits(scores, top, centre, floor, floor_exp, total, least_total, w, scale,
                        bits, lse, shift):
    # band_normalise with the posteriors written as bfloat16 bit patterns (the tiles' operand)
    # into bits
    if not _exp_totals_logs(scores, top, centre, floor, floor_exp, total, least_total, lse,
                            shift):
        return False
    _posterior_bits(scores, w, total, scale, bits)
    return True


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _bits_at(z, f, j):
    # z[f, j]'s bfloat16 bits, 0 outside z (the padding)
    f1, m = z.shape
    return _bfloat16_bits(z[f, j]) if f < f1 and j < m else np.uint32(0)


@numba.njit(LAYOUTS_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def band_tile_layouts(z, pairs, rows):
    # z (F1, m) float32 -> its bfloat16 bit patterns in the tiles' two layouts, padded with
    # zeros, each pair of values one uint32 (the first in the low half): pairs (F1p/2, mp),
    # each row's features in pairs; rows (mp/2, F1p), each feature's rows in pairs. Writes run
    # along the outputs' rows
    for p in range(pairs.shape[0]):
        for j in range(pairs.shape[1]):
            pairs[p, j] = _bits_at(z, 2 * p, j) | (_bits_at(z, 2 * p + 1, j) << np.uint32(16))
    for q in range(rows.shape[0]):
        for f in range(rows.shape[1]):
            rows[q, f] = _bits_at(z, f, 2 * q) | (_bits_at(z, f, 2 * q + 1) << np.uint32(16))
