"""The fused linear E-step on torch: the engine of every band on ``cuda`` (``fp8`` on GPUs
that have it) and of ``float64`` named on a torch device.

:class:`TorchFusedEStep` runs the steps of :class:`~mixfold.compute.linear.FusedEStep` -- layout,
score, normalise, accumulate -- on torch tensors, with the plan of the same
:class:`~mixfold.compute.linear.LinearTerms`:

- the features ``z = [phi; 1]`` of a block are laid out in float32 (float64 for the float64 band)
  by the families' own ``features``, rounded once to the band and kept on the device for the rest
  of the fit when a handle keeps its rows (:mod:`mixfold.compute.feature_cache`): per iteration
  only the model goes in and the statistics and log-densities come out;
- the bands up to float32 *screen*: the scoring GEMM ``coef @ z`` takes inputs in the band's
  dtype and accumulates in float32 (``torch.mm(out_dtype=float32)``; fp8 runs
  ``torch._scaled_mm`` with power-of-two scales per feature row), and each row's candidates
  are rescored in float64 from the exact float32 features
  (:meth:`~mixfold.compute.screened.Screen.rescore_torch`), the statistics a float32 GEMM of
  those features and the posteriors;
- float64 normalises its scores (log-sum-exp, weighted posteriors) and sums ``z @ r.T`` in
  float64;
- each block's statistics are added up in float64 on the device and handed back once; the
  M-step runs in float64 as always.

:func:`~mixfold.compute.band_engines.fused_linear_fold` picks the engine a precision names (the
CPU's bands run :class:`~mixfold.compute.linear_screened.ScreenedEStep`).

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
>>> from mixfold.families._protocol import ArrayEncoded
>>> accs = [PoissonAccumulator() for _ in range(2)]
>>> comps = [PoissonDistribution(1.0), PoissonDistribution(6.0)]
>>> enc = ArrayEncoded(np.array([0, 1, 7, 9]))
>>> terms = PoissonAccumulator.linear_terms(accs, comps, enc)
>>> from mixfold.precision import resolve_precision
>>> step = TorchFusedEStep([terms], np.log([0.5, 0.5]), enc, np.ones(4),
...                        resolve_precision("float64@cpu"))
>>> mass, lse = step.run()
>>> mass.round(3).tolist(), round(float(mass.sum()), 12)
([1.955, 2.045], 4.0)
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from mixfold.compute.encoded import Encoded
from mixfold.compute.feature_cache import cache_for
from mixfold.compute.linear import (FLOAT32_SCORE_FLOOR, FLOAT64_SCORE_FLOOR, LinearTerms,
                                    block_rows, feature_offsets, hand_sums, host_features,
                                    peak_shift, score_coefficients)
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.compute.screened import Screen, screens
from mixfold.precision.bands import Precision
from mixfold.precision.gpu import torch_device_available
from mixfold.precision.support import BandSupportError

__all__ = ["TorchFusedEStep", "GPU_BLOCK_ROWS",
           "GPU_CHUNK_ROWS",
           "FP8_MAX", "fp8_supported", "one_torch_thread"]

#: Rows per block on a GPU: long kernels hide the launches; K=16 float32 scores take 256 MiB.
GPU_BLOCK_ROWS = 1 << 22
#: Rows per chunk a fold hands a GPU: each chunk costs a plan and a copy back to the host.
GPU_CHUNK_ROWS = 1 << 26
#: The largest finite e4m3 value: fp8 inputs are scaled by powers of two to stay below it.
FP8_MAX = 448.0
#: GEMM dimensions of ``torch._scaled_mm`` are padded to a multiple of this.
FP8_ALIGN = 16
#: The engine's dtype names per band (torch attributes).
_TORCH_DTYPES = {"fp8": "float8_e4m3fn", "bfloat16": "bfloat16", "float16": "float16",
                 "float32": "float32", "float64": "float64"}


def _torch() -> Any:
    import torch  # an optional engine: imported when a torch precision first runs

    return torch


@contextmanager
def one_torch_thread(torch: Any) -> Iterator[None]:
    """torch's CPU operations on one thread within: the row threads run blocks side by side,
    as NumPy's BLAS runs on one thread each (OpenMP teams on busy cores wait on each other)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@functools.cache
def _float32_output(torch: Any, device_type: str) -> bool:
    """Whether ``torch.mm(..., out_dtype=torch.float32)`` runs bfloat16 inputs on the device type
    (CUDA in recent torch; never a CPU)."""
    a = torch.ones((16, 16), dtype=torch.bfloat16, device=device_type)
    try:
        return torch.mm(a, a, out_dtype=torch.float32).dtype == torch.float32
    except (TypeError, RuntimeError, NotImplementedError):
        return False


def fp8_supported(device: str) -> bool:
    """Whether ``device`` runs fp8 (e4m3) GEMMs: a CUDA device of compute capability 8.9 or
    later (Ada, Hopper) with ``torch._scaled_mm``.

    >>> fp8_supported("cpu")
    False
    """
    if not device.startswith("cuda") or not torch_device_available(device):
        return False
    torch = _torch()
    return hasattr(torch, "_scaled_mm") and \
        torch.cuda.get_device_capability(torch.device(device)) >= (8, 9)


def runs_as_gpu(device: Any) -> bool:
    """Whether the engine runs ``device`` as a GPU: large blocks one after the other, products
    of the band handed back in float32 by the device's GEMM, ``exp`` on the device."""
    return device.type == "cuda"


class TorchFusedEStep:
    """One fold of the fused linear E-step on a torch device (see the module): its plan for a
    chunk, then per row block :meth:`layout`, :meth:`score`, :meth:`normalise` and
    :meth:`accumulate`; :meth:`run` folds every block and hands the statistics to the terms.
    Returns from :meth:`run` are as :func:`~mixfold.compute.linear.linear_fold`'s."""

    def __init__(self, terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                 weights: np.ndarray, precision: Precision) -> None:
        p = precision
        torch = self.torch = _torch()
        if not torch_device_available(p.device):
            raise RuntimeError(f"precision {str(p)!r} runs through torch on {p.device!r}, which "
                               f"this machine does not have (torch {torch.__version__}, CUDA "
                               f"available: {torch.cuda.is_available()})")
        if p.band == "fp8" and not fp8_supported(p.device):
            raise BandSupportError(f"precision {str(p)!r}: device {p.device!r} has no fp8 (e4m3) "
                                   f"GEMM (it needs a CUDA device of compute capability 8.9 or "
                                   f"later and torch._scaled_mm); run bfloat16 there instead")
        if p.band not in _TORCH_DTYPES:
            raise BandSupportError(f"precision {str(p)!r}: the fused torch E-step runs "
                                   f"{sorted(_TORCH_DTYPES)}, not {p.band!r}")
        self.band, self.device = p.band, torch.device(p.device)
        self.on_gpu = runs_as_gpu(self.device)
        self.dtype = getattr(torch, _TORCH_DTYPES[p.band])
        if not self.on_gpu and p.band in ("bfloat16", "float16"):  # (torch's CPU GEMM of these
            raise BandSupportError(f"precision {str(p)!r}: a CPU's {p.band} runs the screened "
                                   f"engine (mixfold.compute.linear_screened), not torch's")
        # rounds its sums to the band)
        wide = p.band == "float64"
        # log-sum-exp and posteriors: float32, float64 in the float64 band
        self.work = torch.float64 if wide else torch.float32
        self.host_dt = np.dtype(np.float64 if wide else np.float32)
        # scores are floored before the exp and exp(floor) taken off after: what sat at the
        # floor (a -inf of a table included) is then exactly 0, as in the NumPy fold
        self.floor = FLOAT64_SCORE_FLOOR if wide else FLOAT32_SCORE_FLOOR
        floor = torch.full((1,), self.floor, dtype=self.work, device=self.device)
        self.floor_exp = float((floor.exp_() if self.on_gpu else np.exp(floor.numpy()))[0])
        self.terms, self.weights, self.n_rows = terms, weights, enc.n_rows
        k = self.k = len(log_weights)
        self.offsets = feature_offsets(terms)
        self.f = int(self.offsets[-1])
        # the largest peak taken off inside the scoring GEMM keeps the band's scores small; each
        # row's own maximum is still taken off before the exp
        self.shift = peak_shift(terms, log_weights)
        coef = score_coefficients(terms, log_weights, self.shift)
        self.tables = [(t.codes, self._to_band(t.table).to(self.work), t.table.shape[1])
                       for t in terms if t.table is not None]
        self.block = self.block_rows(k)
        if self.band == "fp8":
            self._plan_fp8(coef)
        else:
            self.coef = self._to_band(coef)
        # the bands below float32 screen the components; float64 rescoring decides
        self.screen = Screen.plan(terms, log_weights, self.shift, p.band) if screens(p.band) \
            else None
        self.kept = self._kept_features(enc)
        self.may_die = any(not np.isfinite(t.table).all() for t in terms if t.table is not None)
        self.buffers = threading.local()

    def block_rows(self, k: int) -> int:
        """Rows per block: large on a GPU, cache-sized on a CPU."""
        return GPU_BLOCK_ROWS if self.on_gpu else block_rows(k, np.float32)

    def _to_band(self, a: np.ndarray) -> Any:
        """``a`` on the device, rounded once to the band (from float64)."""
        t = self.torch.as_tensor(np.ascontiguousarray(a, dtype=np.float64), device=self.device)
        if self.band == "fp8":
            return t.clamp(-FP8_MAX, FP8_MAX).to(self.dtype)
        return t.to(self.dtype)

    def _kept_features(self, enc: Encoded) -> dict[Any, Any] | None:
        """The feature cache's store of this fold's blocks on the device (by first row), when
        every term says what its features depend on."""
        if any(t.key is None or t.source is None for t in self.terms):
            return None
        key = (type(self).__name__, self.band, str(self.device), self.block,
               self.kept_dtype(), tuple(t.key for t in self.terms))
        # the row weights stay on the device too: kept with the features of the same weights
        return cache_for(key, [t.source for t in self.terms] + [self.weights],
                         self.kept_row_bytes() * self.n_rows, enc.nbytes)

    def kept_dtype(self) -> Any:
        """The dtype kept features are stored in (the band's)."""
        return self.dtype

    def kept_row_bytes(self) -> int:
        """Host bytes a kept row takes (its features in the band, and its weight);
        device memory is not the host's: a GPU's features take no host budget."""
        width = self.f + 1 + 1
        exact = 0 if self.screen is None else 4 * (self.f + 1)  # the float32 features
        return 0 if self.on_gpu else width * self.dtype.itemsize + exact

    # -- the steps of a block ------------------------------------------------------------------

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        """Fold every block; (posterior mass per component, per-row log-density). A GPU takes
        its large blocks one after the other; a CPU's blocks run on the row threads
        (:func:`~mixfold.compute.row_blocks.map_row_blocks`), each torch call on one thread."""
        wide = self.torch.float64 if self.screen is not None else self.work
        lse = self.torch.empty(self.n_rows, dtype=wide, device=self.device)

        def fold_block(lo: int, hi: int) -> tuple[Any, list[Any]]:
            z, w, codes = self.layout(lo, hi)
            buffers = self.block_buffers(hi - lo)
            if self.screen is not None:
                band_z, exact_z = z
                return self.rescore(exact_z, self.score(band_z, codes, buffers), w, codes,
                                    lse[lo:hi])
            r = self.normalise(self.score(z, codes, buffers), w, lse[lo:hi], buffers)
            return self.accumulate(z, r, codes, buffers)

        if self.on_gpu:
            return self.collect([fold_block(lo, min(self.n_rows, lo + self.block))
                                 for lo in range(0, self.n_rows, self.block)], lse)
        with one_torch_thread(self.torch):
            return self.collect(map_row_blocks(self.n_rows, self.block, fold_block), lse)

    def block_buffers(self, m: int) -> dict[str, Any]:
        """This thread's buffers for an m-row block, taken once per fold: outputs written in
        place (a CPU's large new tensors are fresh pages from the system at every call)."""
        got = self.buffers.__dict__.get(m)
        if got is None:
            got = self.buffers.__dict__[m] = {
                name: self.torch.empty(shape, dtype=dtype, device=self.device)
                for name, (shape, dtype) in self.buffer_specs(m).items()}
        return got

    def buffer_specs(self, m: int) -> dict[str, tuple[tuple[int, ...], Any]]:
        """The (shape, dtype) of each buffer of an m-row block."""
        k, work = self.k, self.work
        return {"scores": ((k, m), work), "top": ((m,), work), "total": ((m,), work)}

    def layout(self, lo: int, hi: int) -> tuple[Any, Any, list[Any]]:
        """The features ``z`` (F + 1, rows) of rows [lo, hi) in the band, their weights and each
        table's codes, all on the device: kept from an earlier fold (of the same rows and
        weights) when they were."""
        kept = self.kept
        got = None if kept is None else kept.get(lo)
        if got is None:
            got = self._device_rows(lo, hi)
            if kept is not None:
                kept[lo] = got
        return got

    def _codes_and_weights(self, lo: int, hi: int) -> tuple[list[Any], Any]:
        """Each table's codes of rows [lo, hi) and their weights, on the device."""
        torch = self.torch
        codes = [torch.as_tensor(c[lo:hi], device=self.device).long().clamp_(0, v - 1)
                 for c, _, v in self.tables]
        return codes, torch.as_tensor(self.weights[lo:hi], device=self.device).to(self.work)

    def _device_rows(self, lo: int, hi: int) -> tuple[Any, Any, list[Any]]:
        host = host_features(self.terms, self.offsets, lo, hi, self.host_dt)
        z = self.torch.from_numpy(host).to(self.device)
        codes, w = self._codes_and_weights(lo, hi)
        band_z = self._fp8_layout(z) if self.band == "fp8" else z.to(self.dtype)
        return ((band_z, z) if self.screen is not None else band_z), w, codes

    def rescore(self, z: Any, scores: Any, w: Any, codes: list[Any], lse: Any
                ) -> tuple[Any, list[Any]]:
        """A screened block (:meth:`~mixfold.compute.screened.Screen.rescore_torch`): each
        row's log-density into ``lse`` (float64, less the shift); returns the statistics of the
        float32 GEMM of the exact features and the posteriors, (F + 1, K) in float64, and each
        table's counts."""
        torch = self.torch
        out, posteriors, counts = self.screen.rescore_torch(torch, scores, z, w, codes)
        lse.copy_(out - self.shift)
        sums = torch.mm(z, posteriors.to(torch.float32).t()).to(torch.float64)
        return sums, self.screen.split_counts(counts)

    def score(self, z: Any, codes: list[Any], buffers: dict[str, Any]) -> Any:
        """The weighted scores (K, rows) of a block, minus the shift, in the working dtype."""
        scores = self._scoring_gemm(z, buffers)
        for (_, table, _), c in zip(self.tables, codes):
            scores += table[:, c]
        return scores

    def _scoring_gemm(self, z: Any, buffers: dict[str, Any]) -> Any:
        """``coef @ z`` (K, rows) in the working dtype."""
        if self.band == "fp8":
            return self._fp8_score(z)
        return self._gemm(self.coef, z, buffers["scores"])

    def normalise(self, scores: Any, w: Any, lse: Any, buffers: dict[str, Any]) -> Any:
        """Log-sum-exp over the components into ``lse`` (less the shift); returns the weighted
        posteriors (K, rows), in ``scores``. A row every component scores -inf gets no
        posterior and a log-density of -inf."""
        torch = self.torch
        top = torch.amax(scores, dim=0, out=buffers["top"])
        dead = None
        if self.may_die:  # a -inf in a table can leave a row that no component scores
            dead = ~torch.isfinite(top)
            top.masked_fill_(dead, 0.0)
        scores -= top
        self._floored_exp(scores)
        total = torch.sum(scores, dim=0, out=buffers["total"])
        torch.log(total, out=lse)
        lse += top
        if dead is not None:  # an infinite total gives a dead row posteriors 0, not NaN
            total.masked_fill_(dead, float("inf"))
        scores *= torch.div(w, total, out=total)
        return scores

    def _floored_exp(self, scores: Any) -> None:
        """exp in place above the floor (no subnormal is formed: they are slow to compute
        with), what sat at it then exactly 0, as in the NumPy fold."""
        scores.clamp_(min=self.floor)
        if self.on_gpu:
            scores.exp_()
        else:  # (a CPU runs float64 here: NumPy's exp on the tensor's own memory)
            np.exp(scores.numpy(), out=scores.numpy())
        scores -= self.floor_exp

    def accumulate(self, z: Any, r: Any, codes: list[Any], buffers: dict[str, Any]
                   ) -> tuple[Any, list[Any]]:
        """Every feature sum and the mass (one GEMM ``z @ r.T``, (F + 1, K)) and each table's
        counts (K, V), in float64."""
        sums = self._statistics_gemm(z, r, buffers)
        return sums, self._table_counts(r, codes)

    def _table_counts(self, r: Any, codes: list[Any]) -> list[Any]:
        """Each table's posterior counts (K, V) of a block, in float64."""
        torch = self.torch
        counts = []
        for (_, _, v), c in zip(self.tables, codes):
            part = torch.zeros((self.k, v), dtype=self.work, device=self.device)
            part.index_add_(1, c, r)
            counts.append(part.to(torch.float64))
        return counts

    def _gemm(self, a: Any, b: Any, out: Any) -> Any:
        """``a @ b`` (inputs in the band) with float32 accumulation, into ``out`` in the working
        dtype (a GPU hands reduced-precision products back in float32)."""
        if self.on_gpu and self.dtype != self.work:
            return out.copy_(self._mm_float32(a, b))
        return self.torch.mm(a, b, out=out)

    def _mm_float32(self, a: Any, b: Any) -> Any:
        """A GPU's ``a @ b`` of band inputs, accumulated and handed back in float32: torch's
        ``out_dtype`` where this torch has it, else the band's values multiplied in float32."""
        torch = self.torch
        if _float32_output(torch, self.device.type):
            return torch.mm(a, b, out_dtype=torch.float32)
        return torch.mm(a.float(), b.float())

    def _statistics_gemm(self, z: Any, r: Any, buffers: dict[str, Any]) -> Any:
        """``z @ r.T`` (F + 1, K) in float64 (the float64 band's: the bands below screen)."""
        return self.torch.mm(z, r.t()).to(self.torch.float64)

    def collect(self, folded: list[tuple[Any, list[Any]]], lse: Any
                ) -> tuple[np.ndarray, np.ndarray]:
        """The blocks' statistics added up in float64 in block order (on the device) and
        handed to the terms; (mass, per-row log-density) in float64."""
        sums = folded[0][0]
        counts = folded[0][1]
        for s, c in folded[1:]:
            sums = sums + s
            counts = [a + b for a, b in zip(counts, c)]
        out = self.log_densities(lse)
        mass = hand_sums(self.terms, self.offsets, sums.t().cpu().numpy(),
                         [c.cpu().numpy() for c in counts], out)
        return mass, out

    def log_densities(self, lse: Any) -> np.ndarray:
        """Each row's log-density less the terms' bases, in float64 on the host: ``lse`` and
        the shift."""
        out = lse.to(self.torch.float64).cpu().numpy()
        out += self.shift
        return out

    # -- fp8 (e4m3) through torch._scaled_mm ---------------------------------------------------

    def _plan_fp8(self, coef: np.ndarray) -> None:
        """The coefficients (float32, padded to ``_scaled_mm``'s multiples); each block scales
        them by its features' scales."""
        torch = self.torch
        self.fp = -(-(self.f + 1) // FP8_ALIGN) * FP8_ALIGN
        self.kp = -(-self.k // FP8_ALIGN) * FP8_ALIGN
        padded = np.zeros((self.kp, self.fp))
        padded[:self.k, :self.f + 1] = coef
        self.coef = torch.as_tensor(padded, dtype=torch.float32, device=self.device)
        self.one = torch.ones((), dtype=torch.float32, device=self.device)

    def _pow2_scale(self, amax: Any) -> Any:
        """The power of two that brings ``amax`` within e4m3's range (exact to divide by)."""
        torch = self.torch
        return torch.exp2(torch.ceil(torch.log2(amax.clamp_min(1e-30) / FP8_MAX)))

    def _fp8_layout(self, z: Any) -> tuple[Any, int, Any]:
        """z (F + 1, rows) as fp8, each feature row divided by a power of two that fits it in
        e4m3's range, laid out (rows, Fp) as ``_scaled_mm`` reads the scoring GEMM's left
        operand, rows padded with zeros; with the rows and the scales (Fp,)."""
        torch = self.torch
        f1, m = z.shape
        mp = -(-m // FP8_ALIGN) * FP8_ALIGN
        scaled = torch.zeros((self.fp, mp), dtype=torch.float32, device=self.device)
        scaled[:f1, :m] = z
        scale = self._pow2_scale(scaled.abs().amax(dim=1))
        scaled /= scale[:, None]
        return scaled.to(self.dtype).t().contiguous(), m, scale

    def _fp8_score(self, z: Any) -> Any:
        rows_fp, m, scale = z
        coef = self.coef * scale  # the features' scales move into the coefficients
        c_scale = self._pow2_scale(coef.abs().amax())
        coef8 = (coef / c_scale).to(self.dtype)
        # (rows, Fp) @ (Fp, Kp), the second operand column-major as _scaled_mm reads it
        out = self.torch._scaled_mm(rows_fp, coef8.t(), scale_a=self.one, scale_b=c_scale,
                                    out_dtype=self.torch.float32)
        return out[:m, :self.k].t().contiguous()
