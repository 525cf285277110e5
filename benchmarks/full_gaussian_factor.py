"""A stack of K covariances factored (Cholesky L, U = (L^-1)^T, log|U|), compiled vs LAPACK, by D.

    python benchmarks/full_gaussian_factor.py [--k 2] [--repeats 200]

For each width D, ``FactoredCovariance.stack_of`` of K covariances (an M-step's) with the compiled
factorisation (:func:`~mixfold.compute.numba_gaussian.factor_covariances`, one call for the
stack) and with LAPACK's (``dpotrf`` and ``dtrtrs`` per covariance, the width set to 0), one
thread: the best CPU time of ``--repeats`` calls each, and the ratio LAPACK / compiled.
``COMPILED_FACTOR_MAX_DIM`` (families/_covariance.py) sits below where the ratio falls to 1.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MIXFOLD_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread, before NumPy starts its BLAS

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from mixfold import MultivariateGaussianDistribution  # noqa: E402
from mixfold.families import _covariance  # noqa: E402

from _timing import best_cpu_seconds  # noqa: E402  (benchmarks/: the script's folder is on the path)

WIDTHS = (2, 4, 8, 16, 24, 30, 32, 40, 48, 64)


def _stack(k: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(d)
    a = rng.normal(size=(k, d, d))
    return rng.normal(size=(k, d)), a @ a.transpose(0, 2, 1) / d + np.eye(d)


def _time(mu: np.ndarray, cov: np.ndarray, repeats: int, widest: int) -> float:
    limit = _covariance.COMPILED_FACTOR_MAX_DIM
    _covariance.COMPILED_FACTOR_MAX_DIM = widest
    try:
        return best_cpu_seconds(
            lambda: MultivariateGaussianDistribution.stack_of(mu.copy(), cov), repeats)
    finally:
        _covariance.COMPILED_FACTOR_MAX_DIM = limit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    print(f"# full_gaussian_factor.py -- {platform.node() or 'this machine'}, one thread, "
          f"K={args.k}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| D | compiled us | LAPACK us | LAPACK / compiled |")
    print("|---|---|---|---|")
    for d in WIDTHS:
        mu, cov = _stack(args.k, d)
        compiled = _time(mu, cov, args.repeats, 1 << 30)
        lapack = _time(mu, cov, args.repeats, 0)
        print(f"| {d} | {compiled * 1e6:.1f} | {lapack * 1e6:.1f} | {lapack / compiled:.2f} |")


if __name__ == "__main__":
    main()
