"""How mixfold's cost per EM iteration grows with the size of the problem.

    python benchmarks/scaling.py                  # the full sweeps (N up to 10^7: long)
    python benchmarks/scaling.py --quick          # tiny sizes, 2 iterations (a smoke run)
    python benchmarks/scaling.py --sweeps N,K [--iterations 5] [--json out.json]

Sweeps (one parameter moves, the others stay at the base case):

- ``N``: a diagonal Gaussian mixture (the P1 family), rows 10^4 ... 10^7 at K=16, D=10;
- ``K``: components 2 ... 256 at N=10^5, D=10;
- ``D``: dimensions 2 ... 128 at N=10^5, K=16;
- ``S``: a Gaussian HMM's states 2 ... 64 at 200 sequences x 500 steps;
- ``T``: the HMM's sequence length 50 ... 5,000 at 200 sequences, S=5.

Each point is one ``mixfold.fit`` from a fixed start (no initialisation timed), the median of
its per-iteration times (``FitResult.seconds``, the first iteration dropped). Per sweep the
table gives s/iter at every size, the exponent fitted by least squares to log(s/iter) against
log(size), the exponent the arithmetic predicts (1 in N, K, D and T; 2 in S, whose per-item
forward-backward is S^2), and the largest step of the cost per unit of predicted work between
neighbouring sizes (a cache or a buffer size that makes the cost jump shows up there; the goal
is at most 1.5x). Small points carry the fixed per-iteration overheads, so their cost per unit is
higher: the exponent fitted to the upper half of each sweep is printed too. With --quick the
base case shrinks as well (N=5,000; 20 sequences x 100 steps).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import mixfold as mf


@dataclass
class Sweep:
    name: str
    what: str
    sizes: list[int]
    quick_sizes: list[int]
    predicted: float  # the exponent of the arithmetic
    points: list[dict] = field(default_factory=list)


SWEEPS = {s.name: s for s in [
    Sweep("N", "diagonal GMM rows (K=16, D=10)",
          [10**4, 3 * 10**4, 10**5, 3 * 10**5, 10**6, 3 * 10**6, 10**7], [1000, 3000, 10000], 1.0),
    Sweep("K", "diagonal GMM components (N=10^5, D=10)",
          [2, 4, 8, 16, 32, 64, 128, 256], [2, 4, 8], 1.0),
    Sweep("D", "diagonal GMM dimensions (N=10^5, K=16)",
          [2, 4, 8, 16, 32, 64, 128], [2, 4, 8], 1.0),
    Sweep("S", "Gaussian HMM states (200 sequences x 500 steps)",
          [2, 4, 8, 16, 32, 64], [2, 4, 8], 2.0),
    Sweep("T", "Gaussian HMM sequence length (200 sequences, S=5)",
          [50, 150, 500, 1500, 5000], [20, 40, 80], 1.0),
]}


def gmm_case(n: int, k: int, d: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 3.0, size=(k, d))
    x = centres[rng.integers(0, k, size=n)] + rng.normal(size=(n, d))
    start = mf.MixtureDistribution(
        [mf.DiagonalGaussianDistribution(x[i], x.var(axis=0)) for i in range(k)],
        np.full(k, 1.0 / k))
    return x, mf.MixtureEstimator([mf.DiagonalGaussianEstimator()] * k), start


def hmm_case(n_seq: int, length: int, s: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    states = rng.integers(0, s, size=(n_seq, length // 10 + 1)).repeat(10, axis=1)[:, :length]
    seqs = 2.0 * states + rng.normal(size=(n_seq, length))
    trans = np.full((s, s), 0.4 / (s - 1))  # s >= 2: stay with 0.6, move evenly otherwise
    np.fill_diagonal(trans, 0.6)
    means = np.quantile(seqs, (np.arange(s) + 0.5) / s)
    start = mf.HiddenMarkovDistribution(
        [mf.GaussianDistribution(m, seqs.var()) for m in means], np.full(s, 1.0 / s), trans)
    return list(seqs), mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * s), start


#: the base case of every sweep: (rows, sequences, steps per sequence)
BASE, QUICK_BASE = (10**5, 200, 500), (5000, 20, 100)


def case_for(sweep: str, size: int, base: tuple[int, int, int]) -> tuple:
    n, n_seq, length = base
    if sweep == "N":
        return gmm_case(size, 16, 10)
    if sweep == "K":
        return gmm_case(n, size, 10)
    if sweep == "D":
        return gmm_case(n, 16, size)
    if sweep == "S":
        return hmm_case(n_seq, length, size)
    return hmm_case(n_seq, size, 5)


def seconds_per_iteration(sweep: str, size: int, iterations: int,
                          base: tuple[int, int, int]) -> float:
    rows, estimator, start = case_for(sweep, size, base)
    result = mf.fit(rows, estimator, init=start, max_iter=iterations, tol=0.0, progress=False)
    times = result.seconds[1:] or result.seconds  # the first iteration carries one-off work
    return statistics.median(times)


def fitted_exponent(sizes: list[int], seconds: list[float]) -> float:
    if len(sizes) < 2:
        return math.nan
    return float(np.polyfit(np.log(sizes), np.log(seconds), 1)[0])


def largest_step(sizes: list[int], seconds: list[float], predicted: float) -> float:
    """The largest rise of the cost per unit of predicted work from one size to the next (a
    fall is fixed overhead being spread over more work, not a jump)."""
    per_unit = [t / x**predicted for x, t in zip(sizes, seconds)]
    return max((b / a for a, b in zip(per_unit, per_unit[1:])), default=math.nan)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 2 iterations")
    ap.add_argument("--sweeps", default=",".join(SWEEPS), help="comma-separated, e.g. N,S")
    ap.add_argument("--iterations", type=int, default=None, help="EM iterations per point")
    ap.add_argument("--json", type=Path, default=None, help="also write every point here")
    args = ap.parse_args()
    names = [s.strip().upper() for s in args.sweeps.split(",") if s.strip()]
    unknown = [s for s in names if s not in SWEEPS]
    if unknown:
        ap.error(f"unknown sweep(s) {unknown}; choose from {list(SWEEPS)}")
    iterations = args.iterations or (2 if args.quick else 6)
    print(f"mixfold scaling — {time.strftime('%Y-%m-%d %H:%M')}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {iterations} EM iterations per point "
          f"(median of all but the first)", flush=True)
    summary = []
    for name in names:
        sweep = SWEEPS[name]
        sizes = sweep.quick_sizes if args.quick else sweep.sizes
        print(f"\n{name}: {sweep.what}\n{'size':>10s} {'s/iter':>10s} {'per unit':>12s}",
              flush=True)
        for size in sizes:
            t = seconds_per_iteration(name, size, iterations, QUICK_BASE if args.quick else BASE)
            sweep.points.append({"size": size, "s_per_iter": t})
            print(f"{size:10d} {t:10.4g} {t / size**sweep.predicted:12.4g}", flush=True)
        seconds = [p["s_per_iter"] for p in sweep.points]
        exponent = fitted_exponent(sizes, seconds)
        upper = len(sizes) // 2
        upper_exponent = fitted_exponent(sizes[upper:], seconds[upper:])
        step = largest_step(sizes, seconds, sweep.predicted)
        summary.append((name, sweep.predicted, exponent, upper_exponent, step))
    print(f"\n{'sweep':5s} {'predicted':>9s} {'fitted':>7s} {'upper half':>10s} "
          f"{'largest step':>12s}")
    for name, predicted, exponent, upper_exponent, step in summary:
        print(f"{name:5s} {predicted:9.1f} {exponent:7.2f} {upper_exponent:10.2f} "
              f"{step:11.2f}x{'' if step <= 1.5 else '  (over 1.5x)'}")
    if args.json:
        args.json.write_text(json.dumps({"iterations": iterations, "quick": args.quick,
                                         "sweeps": {n: SWEEPS[n].points for n in names}},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
