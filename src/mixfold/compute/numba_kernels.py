"""The numba-compiled kernels themselves, loaded by :mod:`mixfold.compute.kernels` on first use.

The fold runs one thread's share of row blocks and releases the GIL (``nogil``): the threads
are the project's row-block pool, not numba's OpenMP layer, whose spinning workers stall on a
busy machine and whose runtime kills a child forked after a fit.

Every kernel is a module-level ``@njit(cache=...)`` function with no closure: numba keys its
on-disk cache by the function's code and closure, so a kernel made inside a factory (closing over
numba or another kernel) writes a new cache entry in every process and never loads one. The fold
has one explicit signature, compiled (or loaded from the cache) when this module is imported: one
machine-code version whatever the layout of the scores, so one cache entry per machine.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

__all__ = ["hmm_fold"]

_F1, _F2, _F3 = numba.float64[::1], numba.float64[:, ::1], numba.float64[:, :, ::1]
_I8 = numba.int64


def _input(dtype: Any, ndim: int, layout: str = "C") -> Any:
    # read-only: a writable array converts to it, so shards that arrive read-only (Ray's
    # zero-copy arrays, memory maps) run the same machine code
    return numba.types.Array(dtype, ndim, layout, readonly=True)


#: scores may be any 2-D float64 layout (the caller never copies them); the rest contiguous
HMM_FOLD_SIGNATURE = numba.void(_input(numba.float64, 2, "A"), _input(numba.int64, 1),
                                _input(numba.float64, 1), _input(numba.float64, 2),
                                _input(numba.float64, 1), _input(numba.float64, 1), _F2, _F1,
                                _I8, _I8, _I8, _F2, _F3, _F2)


@numba.njit(inline="always", fastmath={"contract"})
def exp_nonpositive(v, bits):
    # v <- exp(v) for v <= 0, 0 below -708 (and for NaN); straight-line arithmetic that the
    # compiler vectorises, where np.exp in a loop is a scalar call per element: a degree-13
    # Taylor polynomial on |r| <= ln2/2 after a Cody-Waite reduction, 2^k from its bits
    for i in range(v.size):
        x = max(v[i], -708.0)
        k = np.floor(x * 1.4426950408889634 + 0.5)
        r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        bits[i] = (np.int64(k) + 1023) << 52
        v[i] = p if v[i] >= -708.0 else 0.0
    two_k = bits.view(np.float64)
    for i in range(v.size):
        v[i] *= two_k[i]

@numba.njit(inline="always", fastmath={"contract"})
def _emissions(scores, lo, n, emis, bits):
    # emis[:n] <- exp(scores of items lo.. lo+n less each item's largest), returns the sum of
    # those largest (an item no state scores counts 0)
    s = emis.shape[1]
    total_log = 0.0
    for t in range(n):
        top = scores[lo + t, 0]
        for a in range(1, s):
            top = max(top, scores[lo + t, a])
        if not np.isfinite(top):
            top = 0.0
        total_log += top
        for a in range(s):
            emis[t, a] = scores[lo + t, a] - top
    exp_nonpositive(emis[:n].reshape(n * s), bits[:n * s])
    return total_log


@numba.njit(inline="always", fastmath={"contract"})
def _forward(gamma, lo, n, initial, step, emis, scale, total_log):
    # the scaled forward variables into gamma[lo:lo+n], each step's scale into scale; returns
    # total_log plus the log of the scales' product
    s = emis.shape[1]
    scale_product = 1.0
    for t in range(n):
        c = 0.0
        for b in range(s):
            if t == 0:
                v = initial[b]
            else:
                v = 0.0
                for a in range(s):
                    v += gamma[lo + t - 1, a] * step[a, b]
            v *= emis[t, b]
            gamma[lo + t, b] = v
            c += v
        scale[t] = c
        inv = 1.0 / c if c > 0 else 1.0
        for b in range(s):
            gamma[lo + t, b] *= inv
        # one log per run of scales instead of one per step, flushed long before the running
        # product could leave float64's range
        scale_product *= c
        if not 1e-250 < scale_product < 1e250:
            total_log += np.log(scale_product)
            scale_product = 1.0
    return total_log + np.log(scale_product)


@numba.njit(inline="always", fastmath={"contract"})
def _backward(gamma, lo, n, w, step, end_factor, end_norm, emis, scale, g, beta, beta_next,
              pt):
    # the backward pass: gamma[lo:lo+n] <- the weighted posteriors, pt += the weighted
    # transition counts
    s = emis.shape[1]
    inv_end = 1.0 / end_norm
    for a in range(s):
        beta[a] = end_factor[a] * inv_end
    for t in range(n - 1, -1, -1):
        if t < n - 1:
            inv = 1.0 / scale[t + 1] if scale[t + 1] > 0 else 1.0
            for b in range(s):
                g[b] = emis[t + 1, b] * beta_next[b] * inv
            for a in range(s):
                v = 0.0
                ga = gamma[lo + t, a] * w
                for b in range(s):
                    v += step[a, b] * g[b]
                    pt[a, b] += ga * g[b] * step[a, b]
                beta[a] = v
        for a in range(s):
            gamma[lo + t, a] *= beta[a] * w
            beta_next[a] = beta[a]


@numba.njit(HMM_FOLD_SIGNATURE, nogil=True, fastmath={"contract"}, cache=on_disk())
def hmm_fold(scores, offsets, initial, step, end_factor, weights, gamma, ll, n_blocks,
             block_lo, block_hi, part_init, part_trans, part_end):
    # scaled forward-backward, one sequence at a time, over blocks [block_lo, block_hi) of
    # n_blocks; gamma (n_items, S) holds the forward variables, then the weighted posteriors;
    # each block adds its counts to its own row of the (zeroed) part_* arrays
    n_rows = offsets.size - 1
    s = step.shape[0]
    per_block = (n_rows + n_blocks - 1) // n_blocks
    for blk in range(block_lo, block_hi):
        g = np.empty(s)
        beta = np.empty(s)
        beta_next = np.empty(s)
        first, stop = blk * per_block, min(n_rows, (blk + 1) * per_block)
        longest = 0
        for r in range(first, stop):
            longest = max(longest, offsets[r + 1] - offsets[r])
        emis = np.empty((longest, s))  # one buffer per block, reused by its sequences
        bits = np.empty(longest * s, dtype=np.int64)
        scale = np.empty(longest)
        for r in range(first, stop):
            lo, hi = offsets[r], offsets[r + 1]
            n = hi - lo
            if n == 0:
                continue
            total_log = _forward(gamma, lo, n, initial, step, emis, scale,
                                 _emissions(scores, lo, n, emis, bits))
            end_norm = 0.0
            for a in range(s):
                end_norm += gamma[hi - 1, a] * end_factor[a]
            ll[r] = total_log + np.log(end_norm)
            if not np.isfinite(ll[r]):
                for t in range(n):
                    for a in range(s):
                        gamma[lo + t, a] = 0.0
                continue
            _backward(gamma, lo, n, weights[r], step, end_factor, end_norm, emis, scale, g,
                      beta, beta_next, part_trans[blk])
            for a in range(s):
                part_init[blk, a] += gamma[lo, a]
                part_end[blk, a] += gamma[hi - 1, a]
