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

__all__ = ["diag_mixture_fold", "kernels_available"]

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

    return {"diag": diag_fold}


def _match_thread_budget() -> None:
    """Use no more kernel threads than the process was given (mp/Dask/Ray/MPI workers set 1)."""
    import numba

    budget = os.environ.get("OMP_NUM_THREADS") or os.environ.get("NUMBA_NUM_THREADS")
    if budget and budget.isdigit():
        numba.set_num_threads(max(1, min(int(budget), numba.config.NUMBA_NUM_THREADS)))


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
