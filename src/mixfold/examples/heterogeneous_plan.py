"""A heterogeneous plan: rows and a precision band per worker, planned, executed and simulated.

Three workers of unequal speed and arithmetic — one that runs only float32, twice as fast as
the others, one that runs float32 or float64, and one that runs only float64 — share a fit of a
two-component Gaussian mixture. The planner gives each worker the fastest band it supports whose
error meets the accuracy budget (measured by ``Resources.calibrate`` when the workers were
calibrated, else a-priori; a worker none of whose bands meets it gets no rows), splits the rows
in proportion to speed, and the fit executes exactly
that plan (here in this process; ``backend="mp"``, ``"spark"``, ``"dask"``, ``"ray"`` or
``"mpi"`` alike). The same planner then lays out 2,000 workers on paper and the simulator times
one iteration of that plan against an even split of the rows.

    python -m mixfold.examples.heterogeneous_plan
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import mixfold
from mixfold import GaussianDistribution, GaussianEstimator, MixtureDistribution, MixtureEstimator
from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous
from mixfold.parallel.simulation import simulate_plan

__all__ = ["WORKERS", "run", "simulated_pool", "main"]

#: The workers of the executed plan: name, the bands each runs, and its relative speed.
WORKERS = (Worker("fast", precisions=("float32",), base_throughput=2.0),
           Worker("either", precisions=("float32", "float64")),
           Worker("plain", precisions=("float64",)))


def run(n_rows: int = 20_000, target_rel_error: float = 1e-4) -> dict:
    """Plan and execute the fit over :data:`WORKERS`; the float64 fit is the reference."""
    truth = MixtureDistribution([GaussianDistribution(-2.0, 1.0),
                                 GaussianDistribution(3.0, 2.0)], [0.4, 0.6])
    x = truth.sampler(0).sample(n_rows)
    estimator = MixtureEstimator([GaussianEstimator()] * 2)
    planned = mixfold.optimize(x, estimator, resources=list(WORKERS), precision="auto",
                               target_rel_error=target_rel_error, progress=False)
    reference = mixfold.optimize(x, estimator, progress=False)
    means = np.array([c.mu for c in planned.components])
    reference_means = np.array([c.mu for c in reference.components])
    return {"plan": planned.fit_result.plan, "model": planned, "reference": reference,
            "largest_mean_difference": float(np.max(np.abs(means - reference_means)))}


def simulated_pool(n_workers: int = 2_000, n_rows: int = 10**9) -> tuple:
    """A plan of ``n_workers`` (one GPU in ten; 1 to 3 million float64 rows per second each)
    and its simulated iteration (0.5 ms latency, 1 GB/s links)."""
    pool = [Worker(f"w{i}", "gpu" if i % 10 == 0 else "cpu", base_throughput=1e6 * (1 + i % 3))
            for i in range(n_workers)]
    plan = plan_heterogeneous(pool, n_rows, target_rel_error=1e-5, op_count=100)
    return plan, simulate_plan(plan, latency=5e-4, bandwidth=1e9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args(argv)
    out = run(args.rows)
    print(out["plan"].describe())
    print(f"largest difference of a component mean from the float64 fit: "
          f"{out['largest_mean_difference']:.2e}")
    plan, report = simulated_pool()
    print(f"{len(plan.assignments)} workers on paper: makespan {report.makespan:.3g} s, even "
          f"split {report.uniform_makespan:.3g} s, lower bound {report.lower_bound:.3g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
