"""numba-compiled steps of LDA's variational fixed point, loaded by :mod:`mixfold.compute.kernels`
on the first LDA fold (apart from the HMM kernels, so that neither family compiles the other's).

A step over a piece's documents reads the topic-word columns of every nonzero once per pass:
:func:`lda_norm` the normaliser of each nonzero (``theta_d . beta_w``), :func:`lda_update` each
document's new gamma (``alpha + theta_d * sum_w ratio_w beta_w``); with every topic at hand (no
topic cut) :func:`lda_step` does both in one pass. NumPy needs a copy of each
document's row per nonzero and a sparse product for the same (three passes and a temporary
as large as the columns). The loops run over the topics innermost, contiguous in both operands.
Explicit signatures (contiguous arrays, read-only inputs) keep one cached machine-code version
per kernel; :mod:`mixfold.compute.kernels` hands them contiguous copies of a topic range's slices.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

__all__ = ["lda_norm", "lda_update", "lda_step"]


def _input(dtype: Any, ndim: int, layout: str = "A") -> Any:
    return numba.types.Array(dtype, ndim, layout, readonly=True)


_F8 = numba.float64
#: every array contiguous: the loops over topics are then vectorised
LDA_NORM_SIGNATURE = numba.void(_input(_F8, 2, "C"), _input(_F8, 2, "C"),
                                _input(numba.int64, 1, "C"), _F8[::1])
LDA_UPDATE_SIGNATURE = numba.void(_input(_F8, 2, "C"), _input(_F8, 2, "C"),
                                  _input(numba.int64, 1, "C"), _input(_F8, 1, "C"),
                                  _input(_F8, 1, "C"), _F8[:, ::1])
LDA_STEP_SIGNATURE = LDA_UPDATE_SIGNATURE


@numba.njit(inline="always", fastmath=True)
def _dot(a, b):
    acc = 0.0
    for k in range(a.size):
        acc += a[k] * b[k]
    return acc


@numba.njit(inline="always", fastmath=True)
def _add_scaled(acc, r, col):
    for k in range(acc.size):
        acc[k] += r * col[k]


@numba.njit(inline="always", fastmath=True)
def _gamma_row(out, alpha, theta, acc):
    for k in range(acc.size):
        out[k] = alpha[k] + theta[k] * acc[k]


@numba.njit(LDA_NORM_SIGNATURE, nogil=True, fastmath=True, cache=on_disk())
def lda_norm(theta, cols, sizes, out):
    # out[p] = theta[d] . cols[p] for the nonzeros p of document d (documents in order)
    p = 0
    for d in range(sizes.size):
        t = theta[d]
        for _ in range(sizes[d]):
            out[p] = _dot(t, cols[p])
            p += 1


@numba.njit(LDA_UPDATE_SIGNATURE, nogil=True, fastmath=True, cache=on_disk())
def lda_update(theta, cols, sizes, ratio, alpha, out):
    # out[d] = alpha + theta[d] * sum_p ratio[p] cols[p] over the nonzeros p of document d
    acc = np.empty(cols.shape[1])
    p = 0
    for d in range(sizes.size):
        acc[:] = 0.0
        for _ in range(sizes[d]):
            _add_scaled(acc, ratio[p], cols[p])
            p += 1
        _gamma_row(out[d], alpha, theta[d], acc)


@numba.njit(LDA_STEP_SIGNATURE, nogil=True, fastmath=True, cache=on_disk())
def lda_step(theta, cols, sizes, counts, alpha, out):
    # lda_norm then lda_update in one pass, for all topics at once: a nonzero's columns are
    # read once, still in cache from its normaliser when its share is added
    acc = np.empty(cols.shape[1])
    p = 0
    for d in range(sizes.size):
        acc[:] = 0.0
        t = theta[d]
        for _ in range(sizes[d]):
            col = cols[p]
            _add_scaled(acc, counts[p] / _dot(t, col), col)
            p += 1
        _gamma_row(out[d], alpha, t, acc)
