"""Precision bands and heterogeneous plans: per-band E-step time and error, and the simulator.

    python benchmarks/precision.py            # 200,000 rows; simulator at W = 10,000
    python benchmarks/precision.py --quick    # a smoke run: 20,000 rows, W = 1,000
    python benchmarks/precision.py --rows N --workers W [--json out.json] [--plot finish.png]

Part 1 -- bands. A K=4 diagonal Gaussian mixture in D=4 (fixed seed). For every band, one E-step
(``fold_rows``: scores, responsibilities and statistics of all rows) is timed (best of 3) and its
sufficient statistics compared with the same E-step in double-double: the relative error, the
a-priori ``op_count * u`` and the stated bound (that plus float64 accumulation over N rows).
float32/float64 run the native paths; fp8/bfloat16/float16 are exact emulation (every step rounded
through ml_dtypes: slow by design); dd is double-double. With a CUDA device, the bands also run
through torch on it ("<band>@cuda").

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
from mixfold.compute.accuracy import estep_op_count, statistics_relative_error
from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous
from mixfold.parallel.simulation import plot_finish_times, simulate_plan
from mixfold.precision import BANDS, predicted_relative_error, statistics_error_bound
from mixfold.precision.gpu import torch_device_available

DIM, COMPONENTS = 4, 4


def mixture(seed: int = 0) -> mixfold.MixtureDistribution:
    rng = np.random.default_rng(seed)
    comps = [mixfold.DiagonalGaussianDistribution(rng.normal(0, 3, DIM),
                                                  rng.uniform(0.5, 2.0, DIM))
             for _ in range(COMPONENTS)]
    return mixfold.MixtureDistribution(comps, np.full(COMPONENTS, 1.0 / COMPONENTS))


def time_estep(model, enc, precision: str, repeats: int = 3) -> float:
    factory = model.estimator().accumulator_factory()
    weights = np.ones(enc.n_rows)
    best = np.inf
    for _ in range(repeats):
        acc = factory.make()
        t = time.perf_counter()
        fold_rows(acc, enc, weights, model, precision, 65536)
        best = min(best, time.perf_counter() - t)
    return best


def bands_table(n_rows: int) -> list[dict]:
    model = mixture()
    enc = model.encoder().encode(model.sampler(1).sample(n_rows))
    ops = estep_op_count(model)
    precisions = list(BANDS)
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
    parser.add_argument("--json")
    parser.add_argument("--plot")
    args = parser.parse_args()
    n_rows = args.rows or (20_000 if args.quick else 200_000)
    n_workers = args.workers or (1_000 if args.quick else 10_000)

    bands = bands_table(n_rows)
    print(f"E-step of a K={COMPONENTS}, D={DIM} diagonal mixture over {n_rows} rows")
    print(f"{'precision':<14}{'seconds':>10}{'rows/s':>12}{'error vs dd':>14}{'op_count*u':>12}"
          f"{'bound':>11}")
    for r in bands:
        print(f"{r['precision']:<14}{r['seconds']:>10.4f}{r['rows_per_s']:>12.3g}"
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
            json.dump({"bands": bands, "plan": plans}, fh, indent=2)


if __name__ == "__main__":
    main()
