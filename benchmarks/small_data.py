"""Small data: mixfold's scikit-learn ``GaussianMixture`` against scikit-learn's own, one thread.

    python benchmarks/small_data.py                # every data set and covariance type
    python benchmarks/small_data.py --repeats 3 --datasets iris,wine
    python benchmarks/small_data.py --baseline /path/to/main/src   # adds an A/B of two trees

The data sets a notebook fits (iris, wine, breast_cancer, digits from ``sklearn.datasets``),
standardised, K = the number of classes, every covariance type. Both libraries start from the
same parameters (one scikit-learn k-means start, handed to both as ``weights_init``,
``means_init``, ``precisions_init``) and stop by the same rule: a fixed number of iterations
(``tol=0``, ``max_iter``; a fit that reaches an exact fixed point earlier stops there, so s/iter
is what the ratios compare). Timed: the whole ``fit`` call, wall clock and this process's CPU
time (less sensitive to other processes on a shared machine), median of the repeats, the two
libraries' fits alternating, after one warm-up fit each. Ratios (scikit-learn's time per
iteration over mixfold's) > 1: mixfold faster. ``--baseline`` adds mixfold's CPU seconds per fit
from another source tree beside this checkout's, each tree in its own child processes, the trees
alternating (A B B A ..., ``--ab-rounds`` each), the least of the children's lower quartiles.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MIXFOLD_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread, both libraries, before NumPy starts its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn import datasets  # noqa: E402
from sklearn.mixture import GaussianMixture as SkGaussianMixture  # noqa: E402

from mixfold.sklearn import GaussianMixture as MfGaussianMixture  # noqa: E402

LOADERS = {"iris": datasets.load_iris, "wine": datasets.load_wine,
           "breast_cancer": datasets.load_breast_cancer, "digits": datasets.load_digits}
KINDS = ("full", "tied", "diag", "spherical")


def load(name: str) -> tuple[np.ndarray, int]:
    data = LOADERS[name]()
    x = data.data.astype(np.float64)
    x = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    return x, len(np.unique(data.target))


def shared_start(x: np.ndarray, k: int, kind: str) -> dict:
    """One k-means start, as scikit-learn computes it, for both libraries."""
    start = SkGaussianMixture(k, covariance_type=kind, random_state=0)
    start._initialize_parameters(x, np.random.RandomState(0))
    cov = start.covariances_
    precisions = np.linalg.inv(cov) if kind in ("full", "tied") else 1.0 / cov
    return {"weights_init": start.weights_, "means_init": start.means_,
            "precisions_init": precisions}


def _one_fit(cls, k: int, params: dict, x: np.ndarray) -> tuple[float, float, int]:
    model = cls(k, **params)
    wall, cpu = time.perf_counter(), time.process_time()
    model.fit(x)
    return time.perf_counter() - wall, time.process_time() - cpu, model.n_iter_


def timed_fits(k: int, params: dict, x: np.ndarray, repeats: int) -> dict[str, tuple]:
    """Per library: (median wall s, median process s, iterations) of ``repeats`` fits, the two
    libraries' fits alternating (a change of load falls on both), after one warm-up fit each
    (imports, compiled paths, caches)."""
    libraries = {"sklearn": SkGaussianMixture, "mixfold": MfGaussianMixture}
    for cls in libraries.values():
        cls(k, **params).fit(x)
    runs: dict[str, list] = {name: [] for name in libraries}
    for _ in range(repeats):
        for name, cls in libraries.items():
            runs[name].append(_one_fit(cls, k, params, x))
    return {name: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs),
                   rs[-1][2]) for name, rs in runs.items()}


def mixfold_cpu(datasets: list[str], kinds: list[str], repeats: int, max_iter: int) -> dict:
    """Lower-quartile CPU seconds of mixfold's fit per (data set, covariance type), this
    process's mixfold (a child of :func:`ab_rows` prints them)."""
    out = {}
    for name in datasets:
        x, k = load(name)
        for kind in kinds:
            params = dict(covariance_type=kind, tol=0.0, max_iter=max_iter, random_state=0,
                          **shared_start(x, k, kind))
            MfGaussianMixture(k, **params).fit(x)
            out[f"{name}/{kind}"] = lower_quartile(
                [_one_fit(MfGaussianMixture, k, params, x)[1] for _ in range(repeats)])
    return out


def lower_quartile(times: list[float]) -> float:
    """The lower quartile of ``times``: on a shared machine, other processes only add time."""
    return sorted(times)[(len(times) - 1) // 4]


def ab_rows(baseline: Path, args: argparse.Namespace) -> None:
    """mixfold's CPU seconds per fit from ``baseline`` and from this checkout's ``src``."""
    trees = {"baseline": baseline.resolve(), "this": Path(__file__).resolve().parents[1] / "src"}
    best: dict[str, dict[str, float]] = {tree: {} for tree in trees}
    for i in range(args.ab_rounds):
        for tree in trees if i % 2 == 0 else reversed(list(trees)):
            child = subprocess.run(
                [sys.executable, __file__, "--mixfold-cpu", "--datasets", args.datasets,
                 "--kinds", args.kinds, "--repeats", str(args.repeats), "--max-iter",
                 str(args.max_iter)], capture_output=True, text=True, check=True,
                env={**os.environ, "PYTHONPATH": str(trees[tree])})
            for key, cpu in json.loads(child.stdout.splitlines()[-1]).items():
                best[tree][key] = min(cpu, best[tree].get(key, float("inf")))
    print(f"\nA/B, mixfold's CPU s per fit: baseline {trees['baseline']}\n")
    print(f"{'data/covariance':<26} {'baseline':>9} {'this':>9} {'this/baseline':>14}")
    for key, base in best["baseline"].items():
        this = best["this"][key]
        print(f"{key:<26} {base:>9.4f} {this:>9.4f} {this / base:>14.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default=",".join(LOADERS))
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--max-iter", type=int, default=20)
    ap.add_argument("--baseline", type=Path, help="another mixfold source tree, for A/B rows")
    ap.add_argument("--ab-rounds", type=int, default=4,
                    help="child processes per tree in the A/B (A B B A ...)")
    ap.add_argument("--mixfold-cpu", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # convergence and degenerate-variance notes, both sides
    if args.mixfold_cpu:  # a child of the A/B: this process's mixfold only, as JSON
        print(json.dumps(mixfold_cpu(args.datasets.split(","), args.kinds.split(","),
                                     args.repeats, args.max_iter)))
        return
    print(f"# small_data.py — {platform.node()}, one thread, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print(f"{'data':<14} {'n x d':>9} {'K':>3} {'covariance':<10} {'it sk/mf':>9} "
          f"{'sklearn s':>10} {'mixfold s':>10} {'ratio':>6} {'sklearn cpu':>12} "
          f"{'mixfold cpu':>12} {'cpu ratio':>10}")
    for name in args.datasets.split(","):
        x, k = load(name)
        for kind in args.kinds.split(","):
            common = dict(covariance_type=kind, tol=0.0, max_iter=args.max_iter,
                          random_state=0, **shared_start(x, k, kind))
            t = timed_fits(k, common, x, args.repeats)
            (sk, sk_cpu, sk_it), (mf, mf_cpu, mf_it) = t["sklearn"], t["mixfold"]
            print(f"{name:<14} {f'{x.shape[0]}x{x.shape[1]}':>9} {k:>3} {kind:<10} "
                  f"{f'{sk_it}/{mf_it}':>9} {sk:>10.4f} {mf:>10.4f} "
                  f"{(sk / sk_it) / (mf / mf_it):>6.2f} {sk_cpu:>12.4f} {mf_cpu:>12.4f} "
                  f"{(sk_cpu / sk_it) / (mf_cpu / mf_it):>10.2f}")
    if args.baseline is not None:
        ab_rows(args.baseline, args)


if __name__ == "__main__":
    main()
