"""Compiled E-step kernels (numba, a core dependency; the NumPy path runs where it is missing).

An HMM's forward-backward recursion is a loop over time steps with a few states each: NumPy pays
a call per step, a compiled loop does not. (A Gaussian mixture's stacked E-step is GEMMs and
vectorised exps, which NumPy already runs at full speed in cache-sized row blocks: see
:mod:`mixfold.compute.row_blocks`.) numba is imported on first use only (never at
``import mixfold``), and the kernels (:mod:`mixfold.compute.numba_kernels`) load their machine
code from numba's on-disk cache: a machine compiles them once, every later process reads them.

The NumPy path stays the reference: tests check that both give the same statistics.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: no lock, concurrent first loads each compile
    fcntl = None

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


def _load_hmm_fold() -> Any:
    """The compiled forward-backward: machine code from numba's on-disk cache, compiled once per
    machine. Processes that start together (mp, Dask, Ray workers on one host) hold a file lock
    around the first load, so one compiles and the others then read its cache."""
    # numba's OpenMP threads spin between calls (300,000 spins by default): on a machine with
    # more runnable threads than cores that spinning stalls every call, while sleeping at once
    # costs a wake-up per parallel region; a short spin keeps both small (read when libgomp
    # starts: before the first kernel)
    os.environ.setdefault("GOMP_SPINCOUNT", "20000")
    if fcntl is None:
        from mixfold.compute.numba_kernels import hmm_fold
        return hmm_fold
    lock_path = os.path.join(tempfile.gettempdir(), f"mixfold-numba-{os.getuid()}.lock")
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        from mixfold.compute.numba_kernels import hmm_fold
    return hmm_fold


def _match_thread_budget() -> None:
    """Use no more kernel threads than the process was given (mp/Dask/Ray/MPI workers set 1)."""
    import numba

    budget = os.environ.get("OMP_NUM_THREADS") or os.environ.get("NUMBA_NUM_THREADS")
    if budget and budget.isdigit():
        numba.set_num_threads(max(1, min(int(budget), numba.config.NUMBA_NUM_THREADS)))


def _vector(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


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
        _KERNELS["hmm"] = _load_hmm_fold()
        _match_thread_budget()
    n_rows = offsets.size - 1
    s = step.shape[0]
    gamma = np.empty(scores.shape)
    ll = np.zeros(n_rows)
    counts = np.zeros(s), np.zeros((s, s)), np.zeros(s)
    n_blocks = max(1, min(n_rows, 64))
    _KERNELS["hmm"](np.asarray(scores, dtype=np.float64),  # any layout: no copy
                    np.ascontiguousarray(offsets, dtype=np.int64), _vector(initial),
                    np.ascontiguousarray(step, dtype=np.float64), _vector(end_factor),
                    _vector(weights), gamma, ll, n_blocks, *counts)
    return (gamma, ll, *counts)
