"""Compiled E-step kernels (numba), used when numba is installed (``pip install "mixfold[fast]"``).

An HMM's forward-backward recursion is a loop over time steps with a few states each: NumPy pays
a call per step, a compiled loop does not. (A Gaussian mixture's stacked E-step is GEMMs and
vectorised exps, which NumPy already runs at full speed in cache-sized row blocks: see
:mod:`mixfold._row_blocks`.) numba is imported on first use only (never at ``import mixfold``)
and its machine code is cached on disk.

The NumPy path stays the reference: tests check that both give the same statistics.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["hmm_forward_backward", "kernels_available"]

_KERNELS: dict[str, Any] = {}
_DISABLED = os.environ.get("MIXFOLD_DISABLE_KERNELS", "") not in ("", "0")


def kernels_available() -> bool:
    """Whether the compiled kernels can be used (numba importable, not disabled)."""
    if _DISABLED:
        return False
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _compile() -> dict[str, Any]:
    # module globals, not closure cells: numba keys its disk cache on a kernel's closure too,
    # and a dispatcher in a cell pickles differently in every process (a miss, a new file)
    global numba, exp_nonpositive
    import numba

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

    @numba.njit(parallel=True, fastmath={"contract"}, cache=True)
    def hmm_fold(scores, offsets, initial, step, end_factor, weights, gamma, ll, n_blocks,
                 init_counts, trans_counts, end_counts):
        # scaled forward-backward, one sequence at a time; gamma (n_items, S) holds the forward
        # variables, then the weighted posteriors; per-block partial counts, reduced in order
        n_rows = offsets.size - 1
        s = step.shape[0]
        part_init = np.zeros((n_blocks, s))
        part_trans = np.zeros((n_blocks, s, s))
        part_end = np.zeros((n_blocks, s))
        per_block = (n_rows + n_blocks - 1) // n_blocks
        for blk in numba.prange(n_blocks):
            g = np.empty(s)
            beta = np.empty(s)
            beta_next = np.empty(s)
            pt = part_trans[blk]
            first, stop = blk * per_block, min(n_rows, (blk + 1) * per_block)
            longest = 0
            for r in range(first, stop):
                longest = max(longest, offsets[r + 1] - offsets[r])
            emis = np.empty((longest, s))  # one buffer per block, reused by its sequences
            bits = np.empty(longest * s, dtype=np.int64)
            scale = np.empty(longest)
            for r in range(first, stop):
                lo = offsets[r]
                hi = offsets[r + 1]
                n = hi - lo
                if n == 0:
                    continue
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
                    # one log per run of scales instead of one per step, flushed long before
                    # the running product could leave float64's range
                    scale_product *= c
                    if not 1e-250 < scale_product < 1e250:
                        total_log += np.log(scale_product)
                        scale_product = 1.0
                total_log += np.log(scale_product)
                end_norm = 0.0
                for a in range(s):
                    end_norm += gamma[hi - 1, a] * end_factor[a]
                ll[r] = total_log + np.log(end_norm)
                w = weights[r]
                if not np.isfinite(ll[r]):
                    for t in range(n):
                        for a in range(s):
                            gamma[lo + t, a] = 0.0
                    continue
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
                for a in range(s):
                    part_init[blk, a] += gamma[lo, a]
                    part_end[blk, a] += gamma[hi - 1, a]
        for blk in range(n_blocks):
            init_counts += part_init[blk]
            trans_counts += part_trans[blk]
            end_counts += part_end[blk]

    return {"hmm": hmm_fold}


def _match_thread_budget() -> None:
    """Use no more kernel threads than the process was given (mp/Dask/Ray/MPI workers set 1)."""
    import numba

    budget = os.environ.get("OMP_NUM_THREADS") or os.environ.get("NUMBA_NUM_THREADS")
    if budget and budget.isdigit():
        numba.set_num_threads(max(1, min(int(budget), numba.config.NUMBA_NUM_THREADS)))


def hmm_forward_backward(scores: np.ndarray, offsets: np.ndarray, initial: np.ndarray,
                         step: np.ndarray, end_factor: np.ndarray,
                         weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Scaled forward-backward of every sequence (rows cut by ``offsets``) in one compiled pass.

    ``scores`` are the emission log-densities of the flat items (n_items, S), ``step`` the
    continue-and-move matrix, ``end_factor`` the terminal law (ones without one). Returns
    (weighted posteriors (n_items, S) in flat order, per-row log-likelihood, initial counts,
    transition counts, terminal counts). Rows without items get log-likelihood 0 here; the
    caller applies the length-0 convention.
    """
    if not _KERNELS:
        _KERNELS.update(_compile())
        _match_thread_budget()
    n_rows = offsets.size - 1
    s = step.shape[0]
    gamma = np.empty(scores.shape)
    ll = np.zeros(n_rows)
    counts = np.zeros(s), np.zeros((s, s)), np.zeros(s)
    n_blocks = max(1, min(n_rows, 64))
    _KERNELS["hmm"](np.asarray(scores, dtype=np.float64),  # any layout: no copy
                    np.ascontiguousarray(offsets, dtype=np.int64), initial, step, end_factor,
                    np.ascontiguousarray(weights, dtype=np.float64), gamma, ll, n_blocks, *counts)
    return (gamma, ll, *counts)
