"""Double-double arithmetic: a value is an unevaluated sum ``hi + lo`` of two float64 numbers.

Error-free transformations (``two_sum``, ``two_prod``) give the rounding error of a float64 sum or
product exactly, so a pair carries about 106 bits (unit roundoff 2^-106). Every function works
elementwise on NumPy arrays and on torch tensors alike (the array module is found from the
operands), so the same code runs the ``dd`` band on a CPU and on a GPU.

>>> a = DD(1.0, 0.0)
>>> b = dd_add(a, DD(2.0 ** -80, 0.0))
>>> b.hi, b.lo
(1.0, 8.271806125530277e-25)
>>> t = dd_exp(DD(1.0, 0.0))
>>> float(t.hi), bool(abs(t.lo - 1.4456468917292502e-16) < 1e-31)
(2.718281828459045, True)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["DD", "two_sum", "fast_two_sum", "two_prod", "dd_add", "dd_sub", "dd_mul", "dd_div",
           "dd_exp", "dd_log", "dd_maximum", "dd_sum_rows", "LN2", "LOG_2PI"]

_SPLITTER = 134217729.0  # 2^27 + 1: Veltkamp's split of a float64 into two 26-bit halves
_SPLIT_LIMIT, _SPLIT_SCALE = 2.0 ** 996, 2.0 ** -28


class DD(NamedTuple):
    """A double-double value (or array of them): ``hi + lo`` with ``|lo| <= ulp(hi) / 2``."""

    hi: Any
    lo: Any


def _xp(x: Any) -> Any:
    """The array module of ``x``: torch for tensors, NumPy otherwise."""
    if type(x).__module__.startswith("torch"):
        import torch

        return torch
    return np


def _finite_error(value: Any, err: Any) -> Any:
    """The error term of an exact operation whose rounded result is ``value``: 0 where that
    overflowed (an infinite result has none; its inf - inf would be NaN)."""
    if np.ndim(value) == 0 and not hasattr(value, "device"):  # a scalar
        return err if np.isfinite(value) else type(err)(0.0)
    xp = _xp(value)
    finite = xp.isfinite(value)
    return err if bool(finite.all()) else xp.where(finite, err, xp.zeros_like(err))


def two_sum(a: Any, b: Any) -> DD:
    """``a + b`` exactly, as (rounded sum, its rounding error) (Knuth)."""
    s = a + b
    bb = s - a
    return DD(s, _finite_error(s, (a - (s - bb)) + (b - bb)))


def fast_two_sum(a: Any, b: Any) -> DD:
    """``a + b`` exactly when ``|a| >= |b|`` (Dekker); renormalises a pair."""
    s = a + b
    return DD(s, _finite_error(s, b - (s - a)))


def _split(a: Any) -> tuple[Any, Any]:
    # a value above 2^996 is split scaled down by 2^-28 (exact): its 2^27 + 1 multiple would
    # overflow, and inf - inf would put NaN in both halves
    big = abs(a) > _SPLIT_LIMIT
    if not (big.any() if hasattr(big, "any") else big):  # (the common case: no scaling)
        c = _SPLITTER * a
        hi = c - (c - a)
        return hi, a - hi
    scale = 1.0 - big * (1.0 - _SPLIT_SCALE)
    a_s = a * scale
    c = _SPLITTER * a_s
    hi = c - (c - a_s)
    return hi / scale, (a_s - hi) / scale


def two_prod(a: Any, b: Any) -> DD:
    """``a * b`` exactly, as (rounded product, its rounding error) (Dekker, no FMA needed); a
    product that overflows is that infinity with no error term."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return DD(p, _finite_error(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl))


def _as_dd(x: Any) -> DD:
    return x if isinstance(x, DD) else DD(x, 0.0 * x)


def dd_add(a: DD | Any, b: DD | Any) -> DD:
    """``a + b`` in double-double (the accurate variant: both low parts are summed exactly)."""
    a, b = _as_dd(a), _as_dd(b)
    s, e = two_sum(a.hi, b.hi)
    t, f = two_sum(a.lo, b.lo)
    s, e = fast_two_sum(s, e + t)
    return fast_two_sum(s, e + f)


def dd_sub(a: DD | Any, b: DD | Any) -> DD:
    """``a - b`` in double-double."""
    b = _as_dd(b)
    return dd_add(a, DD(-b.hi, -b.lo))


def dd_mul(a: DD | Any, b: DD | Any) -> DD:
    """``a * b`` in double-double."""
    a, b = _as_dd(a), _as_dd(b)
    p, e = two_prod(a.hi, b.hi)
    return _infinite_as_is(p, fast_two_sum(p, e + (a.hi * b.lo + a.lo * b.hi)))


def dd_div(a: DD | Any, b: DD | Any) -> DD:
    """``a / b`` in double-double (two correction steps of the float64 quotient)."""
    a, b = _as_dd(a), _as_dd(b)
    q1 = a.hi / b.hi
    r = dd_sub(a, dd_mul(b, q1))
    q2 = r.hi / b.hi
    r = dd_sub(r, dd_mul(b, q2))
    q3 = r.hi / b.hi
    q = fast_two_sum(q1, q2)
    return _infinite_as_is(q1, dd_add(q, q3))


def _infinite_as_is(value: Any, result: DD) -> DD:
    """``result``, but ``value`` itself where that is infinite (its corrections, inf - inf,
    would be NaN)."""
    if np.ndim(value) == 0 and not hasattr(value, "device"):  # a scalar
        return result if not np.isinf(value) else DD(value, type(result.lo)(0.0))
    xp = _xp(value)
    inf = xp.isinf(value)
    if not bool(inf.any()):
        return result
    return DD(xp.where(inf, value, result.hi), xp.where(inf, xp.zeros_like(result.lo), result.lo))


LN2 = DD(0.6931471805599453, 2.3190468138462996e-17)
LOG_2PI = DD(1.8378770664093456, -7.756588316134483e-17)

#: exp's argument is scaled by 2^-_SQUARINGS before its Taylor series, then squared back.
_SQUARINGS = 10
_TAYLOR_TERMS = 9


def dd_exp(a: DD) -> DD:
    """``exp(a)`` in double-double: ``2^k exp(r)``, ``r`` reduced by ln 2 and by 2^-10, a Taylor
    series of ``expm1`` in double-double, then ``(1 + s)^2 - 1 = 2s + s^2`` ten times.

    Underflows to 0 below exp(-745), like float64.
    """
    xp = _xp(a.hi)
    k = xp.round(a.hi / LN2.hi)
    r = dd_sub(a, dd_mul(LN2, k))
    scale = 2.0 ** -_SQUARINGS
    r = DD(r.hi * scale, r.lo * scale)
    s = dd_add(1.0, dd_div(r, float(_TAYLOR_TERMS)))
    for j in range(_TAYLOR_TERMS - 1, 1, -1):
        s = dd_add(1.0, dd_div(dd_mul(r, s), float(j)))
    s = dd_mul(r, s)  # expm1(r)
    for _ in range(_SQUARINGS):
        s = dd_add(dd_mul(s, 2.0), dd_mul(s, s))
    e = dd_add(1.0, s)
    ki = k.to(xp.int32) if xp is not np else k.astype(np.int32)
    ki = xp.clip(ki, -1100, 1100)
    hi, lo = xp.ldexp(e.hi, ki), xp.ldexp(e.lo, ki)
    dead = a.hi < -745.0
    return DD(xp.where(dead, 0.0 * hi, hi), xp.where(dead, 0.0 * lo, lo))


def dd_log(a: DD) -> DD:
    """``log(a)`` for ``a > 0`` in double-double: one Newton step ``y + a exp(-y) - 1`` from the
    float64 logarithm doubles its bits."""
    xp = _xp(a.hi)
    y = xp.log(a.hi)
    t = dd_mul(a, dd_exp(DD(-y, 0.0 * y)))
    return dd_add(y, dd_sub(t, 1.0))


def dd_maximum(a: DD, b: DD) -> DD:
    """Elementwise maximum of two double-double arrays (exact: no rounding)."""
    xp = _xp(a.hi)
    take_a = (a.hi > b.hi) | ((a.hi == b.hi) & (a.lo >= b.lo))
    return DD(xp.where(take_a, a.hi, b.hi), xp.where(take_a, a.lo, b.lo))


def dd_sum_rows(x: DD) -> DD:
    """Sum over axis 0 in double-double, pairwise (log2(n) vectorized levels); shape x.shape[1:].

    The result agrees with any other double-double summation order to about 2^-100 relative, so
    its float64 rounding (``hi``) practically never depends on how the rows were split.
    """
    hi, lo = np.asarray(x.hi, dtype=np.float64), np.asarray(x.lo, dtype=np.float64)
    if hi.shape[0] == 0:
        return DD(np.zeros(hi.shape[1:]), np.zeros(hi.shape[1:]))
    while hi.shape[0] > 1:
        half = hi.shape[0] // 2
        s = dd_add(DD(hi[:half], lo[:half]), DD(hi[half:2 * half], lo[half:2 * half]))
        if hi.shape[0] % 2:
            hi = np.concatenate([s.hi, hi[-1:]])
            lo = np.concatenate([s.lo, lo[-1:]])
        else:
            hi, lo = s.hi, s.lo
    return DD(hi[0], lo[0])
