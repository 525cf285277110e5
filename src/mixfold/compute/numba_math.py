"""Vectorisable float64 elementary functions for the compiled kernels (inlined into their loops):
numba's ``math.exp`` is a call into libm per value, which keeps a loop over rows scalar; the
:func:`exp64` here is straight-line arithmetic that LLVM vectorises with the loop around it.

:func:`exp64` is Cody-Waite range reduction by ln 2 (``x = n ln 2 + r``, ``|r| <= ln2 / 2``,
ln 2 in two parts so that ``n ln2_hi`` is exact), the Taylor polynomial of ``exp(r)`` to degree
13 (truncation under 5e-18 relative), and ``2**n`` built from exponent bits in two halves, so
that subnormal results round once and overflow reaches ``inf`` without a branch. Measured
against mpmath over [-745, 710], subnormal results and the special values
(``tests/compute/test_numba_math.py``): within :data:`EXP_MAX_ULPS` ulps (normal results),
``exp(-inf) = 0``, ``exp(inf) = inf``, ``exp(nan) = nan``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["exp64", "EXP_MAX_ULPS"]

#: the bound on exp64's error for normal results, in ulps of the correctly rounded result
#: (measured: at most 1, the nearest float or its neighbour)
EXP_MAX_ULPS = 2

_LOG2E = 1.0 / math.log(2.0)
_LN2_HI = 6.93147180369123816490e-01  # ln 2's leading 32 bits: n * _LN2_HI exact for |n| < 2**20
_LN2_LO = 1.90821492927058770002e-10  # ln 2 - _LN2_HI
#: 1.5 * 2**52: adding it rounds to an integer held in the low mantissa bits (ties to even)
_SHIFT = 6755399441055744.0
_SHIFT_BITS = np.int64(np.float64(_SHIFT).view(np.int64))
_BIAS = np.int64(1023)
#: beyond these, exp is 0 (below half the least subnormal) and inf: clamped, the arithmetic
#: still yields them, and every 2**n half stays a normal number
_X_LOW, _X_HIGH = -746.0, 710.0
(_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13) = (
    1.0 / math.factorial(k) for k in range(2, 14))


@numba.njit(error_model="numpy", fastmath={"contract"})
def exp64(x):
    # NaN passes both clamps (comparisons with it are false) and comes out NaN
    v = _X_HIGH if x > _X_HIGH else x
    v = _X_LOW if v < _X_LOW else v
    t = v * _LOG2E + _SHIFT
    nf = t - _SHIFT
    r = (v - nf * _LN2_HI) - nf * _LN2_LO
    q = _C10 + r * (_C11 + r * (_C12 + r * _C13))
    q = _C6 + r * (_C7 + r * (_C8 + r * (_C9 + r * q)))
    q = _C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * q)))
    p = 1.0 + r * (1.0 + r * q)
    n = np.float64(t).view(np.int64) - _SHIFT_BITS  # nf as an integer, without a conversion
    half = n >> 1
    low = np.int64((half + _BIAS) << 52).view(np.float64)
    high = np.int64((n - half + _BIAS) << 52).view(np.float64)
    return (p * low) * high
