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

A fold over every topic at once needs none of that: :func:`lda_documents` solves each document
to convergence in one call (its words' rows of the (V, K) table, which stays in cache, gathered
once per document topic-major; its steps and its convergence test those of the range path), and
exp(E[log theta]) with its own digamma (the recurrence up to 10, then the asymptotic series),
with no log per topic: digamma's logs come out as the ratio of the raised arguments, so a step
costs one libm exp per topic. :func:`lda_word_sums` adds the expected counts in the order of
NumPy's sparse product, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

__all__ = ["lda_norm", "lda_update", "lda_step", "lda_documents", "lda_word_sums"]


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


# --- every topic at once: each document solved to convergence in one call ---------------------

#: digamma's argument is raised by its recurrence to at least this before the asymptotic
#: series, whose first omitted term is then under 5e-17
_SERIES_FROM = 10.0
_I8 = numba.int64
LDA_DOCUMENTS_SIGNATURE = numba.void(
    _input(_F8, 2, "C"), _input(_I8, 1, "C"), _input(_F8, 1, "C"), _input(_I8, 1, "C"),
    _input(_F8, 1, "C"), _I8, _F8, _I8, _I8, _F8[:, ::1], _F8[:, ::1], _F8[::1], _I8[::1])


@numba.njit(inline="always", fastmath=True)
def _series_tail(y):
    # digamma(y) - log(y) for y >= _SERIES_FROM: -1/(2y) - sum_k B_2k / (2k y^2k), k <= 7
    z = 1.0 / (y * y)
    poly = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (
        1.0 / 132 - z * (691.0 / 32760 - z / 12.0))))))
    return -0.5 / y - poly


@numba.njit(inline="always", fastmath=True)
def _raised(x):
    # (y, s): y = x + n >= _SERIES_FROM, s = sum of 1 / (x + i) for i < n (digamma's
    # recurrence), carried as one fraction num / den: one division, not n
    num, den = 0.0, 1.0
    while x < _SERIES_FROM:
        num = num * x + den
        den *= x
        x += 1.0
    return x, num / den


@numba.njit(inline="always", fastmath=True)
def _expect(gamma, out):
    # out = exp(E[log theta]) of the Dirichlet(gamma) = exp(digamma(gamma_k) - digamma(total)),
    # the logs of the two raised arguments taken out as their ratio (no log per topic)
    total = 0.0
    for k in range(gamma.size):
        total += gamma[k]
    y_total, s_total = _raised(total)
    shift = _series_tail(y_total) - s_total
    for k in range(gamma.size):
        y, s = _raised(gamma[k])
        out[k] = (y / y_total) * np.exp(_series_tail(y) - s - shift)


@numba.njit(inline="always", fastmath=True)
def _gather(table, words, p0, m, out):
    # out[k, j] = table[words[p0 + j], k]: a document's rows, topic-major (its loops then run
    # over the document's words, contiguous, whatever K)
    for j in range(m):
        row = table[words[p0 + j]]
        for k in range(row.size):
            out[k, j] = row[k]


#: a document's words are padded to a multiple of this (whole SIMD vectors)
_LANES = 8


@numba.njit(inline="always", fastmath=True)
def _normalisers(rows, et, m, out):
    # out[j] = et . rows[:, j], topics four at a time: one pass over the words per four
    k4 = et.size - et.size % 4
    out[:m] = 0.0
    for k in range(0, k4, 4):
        e0, e1, e2, e3 = et[k], et[k + 1], et[k + 2], et[k + 3]
        r0, r1, r2, r3 = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
        for j in range(m):
            out[j] += (e0 * r0[j] + e1 * r1[j]) + (e2 * r2[j] + e3 * r3[j])
    for k in range(k4, et.size):
        e, r = et[k], rows[k]
        for j in range(m):
            out[j] += e * r[j]


@numba.njit(inline="always", fastmath=True)
def _weighted_sums(rows, ratio, m, acc):
    # acc[k] = rows[k, :m] . ratio[:m], topics four at a time
    k4 = acc.size - acc.size % 4
    for k in range(0, k4, 4):
        r0, r1, r2, r3 = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
        t0 = t1 = t2 = t3 = 0.0
        for j in range(m):
            q = ratio[j]
            t0 += r0[j] * q
            t1 += r1[j] * q
            t2 += r2[j] * q
            t3 += r3[j] * q
        acc[k], acc[k + 1], acc[k + 2], acc[k + 3] = t0, t1, t2, t3
    for k in range(k4, acc.size):
        r = rows[k]
        total = 0.0
        for j in range(m):
            total += r[j] * ratio[j]
        acc[k] = total


@numba.njit(inline="always", fastmath=True)
def _sweep(rows, ratio, cnt, et, m, acc):
    # acc[k] = sum_j rows[k, j] * cnt[j] / (et . rows[:, j]): one step of the fixed point
    _normalisers(rows, et, m, ratio)
    for j in range(m):
        ratio[j] = cnt[j] / ratio[j]
    _weighted_sums(rows, ratio, m, acc)


@numba.njit(inline="always")
def _padded(m):
    return (m + _LANES - 1) // _LANES * _LANES


@numba.njit(inline="always", fastmath=True)
def _norms(table, words, p0, m, et, norm):
    for j in range(m):
        norm[p0 + j] = _dot(et, table[words[p0 + j]])


@numba.njit(LDA_DOCUMENTS_SIGNATURE, nogil=True, fastmath=True, error_model="numpy",
            cache=on_disk())
def lda_documents(table, words, counts, offsets, alpha, iterations, tol, first, last, gamma,
                  exp_theta, norm, steps):
    # documents first..last-1, each iterated to convergence (mean |change| < tol) or
    # `iterations`; table (V, K): each word's row of exp(E[log beta]) (shifted per word)
    k = table.shape[1]
    longest = 0
    for d in range(first, last):
        longest = max(longest, offsets[d + 1] - offsets[d])
    longest = _padded(longest)
    rows, ratio, cnt = np.ones((k, longest)), np.empty(longest), np.zeros(longest)
    acc = np.empty(k)
    for d in range(first, last):
        p0, m = offsets[d], offsets[d + 1] - offsets[d]
        g, et = gamma[d], exp_theta[d]
        steps[d] = 0
        if m == 0:  # an empty document's posterior is its prior
            g[:] = alpha
            _expect(g, et)
            continue
        _gather(table, words, p0, m, rows)
        mp = _padded(m)
        rows[:, m:mp] = 1.0  # padding: a positive normaliser times a count of 0
        cnt[:m] = counts[p0:p0 + m]
        cnt[m:mp] = 0.0
        g[:] = 1.0
        _expect(g, et)
        while steps[d] < iterations:
            _sweep(rows, ratio, cnt, et, mp, acc)
            change = 0.0
            for j in range(k):
                v = alpha[j] + et[j] * acc[j]
                change += abs(v - g[j])
                g[j] = v
            steps[d] += 1
            _expect(g, et)
            if change / k < tol:
                break
        _norms(table, words, p0, m, et, norm)


LDA_WORD_SUMS_SIGNATURE = numba.void(
    _input(_F8, 2, "C"), _input(_I8, 1, "C"), _input(_F8, 1, "C"), _input(_I8, 1, "C"),
    _input(_F8, 1, "C"), _input(_F8, 1, "C"), _F8[:, ::1])


@numba.njit(LDA_WORD_SUMS_SIGNATURE, nogil=True, cache=on_disk())
def lda_word_sums(exp_theta, words, counts, offsets, norm, weights, out):
    # out[w] += counts[p] / norm[p] * weights[d] * exp_theta[d] over the nonzeros p (word w) of
    # the documents d in order: each word's sum in NumPy's sparse product's order (no fastmath)
    for d in range(offsets.size - 1):
        et = exp_theta[d]
        for p in range(offsets[d], offsets[d + 1]):
            r = counts[p] / norm[p] * weights[d]
            row = out[words[p]]
            for k in range(et.size):
                row[k] += r * et[k]
