"""The fused linear E-step of the CPU's bands up to float32 (bfloat16, float16, float32): the
band's GEMM screens the components, float64 decides (:mod:`mixfold.compute.screened`).

:class:`ScreenedEStep` is one driver over row blocks; what differs between array engines is a
*screener* value that it is given (:func:`screener_for` chooses):

- :class:`GemmScreener` -- NumPy's GEMM of the coefficients rounded to the band and the rows'
  exact float32 features (a product of a band value and a float32 value, summed in float32,
  is at least as accurate as the band's own);
- :class:`TileScreener` -- AMX tiles (:mod:`mixfold.compute.amx_tiles`): bfloat16 coefficients
  and features, products summed in float32 (``TDPBF16PS``).

A block of rows goes through three steps: **layout** (the rows' exact features ``z = [phi; 1]``
in float32, each row's contiguous (m, F1), written by the families' own ``features``, and what
the screener reads; kept between folds when a handle keeps its rows and the feature budget has
room), **screen**
(all K components scored in the band, each table's rounded log-probabilities added),
**rescore** (the compiled kernel :func:`~mixfold.compute.numba_screen.screen_rescore`, or
:meth:`~mixfold.compute.screened.Screen.rescore_numpy` without numba, rescores each row's
candidates in float64 and writes its log-density and posteriors; the statistics are float32
GEMMs of the exact features and the posteriors over :data:`PARTIAL_ROWS` rows at a time, added
in float64). Blocks add up in float64 in block order, so the bits do not depend on the number
of threads.

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
>>> from mixfold.families._protocol import ArrayEncoded
>>> accs = [PoissonAccumulator() for _ in range(2)]
>>> comps = [PoissonDistribution(1.0), PoissonDistribution(6.0)]
>>> enc = ArrayEncoded(np.array([0, 1, 7, 9]))
>>> terms = PoissonAccumulator.linear_terms(accs, comps, enc)
>>> from mixfold.precision import resolve_precision
>>> step = ScreenedEStep([terms], np.log([.5, .5]), enc, np.ones(4), resolve_precision("bfloat16"))
>>> mass, lse = step.run()
>>> mass.round(3).tolist(), round(float(mass.sum()), 6)
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
from mixfold.compute.linear import (LinearTerms, block_rows, feature_offsets, hand_sums,
                                    host_features, peak_shift)
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.compute.screened import Screen, round_to_band
from mixfold.precision.bands import FLOAT32_PARTIAL_ROWS
from mixfold.precision.bands import Precision

__all__ = ["ScreenedEStep", "GemmScreener", "TileScreener", "screener_for", "PARTIAL_ROWS"]

#: Rows of each float32 partial sum of the statistics GEMM (added in float64).
PARTIAL_ROWS = FLOAT32_PARTIAL_ROWS


class GemmScreener:
    """Screens with NumPy's GEMM: the coefficients rounded to the band times the exact float32
    features; keeps nothing beside the features."""

    kept_bytes_per_feature = 0

    def __init__(self, screen: Screen, band: str, f1: int) -> None:
        self.coef = round_to_band(screen.coef, band)
        self.tables = round_to_band(screen.tables, band)

    @staticmethod
    def columns(m: int) -> int:
        """Columns of the scores of an m-row block."""
        return m

    def rows_for(self, z: np.ndarray) -> Any:
        """The block's exact features, a row's contiguous (m, F1)."""
        return np.ascontiguousarray(z.T)

    @staticmethod
    def lean(rows: Any) -> np.ndarray:
        return rows

    def exact(self, rows: Any) -> np.ndarray:
        return rows

    def score(self, rows: Any, scores: np.ndarray) -> np.ndarray:
        """The band's scores (K, m) of the block, without the tables."""
        return np.matmul(self.coef, rows.T, out=scores)


class TileScreener:
    """Screens on AMX tiles: bfloat16 coefficients and features, products summed in float32.
    Keeps each row's features as bfloat16 bit patterns in the scoring tiles' layout too where
    the feature cache has room for them; where it has room only for the exact features
    (:meth:`lean`: P1's shape at the default budget), each block's bit patterns are laid out
    from those when it is scored (a pass over the block, cheaper than laying out its features
    again at every fold)."""

    kept_bytes_per_feature = 2

    def __init__(self, screen: Screen, band: str, f1: int) -> None:
        self.f1 = padded_features(f1)
        self.gemms = tile_gemms(screen.coef.shape[0], self.f1)
        rounded = round_to_band(screen.coef, "bfloat16")
        self.coef = np.zeros((screen.coef.shape[0], self.f1), np.uint16)
        self.coef[:, :f1] = (rounded.view(np.uint32) >> 16).astype(np.uint16)
        self.tables = round_to_band(screen.tables, "bfloat16")
        kernels = band_kernels()
        self.layout, self.rows_layout = (kernels["band_pairs_layout"],
                                         kernels["band_rows_pairs_layout"])
        self.buffers = threading.local()

    @staticmethod
    def columns(m: int) -> int:
        """Columns of the scores of an m-row block: the tiles' rows, padded."""
        return padded_rows(m)

    def rows_for(self, z: np.ndarray) -> Any:
        """(the features' bfloat16 bit patterns in the tiles' layout, the exact features (m,
        F1))."""
        pairs = np.empty((self.f1 // 2, padded_rows(z.shape[1]), 2), np.uint16)
        self.layout(z, pairs.view(np.uint32)[..., 0])
        return pairs, np.ascontiguousarray(z.T)

    @staticmethod
    def lean(rows: Any) -> np.ndarray:
        """What a cache with room for the exact features only keeps of ``rows``."""
        return rows if isinstance(rows, np.ndarray) else rows[1]

    def exact(self, rows: Any) -> np.ndarray:
        return self.lean(rows)

    def score(self, rows: Any, scores: np.ndarray) -> np.ndarray:
        if isinstance(rows, np.ndarray):  # kept lean: this block's bit patterns laid out now
            mp = padded_rows(rows.shape[0])
            pairs = self.buffers.__dict__.get(mp)
            if pairs is None:  # this thread's, once per fold and block shape
                pairs = self.buffers.__dict__[mp] = np.empty((self.f1 // 2, mp, 2), np.uint16)
            self.rows_layout(rows, pairs.view(np.uint32)[..., 0])
        else:
            pairs = rows[0]
        self.gemms.score(self.coef, pairs, scores)
        return scores  # (its padding columns past the rows are not read)


def runs_on_tiles(terms: Sequence[LinearTerms], band: str) -> bool:
    """Whether the tiles screen this fold: bfloat16, the tiles and the compiled kernels at
    hand, and at most :data:`~mixfold.compute.amx_tiles.MAX_FEATURES` features."""
    f1 = padded_features(sum(t.n_features for t in terms) + 1)
    return (band == "bfloat16" and f1 <= MAX_FEATURES and amx_available()
            and band_kernels() is not None)


def screener_for(terms: Sequence[LinearTerms], band: str) -> type:
    """The screener of a CPU fold in ``band``: the tiles for bfloat16 where the CPU has them,
    else NumPy's GEMM."""
    return TileScreener if runs_on_tiles(terms, band) else GemmScreener


class ScreenedEStep:
    """One fold of a CPU band up to float32 (see the module). :meth:`run` returns (posterior
    mass per component, per-row log-density), as :func:`~mixfold.compute.linear.linear_fold`."""

    def __init__(self, terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                 weights: np.ndarray, precision: Precision) -> None:
        band = self.band = precision.band
        self.terms, self.weights, self.n_rows = terms, weights, enc.n_rows
        self.k = len(log_weights)
        self.offsets = feature_offsets(terms)
        self.f = int(self.offsets[-1])
        self.shift = peak_shift(terms, log_weights)  # (keeps the band's scores small)
        self.screen = Screen.plan(terms, log_weights, self.shift, band)
        self.screener = screener_for(terms, band)(self.screen, band, self.f + 1)
        self.codes = [t.codes for t in terms if t.table is not None]
        self.compiled = band_kernels()
        self.block = block_rows(self.k, np.float32)
        self.lean = False  # (set by _kept_features)
        self.kept = self._kept_features(enc)
        self.buffers = threading.local()

    def _kept_features(self, enc: Encoded) -> dict[int, Any] | None:
        """The feature cache's store of this fold's blocks (by first row), when every term says
        what its features depend on and they fit the budget: all the screener keeps, else only
        the exact features (``self.lean``)."""
        if any(t.key is None or t.source is None for t in self.terms):
            return None
        for extra in dict.fromkeys((self.screener.kept_bytes_per_feature, 0)):
            per_row = (self.f + 1) * (4 + extra)
            key = ("screened", type(self.screener).__name__, self.block, extra,
                   tuple(t.key for t in self.terms))
            got = cache_for(key, [t.source for t in self.terms], per_row * self.n_rows,
                            enc.nbytes)
            if got is not None:
                self.lean = extra != self.screener.kept_bytes_per_feature
                return got
        return None

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        """Fold every block on the row threads; hand the sums to the terms; (mass,
        log-densities)."""
        self.lse = np.empty(self.n_rows)
        if self.n_rows == 0:  # no block: nothing to add to the terms
            return np.zeros(self.k), self.lse
        folded = map_row_blocks(self.n_rows, self.block, self.fold_block)
        sums = np.sum([s for s, _ in folded], axis=0)  # (K, F1), blocks added in order
        counts = np.sum([c for _, c in folded], axis=0)
        mass = hand_sums(self.terms, self.offsets, sums, self.screen.split_counts(counts),
                         self.lse)
        return mass, self.lse

    def fold_block(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The statistics of rows [lo, hi): (sums (K, F1), joined table counts (K, V))."""
        rows = self.layout(lo, hi)
        codes = self.screen.codes(self.codes, lo, hi)
        scores = self.screener.score(rows, self._buffer("scores", self.screener.columns(hi - lo)))
        for c in codes:  # each table's rounded log-probabilities
            scores[:, :hi - lo] += self.screener.tables[:, c]
        z = self.screener.exact(rows)  # (m, F1)
        posteriors = self._buffer("posteriors", hi - lo)
        args = (scores, z, self.weights[lo:hi], codes, self.lse[lo:hi], posteriors)
        if self.compiled is None:
            counts = self.screen.rescore_numpy(*args)
        elif self.band == "float32":  # float32's scores are the posteriors' own: only each
            counts = self.screen.rescore_top(self.compiled["exact_top_normalise"], *args)  # row's
        else:  # best is rescored (its log-density); a coarser band's scores only screen
            counts = self.screen.rescore(self.compiled["screen_rescore"], *args)
        return statistics(z, posteriors), counts

    def layout(self, lo: int, hi: int) -> Any:
        """Rows [lo, hi) as the screener and the rescoring read them: kept from an earlier fold
        when they were."""
        kept = self.kept
        got = None if kept is None else kept.get(lo)
        if got is None:
            got = self.screener.rows_for(host_features(self.terms, self.offsets, lo, hi,
                                                       np.float32))
            if kept is not None:
                kept[lo] = self.screener.lean(got) if self.lean else got
        return got

    def _buffer(self, name: str, columns: int) -> np.ndarray:
        """This thread's (K, columns) float32 buffer ``name``, taken once per fold."""
        got = self.buffers.__dict__.get((name, columns))
        if got is None:
            got = self.buffers.__dict__[(name, columns)] = np.empty((self.k, columns),
                                                                     np.float32)
        return got


def statistics(z: np.ndarray, posteriors: np.ndarray) -> np.ndarray:
    """Every feature sum and the mass, (K, F1) in float64: float32 GEMMs of the posteriors
    (K, m) and the exact features (m, F1) over :data:`PARTIAL_ROWS` rows at a time, added in
    float64."""
    m = z.shape[0]
    sums = np.zeros((posteriors.shape[0], z.shape[1]))
    for lo in range(0, m, PARTIAL_ROWS):
        sums += posteriors[:, lo:lo + PARTIAL_ROWS] @ z[lo:lo + PARTIAL_ROWS]
    return sums
