"""Compiled E-step kernels (numba, a core dependency; the NumPy path runs where it is missing).

An HMM's forward-backward recursion is a loop over time steps with a few states each: NumPy pays
a call per step, a compiled loop does not; the same holds for an explicit-duration HMM's
segment recursion (:mod:`mixfold.compute.numba_semi_markov`, whose NumPy reference is
:mod:`mixfold.compute.semi_markov`). LDA's fixed point reads each nonzero's topic columns
twice per step, where NumPy copies each document's row per nonzero and runs a sparse product;
over every topic at once one call solves each document to convergence
(:mod:`mixfold.compute.numba_lda`, loaded on the first LDA fold). A large diagonal Gaussian
mixture's E-step is GEMMs and vectorised exps, which NumPy already runs at full speed in
cache-sized row blocks (:mod:`mixfold.compute.row_blocks`); a small one's (a notebook's few
hundred rows) is some thirty NumPy calls each costing more than its arithmetic, which one
compiled call replaces for diagonal and spherical components
(:mod:`mixfold.compute.numba_mixture`); a full-covariance one's scores and sums at small D are
thin passes per component, which :mod:`mixfold.compute.numba_gaussian` runs over every
component in one read of the rows. The CPU torch engine of the
bands below float64 normalises a block's scores in one compiled call instead of nine torch
operations (:mod:`mixfold.compute.numba_bands`, loaded by that engine). numba is imported on first
use only (never at ``import mixfold``), and the kernels (:mod:`mixfold.compute.numba_kernels`)
load their machine code from numba's on-disk cache: a machine compiles them once, every later
process reads them (:mod:`mixfold.compute.kernel_cache` finds a place that works, or compiles in
memory). The HMM folds' row blocks and LDA's blocks of documents run on the row-block threads
(:mod:`mixfold.compute.row_blocks`: threads that sleep when idle and are re-made after a fork)
where measuring shows they pay; the blocks, not the threads, fix the bits.

The NumPy path stays the reference: tests check that both give the same statistics.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from mixfold.compute.kernel_cache import load_kernel_module
from mixfold.compute.row_blocks import MeasuredThreads, map_row_blocks, row_threads
from mixfold.compute.semi_markov import SegmentLaws, SegmentStatistics

__all__ = ["hmm_forward_backward", "hsmm_forward_backward", "hsmm_log_likelihood", "lda_norm",
           "lda_update", "lda_step", "lda_documents", "lda_word_sums", "kernels_available",
           "band_kernels", "mixture_kernels", "full_gaussian_kernels"]

_KERNELS: dict[str, Any] = {}
#: the HMM fold's row blocks: partial counts per block, added in block order
HMM_BLOCKS = 64
#: items x states^2 below which the HMM fold runs on the calling thread (~0.3 ms of work: less
#: than a scheduler slice that a helper thread may wait on a busy machine)
HMM_SERIAL_WORK = 100_000
_HMM_THREADS = MeasuredThreads()  # threads where they pay, measured per process
_HSMM_THREADS = MeasuredThreads()  # the semi-Markov fold's: its own work per item (S x D)
#: LDA's document blocks (at most), and the nonzeros x topics below which one call runs them
LDA_BLOCKS = 64
LDA_SERIAL_WORK = 100_000
_LDA_THREADS = MeasuredThreads()
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
    theta, cols, sizes = _rows(theta), _rows(cols), np.ascontiguousarray(sizes, np.int64)
    norm = _lda_kernels()["lda_norm"]
    _by_documents(sizes, cols.shape[1], lambda d, e, p, q: norm(
        theta[d:e], cols[p:q], sizes[d:e], out[p:q]))
    return out


def lda_update(theta: np.ndarray, cols: np.ndarray, sizes: np.ndarray, ratio: np.ndarray,
               alpha: np.ndarray, out: np.ndarray) -> None:
    """``out[d] = alpha + theta[d] * sum_p ratio[p] cols[p]`` over document d's nonzeros (LDA's
    gamma update over a topic range), in place (``out`` may be a slice)."""
    target = out if out.flags.c_contiguous else np.empty(out.shape)
    theta, cols, sizes = _rows(theta), _rows(cols), np.ascontiguousarray(sizes, np.int64)
    ratio, alpha, update = _vector(ratio), _vector(alpha), _lda_kernels()["lda_update"]
    _by_documents(sizes, cols.shape[1], lambda d, e, p, q: update(
        theta[d:e], cols[p:q], sizes[d:e], ratio[p:q], alpha, target[d:e]))
    if target is not out:
        out[...] = target


def lda_step(theta: np.ndarray, cols: np.ndarray, sizes: np.ndarray, counts: np.ndarray,
             alpha: np.ndarray, out: np.ndarray) -> None:
    """:func:`lda_norm` and :func:`lda_update` over every topic in one pass (``ratio`` =
    ``counts`` / the normalisers), into ``out`` (documents, topics), C-contiguous."""
    theta, cols, sizes = _rows(theta), _rows(cols), np.ascontiguousarray(sizes, np.int64)
    counts, alpha, step = _vector(counts), _vector(alpha), _lda_kernels()["lda_step"]
    _by_documents(sizes, cols.shape[1], lambda d, e, p, q: step(
        theta[d:e], cols[p:q], sizes[d:e], counts[p:q], alpha, out[d:e]))


def lda_documents(table_rows: np.ndarray, words: np.ndarray, counts: np.ndarray,
                  offsets: np.ndarray, alpha: np.ndarray, iterations: int,
                  tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every document's variational fixed point solved to convergence, one document at a time
    (``table_rows`` (V, K): each word's topic row of exp(E[log beta]); documents as CSR
    ``offsets``, ``words``, ``counts``): (gamma (n, K), exp(E[log theta]) (n, K), each
    nonzero's normaliser (nnz,), each document's iterations (n,))."""
    n, k = offsets.size - 1, table_rows.shape[1]
    gamma, exp_theta = np.empty((n, k)), np.empty((n, k))
    norm, steps = np.empty(words.shape[0]), np.empty(n, dtype=np.int64)
    args = (np.ascontiguousarray(table_rows, dtype=np.float64),
            np.ascontiguousarray(words, dtype=np.int64), _vector(counts),
            np.ascontiguousarray(offsets, dtype=np.int64), _vector(alpha), int(iterations),
            float(tol))
    solve = _lda_kernels()["lda_documents"]
    _by_documents(np.diff(offsets), k, lambda d, e, p, q: solve(
        *args, d, e, gamma, exp_theta, norm, steps))
    return gamma, exp_theta, norm, steps


def lda_word_sums(exp_theta: np.ndarray, words: np.ndarray, counts: np.ndarray,
                  offsets: np.ndarray, norm: np.ndarray, weights: np.ndarray,
                  n_words: int) -> np.ndarray:
    """(V, K): each word's sum over its nonzeros of ``counts / norm * weights[doc] *
    exp_theta[doc]`` (LDA's expected topic-word counts before the table's factor), every word's
    terms added in document order."""
    out = np.zeros((n_words, exp_theta.shape[1]))
    _lda_kernels()["lda_word_sums"](
        _rows(exp_theta), np.ascontiguousarray(words, dtype=np.int64), _vector(counts),
        np.ascontiguousarray(offsets, dtype=np.int64), _vector(norm), _vector(weights), out)
    return out


def _by_documents(sizes: np.ndarray, n_topics: int,
                  call: Callable[[int, int, int, int], None]) -> None:
    """``call(d, e, p, q)`` for blocks of documents ``[d, e)`` owning nonzeros ``[p, q)``,
    cut to about equal nonzeros, on the row threads where that pays (every document's result
    is its own: the cut never changes the bits), else in one call."""
    starts = np.zeros(sizes.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    work = int(starts[-1]) * n_topics
    if row_threads() <= 1 or work < LDA_SERIAL_WORK or sizes.size < 2:
        call(0, sizes.size, 0, int(starts[-1]))
        return
    cuts = np.unique(np.searchsorted(starts, np.linspace(0, starts[-1], LDA_BLOCKS + 1)))
    cuts = np.unique(np.concatenate([[0], np.minimum(cuts, sizes.size), [sizes.size]]))
    blocks = [(int(d), int(e), int(starts[d]), int(starts[e])) for d, e in zip(cuts, cuts[1:])]
    threaded = _LDA_THREADS.threaded(work)
    per_task = max(1, len(blocks) // (4 * row_threads())) if threaded else len(blocks)
    _LDA_THREADS.timed(work, threaded, lambda: map_row_blocks(
        len(blocks), per_task, lambda lo, hi: [call(*b) for b in blocks[lo:hi]]))


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` row-major (a topic range's slice is copied: the kernels' loops then vectorise)."""
    return np.ascontiguousarray(a, dtype=np.float64)


def _lda_kernels() -> dict[str, Any]:
    if "lda_norm" not in _KERNELS:
        lda = load_kernel_module("mixfold.compute.numba_lda")
        _KERNELS.update(lda_norm=lda.lda_norm, lda_update=lda.lda_update, lda_step=lda.lda_step,
                        lda_documents=lda.lda_documents, lda_word_sums=lda.lda_word_sums)
    return _KERNELS


def band_kernels() -> dict[str, Any] | None:
    """The compiled kernels of the CPU band engines (``screen_rescore`` of
    :mod:`mixfold.compute.numba_screen`; ``band_pairs_layout`` of
    :mod:`mixfold.compute.numba_bands` for the AMX tiles), loaded on the first call; ``None``
    where the kernels cannot be used (the engine then runs NumPy's operations)."""
    if not kernels_available():
        return None
    if "screen_rescore" not in _KERNELS:
        bands = load_kernel_module("mixfold.compute.numba_bands")
        screen = load_kernel_module("mixfold.compute.numba_screen")
        _KERNELS.update(band_pairs_layout=bands.band_pairs_layout,
                        band_rows_pairs_layout=bands.band_rows_pairs_layout,
                        screen_rescore=screen.screen_rescore,
                        exact_top_normalise=screen.exact_top_normalise)
    return _KERNELS


def mixture_kernels() -> dict[str, Any] | None:
    """The compiled small-mixture E-steps (``diagonal_estep``, ``tied_estep`` and the stack's
    ``stack_centre`` of :mod:`mixfold.compute.numba_mixture`) and its diagonal M-step's
    ``diagonal_moments``, loaded on the first call;
    ``None`` where the kernels cannot be used (the E-step then runs NumPy's operations)."""
    if not kernels_available():
        return None
    if "diagonal_estep" not in _KERNELS:
        mixture = load_kernel_module("mixfold.compute.numba_mixture")
        _KERNELS.update(diagonal_estep=mixture.diagonal_estep, tied_estep=mixture.tied_estep,
                        stack_centre=mixture.stack_centre,
                        diagonal_moments=mixture.diagonal_moments)
    return _KERNELS


def full_gaussian_kernels() -> dict[str, Any] | None:
    """The compiled float64 passes of stacked full-covariance Gaussians (``full_squares``,
    ``full_moments``, their fused ``full_fold``, the row normalisation ``normalise_scores``, and
    around BLAS's products at wider D ``centred_columns``, ``whitened_squares``,
    ``whitened_fold`` and ``weighted_rows``, the sums' ``reference_point`` and the M-step's
    ``factor_covariances`` of
    :mod:`mixfold.compute.numba_gaussian`), loaded on the first call;
    ``None`` where the kernels cannot be used (the NumPy passes run instead)."""
    if not kernels_available():
        return None
    if "full_squares" not in _KERNELS:
        gaussian = load_kernel_module("mixfold.compute.numba_gaussian")
        _KERNELS.update(full_squares=gaussian.full_squares, full_moments=gaussian.full_moments,
                        full_fold=gaussian.full_fold, normalise_scores=gaussian.normalise_scores,
                        reference_point=gaussian.reference_point,
                        factor_covariances=gaussian.factor_covariances,
                        centred_columns=gaussian.centred_columns,
                        whitened_squares=gaussian.whitened_squares,
                        whitened_fold=gaussian.whitened_fold,
                        weighted_rows=gaussian.weighted_rows)
    return _KERNELS


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
        _KERNELS["hmm"] = load_kernel_module("mixfold.compute.numba_kernels").hmm_fold
    n_rows = offsets.size - 1
    s = step.shape[0]
    gamma = np.empty(scores.shape)
    ll = np.zeros(n_rows)
    n_blocks = max(1, min(n_rows, HMM_BLOCKS))  # the blocks fix the bits, not the threads
    parts = np.zeros((n_blocks, s)), np.zeros((n_blocks, s, s)), np.zeros((n_blocks, s))
    args = (np.asarray(scores, dtype=np.float64),  # any layout: no copy
            np.ascontiguousarray(offsets, dtype=np.int64), _vector(initial),
            np.ascontiguousarray(step, dtype=np.float64), _vector(end_factor),
            _vector(weights), gamma, ll, n_blocks)
    fold = _KERNELS["hmm"]
    work = scores.shape[0] * s * s
    if row_threads() <= 1 or work < HMM_SERIAL_WORK:
        fold(*args, 0, n_blocks, *parts)
    else:  # about four tasks per thread: a thread the OS slows takes fewer
        per_task = max(1, n_blocks // (4 * row_threads()))
        threaded = _HMM_THREADS.threaded(work)
        _HMM_THREADS.timed(work, threaded, lambda: map_row_blocks(
            n_blocks, per_task if threaded else n_blocks,
            lambda lo, hi: fold(*args, lo, hi, *parts)))
    return (gamma, ll, *(p.sum(axis=0) for p in parts))  # blocks added in order



def hsmm_forward_backward(scores: np.ndarray, offsets: np.ndarray, laws: SegmentLaws,
                          weights: np.ndarray) -> SegmentStatistics:
    """The explicit-duration forward-backward of every sequence in one compiled pass (the
    lattice and the results of :func:`mixfold.compute.semi_markov.segment_forward_backward`,
    its NumPy reference), row blocks on the row threads where that pays."""
    s, dmax = laws.log_dur.shape
    gamma, ll = np.empty(scores.shape), np.zeros(offsets.size - 1)
    n_blocks = max(1, min(offsets.size - 1, HMM_BLOCKS))
    parts = np.zeros((n_blocks, s)), np.zeros((n_blocks, s, s)), np.zeros((n_blocks, s, dmax))
    fold = _semi_markov_kernels().hsmm_fold
    args = (*_semi_markov_inputs(scores, offsets, laws), _vector(weights), gamma, ll, n_blocks)
    _semi_markov_blocks(scores.shape[0] * s * dmax, n_blocks,
                        lambda lo, hi: fold(*args, lo, hi, *parts))
    return SegmentStatistics(gamma, ll, *(p.sum(axis=0) for p in parts))  # blocks in order


def hsmm_log_likelihood(scores: np.ndarray, offsets: np.ndarray,
                        laws: SegmentLaws) -> np.ndarray:
    """The per-row log-likelihood of :func:`hsmm_forward_backward` from its forward pass
    alone (scoring rows: a third of the fold's work)."""
    ll = np.zeros(offsets.size - 1)
    n_blocks = max(1, min(offsets.size - 1, HMM_BLOCKS))
    forward = _semi_markov_kernels().hsmm_log_likelihood
    args = (*_semi_markov_inputs(scores, offsets, laws), ll, n_blocks)
    _semi_markov_blocks(scores.shape[0] * laws.log_dur.size // 3, n_blocks,
                        lambda lo, hi: forward(*args, lo, hi))
    return ll


def _semi_markov_kernels() -> Any:
    if "semi_markov" not in _KERNELS:
        _KERNELS["semi_markov"] = load_kernel_module("mixfold.compute.numba_semi_markov")
    return _KERNELS["semi_markov"]


def _semi_markov_inputs(scores: np.ndarray, offsets: np.ndarray,
                        laws: SegmentLaws) -> tuple[np.ndarray, ...]:
    return (np.asarray(scores, dtype=np.float64),  # any layout: no copy
            np.ascontiguousarray(offsets, dtype=np.int64), _vector(laws.log_init),
            *(np.ascontiguousarray(a, dtype=np.float64)
              for a in (laws.log_trans, laws.log_dur, laws.log_surv)))


def _semi_markov_blocks(work: int, n_blocks: int, run: Callable[[int, int], None]) -> None:
    """``run(lo, hi)`` over the row blocks, on the row threads where measuring shows they
    pay (about four tasks per thread), else in one call."""
    if row_threads() <= 1 or work < HMM_SERIAL_WORK:
        run(0, n_blocks)
        return
    threaded = _HSMM_THREADS.threaded(work)
    per_task = max(1, n_blocks // (4 * row_threads())) if threaded else n_blocks
    _HSMM_THREADS.timed(work, threaded, lambda: map_row_blocks(n_blocks, per_task, run))
