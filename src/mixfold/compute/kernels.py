"""Compiled E-step kernels (numba, a core dependency; the NumPy path runs where it is missing).

An HMM's forward-backward recursion is a loop over time steps with a few states each: NumPy pays
a call per step, a compiled loop does not. LDA's fixed point reads each nonzero's topic columns
twice per step, where NumPy copies each document's row per nonzero and runs a sparse product
(:mod:`mixfold.compute.numba_lda`, loaded on the first LDA fold). (A Gaussian mixture's
stacked E-step is GEMMs and vectorised exps, which NumPy already runs at full speed in
cache-sized row blocks: see :mod:`mixfold.compute.row_blocks`.) The CPU torch engine of the
bands below float64 normalises a block's scores in one compiled call instead of nine torch
operations (:mod:`mixfold.compute.numba_bands`, loaded by that engine). numba is imported on first
use only (never at ``import mixfold``), and the kernels (:mod:`mixfold.compute.numba_kernels`)
load their machine code from numba's on-disk cache: a machine compiles them once, every later
process reads them.

The NumPy path stays the reference: tests check that both give the same statistics.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: no lock, concurrent first loads each compile
    fcntl = None

__all__ = ["hmm_forward_backward", "lda_norm", "lda_update", "lda_step", "kernels_available",
           "band_kernels"]

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


def lda_norm(theta: np.ndarray, cols: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each nonzero's ``theta[d] . cols[p]`` (LDA's per-word normaliser over a topic range):
    ``theta`` (documents, topics), ``cols`` (nonzeros, topics), document d owning the next
    ``sizes[d]`` nonzeros."""
    out = np.empty(cols.shape[0])
    _lda_kernels()["lda_norm"](_rows(theta), _rows(cols), np.ascontiguousarray(sizes, np.int64),
                               out)
    return out


def lda_update(theta: np.ndarray, cols: np.ndarray, sizes: np.ndarray, ratio: np.ndarray,
               alpha: np.ndarray, out: np.ndarray) -> None:
    """``out[d] = alpha + theta[d] * sum_p ratio[p] cols[p]`` over document d's nonzeros (LDA's
    gamma update over a topic range), in place (``out`` may be a slice)."""
    target = out if out.flags.c_contiguous else np.empty(out.shape)
    _lda_kernels()["lda_update"](_rows(theta), _rows(cols),
                                 np.ascontiguousarray(sizes, np.int64), _vector(ratio),
                                 _vector(alpha), target)
    if target is not out:
        out[...] = target


def lda_step(theta: np.ndarray, cols: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
             alpha: np.ndarray, out: np.ndarray) -> None:
    """:func:`lda_norm` and :func:`lda_update` over every topic in one pass (``ratio`` =
    ``counts`` / the normalisers), into ``out`` (documents, topics), C-contiguous."""
    _lda_kernels()["lda_step"](_rows(theta), _rows(cols), np.ascontiguousarray(sizes, np.int64),
                               _vector(counts), _vector(alpha), out)


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` row-major (a topic range's slice is copied: the kernels' loops then vectorise)."""
    return np.ascontiguousarray(a, dtype=np.float64)


def _lda_kernels() -> dict[str, Any]:
    if "lda_norm" not in _KERNELS:
        with _first_load_lock():
            from mixfold.compute.numba_lda import lda_norm, lda_step, lda_update
        _KERNELS.update(lda_norm=lda_norm, lda_update=lda_update, lda_step=lda_step)
    return _KERNELS


def band_kernels() -> dict[str, Any] | None:
    """The compiled kernels of the CPU band engines (``screen_rescore`` of
    :mod:`mixfold.compute.numba_screen`; ``band_pairs_layout`` of
    :mod:`mixfold.compute.numba_bands` for the AMX tiles), loaded on the first call; ``None``
    where the kernels cannot be used (the engine then runs NumPy's operations)."""
    if not kernels_available():
        return None
    if "screen_rescore" not in _KERNELS:
        with _first_load_lock():
            from mixfold.compute.numba_bands import band_pairs_layout
            from mixfold.compute.numba_screen import screen_rescore
        _KERNELS.update(band_pairs_layout=band_pairs_layout, screen_rescore=screen_rescore)
    return _KERNELS


@contextlib.contextmanager
def _first_load_lock() -> Iterator[None]:
    """A file lock held around a kernel module's first import (compile or cache read), so that
    processes starting together compile once and the others read the cache; none off POSIX."""
    if fcntl is None:
        yield
        return
    with open(os.path.join(tempfile.gettempdir(), f"mixfold-numba-{os.getuid()}.lock"),
              "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _load_hmm_fold() -> Any:
    """The compiled forward-backward: machine code from numba's on-disk cache, compiled once per
    machine. Processes that start together (mp, Dask, Ray workers on one host) hold a file lock
    around the first load, so one compiles and the others then read its cache."""
    # numba's OpenMP threads spin between calls (300,000 spins by default): on a machine with
    # more runnable threads than cores that spinning stalls every call, while sleeping at once
    # costs a wake-up per parallel region; a short spin keeps both small (read when libgomp
    # starts: before the first kernel)
    os.environ.setdefault("GOMP_SPINCOUNT", "20000")
    with _first_load_lock():
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
    if "hmm" not in _KERNELS:
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
