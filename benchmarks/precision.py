"""Precision bands and heterogeneous plans: P10 (P1 per band and device), per-band E-step time
and error, and the simulator.

    python benchmarks/precision.py            # P10 at 10^6 rows (10^7 on a GPU); 200,000 rows;
                                              # simulator at W = 10,000
    python benchmarks/precision.py --quick    # a smoke run: P10 at 20,000 rows, 20,000, W = 1,000
    python benchmarks/precision.py --rows N --workers W [--p10-rows N] [--gpu-rows N]
                                   [--error-rows N] [--fit-rows N] [--json out.json]
                                   [--plot finish.png]

P10 -- P1 (a K=16, D=10 diagonal Gaussian mixture over 10^6 rows, fixed seed) side by side per
band and device, in one run: seconds per E-step as a fit runs it (``fold_rows`` with the
handle's feature cache active, so features computed once stay resident; best of 5 after a
warm-up), the ratio against mixfold's NumPy ``float32`` and ``float64`` paths, the relative error
of the statistics against double-double (on the first 100,000 rows, ``--error-rows``: double-double
is slow), and
the a-priori bound (:func:`~mixfold.precision.fused_statistics_bound` for the torch engine,
:func:`~mixfold.precision.statistics_error_bound` otherwise). Then a whole fit (20 iterations,
the same start, on the first 200,000 rows, ``--fit-rows``) in ``float64`` and in ``bfloat16`` on
every device: the relative distance of the
final log-likelihoods (scored in float64). ``bfloat16@cpu`` runs on AMX tiles where the CPU has
them; ``MIXFOLD_DISABLE_AMX=1`` runs it as before, through float32 GEMMs of the band's values
(an A/B of the two: the same command with and without it). Goals (issue [bands]):
``bfloat16@cpu`` at least 1.5x faster than NumPy ``float32`` and 3x faster than ``float64``, its
error within its bound; on a GPU, P1 at 10^7 rows in bfloat16 at most 5 ms per iteration and
fp8 no slower than bfloat16.

Part 1 -- bands. A K=4 diagonal Gaussian mixture in D=4 (fixed seed). For every band, one E-step
(``fold_rows``: scores, responsibilities and statistics of all rows) is timed (best of 3) and its
sufficient statistics compared with the same E-step in double-double: the relative error, the
a-priori ``op_count * u`` and the stated bound (that plus float64 accumulation over N rows).
float32/float64 run the native paths; bare bfloat16/float16 the torch engine on this CPU;
"<band>@emulated" (and fp8, which no CPU unit runs) the exact emulation (every step rounded
through ml_dtypes: the accuracy reference, slow by design); dd is double-double. With a CUDA
device, the bands also run through torch on it ("<band>@cuda").

Part 2 -- plans. W workers (1 in 10 a GPU, throughputs drawn from a fixed seed) are planned for
10^9 rows at target 1e-5 and simulated with per-worker link latency (0.1-1 ms) and 1 GB/s
links; reported: planning and simulation seconds, the makespan against a uniform split and the
lower bound, and the tree depth and fanout. ``--plot`` draws the per-worker finish times.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import mixfold
from mixfold.compute.fold import fold_rows
from mixfold.compute import band_engines
from mixfold.compute.accuracy import estep_op_count, fold_statistics, statistics_relative_error
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.linear import block_rows
from mixfold.compute.linear_torch import GPU_BLOCK_ROWS, fp8_supported
from mixfold.examples.band_battery import check_band
from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous
from mixfold.parallel.simulation import plot_finish_times, simulate_plan
from mixfold.precision import (BANDS, fused_statistics_bound, predicted_relative_error,
                               relative_error, resolve_precision, statistics_error_bound)
from mixfold.precision.gpu import torch_device_available

from _table import markdown_header, markdown_row

DIM, COMPONENTS = 4, 4


def mixture(seed: int = 0, dim: int = DIM, k: int = COMPONENTS) -> mixfold.MixtureDistribution:
    """K diagonal Gaussians in D dimensions, equal weights, fixed seed."""
    rng = np.random.default_rng(seed)
    comps = [mixfold.DiagonalGaussianDistribution(rng.normal(0, 3, dim),
                                                  rng.uniform(0.5, 2.0, dim))
             for _ in range(k)]
    return mixfold.MixtureDistribution(comps, np.full(k, 1.0 / k))


def time_estep(model, enc, precision: str, repeats: int = 3) -> float:
    factory = model.estimator().accumulator_factory()
    weights = np.ones(enc.n_rows)
    best = np.inf
    for _ in range(repeats):
        acc = factory.make()
        t = time.perf_counter()
        fold_rows(acc, enc, weights, model, resolve_precision(precision), 65536)
        best = min(best, time.perf_counter() - t)
    return best


def bands_table(n_rows: int) -> list[dict]:
    model = mixture()
    enc = model.encoder().encode(model.sampler(1).sample(n_rows))
    ops = estep_op_count(model)
    precisions = list(BANDS) + ["bfloat16@emulated", "float16@emulated"]
    if torch_device_available("cuda"):
        precisions += [f"{b}@cuda" for b in BANDS]
    out = []
    for p in precisions:
        seconds = time_estep(model, enc, p)
        band = p.partition("@")[0]
        out.append({"precision": p, "seconds": seconds, "rows_per_s": n_rows / seconds,
                    "error_vs_dd": statistics_relative_error(model, enc, p, reference="dd"),
                    "predicted": predicted_relative_error(band, ops),
                    "bound": statistics_error_bound(band, ops, n_rows)})
    return out


P10_DIM, P10_COMPONENTS, P10_FIT_ITERATIONS = 10, 16, 20


def p1_mixture(seed: int = 0) -> mixfold.MixtureDistribution:
    """P1's shape: K=16 diagonal Gaussians in D=10, fixed seed."""
    return mixture(seed, P10_DIM, P10_COMPONENTS)


#: P10's reference: the NumPy float32 fold without screening (the fused E-step of ``float32``
#: before the bands screened), timed through :func:`unscreened`.
UNSCREENED = "float32 unscreened"


def p10_precisions() -> list[str]:
    """NumPy float64, the unscreened NumPy float32 fold, the screened CPU bands, and per band on
    a CUDA device."""
    out = ["float64", UNSCREENED, "float32", "float64@cpu", "float16@cpu", "bfloat16@cpu"]
    if torch_device_available("cuda"):
        out += ["float64@cuda", "float32@cuda", "float16@cuda", "bfloat16@cuda"]
        if fp8_supported("cuda"):
            out.append("fp8@cuda")
    return out


class unscreened:
    """Within it, ``float32`` runs the NumPy float32 fold without screening
    (:func:`~mixfold.compute.linear.linear_fold`): the reference P10's ratios are taken
    against."""

    def __enter__(self) -> None:
        self.engine_for = band_engines.engine_for
        band_engines.engine_for = lambda terms, precision: None

    def __exit__(self, *exc) -> None:
        band_engines.engine_for = self.engine_for


def time_fold(model, enc, precision: str, repeats: int = 5) -> float:
    """Best seconds of one E-step over ``enc`` as a fit runs it: features kept between folds."""
    if precision == UNSCREENED:
        with unscreened():
            return time_fold(model, enc, "float32", repeats)
    factory = model.estimator().accumulator_factory()
    weights = np.ones(enc.n_rows)
    cache = FeatureCache.for_rows(enc.nbytes)
    best = np.inf
    for i in range(repeats + 1):  # the first fold lays the features out: a warm-up
        acc = factory.make()
        with cache.active():
            _sync(precision)
            t = time.perf_counter()
            fold_rows(acc, enc, weights, model, resolve_precision(precision), 1 << 20)
            _sync(precision)
            if i:
                best = min(best, time.perf_counter() - t)
    return best


def _sync(precision: str) -> None:
    p = resolve_precision(precision)
    if p.engine == "torch" and p.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def p10_bound(precision: str, op_count: int, n_rows: int) -> float:
    if precision == UNSCREENED:
        return statistics_error_bound("float32", op_count, n_rows)
    p = resolve_precision(precision)
    if p.engine != "torch":
        return statistics_error_bound(p.band, op_count, n_rows)
    inner = GPU_BLOCK_ROWS if p.device.startswith("cuda") else block_rows(P10_COMPONENTS,
                                                                          np.float32)
    return fused_statistics_bound(p.band, op_count, n_rows, inner)


def p10_table(n_rows: int, gpu_rows: int, fit_rows: int, error_rows: int) -> dict:
    model = p1_mixture()
    x = model.sampler(1).sample(max(n_rows, gpu_rows if torch_device_available("cuda") else 0))
    enc_all = model.encoder().encode(x)
    enc_err = enc_all.rows(0, min(error_rows, n_rows))
    reference = fold_statistics(model, enc_err, "dd", raw=True)
    ops = estep_op_count(model)
    rows = []
    for p in p10_precisions():
        n = gpu_rows if "cuda" in p else n_rows
        enc = enc_all.rows(0, n)
        seconds = time_fold(model, enc, p)
        if p == UNSCREENED:
            with unscreened():
                got = fold_statistics(model, enc_err, "float32", raw=True)
        else:
            got = fold_statistics(model, enc_err, p, raw=True)
        error = max(relative_error(g, r) for g, r in zip(got, reference))
        rows.append({"precision": p, "rows": n, "seconds": seconds,
                     "error_vs_dd": error, "bound": p10_bound(p, ops, enc_err.n_rows)})
    base = {r["precision"]: r["seconds"] for r in rows}
    for r in rows:  # the NumPy paths, scaled to the row's size (a GPU row may hold more rows)
        scale = r["rows"] / n_rows
        r["vs_float32"] = base[UNSCREENED] * scale / r["seconds"]
        r["vs_float64"] = base["float64"] * scale / r["seconds"]
    # whole fits from the same start, against float64's: the issue's separated clusters
    fits = [check_band("separated", band, fit_rows, P10_FIT_ITERATIONS)
            for band in ("bfloat16", "float16", "float32")]
    return {"rows": rows, "error_rows": enc_err.n_rows, "fit_rows": fit_rows, "fits": fits}


def print_p10(table: dict, n_rows: int) -> None:
    print(f"P10: P1 (K={P10_COMPONENTS}, D={P10_DIM}) E-step per band and device, {n_rows} rows "
          f"(error on the first {table['error_rows']} rows against dd)\n")
    print(markdown_header(["precision", "rows", "s/iter", "× unscreened float32", "× float64",
                           "error vs dd", "bound", "within"], [False] + [True] * 6 + [False]))
    for r in table["rows"]:
        print(markdown_row([r["precision"], r["rows"], f"{r['seconds']:.4f}",
                            f"{r['vs_float32']:.2f}", f"{r['vs_float64']:.2f}",
                            f"{r['error_vs_dd']:.2e}", f"{r['bound']:.2e}",
                            "yes" if r["error_vs_dd"] <= r["bound"] else "NO"]))
    print(f"\nwhole fits (band_battery 'separated': K=16, D=10, {table['fit_rows']} rows, "
          f"{P10_FIT_ITERATIONS} iterations, tol=0, the same start as float64)\n")
    print(markdown_header(["band", "fit distance", "promise", "density distance",
                           "largest fall", "reported vs float64", "s", "float64 s"],
                          [False] + [True] * 7))
    for f in table["fits"]:
        print(markdown_row([f["band"], f"{f['fit_distance']:.1e}", f"{f['promise']:.0e}",
                            f"{f['density_distance']:.1e}", f"{f['largest_fall']:.1e}",
                            f"{f['reported_distance']:.1e}", f"{f['seconds']:.2f}",
                            f"{f['float64_seconds']:.2f}"]))


def plan_table(n_workers: int, plot: str | None) -> dict:
    rng = np.random.default_rng(0)
    rates = rng.uniform(0.5, 2.0, n_workers)
    workers = [Worker(f"w{i}", "gpu" if i % 10 == 0 else "cpu", base_throughput=float(r))
               for i, r in enumerate(rates)]
    t = time.perf_counter()
    plan = plan_heterogeneous(workers, 10**9, target_rel_error=1e-5, op_count=100)
    plan_s = time.perf_counter() - t
    t = time.perf_counter()
    report = simulate_plan(plan, latency=rng.uniform(1e-4, 1e-3, n_workers), bandwidth=1e9,
                           payload_bytes=8 * (1 + 2 * DIM) * COMPONENTS)
    sim_s = time.perf_counter() - t
    if plot:
        plot_finish_times(report, path=plot)
    return {"workers": n_workers, "plan_seconds": plan_s, "simulate_seconds": sim_s,
            "bands": plan.bands(), "reduce_depth": plan.reduce_depth, "fanout": plan.fanout,
            "makespan": report.makespan, "uniform_makespan": report.uniform_makespan,
            "lower_bound": report.lower_bound}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--p10-rows", type=int)
    parser.add_argument("--gpu-rows", type=int)
    parser.add_argument("--error-rows", type=int, default=100_000)
    parser.add_argument("--fit-rows", type=int, default=200_000)
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    n_rows = args.rows or (20_000 if args.quick else 200_000)
    n_workers = args.workers or (1_000 if args.quick else 10_000)
    p10_rows = args.p10_rows or (20_000 if args.quick else 1_000_000)
    gpu_rows = args.gpu_rows or (20_000 if args.quick else 10_000_000)

    p10 = p10_table(p10_rows, gpu_rows, min(p10_rows, args.fit_rows), args.error_rows)
    print_p10(p10, p10_rows)
    print()

    bands = bands_table(n_rows)
    print(f"E-step of a K={COMPONENTS}, D={DIM} diagonal mixture over {n_rows} rows")
    print(f"{'precision':<20}{'seconds':>10}{'rows/s':>12}{'error vs dd':>14}{'op_count*u':>12}"
          f"{'bound':>11}")
    for r in bands:
        print(f"{r['precision']:<20}{r['seconds']:>10.4f}{r['rows_per_s']:>12.3g}"
              f"{r['error_vs_dd']:>14.3e}{r['predicted']:>12.2e}{r['bound']:>11.2e}")
    plans = plan_table(n_workers, args.plot)
    print(f"\nplan + simulation over {plans['workers']} workers, 10^9 rows")
    print(f"planned in {plans['plan_seconds']:.3f} s, simulated in {plans['simulate_seconds']:.3f}"
          f" s; bands {plans['bands']}; tree depth {plans['reduce_depth']} "
          f"(fanout {plans['fanout']})")
    print(f"makespan {plans['makespan']:.4g} s, uniform split {plans['uniform_makespan']:.4g} s, "
          f"lower bound {plans['lower_bound']:.4g} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"p10": p10, "bands": bands, "plan": plans}, fh, indent=2)


if __name__ == "__main__":
    main()
