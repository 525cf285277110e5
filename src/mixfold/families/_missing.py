"""Vector rows with missing entries (NaN, missing at random): the encoded rows, their
missingness patterns, and the Gaussian marginals and conditionals the vector Gaussians score
and accumulate them with.

Rows are grouped by which entries they miss; everything that depends on the pattern (a block of
the precision matrix, its inverse and log-determinant) is computed once per pattern, batched
over the patterns that miss the same number of entries, and gathered onto the rows.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.compute.encoded import ArrayEncoded, Encoded
from mixfold.compute.logspace import LOG_2PI
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.errors import ParameterError
from mixfold.precision import BandSupportError
from mixfold.precision.bands import is_native

__all__ = ["MaskedRows", "MissingPatterns", "MissingGroup", "has_missing", "Conditionals",
           "gaussian_conditionals", "add_weighted_outer", "fill_for_points", "require_native",
           "check_missing_flag"]

#: Widest vector whose missingness pattern packs into one int64 code (faster to group).
PACKED_CODE_BITS = 62
#: Rows per block of the (rows, D) @ (D, D) products, one BLAS thread per block: a narrow
#: product gains nothing from BLAS's own threads, and the blocks run on the row threads.
GEMM_BLOCK_ROWS = 16384


class MissingGroup(NamedTuple):
    """The patterns that miss ``r`` entries: ``index`` (P_r, r) the missing coordinates of each,
    ``rows`` (n_r,) the rows with one of them, ``local`` (n_r,) each row's pattern in ``index``,
    ``cols`` (n_r, r) each row's missing coordinates."""

    r: int
    index: np.ndarray
    rows: np.ndarray
    local: np.ndarray
    cols: np.ndarray


class MissingPatterns:
    """The missingness of a block of rows (n_rows, D) grouped by pattern.

    ``observed`` (n_rows, D) is 1.0 where an entry is present, 0.0 where it is missing;
    ``zero_filled`` the rows with missing entries set to 0; ``n_missing`` (n_rows,) the count
    per row; ``groups`` one :class:`MissingGroup` per count of missing entries above 0.

    >>> p = MissingPatterns(np.array([[1.0, np.nan], [np.nan, np.nan], [2.0, np.nan], [3.0, 4.0]]))
    >>> p.n_missing.tolist(), [(g.r, g.index.tolist(), g.rows.tolist()) for g in p.groups]
    ([1, 2, 1, 0], [(1, [[1]], [0, 2]), (2, [[0, 1]], [1])])
    """

    def __init__(self, x: np.ndarray):
        missing = np.isnan(x)
        n, d = x.shape
        self.dim = d
        self.complete = not missing.any()
        self.observed = (~missing).astype(np.float64)
        self.zero_filled = np.where(missing, 0.0, x)
        self.groups: list[MissingGroup] = []
        if self.complete:
            self.n_missing = np.zeros(n, dtype=np.int64)
            return
        if d <= PACKED_CODE_BITS:
            codes = missing.astype(np.int64) @ (np.int64(1) << np.arange(d, dtype=np.int64))
            unique, row_pattern = np.unique(codes, return_inverse=True)
            masks = ((unique[:, None] >> np.arange(d)) & 1).astype(bool)
        else:
            masks, row_pattern = np.unique(missing, axis=0, return_inverse=True)
        row_pattern = row_pattern.reshape(-1)
        counts = masks.sum(axis=1)
        self.n_missing = counts[row_pattern]
        for r in np.unique(counts[counts > 0]):
            patterns = np.flatnonzero(counts == r)
            local_of = np.full(masks.shape[0], -1)
            local_of[patterns] = np.arange(patterns.size)
            rows = np.flatnonzero(self.n_missing == r)
            index = np.nonzero(masks[patterns])[1].reshape(patterns.size, int(r))
            local = local_of[row_pattern[rows]]
            self.groups.append(MissingGroup(int(r), index, rows, local, index[local]))
        self._conditionals: dict[int, tuple[weakref.ref, Conditionals]] = {}

    def conditionals(self, dist: Any, compute: Callable[[], Conditionals]) -> Conditionals:
        """``compute()``, kept while ``dist`` lives: a mixture scores a component, then adds
        the same rows to its statistics with the same conditional expectations."""
        hit = self._conditionals.get(id(dist))
        if hit is not None and hit[0]() is dist:
            return hit[1]
        self._conditionals = {k: v for k, v in self._conditionals.items() if v[0]() is not None}
        value = compute()
        self._conditionals[id(dist)] = (weakref.ref(dist), value)
        return value

    @property
    def n_all_missing(self) -> int:
        """Rows with every entry missing."""
        return int((self.n_missing == self.dim).sum())


class MaskedRows(ArrayEncoded):
    """Vector rows (n_rows, D) that may miss entries (NaN), from an encoder that allows them.

    Its :attr:`patterns` are computed once per block of rows and shared by every component
    that scores or accumulates the block.
    """

    __slots__ = ("_patterns",)

    def __init__(self, values: np.ndarray, start: int = 0):
        super().__init__(values, start)
        self._patterns: MissingPatterns | None = None

    @property
    def patterns(self) -> MissingPatterns:
        if self._patterns is None:
            self._patterns = MissingPatterns(self.values)
        return self._patterns

    def rows(self, begin: int, end: int) -> MaskedRows:
        return MaskedRows(self.values[begin:end], self.start + begin)

    def take(self, indices: np.ndarray) -> MaskedRows:
        return MaskedRows(self.values[indices], 0)

    def with_starts(self, starts: Iterator[int]) -> MaskedRows:
        return MaskedRows(self.values, next(starts))

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> MaskedRows:
        return MaskedRows(np.concatenate([p.values for p in parts]), parts[0].start)

    def __reduce__(self) -> tuple[Any, ...]:  # the patterns are recomputed where rows land
        return MaskedRows, (self.values, self.start)

    def __repr__(self) -> str:
        return f"MaskedRows(shape={self.values.shape})"


def has_missing(enc: Encoded) -> bool:
    """Whether ``enc`` holds rows that miss an entry (one type check for complete data)."""
    return isinstance(enc, MaskedRows) and not enc.patterns.complete


class Conditionals(NamedTuple):
    """What a Gaussian component makes of rows that miss entries: ``log_density`` (n_rows,) of
    the observed entries; per group of :attr:`MissingPatterns.groups`, ``shifts`` (n_r, r) the
    conditional means of the missing entries minus their means, and ``covs`` (P_r, r, r) the
    conditional covariances of each pattern's missing block."""

    log_density: np.ndarray
    shifts: list[np.ndarray]
    covs: list[np.ndarray]

    def filled(self, mu: np.ndarray, patterns: MissingPatterns) -> np.ndarray:
        """The rows (n_rows, D) with their missing entries at their conditional means."""
        out = np.where(patterns.observed > 0, patterns.zero_filled, mu)
        for g, shift in zip(patterns.groups, self.shifts):
            out[g.rows[:, None], g.cols] += shift
        return out


def gaussian_conditionals(mu: np.ndarray, precision_cholesky: np.ndarray,
                          log_det_precision_cholesky: float,
                          patterns: MissingPatterns) -> Conditionals:
    """The :class:`Conditionals` of the rows under N(mu, cov) with ``U U^T = cov^-1``.

    With ``L = cov^-1``, missing ``m`` and observed ``o``: the conditional covariance is
    ``L_mm^-1``, the conditional mean ``mu_m - L_mm^-1 L_mo (x_o - mu_o)``, and since the
    conditional term vanishes at that mean, the marginal's quadratic form is the joint one
    at the filled row, with ``log det cov_oo = log det cov + log det L_mm``.
    """
    u = precision_cholesky
    n = patterns.zero_filled.shape[0]
    centred = np.empty_like(patterns.zero_filled)
    grad = np.empty_like(centred) if patterns.groups else None
    lam = u @ u.T

    def centre(lo: int, hi: int) -> None:
        np.subtract(patterns.zero_filled[lo:hi], mu, out=centred[lo:hi])
        centred[lo:hi] *= patterns.observed[lo:hi]  # 0 where missing
        if grad is not None:  # L_mo (x_o - mu_o) on the missing coordinates
            np.matmul(centred[lo:hi], lam, out=grad[lo:hi])

    map_row_blocks(n, GEMM_BLOCK_ROWS, centre)
    log_det_mm = np.zeros(n)
    shifts, covs = [], []
    if patterns.groups:
        for g in patterns.groups:
            lam_mm = lam[g.index[:, :, None], g.index[:, None, :]]
            chol = np.linalg.cholesky(lam_mm)
            cov = np.linalg.inv(lam_mm)
            cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
            # a tiny (r, r) matrix per row: a broadcast product beats batched matmul / einsum
            shift = -(cov[g.local] * grad[g.rows[:, None], g.cols][:, None, :]).sum(axis=2)
            centred[g.rows[:, None], g.cols] = shift
            log_det = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
            log_det_mm[g.rows] = log_det[g.local]
            shifts.append(shift)
            covs.append(cov)
    quad = np.empty(n)

    def whiten(lo: int, hi: int) -> None:
        y = centred[lo:hi] @ u
        np.einsum("ij,ij->i", y, y, out=quad[lo:hi])

    map_row_blocks(n, GEMM_BLOCK_ROWS, whiten)
    n_observed = patterns.observed.sum(axis=1)
    log_p = log_det_precision_cholesky - 0.5 * (n_observed * LOG_2PI + quad + log_det_mm)
    if patterns.groups and patterns.groups[-1].r == patterns.dim:  # nothing observed: 1
        log_p[patterns.groups[-1].rows] = 0.0
    return Conditionals(log_p, shifts, covs)


def add_weighted_outer(sum_x: np.ndarray, sum_xx: np.ndarray, x: np.ndarray,
                       w: np.ndarray) -> None:
    """``sum_x += w @ x`` and ``sum_xx += x^T (w x)``, block by block of rows on the row
    threads, the blocks' sums added in block order (the same bits however many threads)."""
    def block(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        xb, wb = x[lo:hi], w[lo:hi]
        return wb @ xb, xb.T @ (wb[:, None] * xb)

    for bx, bxx in map_row_blocks(x.shape[0], GEMM_BLOCK_ROWS, block):
        sum_x += bx
        sum_xx += bxx


def fill_for_points(enc: Encoded) -> np.ndarray:
    """The rows as points for k-means seeding: a missing entry takes its column's mean over
    the rows that have it (0 for a column missing everywhere)."""
    x = enc.values
    if not has_missing(enc):
        return x
    p = enc.patterns
    seen = p.observed.sum(axis=0)
    means = np.divide(p.zero_filled.sum(axis=0), seen, out=np.zeros(x.shape[1]), where=seen > 0)
    return np.where(p.observed > 0, x, means)


def check_missing_flag(missing: Any) -> bool:
    """``missing`` as a bool; anything else raises ParameterError."""
    if not isinstance(missing, (bool, np.bool_)):
        raise ParameterError(f"missing must be True or False, got {missing!r}")
    return bool(missing)


def require_native(precision: str, family: str) -> None:
    """Rows with missing entries are scored in float64 / float32 only: a band (fp8, bfloat16,
    float16, dd) raises rather than scoring them otherwise (``precision``: a resolved value, or
    the band name a band engine carries)."""
    if not is_native(precision):
        raise BandSupportError(f"precision {precision!r} cannot run {family} rows with missing "
                               f"entries: they are scored and accumulated in float64")
