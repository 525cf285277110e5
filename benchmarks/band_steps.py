"""Where a screened band's fold spends its time: each step of one 32k-row block of P10's model
(P1's shape: K=16 diagonal Gaussians in D=10), beside the unscreened NumPy float32 and the
float64 fold of the same block, in one run.

    PYTHONPATH=src python benchmarks/band_steps.py [--rows 1000000] [--repeats 7]

It runs on one thread (row threads and BLAS: set before NumPy loads, unless the environment
already names them), as the goal's ratios are taken.

Every figure is the least process time (ms) of ``--repeats`` calls on one block of
``--rows`` drawn rows (the rows' features kept, as a fit keeps them after its first iteration),
the steps interleaved round by round so that a busy machine's load falls on all of them alike.
Then the probes of #32 item 7's untried steps, on the same bfloat16 block: the rescoring
kernel's passes one by one (what a row costs even when its best component is its only
candidate), how many rows keep a second candidate, the best component's log-density in float32
instead of float64 (its time and its error), and the statistics GEMM on the AMX tiles with split
operands (posteriors and features each a bfloat16 hi + lo pair, three tile products
``P_hi Z_hi + P_lo Z_hi + P_hi Z_lo`` summed in float32 over 2048 rows, added in float64) beside
NumPy's float32 GEMM: the layouts it needs, the tiles' own time and its error. Last, the bound:
what a bfloat16 block costs with only the steps no kernel removes, against what the goal allows
(the unscreened float32 fold / 1.5 and the float64 fold / 3).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path

for _var in ("MIXFOLD_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # (before NumPy loads its BLAS)

import numba  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mixfold.compute import amx_tiles, band_engines, linear, numba_screen  # noqa: E402
from mixfold.compute.numba_bands import _bfloat16_bits  # noqa: E402
from mixfold.compute.screened import SCREEN_CUTOFF  # noqa: E402
from mixfold.compute.fold import fold_rows  # noqa: E402
from mixfold.compute.linear_screened import ScreenedEStep, TileScreener, statistics  # noqa: E402
from mixfold.precision import resolve_precision  # noqa: E402
from mixfold.compute.feature_cache import FeatureCache  # noqa: E402
from precision import p1_mixture, unscreened  # noqa: E402

from _table import markdown_header, markdown_row  # noqa: E402


class _Caught:
    """Keeps the engines a fold builds (the screened step, or NumPy's fused step)."""

    def __init__(self) -> None:
        self.steps: list = []

    def __enter__(self) -> _Caught:
        self.engine_for, self.fused = band_engines.engine_for, linear.FusedEStep
        caught = self.steps

        class Screened(ScreenedEStep):
            def __init__(self, *a, **k) -> None:
                super().__init__(*a, **k)
                caught.append(self)

        class Fused(linear.FusedEStep):
            def __init__(self, *a, **k) -> None:
                super().__init__(*a, **k)
                caught.append(self)

        band_engines.engine_for = lambda terms, p: (
            Screened if self.engine_for(terms, p) is ScreenedEStep else None)
        linear.FusedEStep = Fused
        return self

    def __exit__(self, *exc) -> None:
        band_engines.engine_for, linear.FusedEStep = self.engine_for, self.fused


def engine(model, enc, band: str):
    """The engine a fold of ``band`` builds (unscreened: NumPy's fused float32 fold)."""
    factory = model.estimator().accumulator_factory()
    weights = np.ones(enc.n_rows)
    with _Caught() as caught:
        if band == "float32u":
            band_engines.engine_for = lambda terms, p: None
            band = "float32"
        fold_rows(factory.make(), enc, weights, model, resolve_precision(band), 1 << 20)
    return caught.steps[-1]


def screened_block(step: ScreenedEStep, m: int):
    """One screened block as :meth:`ScreenedEStep.fold_block` runs it with its rows kept
    (the tiles' pairs laid out from the kept exact rows, as at P10's shape and the default
    budget), each step timed in the sequence (its inputs as warm as in a fold)."""
    rows = step.screener.rows_for(linear.host_features(step.terms, step.offsets, 0, m,
                                                       np.float32))
    tiles = isinstance(step.screener, TileScreener)
    pairs = rows[0] if tiles else None
    z = step.screener.exact(rows)
    scores = step._buffer("scores", step.screener.columns(m))
    posteriors = step._buffer("posteriors", m)
    codes = step.screen.codes(step.codes, 0, m)
    args = (scores, z, step.weights[:m], codes, step.lse[:m], posteriors)
    top = step.band == "float32"  # (float32's scores give its posteriors: its best rescored)
    kernel = step.compiled["exact_top_normalise" if top else "screen_rescore"]

    def rescore() -> None:
        (step.screen.rescore_top if top else step.screen.rescore)(kernel, *args)
    sequence = [("score (GEMM)", lambda: step.screener.score(rows, scores))]
    if tiles:
        sequence = [("tiles' pairs from kept rows", lambda: step.screener.rows_layout(
                         z, pairs.view(np.uint32)[..., 0])),
                    ("score (tiles' GEMM)", lambda: step.screener.gemms.score(
                         step.screener.coef, pairs, scores))]
    sequence += [("rescore kernel", rescore),
                 ("statistics GEMM (float32)", lambda: statistics(z, posteriors))]
    return timed_sequence(sequence)


def timed_sequence(sequence):
    def run() -> dict:
        out = {}
        t = time.process_time()
        for name, call in sequence:
            call()
            now = time.process_time()
            out[name] = now - t
            t = now
        out["block (the steps above)"] = sum(out.values())
        return out
    return run


def fused_block(step, m: int):
    z, scores, totals = step.block_buffers(m)
    # its own copies: the scratch buffers are shared by name between the engines
    z, scores, totals = step.layout(0, m, z).copy(), scores.copy(), totals.copy()

    return timed_sequence([
        ("score (GEMM)", lambda: step.score(0, m, z, scores)),
        ("normalise", lambda: step.normalise(0, m, z, scores, totals)),
        ("statistics GEMM", lambda: step.accumulate(0, m, z, scores))])


def whole_fold(model, enc, band: str, cache, blocks: int):
    """One fold of ``band`` as a fit runs it (features kept by the handle's cache)."""
    factory = model.estimator().accumulator_factory()
    weights = np.ones(enc.n_rows)
    precision = resolve_precision("float32" if band == "float32u" else band)

    def run() -> dict:
        t = time.process_time()
        with cache.active():
            if band == "float32u":
                with unscreened():
                    fold_rows(factory.make(), enc, weights, model, precision, 1 << 20)
            else:
                fold_rows(factory.make(), enc, weights, model, precision, 1 << 20)
        return {"whole fold per block": (time.process_time() - t) / blocks}
    run()  # the first fold lays the features out
    return run


def least_ms(runs: dict, repeats: int) -> dict:
    """Each band's steps: the least ms of each over the rounds, bands taking turns."""
    best: dict = {}
    for run in runs.values():  # a warm-up round: the kernels compile on their first call
        run()
    for _ in range(repeats):  # round by round: a load falls on every band alike
        for band, run in runs.items():
            for name, v in run().items():
                key = (band, name)
                best[key] = min(best.get(key, np.inf), 1e3 * v)
    return best


# ---- the probes of item 7's untried steps (none of this is in the engine: each measured, not
# kept; see benchmarks/README.md) ----

_FLAGS = numba_screen._FLAGS


@numba.njit(nogil=True, fastmath=_FLAGS, error_model="numpy")
def _rescore_passes(passes, scores, z, coef, cmax, eta, slack, cutoff, shift, tables, codes, w,
                    lse, posteriors):
    # screen_rescore's passes up to ``passes`` (5: all but the rows with several candidates);
    # returns how many rows have several
    k_all, m = scores.shape[0], z.shape[0]
    top, second = np.empty(m, np.float32), np.empty(m, np.float32)
    arg, low, single = np.empty(m, np.int32), np.empty(m, np.float64), np.empty(m, np.float64)
    numba_screen._best_two(scores, top, arg, second)
    if passes > 1:
        numba_screen._lowest_candidates(z, cmax, eta, slack, cutoff, top, low)
    if passes > 2:
        numba_screen._single_scores(z, coef, arg, single)
    if passes > 3:
        for c in range(k_all):
            posteriors[c, :] = 0.0
    if passes > 4:
        again = np.empty(m, np.int64)
        return numba_screen._one_candidate(arg, single, tables, codes, w, shift, top, second,
                                           low, lse, posteriors, again)
    return 0


@numba.njit(nogil=True, fastmath=_FLAGS, error_model="numpy")
def _single_scores32(z, coef, arg, exact):
    # each row's best component's score in float32 (the float64 pass's arithmetic otherwise)
    m, f1 = z.shape
    for j in range(m):
        e = np.float32(0.0)
        for f in range(f1):
            e += coef[arg[j], f] * z[j, f]
        exact[j] = e


@numba.njit(inline="always")
def _hi_lo(x):
    # x's bfloat16 pair: the nearest bfloat16 and the nearest to what it leaves
    h = _bfloat16_bits(x)
    return h, _bfloat16_bits(np.float32(x) - np.uint32(h << np.uint32(16)).view(np.float32))


@numba.njit(nogil=True, fastmath=_FLAGS, error_model="numpy")
def _features_split(z, hi, lo):
    # z (m, F1) float32 -> hi, lo (m/2, F1p) as pairs of rows (the tiles' right operand over
    # the rows): row 2i in the low half, 2i+1 in the high half, F1 padded with zeros
    f1 = z.shape[1]
    for i in range(hi.shape[0]):
        for f in range(hi.shape[1]):
            a = z[2 * i, f] if f < f1 else np.float32(0.0)
            b = z[2 * i + 1, f] if f < f1 else np.float32(0.0)
            ah, al = _hi_lo(a)
            bh, bl = _hi_lo(b)
            hi[i, f] = ah | (bh << np.uint32(16))
            lo[i, f] = al | (bl << np.uint32(16))


@numba.njit(nogil=True, fastmath=_FLAGS, error_model="numpy")
def _posteriors_split(p, hi, lo):
    for c in range(p.shape[0]):
        for j in range(p.shape[1]):
            hi[c, j], lo[c, j] = _hi_lo(p[c, j])


def _statistics_ir(k: int, f1p: int) -> str:
    """out (K, F1p) float32 = P (K, rows) @ Z (rows, F1p) in three tile products of the split
    operands; P's rows ``stride`` apart (F1p <= 32: two result tiles)."""
    ir = amx_tiles._Ir("stats", "ptr noalias %phi, ptr noalias %plo, ptr noalias %zhi, "
                                "ptr noalias %zlo, ptr noalias %out, i64 %m, i64 %stride")
    chunks = amx_tiles._spans(f1p, 16)  # 16 features (64 bytes of float32) per result tile
    a_stride = ir.value("mul i64 %stride, 2")
    for c0, kc in amx_tiles._spans(k, 16):
        tiles = {2: (kc, 64), 3: (kc, 64)}  # 0, 1 results; 2, 3 P hi, lo; 4.. Z hi, lo
        for q, (_, w) in enumerate(chunks):
            tiles.update({q: (kc, 4 * w), 4 + 2 * q: (16, 4 * w), 5 + 2 * q: (16, 4 * w)})
        ir.configure(tiles)
        for q in range(len(chunks)):
            ir.emit(f"call void @llvm.x86.tilezero(i8 {q})")

        def step(j: str, c0: int = c0) -> None:
            at = ir.value(f"add i64 {j}, {ir.value(f'mul i64 %stride, {c0}')}")
            for reg, base in ((2, "%phi"), (3, "%plo")):
                ir.emit(f"call void @llvm.x86.tileloadd64(i8 {reg}, "
                        f"ptr {ir.address(base, at)}, i64 {a_stride})")
            for q, (f0, _) in enumerate(chunks):
                b = ir.value(f"add i64 {ir.value(f'mul i64 {j}, {f1p}')}, {2 * f0}")
                for reg, base in ((4 + 2 * q, "%zhi"), (5 + 2 * q, "%zlo")):
                    ir.emit(f"call void @llvm.x86.tileloadd64(i8 {reg}, "
                            f"ptr {ir.address(base, b)}, i64 {4 * f1p})")
                for a, b_reg in ((2, 4), (3, 4), (2, 5)):  # hi hi, lo hi, hi lo
                    ir.emit(f"call void @llvm.x86.tdpbf16ps(i8 {q}, i8 {a}, i8 {b_reg + 2 * q})")

        ir.loop(step, "%m", 32)
        for q, (f0, _) in enumerate(chunks):
            out = ir.value(f"getelementptr float, ptr %out, i64 {c0 * f1p + f0}")
            ir.emit(f"call void @llvm.x86.tilestored64(i8 {q}, ptr {out}, i64 {4 * f1p})")
    return ir.text()


class TileStatistics:
    """The split-operand statistics GEMM compiled for K components and F1p features."""

    def __init__(self, k: int, f1p: int) -> None:
        import llvmlite.binding as llvm

        amx_tiles.tile_gemms(k, f1p)  # (initialises LLVM's native target)
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=3)
        module = llvm.parse_assembly(_statistics_ir(k, f1p))
        module.verify()
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()
        self._call = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 5, ctypes.c_int64,
                                      ctypes.c_int64)(self._engine.get_function_address("stats"))
        self.k, self.f1p = k, f1p

    def __call__(self, phi, plo, zhi, zlo, partial: int = 2048) -> np.ndarray:
        """(K, F1p) float64: float32 tile sums of ``partial`` rows, added in float64."""
        m = phi.shape[1]
        out = np.empty((self.k, self.f1p), np.float32)
        total = np.zeros((self.k, self.f1p))
        for lo in range(0, m, partial):
            self._call(phi.ctypes.data + 2 * lo, plo.ctypes.data + 2 * lo,
                       zhi.ctypes.data + 2 * self.f1p * lo, zlo.ctypes.data + 2 * self.f1p * lo,
                       out.ctypes.data, min(partial, m - lo), m)
            total += out
        return total


def probes(step: ScreenedEStep, m: int, repeats: int) -> tuple[dict, dict]:
    """The probes' least ms on one bfloat16 block, and what they measured beside."""
    rows = step.screener.rows_for(linear.host_features(step.terms, step.offsets, 0, m,
                                                       np.float32))
    z, s = step.screener.exact(rows), step.screen
    scores = step._buffer("scores", step.screener.columns(m))
    posteriors = step._buffer("posteriors", m)
    step.screener.score(rows, scores)
    codes, w, lse = s.codes(step.codes, 0, m), np.ones(m), np.empty(m)
    kernel = step.compiled["screen_rescore"]
    args = (scores, z, s.coef, s.cmax, s.eta, s.slack, SCREEN_CUTOFF, s.shift, s.tables, codes,
            w, lse, posteriors)
    exact = s.coef @ z.T.astype(np.float64)  # every component's float64 score
    arg = exact.argmax(axis=0).astype(np.int32)
    coef32, single32 = s.coef.astype(np.float32), np.empty(m, np.float32)
    k, f1 = posteriors.shape[0], z.shape[1]
    f1p = f1 + f1 % 2
    zhi, zlo = np.empty((m // 2, f1p), np.uint32), np.empty((m // 2, f1p), np.uint32)
    phi, plo = np.empty((k, m), np.uint16), np.empty((k, m), np.uint16)
    tiles = TileStatistics(k, f1p) if f1p <= 32 and amx_tiles.amx_available() else None
    calls = {f"rescoring: passes 1..{n}": (lambda n=n: _rescore_passes(n, *args))
             for n in range(1, 6)}
    calls["rescoring: the whole kernel"] = lambda: s.rescore(kernel, scores, z, w, codes, lse,
                                                              posteriors)
    calls["best component's score in float32"] = lambda: _single_scores32(z, coef32, arg,
                                                                          single32)
    calls["statistics: NumPy float32 GEMM"] = lambda: statistics(z, posteriors)
    calls["statistics: features split (hi, lo)"] = lambda: _features_split(z, zhi, zlo)
    calls["statistics: posteriors split (hi, lo)"] = lambda: _posteriors_split(posteriors, phi,
                                                                               plo)
    if tiles is not None:  # (one call: the tiles' own time, sums of the whole block in float32)
        calls["statistics: the tiles' three products"] = lambda: tiles(phi, plo, zhi, zlo, m)
    ms = least_ms({"": lambda: _timed(calls)}, repeats)
    ms = {name: v for (_, name), v in ms.items()}
    several = _rescore_passes(5, *args) / m
    s.rescore(kernel, scores, z, w, codes, lse, posteriors)  # (the posteriors again, whole)
    _features_split(z, zhi, zlo)
    _posteriors_split(posteriors, phi, plo)
    seen = {"rows with several candidates": several,
            "rows whose float64 second is within the cutoff":
                float(np.mean(np.sort(exact, axis=0)[-2] >= exact.max(axis=0) - SCREEN_CUTOFF)),
            "band score's error, largest (nats)": float(np.abs(scores[:, :m] - exact).max()),
            "band's error bound, median over rows (nats)":
                float(np.median(s.eta * (np.abs(z) @ s.cmax) + s.slack))}
    seen.update(_margin_alone(scores[:, :m], exact, 2 * (s.eta * (np.abs(z) @ s.cmax) + s.slack)))
    best64 = exact[arg, np.arange(m)]
    seen["float32 best score: largest error (nats)"] = float(np.abs(single32 - best64).max())
    seen["float32 best score: mean error / mean log-density"] = float(
        abs((single32 - best64).mean()) / abs((best64 + s.shift).mean()))
    reference = posteriors.astype(np.float64) @ z.astype(np.float64)
    scale = np.abs(posteriors.astype(np.float64)) @ np.abs(z.astype(np.float64))
    seen["float32 GEMM statistics: error / sum of abs(r z)"] = float(
        (np.abs(statistics(z, posteriors) - reference) / scale).max())
    if tiles is not None:
        got = tiles(phi, plo, zhi, zlo)[:, :f1]
        seen["tiles' statistics (2048-row float32 sums): error / sum of abs(r z)"] = float(
            (np.abs(got - reference) / scale).max())
    return ms, seen


def _margin_alone(scores: np.ndarray, exact: np.ndarray, margin: np.ndarray) -> dict:
    """The cheaper rescoring: candidates within twice the band's bound of the best band score
    (no cutoff). How many rows keep a second, and the posterior mass (float64's) it drops."""
    band = scores.astype(np.float64)
    keep = band >= band.max(axis=0) - margin
    p = np.exp(exact - exact.max(axis=0))
    p /= p.sum(axis=0)
    dropped = np.where(keep, 0.0, p).sum(axis=0)
    return {"rows keeping a second within twice the bound alone": float(np.mean(keep.sum(0) > 1)),
            "posterior mass it drops, largest of a row": float(dropped.max()),
            "posterior mass it drops, mean per row": float(dropped.mean())}


def _timed(calls: dict) -> dict:
    out = {}
    for name, call in calls.items():
        t = time.process_time()
        call()
        out[name] = time.process_time() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    model = p1_mixture()
    enc = model.encoder().encode(model.sampler(1).sample(args.rows))
    m = min(BLOCK, args.rows - args.rows % 32)  # (the tiles' rows come 32 at a time)
    if m < 32:
        raise SystemExit(f"--rows: at least 32 rows, got {args.rows}")
    blocks = args.rows / m
    runs = {}
    for band in BANDS:
        step = engine(model, enc, band)
        cache = FeatureCache.for_rows(enc.nbytes)
        fused = band in ("float64", "float32u")
        rows = min(step.block, m) if fused else m  # (float64's blocks are half as long)
        block = fused_block(step, rows) if fused else screened_block(step, m)
        fold = whole_fold(model, enc, band, cache, blocks)
        scale = m / rows
        runs[band] = (lambda block=block, fold=fold, scale=scale:
                      {**{k: v * scale for k, v in block().items()}, **fold()})
    ms = least_ms(runs, args.repeats)
    print(f"ms per {m}-row block (process time, least of {args.repeats}; {args.rows} rows)")
    print(markdown_header(["band", "step", "ms"], [False, False, True]))
    for (band, name), v in ms.items():
        print(markdown_row([band, name, f"{v:.3f}"]))
    f32u, f64 = ms[("float32u", "whole fold per block")], ms[("float64", "whole fold per block")]
    print()
    print(markdown_header(["band", "fold ms/block", "vs float32u", "vs float64"],
                          [False, True, True, True]))
    for band in BANDS:
        v = ms[(band, "whole fold per block")]
        print(markdown_row([band, f"{v:.3f}", f"{f32u / v:.2f}x", f"{f64 / v:.2f}x"]))
    bf16 = engine(model, enc, "bfloat16@cpu")
    probe_ms, seen = probes(bf16, m, args.repeats)
    print(f"\nProbes on one bfloat16 block (least ms of {args.repeats}; passes cumulative)")
    print(markdown_header(["probe", "ms"], [False, True]))
    for name, v in probe_ms.items():
        print(markdown_row([name, f"{v:.3f}"]))
    print()
    print(markdown_header(["measured", "value"], [False, True]))
    for name, v in seen.items():
        print(markdown_row([name, f"{v:.3g}"]))
    print_bound(ms, probe_ms, isinstance(bf16.screener, TileScreener))


def print_bound(ms: dict, probe_ms: dict, tiles: bool) -> None:
    """What the goal allows a bfloat16 block, against the least it costs."""
    f32u, f64 = ms[("float32u", "whole fold per block")], ms[("float64", "whole fold per block")]
    score = ms[("bfloat16@cpu", "score (tiles' GEMM)" if tiles else "score (GEMM)")]
    passes = probe_ms["rescoring: passes 1..5"]
    budget = min(f32u / 1.5, f64 / 3)
    print(f"\nThe goal allows a bfloat16 block {budget:.3f} ms (float32u {f32u:.3f} / 1.5, "
          f"float64 {f64:.3f} / 3).")
    floors = {"today's steps, no row with a second candidate, features kept":
              score + passes + probe_ms["statistics: NumPy float32 GEMM"]}
    if tiles and "statistics: the tiles' three products" in probe_ms:
        floors["... and the statistics on the tiles, their split operands kept"] = (
            score + passes + probe_ms["statistics: the tiles' three products"])
        floors["... the split operands laid out each block instead"] = (
            floors["... and the statistics on the tiles, their split operands kept"]
            + probe_ms["statistics: features split (hi, lo)"]
            + probe_ms["statistics: posteriors split (hi, lo)"])
    print(markdown_header(["bfloat16 block", "ms", "vs float32u", "vs float64"],
                          [False, True, True, True]))
    for name, v in floors.items():
        print(markdown_row([name, f"{v:.3f}", f"{f32u / v:.2f}x", f"{f64 / v:.2f}x"]))


#: Rows of the block measured: the screened bands' block at P10's K (``block_rows``).
BLOCK = 32768
BANDS = ("float64", "float32u", "float32", "float16@cpu", "bfloat16@cpu")


if __name__ == "__main__":
    main()
