"""The fused linear E-step of the CPU's bands below float32 (bfloat16, float16): the band's GEMM
screens the components, float64 decides (:mod:`mixfold.compute.screened`).

A block of rows goes through three steps:

- **layout**: the rows' exact features ``z = [phi; 1]`` in float32, one row's features
  contiguous (m, F1), written by the families' own ``features`` -- and, on AMX tiles, their
  bfloat16 bit patterns in the layout the scoring tiles read; kept between folds when a handle
  keeps its rows and the feature budget has room;
- **screen**: all K components scored in the band -- the coefficients and tables rounded to
  it, the products summed in float32 -- by the scoring GEMM (torch's on the band's values
  widened to float32, :class:`ScreenedCpuEStep`; the tiles' ``TDPBF16PS`` on bfloat16 inputs,
  :class:`AmxScreenedEStep`), each table's log-probabilities gathered and added;
- **rescore**: the compiled kernel (:func:`~mixfold.compute.numba_screen.screen_rescore`, or
  :meth:`~mixfold.compute.screened.Screen.rescore_torch` without numba) rescores each row's
  candidates in float64 and adds their statistics in float64.

Blocks add up in float64 in block order, so the bits do not depend on the number of threads.

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
>>> from mixfold.families._protocol import ArrayEncoded
>>> accs = [PoissonAccumulator() for _ in range(2)]
>>> comps = [PoissonDistribution(1.0), PoissonDistribution(6.0)]
>>> enc = ArrayEncoded(np.array([0, 1, 7, 9]))
>>> terms = PoissonAccumulator.linear_terms(accs, comps, enc)
>>> mass, lse = ScreenedCpuEStep([terms], np.log([.5, .5]), enc, np.ones(4), "bfloat16@cpu").run()
>>> mass.round(3).tolist(), round(float(mass.sum()), 12)
([1.955, 2.045], 4.0)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.amx_tiles import (MAX_FEATURES, amx_available, padded_features, padded_rows,
                                       tile_gemms)
from mixfold.compute.encoded import Encoded
from mixfold.compute.feature_cache import cache_for
from mixfold.compute.kernels import band_kernels
from mixfold.compute.linear import LinearTerms, block_rows
from mixfold.compute.linear_torch import _torch, one_torch_thread
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.compute.screened import Screen
from mixfold.precision.bands import resolve_precision

__all__ = ["ScreenedCpuEStep", "AmxScreenedEStep", "runs_on_tiles"]


def runs_on_tiles(terms: Sequence[LinearTerms], band: str, device: str) -> bool:
    """Whether :class:`AmxScreenedEStep` runs this fold: bfloat16 on the CPU, the tiles and the
    compiled kernels at hand, and at most :data:`~mixfold.compute.amx_tiles.MAX_FEATURES`
    features."""
    f1 = padded_features(sum(t.n_features for t in terms) + 1)
    return (band == "bfloat16" and device == "cpu" and f1 <= MAX_FEATURES
            and amx_available() and band_kernels() is not None)


class ScreenedCpuEStep:
    """One fold of a CPU band below float32 (see the module). :meth:`run` returns (posterior mass
    per component, per-row log-density), as :func:`~mixfold.compute.linear.linear_fold`."""

    def __init__(self, terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                 weights: np.ndarray, precision: str) -> None:
        p = resolve_precision(precision)
        self.torch = _torch()
        self.band = p.band
        self.terms, self.weights, self.n_rows = terms, weights, enc.n_rows
        self.k = len(log_weights)
        self.offsets = np.concatenate([[0], np.cumsum([t.n_features for t in terms])]).astype(int)
        self.f = int(self.offsets[-1])
        # the largest peak taken off inside the GEMM keeps the band's scores small
        bounded = all(t.peak is not None for t in terms)
        self.shift = float(np.max(log_weights + sum(t.peak for t in terms))) if bounded else 0.0
        self.screen = Screen.plan(terms, log_weights, self.shift, p.band)
        self.codes = [t.codes for t in terms if t.table is not None]
        self.widths = [t.table.shape[1] for t in terms if t.table is not None]
        band_dtype = getattr(self.torch, p.band)
        # the band's coefficients and tables, rounded once, widened to float32 for the GEMM
        self.coef_band = self._rounded(self.screen.coef, band_dtype)
        self.tables_band = self._rounded(self.screen.tables, band_dtype).numpy()
        self.compiled = band_kernels()
        self.block = block_rows(self.k, np.float32)
        self.kept = self._kept_features(enc)
        self.buffers = threading.local()

    def _rounded(self, a: np.ndarray, dtype: Any) -> Any:
        big = float(self.torch.finfo(dtype).max)  # (a saturated value is screened out of the
        t = self.torch.as_tensor(a, dtype=self.torch.float64).clamp(-big, big)  # bound: Screen)
        return t.to(dtype).to(self.torch.float32).contiguous()

    def kept_row_bytes(self) -> int:
        """A kept row: its exact features in float32."""
        return 4 * (self.f + 1)

    def _kept_features(self, enc: Encoded) -> dict[int, Any] | None:
        """The feature cache's store of this fold's blocks (by first row), when every term says
        what its features depend on and they fit the budget."""
        if any(t.key is None or t.source is None for t in self.terms):
            return None
        key = (type(self).__name__, self.block, tuple(t.key for t in self.terms))
        return cache_for(key, [t.source for t in self.terms], self.kept_row_bytes() * self.n_rows,
                         enc.nbytes)

    # -- the steps of a block ------------------------------------------------------------------

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        """Fold every block on the row threads (each torch call on one thread); hand the sums
        to the terms; (mass, log-densities)."""
        self.lse = np.empty(self.n_rows)
        with one_torch_thread(self.torch):
            folded = map_row_blocks(self.n_rows, self.block, self.fold_block)
        sums = np.sum([s for s, _ in folded], axis=0)  # (K, F1), blocks added in order
        counts = np.sum([c for _, c in folded], axis=0)
        mass = sums[:, self.f].copy()
        table_counts = iter(self.screen.split_counts(counts, self.widths))
        for t, off in zip(self.terms, self.offsets):
            t.add_sums(sums[:, off:off + t.n_features], mass,
                       None if t.table is None else next(table_counts))
        for t in self.terms:
            if t.base is not None:
                self.lse += t.base
        return mass, self.lse

    def fold_block(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The statistics of rows [lo, hi): (sums (K, F1), joined table counts (K, V))."""
        rows = self.layout(lo, hi)
        codes = self.screen.codes(self.codes, lo, hi)
        scores = self.score(rows, codes)
        z = self.exact_features(rows)
        torch = self.torch
        if self.compiled is None:
            lse, posteriors, counts = self.screen.rescore_torch(
                torch, torch.from_numpy(scores), torch.from_numpy(z),
                torch.from_numpy(np.ascontiguousarray(self.weights[lo:hi])),
                [torch.from_numpy(c - first) for c, first in zip(codes, self.screen.table_columns)])
            self.lse[lo:hi] = lse.numpy()
            return (z.astype(np.float64) @ posteriors.numpy().T).T, counts.numpy()
        posteriors = self._posteriors_buffer(z.shape[1])
        counts = self.screen.rescore(self.compiled["screen_rescore"], scores, z,
                                     self.weights[lo:hi], codes, self.lse[lo:hi], posteriors)
        # every feature sum and the mass: one float32 GEMM of exact features and posteriors
        sums = torch.mm(torch.from_numpy(z), torch.from_numpy(posteriors).t())
        return sums.numpy().T.astype(np.float64), counts

    def layout(self, lo: int, hi: int) -> Any:
        """Rows [lo, hi) as the GEMMs read them: kept from an earlier fold when they were."""
        kept = self.kept
        got = None if kept is None else kept.get(lo)
        if got is None:
            got = self.rows_for(self._host_features(lo, hi))
            if kept is not None:
                kept[lo] = got
        return got

    def _host_features(self, lo: int, hi: int) -> np.ndarray:
        """``z`` (F + 1, rows) of rows [lo, hi) in float32, by the families' ``features``."""
        f = self.f
        host = np.empty((1, f + 1, hi - lo), np.float32)
        for t, off in zip(self.terms, self.offsets):
            if t.features is not None:
                t.features(lo, hi, host[:, off:off + t.n_features])
        host[0, f] = 1.0
        return host[0]

    def rows_for(self, z: np.ndarray) -> Any:
        """What a block keeps: its exact features (F1, m)."""
        return z

    def exact_features(self, rows: Any) -> np.ndarray:
        return rows

    def score(self, rows: Any, codes: np.ndarray) -> np.ndarray:
        """The band's scores (K, m) of a block, less the shift: the GEMM of the rounded
        coefficients and the features, each table's rounded log-probabilities added."""
        m = rows.shape[1]
        scores = self._scores_buffer(m)
        torch = self.torch
        torch.mm(self.coef_band, torch.from_numpy(rows), out=torch.from_numpy(scores))
        self._add_tables(scores, codes)
        return scores

    def _scores_buffer(self, columns: int) -> np.ndarray:
        return self._buffer("scores", columns)

    def _posteriors_buffer(self, columns: int) -> np.ndarray:
        return self._buffer("posteriors", columns)

    def _buffer(self, name: str, columns: int) -> np.ndarray:
        """This thread's (K, columns) float32 buffer ``name``, taken once per fold."""
        got = self.buffers.__dict__.get((name, columns))
        if got is None:
            got = self.buffers.__dict__[(name, columns)] = np.empty((self.k, columns),
                                                                     np.float32)
        return got

    def _add_tables(self, scores: np.ndarray, codes: np.ndarray) -> None:
        m = codes.shape[1]
        for c in codes:
            scores[:, :m] += self.tables_band[:, c]


class AmxScreenedEStep(ScreenedCpuEStep):
    """:class:`ScreenedCpuEStep` whose screening GEMM runs on AMX tiles: bfloat16 coefficients
    and features, products summed in float32 (:mod:`mixfold.compute.amx_tiles`)."""

    def __init__(self, terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                 weights: np.ndarray, precision: str) -> None:
        self.f1 = padded_features(sum(t.n_features for t in terms) + 1)
        super().__init__(terms, log_weights, enc, weights, precision)
        self.gemms = tile_gemms(self.k, self.f1)
        coef = np.zeros((self.k, self.f1), np.uint16)
        coef[:, :self.f + 1] = _bits(self.coef_band.numpy())  # already bfloat16's values
        self.coef_bits = coef
        self.no_rows = np.empty((0, self.f1), np.uint32)

    def kept_row_bytes(self) -> int:
        """A kept row: its exact features in float32 and their bfloat16 pairs."""
        return 4 * (self.f + 1) + 2 * self.f1

    def rows_for(self, z: np.ndarray) -> Any:
        """(bfloat16 bit patterns in the scoring tiles' layout, the exact rows)."""
        pairs = np.empty((self.f1 // 2, padded_rows(z.shape[1]), 2), np.uint16)
        self.compiled["band_tile_layouts"](z, pairs.view(np.uint32)[..., 0], self.no_rows)
        return pairs, z

    def exact_features(self, rows: Any) -> np.ndarray:
        return rows[1]

    def score(self, rows: Any, codes: np.ndarray) -> np.ndarray:
        pairs, z = rows
        scores = self._scores_buffer(pairs.shape[1])
        self.gemms.score(self.coef_bits, pairs, scores)
        self._add_tables(scores, codes)
        return scores[:, :z.shape[1]]


def _bits(a: np.ndarray) -> np.ndarray:
    """float32 values that are bfloat16's -> their bit patterns."""
    return (np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)
