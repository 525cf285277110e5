"""numba-compiled rescoring of a row block whose components a reduced band has screened
(:mod:`mixfold.compute.screened`), loaded by :mod:`mixfold.compute.kernels` on the first such
fold.

:func:`screen_rescore` takes a block's band scores (K, m) and the rows' exact features (m, F1)
in float32. The components whose band score lies within the row's margin of its best (twice
the band's error bound plus the cutoff) are the row's candidates, scored again in float64
from the exact features and coefficients; the row's log-density (float64, the shift added)
and its weighted posteriors (written into a (K, m) float32 matrix, zero elsewhere, for the
statistics GEMM) come from those scores alone. The best band score and the second run along
the rows (each row a lane); then each row's bound and its best component's float64 score are
dot products of its contiguous features; every row is first written as if it had one
candidate (most rows of separated clusters: no ``exp``, and no branch that the data decides),
then the rows with several are done again, their candidates scored one by one.
"""

from __future__ import annotations

import numba
import numpy as np

from mixfold.compute.kernel_cache import on_disk

from mixfold.compute.numba_bands import exp32, log32

__all__ = ["screen_rescore", "SCREEN_SIGNATURE"]

#: contraction and reordering (the passes vectorise), but no assumption that values are finite:
#: a table's -inf and a dead row stay what they are
_FLAGS = {"contract", "reassoc", "nsz", "arcp", "afn"}

_F4, _F8, _I8 = numba.float32, numba.float64, numba.int64
SCREEN_SIGNATURE = numba.void(_F4[:, ::1], _F4[:, ::1], _F8[:, ::1], _F8[::1], _F8, _F8, _F8,
                              _F8, _F8[:, ::1], _I8[:, ::1], _F8[::1], _F8[::1], _F4[:, ::1],
                              _F8[:, ::1])


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _best_two(scores, top, arg, second):
    # each row's best band score, its component, and the second best (the rows of top: scores
    # may hold padding columns past them)
    k_all, m = scores.shape[0], top.size
    for j in range(m):
        top[j] = -np.inf
        second[j] = -np.inf
        arg[j] = 0
    for c in range(k_all):
        row = scores[c]
        for j in range(m):
            s = row[j]
            second[j] = max(second[j], min(s, top[j]))
            if s > top[j]:
                top[j] = s
                arg[j] = np.int32(c)


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _lowest_candidates(z, cmax, eta, slack, cutoff, top, low):
    # the least band score of a candidate: the best less twice the band's error bound
    # (eta * sum |coef| |z| + slack) and the cutoff; z (m, F1), a row's features contiguous
    m, f1 = z.shape
    for j in range(m):
        zj = z[j]
        bound = 0.0
        for f in range(f1):
            bound += cmax[f] * abs(zj[f])
        low[j] = top[j] - (2.0 * (eta * bound + slack) + cutoff)


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _single_scores(z, coef, arg, exact):
    # every row scored in float64 by the component of its best score: one dot product of the
    # row's features (contiguous) and that component's coefficients
    m, f1 = z.shape
    for j in range(m):
        zj, cj = z[j], coef[arg[j]]
        e = 0.0
        for f in range(f1):
            e += cj[f] * zj[f]
        exact[j] = e


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _rescore_row(scores, z, coef, tables, codes, j, low, cand, exact):
    # row j's candidates and their float64 scores from its features z[j]; returns (how many,
    # the best score)
    n, best = 0, -np.inf
    for c in range(scores.shape[0]):  # (listed without a branch: which are is data)
        cand[n] = c
        n += scores[c, j] >= low
    f1 = z.shape[1]
    for q in range(n):
        c = cand[q]
        e = 0.0
        for f in range(f1):  # (z[j, f], not a view of the row: a third faster, measured)
            e += coef[c, f] * z[j, f]
        for t in range(codes.shape[0]):
            e += tables[c, codes[t, j]]
        exact[q] = e
        best = max(best, e)
    return n, best


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _one_candidate(arg, single, tables, codes, w, shift, top, second, low, lse, posteriors,
                   again):
    # every row as if its best component were its one candidate (its score the log-density,
    # its posterior w), without a branch a row's data decides; returns how many rows are to
    # be done again (several candidates, or none that scores the row), listed in again
    n_again = 0
    for j in range(lse.size):
        c = arg[j]
        e = single[j]
        for t in range(codes.shape[0]):
            e += tables[c, codes[t, j]]
        lse[j] = e + shift
        posteriors[c, j] = w[j] if e > -np.inf else 0.0
        again[n_again] = j
        n_again += (second[j] >= low[j]) | (top[j] == -np.inf)
    return n_again


@numba.njit(SCREEN_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def screen_rescore(scores, z, coef, cmax, eta, slack, cutoff, shift, tables, codes, w, lse,
                   posteriors, counts):
    # scores (K, m) band scores less the shift; z (m, F1) exact features, ones column included;
    # coef (K, F1) float64 (const less the shift in the ones column);
    # tables (K, V) every table side by side, codes (T, m) each table's codes offset to its
    # columns; w (m,) row weights -> lse (m,) log-densities, the shift added; posteriors (K, m)
    # the weighted posteriors (0 off the candidates); counts (K, V) += the table counts (scores
    # may hold padding columns past the m rows of z)
    k_all, m = scores.shape[0], z.shape[0]
    top = np.empty(m, np.float32)
    second = np.empty(m, np.float32)
    arg = np.empty(m, np.int32)
    low = np.empty(m, np.float64)
    single = np.empty(m, np.float64)
    _best_two(scores, top, arg, second)
    _lowest_candidates(z, cmax, eta, slack, cutoff, top, low)
    _single_scores(z, coef, arg, single)
    for c in range(k_all):
        posteriors[c, :] = 0.0
    again = np.empty(m, np.int64)
    n_again = _one_candidate(arg, single, tables, codes, w, shift, top, second, low, lse,
                             posteriors, again)
    n_tables = codes.shape[0]
    if n_tables:
        ones = np.ones(m, np.bool_)
        ones[again[:n_again]] = False
        for t in range(n_tables):
            for j in range(m):
                if ones[j]:
                    c = arg[j]
                    counts[c, codes[t, j]] += posteriors[c, j]
    cand = np.empty(k_all, np.int64)
    exact = np.empty(k_all, np.float64)
    for i in range(n_again):
        j = again[i]
        posteriors[arg[j], j] = 0.0
        if top[j] == -np.inf:  # no component scores the row
            lse[j] = -np.inf
            continue
        n, best = _rescore_row(scores, z, coef, tables, codes, j, low[j], cand, exact)
        if best == -np.inf:
            lse[j] = -np.inf
            continue
        total = np.float32(0.0)
        for q in range(n):  # float32's exp and log: 3e-7 of a posterior, of a log-density
            e = exp32(np.float32(max(exact[q] - best, -80.0)))
            exact[q] = e
            total += e
        lse[j] = best + np.float64(log32(total)) + shift
        scale = w[j] / total
        for q in range(n):
            r = exact[q] * scale
            posteriors[cand[q], j] = r
            for t in range(n_tables):
                counts[cand[q], codes[t, j]] += r


#: Shifted float32 scores at or below this give a posterior of exactly 0 (exp(-60) is far below
#: float32's resolution of a row's total, and no subnormal is formed).
_FLOOR = np.float32(-60.0)
_FLOOR_EXP = np.float32(np.exp(np.float32(-60.0)))
TOP_SIGNATURE = numba.void(_F4[:, ::1], _F4[:, ::1], _F8[:, ::1], _F8, _F8[:, ::1], _I8[:, ::1],
                           _F8[::1], _F8[::1], _F4[:, ::1], _F8[:, ::1])


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _best(scores, top, arg):
    # each row's best score and its component (the rows of top)
    k_all, m = scores.shape[0], top.size
    for j in range(m):
        top[j] = -np.inf
        arg[j] = 0
    for c in range(k_all):
        row = scores[c]
        for j in range(m):
            if row[j] > top[j]:
                top[j] = row[j]
                arg[j] = np.int32(c)


@numba.njit(TOP_SIGNATURE, nogil=True, fastmath=_FLAGS, error_model="numpy", cache=on_disk())
def exact_top_normalise(scores, z, coef, shift, tables, codes, w, lse, posteriors, counts):
    # the float32 band: scores (K, m) are float32 GEMM scores less the shift (tables included);
    # every component's posterior comes from them (exp and totals along the rows), and each
    # row's log-density is its best component's score rescored in float64 from the exact
    # features z (m, F1) (coef (K, F1) float64, tables (K, V), codes (T, m)) plus the log of
    # the total of exp(score - best): the part of a log-density a float32 sum of thousands of
    # nats would miss. -> lse (m,), posteriors (K, m) weighted, counts (K, V) += table counts
    k_all, m = scores.shape[0], z.shape[0]
    top = np.empty(m, np.float32)
    arg = np.empty(m, np.int32)
    total = np.zeros(m, np.float32)
    _best(scores, top, arg)
    for c in range(k_all):
        row, out = scores[c], posteriors[c]
        for j in range(m):
            x = row[j] - top[j]
            # what sits at the floor (a -inf of a table, a dead row's NaN) is exactly 0
            e = exp32(x) - _FLOOR_EXP if x > _FLOOR else np.float32(0.0)
            out[j] = e
            total[j] += e
    _single_scores(z, coef, arg, lse)
    for t in range(codes.shape[0]):
        for j in range(m):
            lse[j] += tables[arg[j], codes[t, j]]
    for j in range(m):  # (along the rows: vectorised; a dead row is mended below)
        lse[j] += np.float64(log32(total[j])) + shift
        total[j] = w[j] / total[j]
    for j in range(m):
        if top[j] == -np.inf:  # no component scores the row: -inf, and no posterior
            lse[j] = -np.inf
            total[j] = 0.0
    for c in range(k_all):
        out = posteriors[c]
        for j in range(m):
            out[j] *= total[j]
    for t in range(codes.shape[0]):
        for c in range(k_all):
            out = posteriors[c]
            for j in range(m):
                counts[c, codes[t, j]] += out[j]
