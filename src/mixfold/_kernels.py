"""Compiled E-step kernels (numba), used when numba is installed (``pip install "mixfold[fast]"``).

NumPy cannot fuse a mixture's E-step: scoring, the log-sum-exp and the weighted sums each stream
the (rows x components) block through memory. A compiled kernel does a row at a time in
registers — score K components, normalise, add the row into K accumulators — with one partial
accumulator per thread, so memory traffic is the data alone. numba is imported on first use only
(never at ``import mixfold``) and its machine code is cached on disk.

The NumPy paths stay the reference: tests check that both give the same statistics.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["diag_mixture_fold", "diag_mixture_scores", "diag_mixture_normalize",
           "diag_mixture_add", "hmm_forward_backward", "kernels_available"]

_KERNELS: dict[str, Any] = {}
_DISABLED = os.environ.get("MIXFOLD_DISABLE_KERNELS", "") not in ("", "0")
#: Rows per parallel block: each thread folds whole blocks into its own partial sums.
BLOCK_ROWS = 4096


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
    import numba

    @numba.njit(parallel=True, fastmath={"contract"}, cache=True)
    def diag_fold(x, weights, center, a_t, b_t, const, n_blocks, block, mass, s1_t, s2_t, lse):
        # parameters are laid out (D, K): the loops over components are contiguous and vectorise
        n, d = x.shape
        k = a_t.shape[1]
        part_mass = np.zeros((n_blocks, k))
        part_s1 = np.zeros((n_blocks, d, k))
        part_s2 = np.zeros((n_blocks, d, k))
        for blk in numba.prange(n_blocks):
            lo = blk * block
            hi = min(n, lo + block)
            z = np.empty(d, dtype=x.dtype)  # the band the scores run in (float32 or float64)
            score = np.empty(k, dtype=x.dtype)
            pm = part_mass[blk]
            p1 = part_s1[blk]
            p2 = part_s2[blk]
            for i in range(lo, hi):
                for j in range(d):
                    z[j] = x[i, j] - center[j]
                for c in range(k):
                    score[c] = const[c]
                for j in range(d):
                    zj = z[j]
                    for c in range(k):
                        score[c] += zj * (a_t[j, c] * zj + b_t[j, c])
                top = score[0]
                for c in range(1, k):
                    top = max(top, score[c])
                total = 0.0  # float64: the normalisation and the statistics accumulate in float64
                for c in range(k):
                    gap = score[c] - top
                    # below e^-64 a component adds nothing to a float64 total >= 1; skipping the
                    # exp also avoids the slow underflow path of far-away components
                    score[c] = np.exp(gap) if gap > -64.0 else 0.0
                    total += score[c]
                lse[i] = top + np.log(total)
                scale = weights[i] / total
                for c in range(k):
                    r = score[c] * scale
                    pm[c] += r
                    score[c] = r
                for j in range(d):
                    zj = np.float64(z[j])
                    zz = zj * zj
                    for c in range(k):
                        p1[j, c] += score[c] * zj
                        p2[j, c] += score[c] * zz
        for blk in range(n_blocks):  # fixed order: results do not depend on thread timing
            mass += part_mass[blk]
            s1_t += part_s1[blk]
            s2_t += part_s2[blk]

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
                        gap = scores[lo + t, a] - top  # e^-64 is nothing next to the top's 1
                        emis[t, a] = np.exp(gap) if gap > -64.0 else 0.0
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
                    total_log += np.log(c)
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

    # The fused pass above in three steps, for model-parallel workers that each own a range of
    # components: the same per-row arithmetic and the same row blocks, so the same bits.

    @numba.njit(fastmath={"contract"}, cache=True)
    def diag_scores(x, center, a_t, b_t, const, start, stop, out):
        # out (K, n): diag_fold's scores of components [start, stop), row by row
        n, d = x.shape
        z = np.empty(d, dtype=x.dtype)
        score = np.empty(stop - start, dtype=x.dtype)
        for i in range(n):
            for j in range(d):
                z[j] = x[i, j] - center[j]
            for c in range(start, stop):
                score[c - start] = const[c]
            for j in range(d):
                zj = z[j]
                for c in range(start, stop):
                    score[c - start] += zj * (a_t[j, c] * zj + b_t[j, c])
            for c in range(start, stop):
                out[c, i] = score[c - start]

    @numba.njit(parallel=True, fastmath={"contract"}, cache=True)
    def diag_normalize(scores, weights, n_blocks, block, resp, mass, lse):
        # diag_fold's normalisation of the (K, n) scores into weighted posteriors resp (K, n)
        k, n = scores.shape
        part_mass = np.zeros((n_blocks, k))
        for blk in numba.prange(n_blocks):
            lo = blk * block
            hi = min(n, lo + block)
            score = np.empty(k, dtype=scores.dtype)
            pm = part_mass[blk]
            for i in range(lo, hi):
                for c in range(k):
                    score[c] = scores[c, i]
                top = score[0]
                for c in range(1, k):
                    top = max(top, score[c])
                total = 0.0
                for c in range(k):
                    gap = score[c] - top
                    score[c] = np.exp(gap) if gap > -64.0 else 0.0
                    total += score[c]
                lse[i] = top + np.log(total)
                scale = weights[i] / total
                for c in range(k):
                    r = score[c] * scale
                    pm[c] += r
                    score[c] = r
                for c in range(k):
                    resp[c, i] = score[c]
        for blk in range(n_blocks):
            mass += part_mass[blk]

    @numba.njit(fastmath={"contract"}, cache=True)
    def diag_add(x, center, resp, start, stop, n_blocks, block, s1_t, s2_t):
        # diag_fold's sums of r z and r z^2 (z = x - center) of components [start, stop),
        # (D, stop - start): per row block, then the blocks in order
        n, d = x.shape
        m = stop - start
        z = np.empty(d, dtype=x.dtype)
        score = np.empty(m, dtype=resp.dtype)
        p1 = np.empty((d, m))
        p2 = np.empty((d, m))
        for blk in range(n_blocks):
            lo = blk * block
            hi = min(n, lo + block)
            p1[:] = 0.0
            p2[:] = 0.0
            for i in range(lo, hi):
                for j in range(d):
                    z[j] = x[i, j] - center[j]
                for c in range(m):
                    score[c] = resp[start + c, i]
                for j in range(d):
                    zj = np.float64(z[j])
                    zz = zj * zj
                    for c in range(m):
                        p1[j, c] += score[c] * zj
                        p2[j, c] += score[c] * zz
            s1_t += p1
            s2_t += p2

    return {"diag": diag_fold, "hmm": hmm_fold, "diag_scores": diag_scores,
            "diag_normalize": diag_normalize, "diag_add": diag_add}


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


def _kernel(name: str) -> Any:
    if not _KERNELS:
        _KERNELS.update(_compile())
        _match_thread_budget()
    return _KERNELS[name]


def diag_mixture_scores(x: np.ndarray, center: np.ndarray, a: np.ndarray, b: np.ndarray,
                        const: np.ndarray, start: int, stop: int, out: np.ndarray) -> None:
    """Step 1 of :func:`diag_mixture_fold` for components ``[start, stop)``: their scores into
    rows ``start:stop`` of ``out`` (K, n), in ``out``'s dtype, bit for bit as the fused pass
    computes them (one thread: model-parallel workers run this side by side)."""
    dt = out.dtype
    _kernel("diag_scores")(np.ascontiguousarray(x, dtype=dt), center.astype(dt),
                           np.ascontiguousarray(a.T, dtype=dt), np.ascontiguousarray(b.T, dtype=dt),
                           const.astype(dt), start, stop, out)


def diag_mixture_normalize(scores: np.ndarray,
                           weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 2: the fused pass's normalisation of all K scores (K, n). Returns (weighted
    posteriors (K, n) in the scores' dtype, mass (K,), per-row log-sum-exp (n,))."""
    k, n = scores.shape
    resp = np.empty_like(scores)
    mass, lse = np.zeros(k), np.empty(n)
    _kernel("diag_normalize")(scores, np.ascontiguousarray(weights, dtype=np.float64),
                              max(1, -(-n // BLOCK_ROWS)), BLOCK_ROWS, resp, mass, lse)
    return resp, mass, lse


def diag_mixture_add(x: np.ndarray, center: np.ndarray, resp: np.ndarray, start: int,
                     stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 3 for components ``[start, stop)``: (sums of r z (m, D), sums of r z^2 (m, D)),
    ``z = x - center``, bit for bit as the fused pass adds them (one thread)."""
    dt = resp.dtype
    n, d = x.shape
    m = stop - start
    s1_t, s2_t = np.zeros((d, m)), np.zeros((d, m))
    _kernel("diag_add")(np.ascontiguousarray(x, dtype=dt), center.astype(dt), resp, start, stop,
                        max(1, -(-n // BLOCK_ROWS)), BLOCK_ROWS, s1_t, s2_t)
    return s1_t.T, s2_t.T


def diag_mixture_fold(x: np.ndarray, weights: np.ndarray, center: np.ndarray, a: np.ndarray,
                      b: np.ndarray, const: np.ndarray,
                      dtype: np.dtype | type = np.float64) -> tuple[np.ndarray, ...]:
    """Fused E-step of a diagonal-Gaussian mixture over rows ``x`` (n, D).

    Scores are ``const_k + sum_j z_j (a_kj z_j + b_kj)`` with ``z = x - center``, computed in
    ``dtype`` (float32 or float64); posteriors are normalised and statistics accumulated in
    float64. Returns (mass (K,), sums of r z (K, D), sums of r z^2 (K, D), per-row
    log-sum-exp (n,)).
    """
    if not _KERNELS:
        _KERNELS.update(_compile())
        _match_thread_budget()
    n, d = x.shape
    k = a.shape[0]
    mass, s1_t, s2_t = np.zeros(k), np.zeros((d, k)), np.zeros((d, k))
    lse = np.empty(n)
    n_blocks = max(1, -(-n // BLOCK_ROWS))
    _KERNELS["diag"](np.ascontiguousarray(x, dtype=dtype),
                     np.ascontiguousarray(weights, dtype=np.float64), center.astype(dtype),
                     np.ascontiguousarray(a.T, dtype=dtype), np.ascontiguousarray(b.T, dtype=dtype),
                     const.astype(dtype), n_blocks, BLOCK_ROWS, mass, s1_t, s2_t, lse)
    return mass, s1_t.T, s2_t.T, lse
