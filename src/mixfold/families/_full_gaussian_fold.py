"""A full-covariance (or tied) Gaussian mixture's float64 E-step in one compiled pass over the
rows (``full_fold`` of :mod:`mixfold.compute.numba_gaussian`): each chunk of rows scored under
every component, normalised into posteriors and added to the sums while it is in cache, so the
(rows, K) scores never make the round trips through memory that the three steps' NumPy calls
make.

Every step has the arithmetic of the three steps' own compiled calls -- the stack's squares,
its row normalisation (:func:`~mixfold.compute.logspace.normalise_rows_compiled`, which every
path of this mixture's fold uses), the stacked update's sums in its row blocks -- so the fold
gives their bits, and the model-parallel column fold's (a range of components scored and added
apart). The posteriors are written out: their column sums are the posterior masses, summed as
the three steps sum them.

Wider rows of a small chunk (:func:`whitened_full_fold`): the rows whitened by BLAS (a GEMM per
component, as the stack's scores make them), then one compiled pass scores and normalises them,
and the sums are the stacked update's (per component a compiled pass and BLAS's rank-k update):
again the three steps' bits, in a handful of calls where the three steps make dozens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.logspace import LOG_2PI
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.compute.scratch import scratch
from mixfold.families._full_gaussian_moments import (COMPILED_SCORES_MAX_DIM, BlockMoments,
                                                     add_block_moments, add_rank_k,
                                                     compiled_passes, compiled_rows)
from mixfold.families._full_gaussian_stack import (stack_centre, stack_constants, whiten_rows,
                                                   whitened_block_rows, whitened_terms,
                                                   whitening_terms)
from mixfold.families._missing import has_missing

__all__ = ["fused_full_fold", "whitened_full_fold", "fused_full_parts", "whitened_full_parts"]


def fused_full_fold(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                    enc: Any, weights: np.ndarray, block_rows: int
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """(posterior mass per component (K,), per-row log-density (n_rows,)) of complete float64
    rows, the sums added to ``accs`` about the stack's reference point in blocks of
    ``block_rows`` rows (the stacked update's); ``None``, nothing added, where the compiled
    sums do not take rows this wide, rows miss entries, or a row has no finite score (the
    three steps then run, and report it)."""
    return _handed_over(accs, fused_full_parts(accs[0].stack_reference, components,
                                               log_weights, enc, weights, block_rows))


def _handed_over(accs: Sequence[Any], folded: tuple[Any, ...] | None
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """A pass's row blocks' sums added to ``accs`` about its point, in block order, as the
    stacked update adds them: (posterior masses, per-row log-density), or ``None``."""
    if folded is None:
        return None
    parts, point, mass, lse = folded
    for acc in accs:
        acc.set_reference(point)
    for part in parts:
        add_block_moments(accs, part, point)
    return mass, lse


def fused_full_parts(reference: Any, components: Sequence[Any], log_weights: np.ndarray,
                     enc: Any, weights: np.ndarray, block_rows: int
                     ) -> tuple[list[BlockMoments], np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`fused_full_fold`'s pass before its hand-over: (each row block's sums, the point
    ``reference(components)[0]`` they are about, the posterior masses, the per-row
    log-density), or ``None`` where it declines."""
    x = enc.values
    kernels = None if has_missing(enc) else compiled_passes(x.shape[1])
    if kernels is None:
        return None
    x = np.ascontiguousarray(x, dtype=np.float64)
    (n, d), k = x.shape, len(components)
    center = stack_centre(components)
    offsets, factors = whitening_terms(components, center)
    const = np.array([c.log_det_precision_cholesky for c in components]) - 0.5 * d * LOG_2PI
    point = reference(components)[0]
    # the posteriors by component (K, n): the transpose of the three steps' Fortran (n, K)
    resp_t = scratch("mvg.fused_resp", (k, n))
    top, total = scratch("mvg.fused_top", (n,)), scratch("mvg.fused_total", (n,))
    args = (x, center, offsets, factors, const,
            np.ascontiguousarray(log_weights, dtype=np.float64),
            np.ascontiguousarray(weights, dtype=np.float64), np.array(point, dtype=np.float64))

    def fold_block(lo: int, hi: int) -> BlockMoments | None:
        out = BlockMoments(np.empty(k), np.empty((k, d)), np.empty((k, d, d)))
        ok = kernels["full_fold"](*args, lo, hi, resp_t, top, total, out.mass, out.sum_x,
                                  out.sum_xx)
        return out if ok else None

    parts = map_row_blocks(n, block_rows, fold_block)
    if any(part is None for part in parts):
        return None
    return parts, point, resp_t.T.sum(axis=0), top + np.log(total)


def whitened_full_fold(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                       enc: Any, weights: np.ndarray, block_rows: int
                       ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`fused_full_fold` of rows wider than the compiled scores take, in one block of
    rows (at most :func:`~mixfold.families._full_gaussian_stack.whitened_block_rows` and
    ``block_rows``, the stacked update's): each component's whitened rows by one GEMM, their
    scores and posteriors by one compiled pass (``whitened_fold``), the sums by
    :func:`block_moments`; ``None``, nothing added, outside that form (narrower or more rows,
    rows that miss entries, a tied stack, no numba) or where a row has no finite score (the
    three steps then run, and report it)."""
    return _handed_over(accs, whitened_full_parts(accs[0].stack_reference, components,
                                                  log_weights, enc, weights, block_rows))


def whitened_full_parts(reference: Any, components: Sequence[Any], log_weights: np.ndarray,
                        enc: Any, weights: np.ndarray, block_rows: int
                        ) -> tuple[list[BlockMoments], np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`whitened_full_fold`'s pass before its hand-over, as :func:`fused_full_parts`."""
    x = enc.values
    (n, d), k = x.shape, len(components)
    kernels = compiled_rows()
    shared = components[0].precision_cholesky
    if kernels is None or d <= COMPILED_SCORES_MAX_DIM or n > min(whitened_block_rows(d),
                                                                  block_rows) \
            or has_missing(enc) or (k > 1 and all(c.precision_cholesky is shared
                                                  for c in components)):
        return None
    x = np.ascontiguousarray(x, dtype=np.float64)
    center = stack_centre(components)
    factors, offsets = whitened_terms(components, center)
    const = stack_constants(components, d)
    point = np.array(reference(components)[0], dtype=np.float64)
    resp_t = scratch("mvg.fused_resp", (k, n))
    top, total = np.empty(n), np.empty(n)
    log_weights = np.ascontiguousarray(log_weights, dtype=np.float64)
    weights = np.ascontiguousarray(weights, dtype=np.float64)

    def fold_block(lo: int, hi: int) -> BlockMoments | None:
        yt = scratch("mvg.whitened", (k, d, n))
        whiten_rows(kernels, x, center, 0, n, factors, yt)
        out = BlockMoments(np.empty(k), np.empty((k, d)), np.empty((k, d, d)))
        rooted = scratch("mvg.rooted", (k, n, d))
        # the posteriors, then the stacked update's sums of them (block_moments' calls)
        if not kernels["whitened_fold"](yt, offsets, const, log_weights, weights, resp_t, top,
                                        total, x, point, out.mass, out.sum_x, rooted):
            return None
        add_rank_k(rooted, out.sum_xx)
        return out

    # one block, as the three steps score and add it (BLAS held as they hold it)
    part = map_row_blocks(n, n, fold_block)[0]
    if part is None:
        return None
    return [part], point, resp_t.T.sum(axis=0), top + np.log(total)
