"""The compiled explicit-duration (semi-Markov) forward-backward, loaded by
:mod:`mixfold.compute.kernels` on first use.

One sequence at a time, in log space, O(n * S * D): the recursion of
:mod:`mixfold.compute.semi_markov` (the NumPy reference, whose docstring defines the lattice)
without its padding. A row block's scratch is sized by its longest sequence and reused by its
sequences; each block adds its counts to its own row of the (zeroed) ``part_*`` arrays, so the
blocks, not the threads, fix the bits. Module-level kernels with one explicit signature, as in
:mod:`mixfold.compute.numba_kernels`.
"""

from __future__ import annotations

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk
from mixfold.compute.numba_kernels import _input, exp_nonpositive

__all__ = ["hsmm_fold", "hsmm_log_likelihood"]

_F1, _F2, _F3 = numba.float64[::1], numba.float64[:, ::1], numba.float64[:, :, ::1]
_I8 = numba.int64
_R1, _R2 = _input(numba.float64, 1), _input(numba.float64, 2)

#: scores any 2-D float64 layout (never copied); the laws, the weights and outputs contiguous
HSMM_FOLD_SIGNATURE = numba.void(_input(numba.float64, 2, "A"), _input(numba.int64, 1), _R1,
                                 _R2, _R2, _R2, _R1, _F2, _F1, _I8, _I8, _I8, _F2, _F3, _F3)
#: the forward pass alone: the same inputs but the weights, the log-likelihoods out
HSMM_LL_SIGNATURE = numba.void(_input(numba.float64, 2, "A"), _input(numba.int64, 1), _R1, _R2,
                               _R2, _R2, _F1, _I8, _I8, _I8)


@numba.njit(inline="always")
def _lse(terms, k, top, bits):
    # log sum exp of terms[:k] whose maximum is top (overwrites terms); the exps vectorised
    if top == -np.inf:
        return -np.inf
    for i in range(k):
        terms[i] -= top
    exp_nonpositive(terms[:k], bits[:k])
    total = 0.0
    for i in range(k):
        total += terms[i]
    return top + np.log(total)


@numba.njit(inline="always")
def _forward(scores, lo, n, log_init, log_trans, log_dur, log_surv, start, ends, terms, row,
             bits):
    # start[t, a]: log P(x[:t], a segment of a starts at t); ends[t, a]: one of a ends at t
    # (ends[n]: the censored last segment); returns the log-likelihood
    s, dmax = log_trans.shape[0], log_dur.shape[1]
    for a in range(s):
        start[0, a] = log_init[a]
    for t in range(1, n + 1):
        for a in range(s):
            seg, top, nd = 0.0, -np.inf, min(dmax, t)
            for d in range(1, nd + 1):
                seg += scores[lo + t - d, a]
                v = start[t - d, a] + seg + (log_surv[a, d - 1] if t == n else log_dur[a, d - 1])
                terms[d - 1] = v
                top = max(top, v)
            ends[t, a] = _lse(terms, nd, top, bits)
        if t < n:
            for b in range(s):
                top = -np.inf
                for a in range(s):
                    row[a] = ends[t, a] + log_trans[a, b]
                    top = max(top, row[a])
                start[t, b] = _lse(row, s, top, bits)
    top = -np.inf
    for a in range(s):
        row[a] = ends[n, a]
        top = max(top, row[a])
    return _lse(row, s, top, bits)


@numba.njit(inline="always")
def _backward(scores, lo, n, log_trans, log_dur, log_surv, after, gone, terms, row, bits):
    # after[t, a]: log P(x[t:] | a segment of a starts at t); gone[t, a]: | one of a ended at t
    s, dmax = log_trans.shape[0], log_dur.shape[1]
    for t in range(n - 1, -1, -1):
        for a in range(s):
            seg, top, nd = 0.0, -np.inf, min(dmax, n - t)
            for d in range(1, nd + 1):
                seg += scores[lo + t + d - 1, a]
                e = t + d
                v = seg + (log_dur[a, d - 1] + gone[e, a] if e < n else log_surv[a, d - 1])
                terms[d - 1] = v
                top = max(top, v)
            after[t, a] = _lse(terms, nd, top, bits)
        if t > 0:
            for a in range(s):
                top = -np.inf
                for b in range(s):
                    row[b] = log_trans[a, b] + after[t, b]
                    top = max(top, row[b])
                gone[t, a] = _lse(row, s, top, bits)


@numba.njit(HSMM_FOLD_SIGNATURE, nogil=True, cache=on_disk())
def hsmm_fold(scores, offsets, log_init, log_trans, log_dur, log_surv, weights, gamma, ll,
              n_blocks, block_lo, block_hi, part_init, part_trans, part_dur):
    # gamma (n_items, S) receives the row-weighted item posteriors; rows of blocks
    # [block_lo, block_hi) of n_blocks
    n_rows = offsets.size - 1
    s, dmax = log_trans.shape[0], log_dur.shape[1]
    per_block = (n_rows + n_blocks - 1) // n_blocks
    surv = np.exp(log_surv)
    for blk in range(block_lo, block_hi):
        first, stop = blk * per_block, min(n_rows, (blk + 1) * per_block)
        longest = 0
        for r in range(first, stop):
            longest = max(longest, offsets[r + 1] - offsets[r])
        start, ends = np.empty((longest + 1, s)), np.empty((longest + 1, s))
        after, gone = np.empty((longest + 1, s)), np.empty((longest + 1, s))
        diff, run = np.empty((longest + 1, s)), np.empty(s)
        terms, row = np.empty(dmax), np.empty(s)
        bits = np.empty(max(dmax, s), dtype=np.int64)
        censored = np.zeros((s, dmax))
        pd, pt = part_dur[blk], part_trans[blk]
        for r in range(first, stop):
            lo, n = offsets[r], offsets[r + 1] - offsets[r]
            if n == 0:
                ll[r] = 0.0
                continue
            total = _forward(scores, lo, n, log_init, log_trans, log_dur, log_surv, start,
                             ends, terms, row, bits)
            ll[r] = total
            if not np.isfinite(total):
                for t in range(n):
                    for a in range(s):
                        gamma[lo + t, a] = 0.0
                continue
            _backward(scores, lo, n, log_trans, log_dur, log_surv, after, gone, terms, row,
                      bits)
            w = weights[r]
            diff[:n + 1] = 0.0
            for t in range(n):
                for a in range(s):
                    base = start[t, a] - total
                    if base == -np.inf:
                        continue
                    seg, nd = 0.0, min(dmax, n - t)
                    for d in range(1, nd + 1):
                        seg += scores[lo + t + d - 1, a]
                        e = t + d
                        terms[d - 1] = base + seg + (log_dur[a, d - 1] + gone[e, a] if e < n
                                                     else 0.0)
                    exp_nonpositive(terms[:nd], bits[:nd])
                    for d in range(1, nd + 1):
                        e = t + d
                        if e < n:
                            xi = terms[d - 1]
                            pd[a, d - 1] += w * xi
                        else:  # censored: the true duration is any d' >= d (spread below)
                            censored[a, d - 1] += w * terms[d - 1]
                            xi = terms[d - 1] * surv[a, d - 1]
                        diff[t, a] += xi
                        diff[e, a] -= xi
            run[:] = 0.0
            for t in range(n):
                for a in range(s):
                    run[a] += diff[t, a]
                    gamma[lo + t, a] = run[a] * w
            for a in range(s):
                part_init[blk, a] += w * np.exp(log_init[a] + after[0, a] - total)
            for t in range(1, n):
                for a in range(s):
                    if ends[t, a] == -np.inf:
                        continue
                    for b in range(s):
                        pt[a, b] += w * np.exp(ends[t, a] + log_trans[a, b] + after[t, b]
                                               - total)
        for a in range(s):  # a censored segment of elapsed d is any d' >= d, by P(d')
            acc = 0.0
            for d in range(dmax):
                acc += censored[a, d]
                pd[a, d] += acc * np.exp(log_dur[a, d])


@numba.njit(HSMM_LL_SIGNATURE, nogil=True, cache=on_disk())
def hsmm_log_likelihood(scores, offsets, log_init, log_trans, log_dur, log_surv, ll, n_blocks,
                        block_lo, block_hi):
    # the forward pass of the rows of blocks [block_lo, block_hi): scoring without statistics
    n_rows = offsets.size - 1
    s, dmax = log_trans.shape[0], log_dur.shape[1]
    per_block = (n_rows + n_blocks - 1) // n_blocks
    for blk in range(block_lo, block_hi):
        first, stop = blk * per_block, min(n_rows, (blk + 1) * per_block)
        longest = 0
        for r in range(first, stop):
            longest = max(longest, offsets[r + 1] - offsets[r])
        start, ends = np.empty((longest + 1, s)), np.empty((longest + 1, s))
        terms, row = np.empty(dmax), np.empty(s)
        bits = np.empty(max(dmax, s), dtype=np.int64)
        for r in range(first, stop):
            n = offsets[r + 1] - offsets[r]
            ll[r] = 0.0 if n == 0 else _forward(scores, offsets[r], n, log_init, log_trans,
                                                log_dur, log_surv, start, ends, terms, row,
                                                bits)
