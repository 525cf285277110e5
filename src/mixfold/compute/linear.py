"""The fused mixture E-step of families whose log-density is linear in per-row features.

Many families score a row as ``log p_k(x) = coef_k . phi(x) + const_k + table_k[code(x)] +
base(x)``: a Gaussian on ``phi = [(x-c)^2, x-c]``, a diagonal Gaussian on the same per
coordinate, a Poisson on ``phi = [x, -log x!]``, a log-Gaussian on the Gaussian's features of
``log x`` with ``base = -log x``, a categorical through a table of log-probabilities indexed by
the level code. Their sufficient statistics are the same features
summed with the responsibilities: ``sum_i r_ik phi(x_i)``, and a scatter of ``r_ik`` into the
levels for a table. A record of such fields is such a family too: its features are the fields'
features side by side.

:func:`linear_fold` runs a mixture's whole E-step over a chunk for K components of such a family,
block by block of rows on all cores: one GEMM scores all K components (the last feature row is
1 and carries ``log w_k + const_k``), each table adds a gather, a log-sum-exp over components
makes the weighted posteriors, and one more GEMM gives every feature sum and the posterior mass;
tables are summed through one-hot rows in that GEMM (small vocabularies) or by a weighted
``bincount``. When every family bounds its scores (a density's peak), the scores are shifted
by the largest peak inside the first GEMM instead of by each row's maximum. A family takes part
by giving its accumulator class a ``linear_terms(accs, components, enc)`` static method that
returns :class:`LinearTerms` (or ``None`` when its parameters fall outside the form, as a
Poisson of rate 0 does).

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
>>> from mixfold.families._protocol import ArrayEncoded
>>> accs = [PoissonAccumulator() for _ in range(2)]
>>> comps = [PoissonDistribution(1.0), PoissonDistribution(6.0)]
>>> enc = ArrayEncoded(np.array([0, 1, 7, 9]))
>>> terms = PoissonAccumulator.linear_terms(accs, comps, enc)
>>> mass, lse = linear_fold([terms], np.log([0.5, 0.5]), enc, np.ones(4), "float64")
>>> mass.round(3).tolist(), round(float(mass.sum()), 12)
([1.955, 2.045], 4.0)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixfold.compute.feature_cache import cache_for
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.compute.scratch import scratch
from mixfold.compute.encoded import Encoded
from mixfold.compute.logspace import LOG_2PI
from mixfold.precision.bands import FLOAT32_PARTIAL_ROWS, native_dtype

__all__ = ["LinearTerms", "linear_fold", "fold_linear_mixture", "block_rows",
           "centred_gaussian", "uncentred_moments",
           "SCORE_BLOCK_BYTES", "MAX_FUSED_BLOCK_ROWS", "PARTIAL_ROWS", "FLOAT32_SCORE_FLOOR",
           "FLOAT64_SCORE_FLOOR",
           "ONE_HOT_LEVELS"]

#: Bytes of a block's (K, rows) score array, which the log-sum-exp passes over five times: it
#: stays in a core's cache. 2 MiB is 16,384 rows at K=16 in float64 (the fastest on P1; 32,768
#: rows ran 8% slower) and 32,768 at K=8 or in float32 (the fastest on P4 and P7).
SCORE_BLOCK_BYTES = 2 ** 21
#: The most rows a block of the fused E-step takes (larger blocks leave the cache), and the
#: fewest (below that, per-call overhead dominates).
MAX_FUSED_BLOCK_ROWS = 32768
MIN_BLOCK_ROWS = 4096
#: In a float32 E-step, rows per float32 partial sum of the statistics (see the band).
PARTIAL_ROWS = FLOAT32_PARTIAL_ROWS
#: In a float32 E-step, shifted scores (log r_k + log total) below this are raised to it before
#: the exp and e^-60 is taken off after it: what sat there becomes exactly 0 (as float64's
#: underflow gives 0) and every other term moves by 9e-27, nothing at float32's 6e-8
#: resolution. Unfloored, the subnormals below e^-87 made a float32 iteration of P1 4x slower
#: than a float64 one.
FLOAT32_SCORE_FLOOR = -60.0
#: In a float64 E-step, the same floor for shifted scores below -708, whose exp is subnormal or
#: 0: NumPy's SIMD exp computes those lanes one by one, 15x (0) to 100x (subnormal) slower
#: than the rest. What sits there counts 0, as its exp would (at most e^-100 of a row's total,
#: which is at least e^-600: below float64's resolution). The floor costs two passes over the
#: scores, so a fold applies it only when more than :data:`UNDERFLOW_SHARE` of the scores of
#: the first 1/:data:`UNDERFLOW_PROBE` rows of its first block lie below it; the other blocks
#: wait for that decision at their exp (a probe of every block held the GIL there, 2-3% of
#: P1's fold on two threads; a probe of rows spread over the chunk, scored apart, cost 3.5% of
#: P4's). Well-separated components need it: 16 components whose means spread 8 or 20 sd fold
#: 3x faster with it.
FLOAT64_SCORE_FLOOR = -700.0
UNDERFLOW_PROBE = 32
UNDERFLOW_SHARE = 0.02
#: A block scored against one bound of every component's peak (rather than against each row's
#: largest score) is kept when each row's largest shifted score is at least this (checked as
#: a sum of exps of at least K e^this): then every component within the precision's
#: resolution of its row's largest score (37 for float64, 17 for float32) is a normal number
#: above the float32 score floor, exact to rounding. A block with a row below (an outlier, a
#: row nothing scores) is scored again row by row.
PEAK_SHIFT_MARGIN = {np.dtype(np.float64): -600.0,
                     np.dtype(np.float32): FLOAT32_SCORE_FLOOR + 17.0}
#: A table of at most this many levels is summed through one-hot rows added to the statistics
#: GEMM (one comparison per level and row, GIL-free); a larger one by a weighted ``bincount``
#: (which NumPy runs holding the GIL: on P4's 20 levels it kept two threads from beating one).
ONE_HOT_LEVELS = 64


@dataclass(frozen=True)
class LinearTerms:
    """One family's part of ``log p_k(x)`` for K components, and where its sums go.

    ``coef`` (K, F) and ``const`` (K,): the score is ``coef[k] @ phi(x) + const[k]``;
    ``features(lo, hi, out)`` writes ``phi`` of rows ``[lo, hi)`` into ``out`` of shape
    (s, F, (hi - lo) / s) in ``out``'s dtype, row ``lo + i * (hi - lo) / s + j`` into
    ``out[i, :, j]`` (s sub-blocks of consecutive rows; ``None`` when F = 0). ``codes``
    (n_rows,) and ``table`` (K, V) add ``table[k, codes[i]]`` (a categorical); ``base``
    (n_rows,) adds a term that is the same for every component (it moves the log-density, not
    the posteriors).
    ``add_sums(sums, mass, counts)`` adds ``sums`` (K, F) = ``sum_i r_ik phi(x_i)``, the
    posterior mass (K,) and, with a table, ``counts`` (K, V) = ``sum_i r_ik [codes_i = v]``
    to the family's K accumulators (all float64). ``peak`` (K,): an upper bound of
    ``coef[k] @ phi(x) + const[k] + table[k, code(x)]`` over every x (a density's peak, the
    largest log-probability), or ``None`` when there is none (a log-Gaussian's density grows
    without bound near 0: its ``-log x`` is in ``base``). ``source``: the array the features and
    codes are read from, and ``key``: what else they depend on (a centre), hashable; with both,
    a handle that keeps its rows may keep the features between folds
    (:mod:`mixfold.compute.feature_cache`).
    """

    coef: np.ndarray
    const: np.ndarray
    features: Callable[[int, int, np.ndarray], None] | None
    add_sums: Callable[[np.ndarray, np.ndarray, np.ndarray | None], None]
    codes: np.ndarray | None = None
    table: np.ndarray | None = None
    base: np.ndarray | None = None
    peak: np.ndarray | None = None
    source: np.ndarray | None = None
    key: tuple[Any, ...] | None = None

    @property
    def n_features(self) -> int:
        return self.coef.shape[1]


def centred_gaussian(mu: np.ndarray, sigma2: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """K Gaussians with independent coordinates (``mu``, ``sigma2`` of shape (K, D)) as terms
    on the centred features ``[(x-c)^2, x-c]``: (centre c (D,), coefficients (K, 2D), constants
    (K,), peaks (K,)). The centre is the mean of the means rounded to a power-of-two grid no
    finer than the model's spread (its components' variances and the variance of their means):
    the expansion cancels little even far from the origin or in float32, and the centre, so the
    features, stay put from one EM iteration to the next (they can be kept,
    :mod:`mixfold.compute.feature_cache`). A peak is the log-density at the mean.

    >>> c, coef, const, peak = centred_gaussian(np.array([[1.0], [3.0]]), np.array([[1.0], [4.0]]))
    >>> c.tolist(), coef.tolist()
    ([2.0], [[-0.5, -1.0], [-0.125, 0.25]])
    >>> centred_gaussian(np.array([[101.0], [103.3]]), np.array([[1.0], [4.0]]))[0].tolist()
    [102.0]
    """
    prec = 1.0 / sigma2
    k = mu.shape[0]
    center = np.add.reduce(mu) / k
    spread = np.sqrt(np.add.reduce(sigma2 + (mu - center) ** 2) / k)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        grid = np.exp2(np.ceil(np.log2(spread)))
        snapped = np.round(center / grid) * grid
    center = np.where(np.isfinite(snapped) & (grid > 0), snapped, center)
    m = mu - center
    coef = np.concatenate([-0.5 * prec, m * prec], axis=1)
    d = mu.shape[1]
    const = -0.5 * ((m * m * prec).sum(axis=1) + d * LOG_2PI - np.log(prec).sum(axis=1))
    peak = -0.5 * (d * LOG_2PI + np.log(sigma2).sum(axis=1))
    return center, coef, const, peak


def uncentred_moments(center: np.ndarray, mass: np.ndarray, s1: np.ndarray, s2: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(sum r x, sum r x^2), (K, D) each, from the centred sums ``s1 = sum r (x-c)`` and
    ``s2 = sum r (x-c)^2`` (K, D) and the mass ``sum r`` (K,).

    >>> [a.tolist() for a in uncentred_moments(np.array([2.0]), np.array([1.0]),
    ...                                        np.array([[1.0]]), np.array([[1.0]]))]
    [[[3.0]], [[9.0]]]
    """
    w = mass[:, None]
    return s1 + center * w, s2 + 2.0 * center * s1 + center * center * w


def block_rows(k: int, dtype: np.dtype | type) -> int:
    """Rows per block of the fused E-step for K components in ``dtype``: the power of two that
    keeps the (K, rows) scores within :data:`SCORE_BLOCK_BYTES`, between
    :data:`MIN_BLOCK_ROWS` and :data:`MAX_FUSED_BLOCK_ROWS`.

    >>> block_rows(16, np.float64), block_rows(16, np.float32), block_rows(8, np.float64)
    (16384, 32768, 32768)
    """
    rows = SCORE_BLOCK_BYTES // (max(k, 1) * np.dtype(dtype).itemsize)
    return int(min(MAX_FUSED_BLOCK_ROWS, max(MIN_BLOCK_ROWS, 1 << (rows.bit_length() - 1))))


def reduce_components(op: np.ufunc, a: np.ndarray, name: str) -> np.ndarray:
    """``op`` over the component axis of ``a`` (parts, K, rows) -> (parts, rows), as a
    fixed pairwise tree: ~log2 K whole-block calls rather than K - 1 row-sized ones, so the
    calls stay long enough for their GIL-free stretch to dominate; the order is fixed, so
    are the bits. The result is a scratch buffer, never a view of ``a``."""
    parts, rows, p = a.shape
    t = scratch(name, (parts, max(rows // 2, 1), p), a.dtype)
    if rows == 1:
        np.copyto(t[:, 0], a[:, 0])
    src = a
    while rows > 1:  # halve: row j takes row j + h; an odd last row folds into row 0
        h = rows // 2
        op(src[:, :h], src[:, h:2 * h], out=t[:, :h])
        if rows % 2:
            op(t[:, 0], src[:, rows - 1], out=t[:, 0])
        src, rows = t, h
    return t[:, 0]


def linear_fold(terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                weights: np.ndarray, precision: str = "float64"
                ) -> tuple[np.ndarray, np.ndarray]:
    """The whole mixture E-step of a chunk for the families of ``terms`` (the fields of a
    record, or one family), block by block of rows on all cores; the sums go into the
    families' accumulators. Returns (posterior mass per component, per-row log-density).

    Per block, everything in ``precision``: the features ``z = [phi; 1]`` laid out
    (F + 1, rows), all K weighted scores in one GEMM, each table's gather, the log-sum-exp
    over the components (a row every component scores -inf gets no posterior and a
    log-density of -inf), the weighted posteriors ``r``. When every term declares its peaks,
    the scores are shifted by the largest peak within the GEMM and exponentiated as they are;
    a block with a row far below it (:data:`PEAK_SHIFT_MARGIN`) is scored again against each
    row's largest score, as every block is otherwise. Then one GEMM ``z @ r.T`` gives every
    feature sum, the mass and, through one-hot rows of z, the counts of each table of at most
    :data:`ONE_HOT_LEVELS` levels (a larger one's come from a weighted ``bincount``). In float64 the
    GEMM covers the block; in float32 it covers :data:`PARTIAL_ROWS` rows at a time and those
    float32 partial sums are added in float64. Blocks add up in float64 in block order
    (:func:`~mixfold.compute.row_blocks.map_row_blocks`), so the bits do not depend on the number of
    threads. A handle that keeps its rows resident may keep each block's ``z`` from one fold to
    the next (:mod:`mixfold.compute.feature_cache`; every term then gives a ``source`` and ``key``).

    The statistics GEMM of a whole block is ``np.dot``: NumPy holds the GIL through
    ``np.matmul`` with a long inner dimension (measured: two threads ran such a GEMM no faster
    than one); the scoring, the component totals (a short inner dimension) and the statistics
    of float32 sub-blocks (2,048 rows) are one batched ``np.matmul`` each, which releases it
    there. The features and the other steps are element-wise calls over the whole block, few
    and long, for the same reason: each NumPy call hands the GIL over between the row threads.
    """
    dt = native_dtype(precision)
    n, k = enc.n_rows, len(log_weights)
    widths = [t.n_features for t in terms]
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    f = int(offsets[-1])
    # every term bounded above: subtract one bound of all the scores, the largest peak, inside
    # the scoring GEMM, which saves the per-row max and its subtraction (-13% on P1's fold)
    bounded = all(t.peak is not None for t in terms)
    shift = float(np.max(log_weights + sum(t.peak for t in terms))) if bounded else 0.0
    least_total = k * np.exp(PEAK_SHIFT_MARGIN[dt])
    const = sum(t.const for t in terms) + log_weights - shift
    # (K, F+1): the score of component k (minus the shift) is coef_band[k] @ [phi; 1]
    coef_band = np.concatenate([t.coef for t in terms] + [const[:, None]], axis=1).astype(dt)
    # each table: (codes, table in dt, first row of its one-hot indicators in z or None); a
    # small table's counts come out of the statistics GEMM, a large one's out of a bincount
    tables, rows_z = [], f + 1
    for t in terms:
        if t.table is not None:
            hot = t.table.shape[1] <= ONE_HOT_LEVELS
            tables.append((t.codes, t.table.astype(dt), rows_z if hot else None))
            rows_z += t.table.shape[1] if hot else 0
    # a -inf in a table can leave a row with no component that scores it
    may_die = any(not np.isfinite(table).all() for _, table, _ in tables)
    block = block_rows(k, dt)
    if dt == np.float64:
        partial = block
        floor, always = dt.type(FLOAT64_SCORE_FLOOR), False
    else:
        partial = min(block, PARTIAL_ROWS)
        floor, always = dt.type(FLOAT32_SCORE_FLOOR), True
    floor_exp = np.exp(floor)  # the same exp as the block's, so the same bits
    lse = np.empty(n)

    kept = _kept_features(terms, enc, dt, block, partial, rows_z)
    # this fold's scratch buffers, taken once per thread (each block's Python work holds the
    # GIL, and on two threads every such stretch may keep the other thread waiting)
    buffers = threading.local()

    def block_buffers(parts: int, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This thread's (z, scores, totals) for blocks of `parts` sub-blocks of p rows; z's
        ones row is set when they are taken (a block writes only its features, and a padded
        block its padding, ones row included: it gives its buffers up)."""
        got = buffers.__dict__.get((parts, p))
        if got is None:
            z = scratch("linear.z", (parts, rows_z, p), dt)
            z[:, f] = 1.0
            got = buffers.__dict__[(parts, p)] = (
                z, scratch("linear.scores", (parts, k, p), dt),
                scratch("linear.total", (parts, 1, p), dt))
        return got

    def features_of(lo: int, hi: int, z: np.ndarray) -> np.ndarray:
        """``z`` of rows [lo, hi) as `parts` contiguous sub-blocks of p rows (one in float64),
        the last padded with rows of weight 0 and features 0: element-wise steps run once over
        the whole block, the GEMMs once per sub-block. Kept from an earlier fold if it was, else
        written into ``z`` (this thread's buffer, ones row set) or, to be kept, a new array."""
        if kept is not None:
            got = kept.get(lo)
            if got is not None:
                return got
            z = np.empty(z.shape, dt)
            z[:, f] = 1.0
        m = hi - lo
        parts, _, p = z.shape
        for a, b, i, count in sub_blocks(lo, hi, p):
            sub = z[i:i + count, :, :(b - a) // count]
            for t, off in zip(terms, offsets):
                if t.features is not None:
                    t.features(a, b, sub[:, off:off + t.n_features])
            for codes, table, first in tables:
                if first is not None:  # 1.0 where the row's code is the level, else 0.0
                    v = table.shape[1]
                    np.equal(codes[a:b].reshape(count, 1, -1), np.arange(v)[:, None],
                             out=sub[:, first:first + v], casting="unsafe")
        if parts * p > m:  # padding rows score 0 for every component (their ones row too: a
            # constant could underflow every component's exp, and 0/0 would put NaN in the sums)
            z[-1, :, m - (parts - 1) * p:] = 0.0
        if kept is not None:  # (only once whole)
            kept[lo] = z
        return z

    def fold_block(lo: int, hi: int) -> tuple[np.ndarray, list[np.ndarray | None]]:
        try:
            return fold_rows_of(lo, hi)
        finally:
            if lo == 0:  # (a first block that fails must not leave the others waiting)
                floor_decided.set()

    def fold_rows_of(lo: int, hi: int) -> tuple[np.ndarray, list[np.ndarray | None]]:
        m = hi - lo
        parts, p = sub_block_shape(m, partial)
        z, scores, totals = block_buffers(parts, p)
        if parts * p > m:  # (its padding clears the ones row: the next block sets it again)
            del buffers.__dict__[(parts, p)]
        z = features_of(lo, hi, z)
        score_block(lo, hi, z, scores)
        shifted = bounded  # exp(score - shift) needs no per-row max, unless a row sits far below
        if shifted:
            exp_scores(lo, scores)
            total = component_totals(scores, totals)
            if np.minimum.reduce(total.reshape(-1)[:m]) < least_total:
                score_block(lo, hi, z, scores)
                shifted = False
        top = dead = None
        if not shifted:  # against each row's largest score
            top = reduce_components(np.maximum, scores, "linear.top")
            if may_die:
                dead = ~np.isfinite(top)
                if dead.any():
                    top[dead] = 0.0  # its scores stay -inf: exp gives 0, the total 0, log -inf
                else:
                    dead = None
            scores -= top[:, None]
            exp_scores(lo, scores)
            total = component_totals(scores, totals)
        # (the shift is added to all rows at the end); a total is 0 only on a dead row
        if dead is None:
            np.log(total.reshape(-1)[:m], out=lse[lo:hi])
        else:
            with np.errstate(divide="ignore"):
                np.log(total.reshape(-1)[:m], out=lse[lo:hi])
            total[dead] = np.inf  # no posterior for a row nothing scores
        if top is not None:
            lse[lo:hi] += top.reshape(-1)[:m]
        return weighted_sums(lo, hi, z, scores, total)

    ones = np.ones((1, k), dt)

    def component_totals(scores: np.ndarray, totals: np.ndarray) -> np.ndarray:
        """Each row's sum over the components, (parts, p): a ones-row GEMM (one call for all
        sub-blocks), twice as fast as the halving tree of adds (one pass over the scores)."""
        np.matmul(ones, scores, out=totals)
        return totals[:, 0]

    # whether this fold floors its scores: decided by the first block, the others wait for it
    floor_decided = threading.Event()
    floor_decision = [always]

    def floored_at(lo: int, scores: np.ndarray) -> bool:
        if not always and not floor_decided.is_set():
            if lo == 0:
                floor_decision[0] = underflows(scores)
                floor_decided.set()
            else:
                floor_decided.wait()
        return floor_decision[0]

    def exp_scores(lo: int, scores: np.ndarray) -> None:
        # float32: exp below -87 is subnormal, 100x slower to use; float64: below -708, 100x
        # slower to compute, so floored only where a probe of the first block finds such scores
        floored = floored_at(lo, scores)
        if floored:
            np.maximum(scores, floor, out=scores)
        np.exp(scores, out=scores)
        if floored:  # ... and what sat at the floor becomes exactly 0
            scores -= floor_exp

    def underflows(scores: np.ndarray) -> bool:
        """Whether more than UNDERFLOW_SHARE of the scores of the block's first rows (a
        contiguous probe) lie below the floor."""
        probe = scores[:, :, :max(scores.shape[2] // UNDERFLOW_PROBE, 1)]
        return bool(np.count_nonzero(probe < floor) > UNDERFLOW_SHARE * probe.size)

    def score_block(lo: int, hi: int, z: np.ndarray, scores: np.ndarray) -> None:
        """The weighted scores of rows [lo, hi) (minus ``shift``) into ``scores``."""
        np.matmul(coef_band, z[:, :f + 1], out=scores)  # all sub-blocks in one call
        for codes, table, _ in tables:  # all K components' log-probabilities in one take (16%
            # slower alone than K 1-D gathers, 4% faster on P4's two threads: two calls, not 2K)
            gathered = np.take(table, codes[lo:hi], axis=1, mode="clip",
                               out=scratch("linear.gathered", (k, hi - lo), dt))
            for a, b, i, count in sub_blocks(lo, hi, scores.shape[2]):
                scores[i:i + count, :, :(b - a) // count] += \
                    gathered[:, a - lo:b - lo].reshape(k, count, -1).transpose(1, 0, 2)

    def weighted_sums(lo: int, hi: int, z: np.ndarray, scores: np.ndarray,
                      total: np.ndarray) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """From exps and their totals: the weighted posteriors (in ``scores``), then every
        feature sum and the mass (one GEMM) and each large table's counts."""
        parts, _, p = scores.shape
        m = hi - lo
        if parts == 1 and dt == np.float64:  # (the fewer NumPy calls per block, the fewer
            np.divide(weights[lo:hi], total[0], out=total[0])  # waits for the GIL)
        else:
            w = scratch("linear.w", (parts * p,), dt)
            w[:m] = weights[lo:hi]
            w[m:] = 0.0
            np.divide(w.reshape(parts, p), total, out=total)
        scores *= total[:, None]  # the weighted posteriors, (K, rows) per sub-block
        # z @ r.T (the faster order of the same GEMM) per sub-block, added up in float64: one
        # block by np.dot (np.matmul would hold the GIL over its long inner dimension), the
        # sub-blocks of a float32 block by one batched np.matmul (it releases it at 2,048
        # rows; 10% faster on P7's fold than a np.dot per sub-block)
        if parts == 1:
            sums = np.dot(z[0], scores[0].T).astype(np.float64, copy=False)
        else:
            part_sums = np.matmul(z, scores.transpose(0, 2, 1),
                                  out=scratch("linear.part_sums", (parts, rows_z, k), dt))
            sums = np.add.reduce(part_sums, axis=0, dtype=np.float64)
        counts: list[np.ndarray | None] = []
        for codes, table, first in tables:
            if first is not None:
                counts.append(None)
                continue
            v = table.shape[1]
            # one weighted bincount over (component, level) pairs; padding rows weigh 0
            pairs = scratch("linear.pairs", (parts, k, p), np.intp)
            pairs[-1] = 0
            for a, b, i, count in sub_blocks(lo, hi, p):
                np.add(codes[a:b].reshape(count, 1, -1), np.arange(k)[:, None] * v,
                       out=pairs[i:i + count, :, :(b - a) // count])
            counts.append(np.bincount(pairs.reshape(-1), weights=scores.reshape(-1),
                                      minlength=k * v).reshape(k, v))
        return sums, counts

    folded = map_row_blocks(n, block, fold_block)
    lse += shift
    sums = np.sum([s for s, _ in folded], axis=0).T  # (K, rows of z), blocks added in order
    mass = sums[:, f].copy()
    table_counts = iter([np.sum([c[j] for _, c in folded], axis=0) if first is None else
                         sums[:, first:first + table.shape[1]]
                         for j, (_, table, first) in enumerate(tables)])
    for t, off in zip(terms, offsets):
        counts = None if t.table is None else next(table_counts)
        t.add_sums(sums[:, off:off + t.n_features], mass, counts)
    for t in terms:
        if t.base is not None:
            lse += t.base
    return mass, lse


def sub_block_shape(m: int, partial: int) -> tuple[int, int]:
    """(sub-blocks, rows each) of an m-row block cut into sub-blocks of at most ``partial``
    rows, the last one padded.

    >>> sub_block_shape(10, 4), sub_block_shape(3, 4)
    ((3, 4), (1, 3))
    """
    p = min(partial, m)
    return -(-m // p), p


def sub_blocks(lo: int, hi: int, p: int) -> list[tuple[int, int, int, int]]:
    """Rows [lo, hi) as (first row, end row, first sub-block, sub-blocks): the whole
    sub-blocks of p rows in one piece, then the short last one.

    >>> sub_blocks(100, 110, 4)
    [(100, 108, 0, 2), (108, 110, 2, 1)]
    """
    whole = (hi - lo) // p
    pieces = [(lo, lo + whole * p, 0, whole)] if whole else []
    if lo + whole * p < hi:
        pieces.append((lo + whole * p, hi, whole, 1))
    return pieces


def _kept_features(terms: Sequence[LinearTerms], enc: Encoded, dt: np.dtype, block: int,
                   partial: int, rows_z: int) -> dict[int, np.ndarray] | None:
    """The active feature cache's store of this fold's blocks of ``z`` (by first row), when
    every term says what its features depend on and they fit the cache's budget."""
    if any(t.key is None or t.source is None for t in terms):
        return None
    full, rest = divmod(enc.n_rows, block)
    padded_rows = sum(np.prod(sub_block_shape(m, partial)) * count
                      for m, count in ((block, full), (rest, 1)) if m and count)
    nbytes = int(rows_z * dt.itemsize * padded_rows)
    key = ("linear_fold", dt.str, block, partial, tuple(t.key for t in terms))
    return cache_for(key, [t.source for t in terms], nbytes, enc.nbytes)


def fold_linear_mixture(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                        enc: Encoded, weights: np.ndarray, precision: str = "float64"
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """The fused E-step of a mixture of K components of one family with ``linear_terms``
    (:func:`linear_fold` on its terms); ``None`` when its parameters fall outside the form.
    Returns (posterior mass per component, per-row log-density)."""
    terms = type(accs[0]).linear_terms(accs, components, enc)
    return None if terms is None else linear_fold([terms], log_weights, enc, weights, precision)
