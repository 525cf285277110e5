"""Where P1's time goes: one fused E-step fold of the diagonal GMM (10^6 x 10, K=16), step by step.

Times each step of :class:`mixfold.compute.linear.FusedEStep` over every row block on one thread
(features kept, as a fit keeps them after its first iteration), beside the whole fit's seconds per
iteration on one thread and on all cores, and the floor that the exps alone set (one NumPy
``exp`` over the K x N scores). Run it alone on a quiet machine::

    PYTHONPATH=src python benchmarks/p1_profile.py [--rows 1000000] [--iterations 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mixfold  # noqa: E402
from mixfold.compute import linear  # noqa: E402
from backends import p1_data  # noqa: E402
from _peers import gmm_start  # noqa: E402

STEPS = ("block_buffers", "layout", "score", "exp_scores", "component_totals", "normalise",
         "accumulate", "collect")


def model_of(start: dict) -> mixfold.MixtureDistribution:
    return mixfold.MixtureDistribution(
        [mixfold.DiagonalGaussianDistribution(m, v) for m, v in zip(start["mu"], start["var"])],
        start["w"])


def fit_seconds(x: np.ndarray, start: dict, iterations: int, precision: str) -> float:
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * len(start["w"]))
    res = mixfold.fit(x, est, init=model_of(start), max_iter=iterations, tol=0.0,
                      precision=precision, progress=False)
    return statistics.median(res.seconds[1:])  # the first iteration lays the features out


def step_profile(x: np.ndarray, start: dict, iterations: int, precision: str) -> dict:
    """Seconds per fold spent in each step (one thread: the steps do not overlap), the median
    over the folds of one fit after its first (which lays the features out and keeps them)."""
    spent: dict[str, float] = defaultdict(float)
    folds: list[dict[str, float]] = []
    originals = {}
    for name in STEPS:
        fn = getattr(linear.FusedEStep, name)
        originals[name] = fn

        def timed(self, *a, _fn=fn, _name=name, **kw):
            t = time.perf_counter()
            try:
                return _fn(self, *a, **kw)
            finally:
                spent[_name] += time.perf_counter() - t
                if _name == "collect":  # the fold's last step
                    folds.append(dict(spent))
                    spent.clear()

        setattr(linear.FusedEStep, name, timed)
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * len(start["w"]))
    try:
        res = mixfold.fit(x, est, init=model_of(start), max_iter=iterations, tol=0.0,
                          precision=precision, progress=False)
    finally:
        for name, fn in originals.items():
            setattr(linear.FusedEStep, name, fn)
    out = {k: statistics.median(f.get(k, 0.0) for f in folds[1:]) for k in STEPS}
    out["(whole iteration)"] = statistics.median(res.seconds[1:])
    return out


def exp_floor(x: np.ndarray, k: int, precision: str) -> float:
    dt = np.dtype(np.float32 if precision == "float32" else np.float64)
    block = linear.block_rows(k, dt)
    a = np.random.default_rng(0).uniform(-30, 0, (k, block)).astype(dt)
    reps = max(1, len(x) // block)
    t = time.perf_counter()
    for _ in range(reps):
        np.exp(a, out=a)
        a *= -1.0
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--precision", default="float64")
    args = ap.parse_args()
    x = p1_data(args.rows)
    start = gmm_start(x, 16, full=False, seed=101)
    cores = len(os.sched_getaffinity(0))
    print(f"P1 N={args.rows:,} D=10 K=16 {args.precision}, {args.iterations} iterations, "
          f"{cores} cores")
    all_cores = fit_seconds(x, start, args.iterations, args.precision)
    os.environ["MIXFOLD_NUM_THREADS"] = "1"
    one = fit_seconds(x, start, args.iterations, args.precision)
    prof = step_profile(x, start, args.iterations, args.precision)
    print(f"fit s/iter: {all_cores:.4f} on {cores} threads, {one:.4f} on one thread")
    print("one fold on one thread, by step (normalise includes exp_scores and component_totals):")
    for name in STEPS + ("(whole iteration)",):
        if name in prof:
            print(f"  {name:<20} {prof[name] * 1e3:8.2f} ms")
    print(f"  exps alone (NumPy, {16 * args.rows:,} in cache-sized blocks): "
          f"{exp_floor(x, 16, args.precision) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
