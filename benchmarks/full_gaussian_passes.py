"""Full-covariance Gaussians' float64 scores and sums, compiled passes vs BLAS's, by width D.

    python benchmarks/full_gaussian_passes.py [--rows 100000] [--k 8] [--repeats 5]

For each D, the stacked scores (``stack_log_density`` of K components) and the stacked update
(``stack_update`` of K accumulators) of the same rows, timed with the compiled passes
(:mod:`mixfold.compute.numba_gaussian`) and with the wider rows' path (the widths they take set
to 0): BLAS's products -- a whitening GEMM, a rank-k update per component -- with compiled passes
around them, on one thread (``MIXFOLD_NUM_THREADS=1`` unless set; BLAS held to one thread, as
the fold's row blocks hold it): the best CPU time of ``--repeats`` each, and the ratio
BLAS / compiled. ``COMPILED_MAX_DIM`` and ``COMPILED_SCORES_MAX_DIM``
(families/_full_gaussian_moments.py) are where the ratios fall to about 1.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

os.environ.setdefault("MIXFOLD_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from mixfold import MultivariateGaussianDistribution, MultivariateGaussianEstimator  # noqa: E402
from mixfold.compute.row_blocks import blas_threads  # noqa: E402
from mixfold.families import _full_gaussian_moments as moments  # noqa: E402

from _timing import best_cpu_seconds  # noqa: E402  (benchmarks/: the script's folder is on the path)

WIDTHS = (2, 3, 5, 8, 10, 12, 16, 20, 24, 32)


def _case(n: int, k: int, d: int):
    rng = np.random.default_rng(d)
    comps = []
    for _ in range(k):
        a = rng.normal(size=(d, d))
        comps.append(MultivariateGaussianDistribution(rng.normal(0, 3, d), a @ a.T / d + np.eye(d)))
    x = rng.normal(0, 3, size=(n, d))
    enc = comps[0].encoder().encode(x)
    resp = np.asfortranarray(rng.dirichlet(np.ones(k), n))
    return comps, enc, resp


def _timings(comps, enc, resp, repeats: int) -> tuple[float, float]:
    cls = type(comps[0])
    d = comps[0].dim
    accs_cls = MultivariateGaussianEstimator(dim=d).accumulator_factory()

    def update():
        accs = [accs_cls.make() for _ in comps]
        for acc in accs:
            acc.set_reference(np.zeros(d))
        type(accs[0]).stack_update(accs, enc, resp)

    return (best_cpu_seconds(lambda: cls.stack_log_density(comps, enc), repeats),
            best_cpu_seconds(update, repeats))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"{platform.node()} {time.strftime('%Y-%m-%d %H:%M')}: {args.rows:,} rows, K={args.k}, "
          f"MIXFOLD_NUM_THREADS={os.environ['MIXFOLD_NUM_THREADS']}, "
          f"best CPU time of {args.repeats} (ms)")
    print("| D | scores compiled | scores BLAS | BLAS/compiled | sums compiled | sums BLAS "
          "| BLAS/compiled |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    limits = moments.COMPILED_MAX_DIM, moments.COMPILED_SCORES_MAX_DIM
    hold = blas_threads(1)
    for d in WIDTHS:
        comps, enc, resp = _case(args.rows, args.k, d)
        moments.COMPILED_MAX_DIM = moments.COMPILED_SCORES_MAX_DIM = 1 << 30
        fast = _timings(comps, enc, resp, args.repeats)
        moments.COMPILED_MAX_DIM = moments.COMPILED_SCORES_MAX_DIM = 0
        plain = _timings(comps, enc, resp, args.repeats)
        moments.COMPILED_MAX_DIM, moments.COMPILED_SCORES_MAX_DIM = limits
        print(f"| {d} | {1e3 * fast[0]:.2f} | {1e3 * plain[0]:.2f} | {plain[0] / fast[0]:.2f} "
              f"| {1e3 * fast[1]:.2f} | {1e3 * plain[1]:.2f} | {plain[1] / fast[1]:.2f} |",
              flush=True)
    hold.restore_original_limits()


if __name__ == "__main__":
    main()
