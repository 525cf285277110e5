"""Double-double (compensated) accumulation of sufficient statistics, and of their payloads.

In the ``dd`` band every statistic buffer of an accumulator (its ``own_arrays``, the high parts)
gets a low part of the same shape (:func:`low_parts`); terms are formed exactly (``two_prod``)
and summed in double-double, so the float64 value of a statistic -- ``hi`` of the pair -- does not
depend on how the rows were chunked or sharded. A backend reduces such statistics as one flat
payload ``[high parts..., low parts...]`` combined by :func:`add_dd_payloads` (exact two-sum).

>>> hi, lo = np.zeros(1), np.zeros(1)
>>> add_into(hi, lo, DD(np.array([1e16]), np.array([0.0])))
>>> add_into(hi, lo, DD(np.array([1.0]), np.array([0.0])))
>>> add_into(hi, lo, DD(np.array([-1e16]), np.array([0.0])))
>>> hi.tolist(), lo.tolist()
([1.0], [0.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.precision.doubledouble import DD, dd_add, dd_mul, dd_sum_rows, two_prod

#: Rows per block of double-double moment sums.
_BLOCK_ROWS = 8192

__all__ = ["low_parts", "tree_low_parts", "add_into", "weighted_dd_sums", "exact_products",
           "dd_payload", "load_dd_payload", "add_dd_payloads", "split_dd_payload",
           "moment_features", "add_weighted_moments"]


def low_parts(acc: Any) -> list[np.ndarray]:
    """The low parts of ``acc``'s own statistic buffers (zeros until ``dd`` adds to them)."""
    lo = acc.__dict__.get("_dd_low")
    if lo is None:
        lo = [np.zeros_like(a) for a in acc.own_arrays()]
        acc._dd_low = lo
    return lo


def tree_low_parts(acc: Any) -> list[np.ndarray]:
    """Low parts of the whole accumulator tree, in payload order (as ``acc.arrays()``)."""
    out = list(low_parts(acc))
    for child in acc.children():
        out.extend(tree_low_parts(child))
    return out


def add_into(hi: np.ndarray, lo: np.ndarray, value: DD) -> None:
    """``(hi, lo) += value`` in double-double, in place."""
    s = dd_add(DD(hi, lo), value)
    hi[...] = s.hi
    lo[...] = s.lo


def exact_products(a: np.ndarray, b: np.ndarray) -> DD:
    """``a * b`` elementwise, exactly, as a double-double array."""
    return two_prod(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def weighted_dd_sums(w_hi: np.ndarray, w_lo: np.ndarray, features: DD) -> DD:
    """``sum_i w_i * f_i`` over rows, in double-double: weights (n,) as a pair, features (n, m)
    as a pair; returns a pair of shape (m,)."""
    w = DD(w_hi[:, None], w_lo[:, None])
    return dd_sum_rows(dd_mul(w, features))


def dd_payload(acc: Any) -> np.ndarray:
    """``acc``'s statistics as ``[high parts..., low parts...]`` (twice ``to_array``'s length)."""
    lows = tree_low_parts(acc)
    lo = np.concatenate([a.ravel() for a in lows]) if lows else np.zeros(0)
    return np.concatenate([acc.to_array(), lo])


def load_dd_payload(acc: Any, hi: np.ndarray, lo: np.ndarray) -> Any:
    """Set ``acc``'s statistics (high parts) and their low parts from flat arrays; returns acc."""
    acc.from_array(hi)
    pos = 0
    for a in tree_low_parts(acc):
        a[...] = lo[pos:pos + a.size].reshape(a.shape)
        pos += a.size
    return acc


def split_dd_payload(flat: np.ndarray) -> DD:
    """A ``[high..., low...]`` payload as a pair of halves."""
    half = flat.size // 2
    return DD(flat[:half], flat[half:])


def add_dd_payloads(*payloads: np.ndarray) -> np.ndarray:
    """The double-double sum of ``[high..., low...]`` payloads (the ``dd`` reduce operation)."""
    total = split_dd_payload(np.asarray(payloads[0], dtype=np.float64))
    for p in payloads[1:]:
        total = dd_add(total, split_dd_payload(np.asarray(p, dtype=np.float64)))
    return np.concatenate([total.hi, total.lo])


def moment_features(x: np.ndarray, cross: bool = False) -> DD:
    """Per-row ``[1, x_j..., x_j^2...]`` (or ``x_i x_j`` for all i, j with ``cross``), exact, as a
    double-double array (n, m): the terms whose weighted sums are Gaussian statistics."""
    x2 = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    n, d = x2.shape
    sq = two_prod(x2[:, :, None], x2[:, None, :]) if cross else two_prod(x2, x2)
    ones = np.ones((n, 1))
    hi = np.concatenate([ones, x2, sq.hi.reshape(n, -1)], axis=1)
    lo = np.concatenate([np.zeros((n, 1 + d)), sq.lo.reshape(n, -1)], axis=1)
    return DD(hi, lo)


def add_weighted_moments(acc: Any, x: np.ndarray, w_hi: np.ndarray, w_lo: np.ndarray,
                         cross: bool = False, reference: np.ndarray | None = None) -> None:
    """Add ``sum_i w_i [1, x_i, x_i^2 (or x_i x_i^T)]`` in double-double to ``acc``'s own
    buffers, which hold exactly those sums in that order (weight, sum of x, sum of squares).

    With a ``reference`` point c (D,), the sums are about it, ``sum_i w_i [1, d_i, d_i^2 (or
    d_i d_i^T), c]`` with ``d_i = x_i - c`` rounded once (the same bits however the rows are
    chunked), into buffers (weight, sum of d, sum of squares, sum of w c)."""
    if reference is not None:
        c = np.asarray(reference, dtype=np.float64)
        x = np.asarray(x, dtype=np.float64).reshape(len(x), -1) - c
    for begin in range(0, len(x), _BLOCK_ROWS):  # bounds the (rows, D^2) temporaries
        end = begin + _BLOCK_ROWS
        features = moment_features(x[begin:end], cross)
        if reference is not None:
            rows = features.hi.shape[0]
            features = DD(np.concatenate([features.hi, np.broadcast_to(c, (rows, c.size))], 1),
                          np.concatenate([features.lo, np.zeros((rows, c.size))], 1))
        total = weighted_dd_sums(w_hi[begin:end], w_lo[begin:end], features)
        pos = 0
        for hi, lo in zip(acc.own_arrays(), low_parts(acc)):
            add_into(hi, lo, DD(total.hi[pos:pos + hi.size].reshape(hi.shape),
                                total.lo[pos:pos + hi.size].reshape(hi.shape)))
            pos += hi.size
