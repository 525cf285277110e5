"""The fused linear E-step of the bfloat16 band on a CPU with AMX tiles: both GEMMs multiply
bfloat16 values and accumulate in float32 (:mod:`mixfold.compute.amx_tiles`), as DESIGN's bands
ask and as torch's CPU GEMM does not (it rounds its sums to bfloat16).

:class:`AmxFusedEStep` is :class:`~mixfold.compute.linear_torch.CpuTorchFusedEStep` with these
differences of layout:

- a block's features are bfloat16 bit patterns, F + 1 padded to pairs and the rows to
  :data:`~mixfold.compute.amx_tiles.ROW_ALIGN` with zeros, in the two layouts the tiles read
  (features in pairs for the scoring GEMM, rows in pairs for the statistics one), kept between
  folds when the feature budget has room (4 bytes a feature a row, as float32), else kept as
  the band's values (2 bytes) and laid out block by block;
- the posteriors are written as bfloat16 bit patterns by the compiled normalisation
  (:func:`~mixfold.compute.numba_bands.band_posterior_bits`): the rows that pad a block get the
  weight 0, so they add nothing.

The values are the band engine's -- features, coefficients and posteriors rounded to bfloat16,
products summed in float32 per block and in float64 across blocks -- and only the order of the
float32 sums differs.

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
>>> from mixfold.families._protocol import ArrayEncoded
>>> accs = [PoissonAccumulator() for _ in range(2)]
>>> comps = [PoissonDistribution(1.0), PoissonDistribution(6.0)]
>>> enc = ArrayEncoded(np.array([0, 1, 7, 9]))
>>> terms = PoissonAccumulator.linear_terms(accs, comps, enc)
>>> from mixfold.compute.band_engines import fused_linear_fold  # this engine, where AMX is
>>> mass, lse = fused_linear_fold([terms], np.log([.5, .5]), enc, np.ones(4), "bfloat16@cpu")
>>> mass.round(2).tolist(), round(float(mass.sum()), 2)
([1.95, 2.05], 4.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.amx_tiles import (MAX_FEATURES, ROW_ALIGN, amx_available, padded_features,
                                       padded_rows, tile_gemms)
from mixfold.compute.encoded import Encoded
from mixfold.compute.kernels import band_kernels
from mixfold.compute.linear import LinearTerms, block_rows
from mixfold.compute.linear_torch import CpuTorchFusedEStep, TorchFusedEStep

__all__ = ["AmxFusedEStep", "runs_on_tiles"]


def runs_on_tiles(terms: Sequence[LinearTerms], band: str, device: str) -> bool:
    """Whether :class:`AmxFusedEStep` runs this fold: bfloat16 on the CPU, the tiles and the
    compiled normalisation at hand, and at most
    :data:`~mixfold.compute.amx_tiles.MAX_FEATURES` features."""
    f1 = padded_features(sum(t.n_features for t in terms) + 1)
    return (band == "bfloat16" and device == "cpu" and f1 <= MAX_FEATURES
            and amx_available() and band_kernels() is not None)


class AmxFusedEStep(CpuTorchFusedEStep):
    """The CPU bfloat16 band's fold on AMX tiles (see the module)."""

    def __init__(self, terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                 weights: np.ndarray, precision: str) -> None:
        super().__init__(terms, log_weights, enc, weights, precision)
        self.gemms = tile_gemms(self.k, self.f1)
        coef = np.zeros((self.k, self.f1), np.uint16)
        coef[:, :self.f + 1] = self._bits(self.coef.numpy())  # already the band's values
        self.coef_bits = coef

    def block_rows(self, k: int) -> int:
        """The NumPy float32 fold's rows (twice the CPU engine's): a block's steps are a few
        GIL-free calls, and fewer, longer blocks keep two row threads from queueing for the GIL
        between them."""
        return block_rows(k, np.float32)

    @property
    def f1(self) -> int:
        """The features and the ones row, padded to pairs."""
        return padded_features(self.f + 1)

    @staticmethod
    def _bits(a: np.ndarray) -> np.ndarray:
        """float32 values that are bfloat16's -> their bit patterns."""
        return (np.ascontiguousarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)

    def kept_dtype(self) -> Any:
        """Kept ready (``keep_ready``): both tile layouts' bit patterns; else the band's values
        (laid out block by block)."""
        return self.torch.int16 if self.keep_ready else self.dtype

    @property
    def compact(self) -> bool:
        """Whether the kept features are the band's values, laid out block by block."""
        return self.kept is not None and not self.keep_ready

    def kept_row_bytes(self) -> int:
        """Both layouts of a row's features (2 bytes each), or its band values, and its
        weight."""
        width = 2 * self.f1 if self.keep_ready else self.f + 1
        return 2 * width + self.host_dt.itemsize

    def _tiles(self, z: np.ndarray, pairs: np.ndarray | None = None,
               rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """z (F + 1, m) float32 in the tiles' two layouts (into ``pairs`` and ``rows`` when
        given), padded with zeros."""
        mp = padded_rows(z.shape[1])
        if pairs is None:
            pairs = np.empty((self.f1 // 2, mp, 2), np.uint16)
            rows = np.empty((mp // 2, self.f1, 2), np.uint16)
        # (each pair of 16-bit values written as one 32-bit word)
        self.compiled["band_tile_layouts"](z, pairs.view(np.uint32)[..., 0],
                                           rows.view(np.uint32)[..., 0])
        return pairs, rows

    def _device_rows(self, lo: int, hi: int) -> tuple[Any, Any, list[Any]]:
        host = self._host_features(lo, hi)
        if self.compact:
            z = self.torch.from_numpy(host).to(self.dtype)
        else:
            z = self._tiles(host)
        codes, w = self._codes_and_weights(lo, hi)
        w_padded = self.torch.zeros(padded_rows(hi - lo), dtype=self.work)
        w_padded[:hi - lo] = w
        return z, w_padded, codes

    lse_padding = ROW_ALIGN  # a block's padding past the last row gets a log-density too

    def buffer_specs(self, m: int) -> dict[str, tuple[tuple[int, ...], Any]]:
        k, mp, work = self.k, padded_rows(m), self.work
        specs = {"scores": ((k, mp), work), "top": ((mp,), work), "total": ((mp,), work),
                 "scale": ((mp,), work), "bits": ((k, mp), self.torch.int16)}
        if self.compact:  # the block's tile layouts, from the kept band values
            specs.update(pairs=((self.f1 // 2, mp, 2), self.torch.int16),
                         rows=((mp // 2, self.f1, 2), self.torch.int16))
        return specs

    def layout(self, lo: int, hi: int) -> tuple[Any, Any, list[Any]]:
        """The kept (or new) layouts of rows [lo, hi); they and the codes stay with the block's
        buffers for a block scored again."""
        z, w, codes = TorchFusedEStep.layout(self, lo, hi)
        buffers = self.block_buffers(hi - lo)
        if self.compact:
            z = self._tiles(z.float().numpy(), *(buffers[name].numpy().view(np.uint16)
                                                 for name in ("pairs", "rows")))
        buffers.update(z=z, codes=codes, lo=lo, m=hi - lo)
        return z, w, codes

    def score(self, z: Any, codes: list[Any], buffers: dict[str, Any]) -> Any:
        scores = buffers["scores"]
        self.gemms.score(self.coef_bits, z[0], scores.numpy())
        m = buffers["m"]
        for (_, table, _), c in zip(self.tables, codes):
            scores[:, :m] += table[:, c]
        return scores

    def normalise(self, scores: Any, w: Any, lse: Any, buffers: dict[str, Any]) -> Any:
        """Each row's log-density into the fold's (in float64, the shift added); returns the
        posteriors as bfloat16 bit patterns (K, padded rows), the padding's 0."""
        bits = buffers["bits"].numpy().view(np.uint16)
        self._normalise_compiled(scores, w, buffers, "band_normalise_bits", bits)
        return bits

    def accumulate(self, z: Any, r: Any, codes: list[Any], buffers: dict[str, Any]
                   ) -> tuple[Any, list[Any]]:
        """The tiles' sums (F + 1, K) and each table's counts, in float64."""
        torch = self.torch
        sums = np.zeros((self.k, self.f1), np.float32)
        self.gemms.stats(r, z[1], sums)
        out = torch.from_numpy(sums[:, :self.f + 1].T.astype(np.float64))
        if not self.tables:
            return out, []
        posteriors = buffers["bits"][:, :buffers["m"]].view(torch.bfloat16).to(self.work)
        return out, self._table_counts(posteriors, codes)
