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

import functools
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixfold.compute.feature_cache import cache_for
from mixfold.compute.row_blocks import FirstBlockDecision, map_row_blocks
from mixfold.compute.scratch import scratch
from mixfold.compute.encoded import Encoded
from mixfold.compute.logspace import LOG_2PI
from mixfold.precision.bands import FLOAT32_PARTIAL_ROWS, native_dtype
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["LinearTerms", "linear_fold", "fold_linear_mixture", "block_rows",
           "feature_offsets", "peak_shift", "box_peak", "feature_ranges", "score_coefficients",
           "host_features", "hand_sums", "centred_gaussian", "gaussian_centre",
           "SCORE_BLOCK_BYTES", "MAX_FUSED_BLOCK_ROWS", "PARTIAL_ROWS", "FLOAT32_SCORE_FLOOR",
           "FLOAT64_SCORE_FLOOR",
           "ONE_HOT_LEVELS"]

# Tuning constants of the fused E-step, each measured (benchmarks/README.md, "tuning constants
# of the fused E-step"):
#: Bytes of a block's (K, rows) scores: the log-sum-exp passes over them five times, in cache.
SCORE_BLOCK_BYTES = 2 ** 21
#: The most rows of a block: larger blocks fall out of cache.
MAX_FUSED_BLOCK_ROWS = 32768
#: The fewest rows of a block: below it, per-call overhead dominates.
MIN_BLOCK_ROWS = 4096
#: In a float32 E-step, rows per float32 partial sum of the statistics (see the band).
PARTIAL_ROWS = FLOAT32_PARTIAL_ROWS
#: float32 floor of shifted scores before the exp (e^-60 taken off after): no subnormal is formed.
FLOAT32_SCORE_FLOOR = -60.0
#: float64 floor of shifted scores: NumPy's SIMD exp computes lanes below -708 one by one.
FLOAT64_SCORE_FLOOR = -700.0
#: A float64 fold probes the first 1/this of its first block's rows for scores below the floor.
UNDERFLOW_PROBE = 32
#: ... and floors every block when more than this share of the probe lies below it.
UNDERFLOW_SHARE = 0.02
#: A block scored against the largest peak is kept if each row's largest shifted score is above.
PEAK_SHIFT_MARGIN = {np.dtype(np.float64): -600.0,
                     np.dtype(np.float32): FLOAT32_SCORE_FLOOR + 17.0}
#: Tables of at most this many levels are summed by one-hot rows in the GEMM (GIL-free), larger
#: ones by a weighted ``bincount`` (which holds the GIL).
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


def feature_offsets(terms: Sequence[LinearTerms]) -> np.ndarray:
    """Where each term's features start in ``z``, and (last) how many there are in all.

    >>> feature_offsets([]).tolist()
    [0]
    """
    return _offsets(tuple(t.n_features for t in terms))


def _offsets(widths: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(widths)]).astype(int)


def peak_shift(terms: Sequence[LinearTerms], log_weights: np.ndarray) -> float:
    """The largest peak of the weighted scores when every term bounds its scores, else 0: taken
    off inside the scoring GEMM, it keeps the scores small (and, bounded, saves each row's
    maximum)."""
    if not all(t.peak is not None for t in terms):
        return 0.0
    return float(np.max(log_weights + sum(t.peak for t in terms)))


#: A box bound (:func:`box_peak`) is a term's peak only where each component's scores span at
#: most this many nats over the rows: wider, rows would sit below :data:`PEAK_SHIFT_MARGIN` and
#: their block be scored twice.
BOX_PEAK_SPREAD = 300.0


def box_peak(coef: np.ndarray, const: np.ndarray, ranges: np.ndarray) -> np.ndarray | None:
    """(K,) each component's largest score ``coef[k] . phi + const[k]`` over the rows, bounded
    feature by feature over the features' ``ranges`` ((F, 2): least and largest value; exact for
    one feature); ``None`` where a range is not finite (or empty: NaN) or the scores span more
    than :data:`BOX_PEAK_SPREAD`.

    >>> box_peak(np.array([[1.0], [-2.0]]), np.array([0.0, 1.0]), np.array([[0.0, 3.0]])).tolist()
    [3.0, 1.0]
    """
    if ranges.size == 0 or not np.isfinite(ranges).all():
        return None
    ends = coef[:, :, None] * ranges[None]  # (K, F, 2)
    top = ends.max(axis=2)
    if not ((top - ends.min(axis=2)).sum(axis=1) <= BOX_PEAK_SPREAD).all():
        return None
    return const + top.sum(axis=1)


def feature_ranges(features: Sequence[np.ndarray]) -> np.ndarray:
    """(F, 2) each feature's least and largest value over the rows (NaN where it has none).

    >>> feature_ranges([np.array([2.0, -1.0]), np.empty(0)]).tolist()
    [[-1.0, 2.0], [nan, nan]]
    """
    return np.array([[f.min(), f.max()] if f.size else [np.nan, np.nan] for f in features],
                    dtype=float).reshape(len(features), 2)


def score_coefficients(terms: Sequence[LinearTerms], log_weights: np.ndarray,
                       shift: float) -> np.ndarray:
    """(K, F+1) float64: the score of component k less ``shift`` is ``row k @ [phi; 1]`` (the
    constants and log-weights in the last column)."""
    const = sum(t.const for t in terms) + log_weights - shift
    return np.concatenate([t.coef for t in terms] + [const[:, None]], axis=1)


def host_features(terms: Sequence[LinearTerms], offsets: np.ndarray, lo: int, hi: int,
                  dtype: Any) -> np.ndarray:
    """``z = [phi; 1]`` (F + 1, rows) of rows [lo, hi) in ``dtype``, written by the families'
    own ``features``, the ones row set."""
    f = int(offsets[-1])
    host = np.empty((1, f + 1, hi - lo), dtype)
    for t, off in zip(terms, offsets):
        if t.features is not None:
            t.features(lo, hi, host[:, off:off + t.n_features])
    host[0, f] = 1.0
    return host[0]


def hand_sums(terms: Sequence[LinearTerms], offsets: np.ndarray, sums: np.ndarray,
              table_counts: Sequence[np.ndarray], lse: np.ndarray) -> np.ndarray:
    """Hand a fold's sums (K, F+1) and each table's counts to the terms, and add the terms'
    bases to the rows' log-densities ``lse`` (in place); returns the posterior mass (K,)."""
    mass = sums[:, int(offsets[-1])].copy()
    counts = iter(table_counts)
    for t, off in zip(terms, offsets):
        t.add_sums(sums[:, off:off + t.n_features], mass,
                   None if t.table is None else next(counts))
    for t in terms:
        if t.base is not None:
            lse += t.base
    return mass


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
    center = gaussian_centre(mu, sigma2)
    m = mu - center
    coef = np.concatenate([-0.5 * prec, m * prec], axis=1)
    d = mu.shape[1]
    const = -0.5 * ((m * m * prec).sum(axis=1) + d * LOG_2PI - np.log(prec).sum(axis=1))
    peak = -0.5 * (d * LOG_2PI + np.log(sigma2).sum(axis=1))
    return center, coef, const, peak


def gaussian_centre(mu: np.ndarray, sigma2: np.ndarray) -> np.ndarray:
    """The centre (D,) of K Gaussians with independent coordinates (``mu``, ``sigma2`` of shape
    (K, D)): the mean of the means rounded to a power-of-two grid no finer than the model's
    spread (its components' variances and the variance of their means), so that it stays put
    from one EM iteration to the next.

    >>> gaussian_centre(np.array([[101.0], [103.3]]), np.array([[1.0], [4.0]])).tolist()
    [102.0]
    """
    k = mu.shape[0]
    center = np.add.reduce(mu) / k
    spread = np.sqrt(np.add.reduce(sigma2 + (mu - center) ** 2) / k)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        grid = np.exp2(np.ceil(np.log2(spread)))
        snapped = np.round(center / grid) * grid
    return np.where(np.isfinite(snapped) & (grid > 0), snapped, center)


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
                weights: np.ndarray, precision: Precision = FLOAT64
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
    ``np.matmul`` with a long inner dimension; the scoring, the component totals (a short inner
    dimension) and the statistics of float32 sub-blocks are one batched ``np.matmul`` each,
    which releases it there. The features and the other steps are element-wise calls over the
    whole block, few and long, for the same reason: each NumPy call hands the GIL over between
    the row threads.
    """
    if enc.n_rows == 0:  # no block: nothing to add to the terms
        return np.zeros(len(log_weights)), np.empty(0)
    fold = FusedEStep(terms, log_weights, enc, weights, precision)
    return fold.collect(map_row_blocks(enc.n_rows, fold.block, fold.fold_block))


class FusedEStep:
    """One fold of :func:`linear_fold`: its plan for a chunk (made once, read-only after) and
    the steps of each row block: :meth:`layout` the features ``z``, :meth:`score` all K
    components, :meth:`normalise` them (log-sum-exp, log-density, weighted posteriors),
    :meth:`accumulate` the statistics; :meth:`collect` adds the blocks' statistics up. Every
    array operation of a block is in these steps and :meth:`exp_scores` and
    :meth:`component_totals`, on the buffers of :meth:`block_buffers`: another array library
    runs the same steps by overriding those methods. Blocks share only the plan, the floor
    decision (:class:`~mixfold.compute.row_blocks.FirstBlockDecision`) and their own rows of
    ``lse``."""

    def __init__(self, terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                 weights: np.ndarray, precision: Precision) -> None:
        dt = self.dt = native_dtype(precision)
        self.terms, self.weights = terms, weights
        k = self.k = len(log_weights)
        shape = _fold_shape(dt, k, tuple(t.n_features for t in terms),
                            tuple(None if t.table is None else t.table.shape[1] for t in terms))
        self.offsets, self.f, self.rows_z = shape.offsets, shape.f, shape.rows_z
        # every term bounded above: subtract one bound of all the scores, the largest peak,
        # inside the scoring GEMM, which saves the per-row max and its subtraction
        self.bounded = all(t.peak is not None for t in terms)
        self.shift = peak_shift(terms, log_weights)
        self.least_total = shape.least_total
        # (K, F+1): the score of component k (minus the shift) is coef_band[k] @ [phi; 1]
        self.coef_band = score_coefficients(terms, log_weights, self.shift).astype(dt)
        # each table: (codes, table in dt, first row of its one-hot indicators in z or None)
        self.tables = [(t.codes, t.table.astype(dt), first)
                       for t, first in zip([t for t in terms if t.table is not None],
                                           shape.firsts)]
        # a -inf in a table can leave a row with no component that scores it
        self.may_die = any(not np.isfinite(table).all() for _, table, _ in self.tables)
        self.block, self.partial = shape.block, shape.partial
        self.floor, self.floor_exp = shape.floor, shape.floor_exp
        always = dt != np.float64
        self.floored: FirstBlockDecision[bool] = FirstBlockDecision(always, decided=always)
        self.lse = np.empty(enc.n_rows)
        self.kept = _kept_features(terms, enc, dt, self.block, self.partial, self.rows_z)
        # this fold's scratch buffers, taken once per thread (each block's Python work holds the
        # GIL, and on two threads every such stretch may keep the other thread waiting)
        self.buffers = threading.local()
        self.ones = shape.ones

    def fold_block(self, lo: int, hi: int) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """The statistics of rows [lo, hi): (sums (rows of z, K), each large table's counts)."""
        try:
            z, scores, totals = self.block_buffers(hi - lo)
            z = self.layout(lo, hi, z)
            self.score(lo, hi, z, scores)
            self.normalise(lo, hi, z, scores, totals)
            return self.accumulate(lo, hi, z, scores)
        finally:
            if lo == 0:  # (a first block that fails must not leave the others waiting)
                self.floored.settle()

    def block_buffers(self, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This thread's (z, scores, totals) for an m-row block cut into sub-blocks
        (:func:`sub_block_shape`); z's ones row is set when they are taken (a block writes only
        its features, and a padded block its padding, ones row included: it gives its buffers
        up, and the next block sets the ones row again)."""
        parts, p = sub_block_shape(m, self.partial)
        buffers = self.buffers.__dict__
        got = buffers.get((parts, p))
        if got is None:
            z = scratch("linear.z", (parts, self.rows_z, p), self.dt)
            z[:, self.f] = 1.0
            got = buffers[(parts, p)] = (
                z, scratch("linear.scores", (parts, self.k, p), self.dt),
                scratch("linear.total", (parts, 1, p), self.dt))
        if parts * p > m:
            del buffers[(parts, p)]
        return got

    def layout(self, lo: int, hi: int, z: np.ndarray) -> np.ndarray:
        """``z`` of rows [lo, hi) as `parts` contiguous sub-blocks of p rows (one in float64),
        the last padded with rows of weight 0 and features 0: element-wise steps run once over
        the whole block, the GEMMs once per sub-block. Kept from an earlier fold if it was, else
        written into ``z`` (this thread's buffer, ones row set) or, to be kept, a new array."""
        kept = self.kept
        if kept is not None:
            got = kept.get(lo)
            if got is not None:
                return got
            z = np.empty(z.shape, self.dt)
            z[:, self.f] = 1.0
        m = hi - lo
        parts, _, p = z.shape
        for a, b, i, count in sub_blocks(lo, hi, p):
            sub = z[i:i + count, :, :(b - a) // count]
            for t, off in zip(self.terms, self.offsets):
                if t.features is not None:
                    t.features(a, b, sub[:, off:off + t.n_features])
            for codes, table, first in self.tables:
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

    def score(self, lo: int, hi: int, z: np.ndarray, scores: np.ndarray) -> None:
        """The weighted scores of rows [lo, hi) (minus ``shift``) into ``scores``."""
        np.matmul(self.coef_band, z[:, :self.f + 1], out=scores)  # all sub-blocks in one call
        k = self.k
        for codes, table, _ in self.tables:  # all K components' log-probabilities in one
            # take: few long calls, so the row threads hand the GIL over seldom
            gathered = np.take(table, codes[lo:hi], axis=1, mode="clip",
                               out=scratch("linear.gathered", (k, hi - lo), self.dt))
            for a, b, i, count in sub_blocks(lo, hi, scores.shape[2]):
                scores[i:i + count, :, :(b - a) // count] += \
                    gathered[:, a - lo:b - lo].reshape(k, count, -1).transpose(1, 0, 2)

    def normalise(self, lo: int, hi: int, z: np.ndarray, scores: np.ndarray,
                  totals: np.ndarray) -> None:
        """The log-sum-exp of the scores of rows [lo, hi): their log-density (less the shift,
        added to all rows at the end) into ``lse``, and their weighted posteriors into
        ``scores``."""
        m = hi - lo
        shifted = self.bounded  # exp(score - shift) needs no per-row max, unless a row sits
        if shifted:  # far below
            self.exp_scores(lo, scores)
            total = self.component_totals(scores, totals)
            if np.minimum.reduce(total.reshape(-1)[:m]) < self.least_total:
                self.score(lo, hi, z, scores)
                shifted = False
        top = dead = None
        if not shifted:  # against each row's largest score
            top = reduce_components(np.maximum, scores, "linear.top")
            if self.may_die:
                dead = ~np.isfinite(top)
                if dead.any():
                    top[dead] = 0.0  # its scores stay -inf: exp gives 0, the total 0, log -inf
                else:
                    dead = None
            scores -= top[:, None]
            self.exp_scores(lo, scores)
            total = self.component_totals(scores, totals)
        lse = self.lse
        if dead is None:  # a total is 0 only on a dead row
            np.log(total.reshape(-1)[:m], out=lse[lo:hi])
        else:
            with np.errstate(divide="ignore"):
                np.log(total.reshape(-1)[:m], out=lse[lo:hi])
            total[dead] = np.inf  # no posterior for a row nothing scores
        if top is not None:
            lse[lo:hi] += top.reshape(-1)[:m]
        parts, _, p = scores.shape
        if parts == 1 and self.dt == np.float64:  # (the fewer NumPy calls per block, the fewer
            np.divide(self.weights[lo:hi], total[0], out=total[0])  # waits for the GIL)
        else:
            w = scratch("linear.w", (parts * p,), self.dt)
            w[:m] = self.weights[lo:hi]
            w[m:] = 0.0
            np.divide(w.reshape(parts, p), total, out=total)
        scores *= total[:, None]  # the weighted posteriors, (K, rows) per sub-block

    def exp_scores(self, lo: int, scores: np.ndarray) -> None:
        """``exp`` of the scores in place; floored (:data:`FLOAT32_SCORE_FLOOR`,
        :data:`FLOAT64_SCORE_FLOOR`) when the fold is, what sat at the floor then exactly 0."""
        floored = self.floored.value(lo, self.underflows, scores)
        if floored:
            np.maximum(scores, self.floor, out=scores)
        np.exp(scores, out=scores)
        if floored:
            scores -= self.floor_exp

    def underflows(self, scores: np.ndarray) -> bool:
        """Whether more than :data:`UNDERFLOW_SHARE` of the scores of the block's first rows
        (a contiguous probe) lie below the floor."""
        probe = scores[:, :, :max(scores.shape[2] // UNDERFLOW_PROBE, 1)]
        return bool(np.count_nonzero(probe < self.floor) > UNDERFLOW_SHARE * probe.size)

    def component_totals(self, scores: np.ndarray, totals: np.ndarray) -> np.ndarray:
        """Each row's sum over the components, (parts, p): a ones-row GEMM (one call for all
        sub-blocks, one pass over the scores)."""
        np.matmul(self.ones, scores, out=totals)
        return totals[:, 0]

    def accumulate(self, lo: int, hi: int, z: np.ndarray, scores: np.ndarray
                   ) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """From the weighted posteriors: every feature sum and the mass (one GEMM), and each
        large table's counts."""
        parts, _, p = scores.shape
        k = self.k
        # z @ r.T (the faster order of the same GEMM) per sub-block, added up in float64: one
        # block by np.dot (np.matmul would hold the GIL over its long inner dimension), the
        # sub-blocks of a float32 block by one batched np.matmul (which releases it)
        if parts == 1:
            sums = np.dot(z[0], scores[0].T).astype(np.float64, copy=False)
        else:
            part_sums = np.matmul(z, scores.transpose(0, 2, 1),
                                  out=scratch("linear.part_sums", (parts, self.rows_z, k),
                                              self.dt))
            sums = np.add.reduce(part_sums, axis=0, dtype=np.float64)
        counts: list[np.ndarray | None] = []
        for codes, table, first in self.tables:
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

    def collect(self, folded: list[tuple[np.ndarray, list[np.ndarray | None]]]
                ) -> tuple[np.ndarray, np.ndarray]:
        """The blocks' statistics added up in block order and handed to the terms; returns
        (posterior mass per component, per-row log-density)."""
        lse = self.lse
        lse += self.shift
        # (K, rows of z), blocks added in order (one block: its sums as they are)
        sums = (folded[0][0] if len(folded) == 1 else np.sum([s for s, _ in folded], axis=0)).T
        table_counts = [np.sum([c[j] for _, c in folded], axis=0) if first is None else
                        sums[:, first:first + table.shape[1]]
                        for j, (_, table, first) in enumerate(self.tables)]
        return hand_sums(self.terms, self.offsets, sums, table_counts, lse), lse


@dataclass(frozen=True)
class _FoldShape:
    """What a fold's plan takes from its shapes alone: made once per (dtype, K, each term's
    features and table levels) by :func:`_fold_shape`, shared (read-only) by every fold."""

    offsets: np.ndarray
    f: int
    firsts: tuple[int | None, ...]
    rows_z: int
    block: int
    partial: int
    floor: Any
    floor_exp: Any
    least_total: float
    ones: np.ndarray


@functools.lru_cache(maxsize=64)
def _fold_shape(dt: np.dtype, k: int, widths: tuple[int, ...],
                levels: tuple[int | None, ...]) -> _FoldShape:
    offsets = _offsets(widths)
    offsets.setflags(write=False)
    f = int(offsets[-1])
    # a small table's counts come out of the statistics GEMM through its one-hot rows of z,
    # a large one's out of a bincount
    firsts, rows_z = [], f + 1
    for v in levels:
        if v is not None:
            hot = v <= ONE_HOT_LEVELS
            firsts.append(rows_z if hot else None)
            rows_z += v if hot else 0
    block = block_rows(k, dt)
    # float32: exp below -87 is subnormal, slow to use, so always floored; float64: below
    # -708, slow to compute, so floored only where the first block's probe finds such scores
    always = dt != np.float64
    floor = dt.type(FLOAT32_SCORE_FLOOR if always else FLOAT64_SCORE_FLOOR)
    ones = np.ones((1, k), dt)
    ones.setflags(write=False)
    return _FoldShape(offsets, f, tuple(firsts), rows_z, block,
                      min(block, PARTIAL_ROWS) if always else block, floor,
                      np.exp(floor),  # the same exp as the block's, so the same bits
                      k * np.exp(PEAK_SHIFT_MARGIN[dt]), ones)


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
    padded_rows = sum(math.prod(sub_block_shape(m, partial)) * count
                      for m, count in ((block, full), (rest, 1)) if m and count)
    nbytes = int(rows_z * dt.itemsize * padded_rows)
    key = ("linear_fold", dt.str, block, partial, tuple(t.key for t in terms))
    return cache_for(key, [t.source for t in terms], nbytes, enc.nbytes)


def fold_linear_mixture(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                        enc: Encoded, weights: np.ndarray, precision: Precision = FLOAT64
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """The fused E-step of a mixture of K components of one family with ``linear_terms``
    (:func:`linear_fold` on its terms); ``None`` when its parameters fall outside the form.
    Returns (posterior mass per component, per-row log-density)."""
    terms = type(accs[0]).linear_terms(accs, components, enc)
    return None if terms is None else linear_fold([terms], log_weights, enc, weights, precision)
