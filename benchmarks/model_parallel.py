"""Model-parallel benchmark P6: a K=64 full-covariance Gaussian mixture, D=32, N=100,000.

    python benchmarks/model_parallel.py              # P6: 2 threads vs serial, 3 iterations
    python benchmarks/model_parallel.py --quick      # a smoke run: N=5,000, K=8, D=4
    python benchmarks/model_parallel.py --rows N --components K --dim D --workers W
                                        --iterations I [--json out.json]

Both runs fold the same resident rows from the same starting model (a seeded initialisation):

- serial: ``LocalEncodedData`` (the local backend's fold) on one core: BLAS limited to one
  thread and ``MIXFOLD_NUM_THREADS=1`` (no row blocks on other cores);
- threaded: ``ModelParallelEncodedData`` with the planner's cut over ``--workers`` CPU devices
  (its decision is printed), each worker's BLAS limited to cores // workers threads, so the
  workers do not oversubscribe the cores either.

Reported: the median seconds per EM iteration (E-step fold, reduce and M-step) of each, the
speed-up (the target on a 2-core machine: >= 1.7x), and whether every parameter array of the
two runs' models is equal bit for bit after every iteration (it must be).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import contextmanager

import numpy as np
from threadpoolctl import threadpool_limits

from mixfold import (MixtureDistribution, MixtureEstimator, MultivariateGaussianDistribution,
                     MultivariateGaussianEstimator)
from mixfold.backends.local import LocalEncodedData
from mixfold.dispatch import encode_data
from mixfold.parallel.model_parallel import ModelParallelEncodedData, plan_for

FULL = {"rows": 100_000, "components": 64, "dim": 32, "iterations": 3}
QUICK = {"rows": 5_000, "components": 8, "dim": 4, "iterations": 2}


def p6_data(rows: int, components: int, dim: int, seed: int = 0) -> np.ndarray:
    """Rows of a random full-covariance mixture (fixed seed)."""
    rng = np.random.default_rng(seed)
    comps = []
    for _ in range(components):
        a = rng.normal(size=(dim, dim)) / np.sqrt(dim)
        comps.append(MultivariateGaussianDistribution(rng.normal(0, 3, dim),
                                                      a @ a.T + 0.5 * np.eye(dim)))
    truth = MixtureDistribution(comps, np.full(components, 1.0 / components))
    return truth.sampler(seed).sample(rows)


@contextmanager
def one_core():
    """The serial baseline: one BLAS thread, stacked row blocks on one thread."""
    saved = os.environ.get("MIXFOLD_NUM_THREADS")
    os.environ["MIXFOLD_NUM_THREADS"] = "1"
    try:
        with threadpool_limits(1, user_api="blas"):
            yield
    finally:
        if saved is None:
            os.environ.pop("MIXFOLD_NUM_THREADS")
        else:
            os.environ["MIXFOLD_NUM_THREADS"] = saved


def same_bits(a: MixtureDistribution, b: MixtureDistribution) -> bool:
    """Every parameter array equal, bit for bit."""
    return np.array_equal(a.weights, b.weights) and all(
        np.array_equal(x.mu, y.mu) and np.array_equal(x.cov, y.cov)
        for x, y in zip(a.components, b.components))


def run(rows: int, components: int, dim: int, iterations: int, workers: int) -> dict:
    x = p6_data(rows, components, dim)
    est = MixtureEstimator([MultivariateGaussianEstimator()] * components)
    enc, est = encode_data(x, est)
    with one_core():
        start = LocalEncodedData(enc).initialize(est, seed=0)
    plan = plan_for(start, workers)
    print(plan.describe())
    serial_s, threaded_s, identical = [], [], True
    serial_model = threaded_model = start
    with LocalEncodedData(enc) as serial, ModelParallelEncodedData(enc, plan=plan) as threaded:
        for _ in range(iterations):
            with one_core():
                t0 = time.perf_counter()
                serial_model = serial.estimate(est, serial_model)[0]
                serial_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            threaded_model = threaded.estimate(est, threaded_model)[0]
            threaded_s.append(time.perf_counter() - t0)
            identical = identical and same_bits(serial_model, threaded_model)
    s, t = statistics.median(serial_s), statistics.median(threaded_s)
    return {"rows": rows, "components": components, "dim": dim, "workers": workers,
            "plan_path": plan.path, "plan_cuts": [(c.device.name, c.start, c.stop)
                                                  for c in plan.cuts],
            "serial_s_per_iter": s, "threaded_s_per_iter": t, "speedup": s / t,
            "bit_identical": identical}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--components", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--iterations", type=int)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    for key in sizes:
        if getattr(args, key) is not None:
            sizes[key] = getattr(args, key)
    result = run(workers=args.workers, **sizes)
    print(f"P6  serial {result['serial_s_per_iter']:.3f} s/it  "
          f"{result['workers']} threads {result['threaded_s_per_iter']:.3f} s/it  "
          f"speed-up {result['speedup']:.2f}x  bit-identical {result['bit_identical']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0 if result["bit_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
