"""The bands below float32 screen, float64 decides: how a reduced-precision E-step stays within
its promise on any data.

A band's scoring GEMM in the expanded form ``coef . [(x-c)^2, x-c, 1]`` carries an absolute
error of about ``u * sum |coef| |z|`` (u: the band's unit roundoff): for a row far from the
centre c that is O(1) nat in bfloat16, which is what made bfloat16 fits fall and report a
log-likelihood they never had. Here the band's scores only *screen*: a component whose band
score lies more than twice that bound plus :data:`SCREEN_CUTOFF` below the row's best cannot
hold a posterior above ``exp(-SCREEN_CUTOFF)``; the few that remain (one for most rows of
separated clusters) are scored again in float64 from the rows' exact (float32) features, and
the row's log-density, its posteriors and every statistic come from those scores. The
statistics are then sums of float64 products of float32 features, as in the float32 band: no
variance is a difference of band-rounded sums.

:class:`Screen` is the plan of one fold (made once from its
:class:`~mixfold.compute.linear.LinearTerms`); :meth:`Screen.rescore` runs a block on the
compiled kernel (:func:`~mixfold.compute.numba_screen.screen_rescore`) and
:meth:`Screen.rescore_torch` runs the same arithmetic in torch's operations (a GPU, or where
numba is missing).

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
>>> from mixfold.families._protocol import ArrayEncoded
>>> accs = [PoissonAccumulator() for _ in range(2)]
>>> comps = [PoissonDistribution(1.0), PoissonDistribution(900.0)]
>>> enc = ArrayEncoded(np.array([0, 1, 880, 905]))
>>> terms = PoissonAccumulator.linear_terms(accs, comps, enc)
>>> screen = Screen.plan([terms], np.log([0.5, 0.5]), 0.0, "bfloat16")
>>> screen.eta > 2 ** -8, screen.coef.shape
(True, (2, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixfold.compute.linear import LinearTerms, score_coefficients

__all__ = ["Screen", "SCREEN_CUTOFF", "BAND_UNIT", "screens", "round_to_band"]

#: A component more than this many nats below a row's best gets no posterior: its share of the
#: row's density is below exp(-20) (2e-9), beneath every band's promise.
SCREEN_CUTOFF = 20.0
#: Unit roundoff of a band's GEMM inputs (round to nearest): each product of two rounded
#: inputs is within twice this of the exact one.
BAND_UNIT = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "fp8": 2.0 ** -4,
             "float32": 2.0 ** -24}
#: The largest finite value of a band whose inputs are not scaled: a coefficient or table entry
#: beyond it saturates, and its band score bounds nothing.
BAND_MAX = {"bfloat16": 3.3895e38, "float16": 65504.0, "float32": 3.4028e38}
#: Unit roundoff of the float32 sums of a band's GEMM.
FLOAT32_UNIT = 2.0 ** -24


def screens(band: str) -> bool:
    """Whether a fused fold of ``band`` screens its components and rescores them in float64
    (every band up to float32: a float32 GEMM's sum of terms of thousands of nats, as a
    Poisson of large counts gives, is off by more than its log-likelihood may be).

    >>> screens("bfloat16"), screens("float32"), screens("float64")
    (True, True, False)
    """
    return band in BAND_UNIT


def round_to_band(a: np.ndarray, band: str) -> np.ndarray:
    """``a`` rounded to ``band``'s values (to nearest, ties to even), as float32 (C order);
    finite values beyond the band's range saturate to its largest (:class:`Screen` then bounds
    nothing); infinities stay (a table's impossible level).

    >>> round_to_band(np.array([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8]), "bfloat16").tolist()  # ties
    [1.0, 1.015625]
    """
    big = BAND_MAX[band]
    x = np.ascontiguousarray(np.where(np.isfinite(a), np.clip(a, -big, big), a),
                             dtype=np.float32)
    if band == "float16":
        return x.astype(np.float16).astype(np.float32)
    if band == "bfloat16":
        u = x.view(np.uint32)
        rounded = (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
        return np.where(np.isfinite(x), rounded.view(np.float32), x)
    return x


@dataclass(frozen=True)
class Screen:
    """The screening plan of one fold: the exact coefficients (K, F1) in float64 with the
    constants less ``shift`` in the last column, each feature's largest coefficient (for the
    band's error bound ``eta * sum_f cmax_f |z_f| + slack``), and the tables side by side in
    float64 with each one's first column."""

    coef: np.ndarray
    cmax: np.ndarray
    eta: float
    slack: float
    shift: float
    tables: np.ndarray
    table_columns: tuple[int, ...]

    @classmethod
    def plan(cls, terms: Sequence[LinearTerms], log_weights: np.ndarray, shift: float,
             band: str) -> Screen:
        """The plan of a fold of ``terms`` in ``band`` whose scores are less ``shift``."""
        u = BAND_UNIT[band]
        coef = np.ascontiguousarray(score_coefficients(terms, log_weights, shift), np.float64)
        tables = [np.asarray(t.table, np.float64) for t in terms if t.table is not None]
        k = coef.shape[0]
        columns = tuple(np.cumsum([0] + [t.shape[1] for t in tables[:-1]]).tolist()) \
            if tables else ()
        joined = np.ascontiguousarray(np.concatenate(tables, axis=1) if tables
                                      else np.zeros((k, 1)))
        finite = [np.abs(t[np.isfinite(t)]) for t in tables]
        # each table's entry rounded to the band and added in float32
        slack = sum((u + FLOAT32_UNIT) * float(a.max(initial=0.0)) for a in finite)
        # a product of two rounded inputs is within (2u + u^2) of the exact one; the float32 sums
        # of the GEMM add one float32 rounding per term
        eta = 2 * u + u * u + (coef.shape[1] + len(tables) + 2) * FLOAT32_UNIT
        finite_coef = np.where(np.isfinite(coef), np.abs(coef), 0.0)  # (a -inf weight scores
        cmax = finite_coef.max(axis=0) * (1 + u)  # -inf in the band too: it bounds nothing)
        largest = max(float(finite_coef.max(initial=0.0)),
                      max((float(a.max(initial=0.0)) for a in finite), default=0.0))
        if largest > BAND_MAX.get(band, np.inf):  # the band cannot hold the model: all rescored
            eta = np.inf
        return cls(coef, np.ascontiguousarray(cmax), eta, slack, float(shift), joined, columns)

    @property
    def n_levels(self) -> int:
        """Columns of the joined tables (1 when there is none)."""
        return self.tables.shape[1]

    def codes(self, codes: Sequence[np.ndarray], lo: int, hi: int) -> np.ndarray:
        """Each table's codes of rows [lo, hi) as (T, rows) int64, offset to the joined
        tables' columns and clipped to the table (as the band's gather)."""
        out = np.empty((len(codes), hi - lo), np.int64)
        for t, (c, first) in enumerate(zip(codes, self.table_columns)):
            width = self._width(t)
            np.clip(c[lo:hi], 0, width - 1, out=out[t])
            out[t] += first
        return out

    def _width(self, t: int) -> int:
        ends = self.table_columns[1:] + (self.tables.shape[1],)
        return ends[t] - self.table_columns[t]

    def rescore(self, kernel: Any, scores: np.ndarray, z: np.ndarray, w: np.ndarray,
                codes: np.ndarray, lse: np.ndarray, posteriors: np.ndarray) -> np.ndarray:
        """One block on the compiled kernel: band ``scores`` (K, m) float32, exact features
        ``z`` (m, F1) float32, weights ``w`` (m,) -> each row's log-density into ``lse`` (m,)
        float64 and its weighted posteriors into ``posteriors`` (K, m) float32; returns the
        block's joined table counts (K, V) in float64."""
        counts = np.zeros((self.coef.shape[0], self.n_levels))
        kernel(scores, z, self.coef, self.cmax, self.eta, self.slack, SCREEN_CUTOFF, self.shift,
               self.tables, codes, _writable(w), lse, posteriors, counts)
        return counts

    def rescore_top(self, kernel: Any, scores: np.ndarray, z: np.ndarray, w: np.ndarray,
                    codes: np.ndarray, lse: np.ndarray, posteriors: np.ndarray) -> np.ndarray:
        """The float32 band's block (:func:`~mixfold.compute.numba_screen.exact_top_normalise`):
        float32 ``scores`` give every posterior; each row's best component is rescored in
        float64 for its log-density. Returns the joined table counts (K, V) in float64."""
        counts = np.zeros((self.coef.shape[0], self.n_levels))
        kernel(scores, z, self.coef, self.shift, self.tables, codes, _writable(w), lse,
               posteriors, counts)
        return counts

    def rescore_numpy(self, scores: np.ndarray, z: np.ndarray, w: np.ndarray,
                      codes: np.ndarray, lse: np.ndarray, posteriors: np.ndarray) -> np.ndarray:
        """:meth:`rescore` in NumPy's operations (where numba is missing): the same candidates,
        their float64 scores and float64 exp."""
        k, m = len(self.coef), z.shape[0]
        scores = scores[:, :m]
        top = scores.max(axis=0).astype(np.float64)
        low = top - (2 * (self.eta * (np.abs(z) @ self.cmax) + self.slack) + SCREEN_CUTOFF)
        with np.errstate(invalid="ignore"):
            comp, row = np.nonzero(scores >= low)
        exact = np.einsum("pf,pf->p", self.coef[comp], z[row].astype(np.float64))
        for c in codes:
            exact += self.tables[comp, c[row]]
        best = np.full(m, -np.inf)
        np.maximum.at(best, row, exact)
        alive = np.isfinite(best)
        with np.errstate(invalid="ignore"):
            e = np.exp(exact - np.where(alive, best, 0.0)[row])
        total = np.bincount(row, weights=e, minlength=m)
        with np.errstate(divide="ignore"):
            lse[:] = np.where(alive, best + np.log(total), -np.inf) + self.shift
        scale = np.divide(w, total, out=np.zeros(m), where=total > 0)
        r = e * scale[row]
        posteriors[:] = 0.0
        posteriors[comp, row] = r
        counts = np.zeros((k, self.n_levels))
        for c in codes:
            np.add.at(counts, (comp, c[row]), r)
        return counts

    def rescore_torch(self, torch: Any, scores: Any, z: Any, w: Any, codes: Sequence[Any]
                      ) -> tuple[Any, Any, Any]:
        """The same in torch's operations on the tensors' device (``z`` (F1, m); codes: each
        table's (m,) long codes, clipped): returns (log-densities (m,) float64 with the shift
        added, weighted posteriors (K, m) float64, joined counts (K, V) float64)."""
        f64 = torch.float64
        dev = scores.device
        k, m = scores.shape
        coef = torch.as_tensor(self.coef, device=dev)
        tables = torch.as_tensor(self.tables, device=dev)
        z = z.to(f64)
        top = scores.amax(dim=0).to(f64)
        bound = torch.as_tensor(self.cmax, device=dev) @ z.abs()
        low = top - (2 * (self.eta * bound + self.slack) + SCREEN_CUTOFF)
        comp, row = torch.nonzero(scores.to(f64) >= low[None, :], as_tuple=True)
        exact = (coef[comp] * z.t()[row]).sum(dim=1)
        for c, first in zip(codes, self.table_columns):
            exact = exact + tables[comp, c[row] + first]
        best = torch.full((m,), -np.inf, dtype=f64, device=dev)
        best.scatter_reduce_(0, row, exact, reduce="amax")
        alive = torch.isfinite(best)
        e = torch.exp(exact - torch.where(alive, best, 0.0)[row])
        total = torch.zeros(m, dtype=f64, device=dev).index_add_(0, row, e)
        lse = torch.where(alive, best + torch.log(total), -np.inf) + self.shift
        scale = torch.where(total > 0, w.to(f64) / total, 0.0)
        posteriors = torch.zeros((k, m), dtype=f64, device=dev)
        posteriors[comp, row] = e * scale[row]
        counts = torch.zeros((k, self.n_levels), dtype=f64, device=dev)
        for c, first in zip(codes, self.table_columns):
            counts.view(-1).index_add_(0, comp * self.n_levels + c[row] + first,
                                       posteriors[comp, row])
        return lse, posteriors, counts

    def split_counts(self, counts: Any) -> list[Any]:
        """The joined counts (K, V) as each table's (K, V_t)."""
        return [counts[:, first:first + self._width(t)]
                for t, first in enumerate(self.table_columns)]


def _writable(w: np.ndarray) -> np.ndarray:
    """Row weights as the kernels' signatures take them: contiguous, writable float64 (an
    engine may hand the shard's weights read-only, as Ray's object store does)."""
    w = np.ascontiguousarray(w, np.float64)
    return w if w.flags.writeable else w.copy()
