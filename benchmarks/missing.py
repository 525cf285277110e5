"""P11: a full-covariance Gaussian mixture on rows with 20% of their entries missing (MCAR).

    python benchmarks/missing.py             # N=200,000, D=10, K=8, 20 iterations
    python benchmarks/missing.py --quick     # N=2,000, 3 iterations (smoke run)

The reference is mixfold's fit of the *complete* data from a crude start (K rows of the complete
data as means, the data's covariance for every component, equal weights). Every missing-data
library then starts from that reference's means and covariances (equal weights) and runs the
same number of EM iterations, each in its own child process on the same bytes; initialisation
and imputation are excluded from the timings. Each row reports the seconds per iteration and how
far its fitted means and covariances lie from the reference (components matched by their
means): the bias each way of handling missing entries adds, not a different local optimum.

- mixfold, ``MultivariateGaussianEstimator(missing=True)``: exact EM over the missing entries;
- scikit-learn's ``GaussianMixture(covariance_type="full")`` on mean-imputed rows (it rejects
  NaN);
- pomegranate 1.x with its missing-value support (``torch.masked.MaskedTensor``), full
  covariance, and, since its full covariance does not take masked rows, diagonal covariance
  as the nearest it offers.

The error columns are ``max_k |mu_k - mu_k^ref| / sd`` (sd: the complete data's per-coordinate
standard deviation, averaged) and ``max_k ||cov_k - cov_k^ref||_F / ||cov_k^ref||_F``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peers import _timed, p2_data  # noqa: E402 - P2's generator, the per-step timer

N, D, K, MISSING = 200_000, 10, 8, 0.2
ITERATIONS, QUICK_ITERATIONS, QUICK_N = 20, 3, 2_000
LIBRARIES = ["mixfold-complete", "mixfold", "scikit-learn", "pomegranate-full",
             "pomegranate-diag"]
LABELS = {
    "mixfold-complete": "mixfold, complete data (reference)",
    "mixfold": "mixfold, missing=True (exact EM)",
    "scikit-learn": "scikit-learn, mean-imputed",
    "pomegranate-full": "pomegranate, MaskedTensor, full",
    "pomegranate-diag": "pomegranate, MaskedTensor, diag",
}


# --- data (fixed seeds) ---

def generate(data_dir: Path, n: int) -> None:
    """The complete rows, the rows with 20% of entries removed at random, the shared start."""
    x = p2_data(n, D, K)
    rng = np.random.default_rng(11)
    xm = x.copy()
    xm[rng.random(x.shape) < MISSING] = np.nan
    mu = x[rng.choice(n, K, replace=False)]
    cov = np.repeat(np.cov(x.T, bias=True)[None], K, axis=0)
    np.savez(data_dir / "p11.npz", x=x, xm=xm, w=np.full(K, 1.0 / K), mu=mu, cov=cov)


def _start_from_reference(data_dir: Path, ref: dict) -> None:
    """Start the missing-data fits from the complete data's fit (its means and covariances,
    equal weights): from the crude start, a few iterations on different data reach different
    local optima, and the error columns would measure that instead of each method's bias."""
    data = dict(np.load(data_dir / "p11.npz"))
    data["mu"], data["cov"] = np.asarray(ref["means"]), np.asarray(ref["covs"])
    np.savez(data_dir / "p11.npz", **data)


# --- the runners: each returns (seconds per iteration, means (K, D), covariances (K, D, D)) ---

def run_mixfold(data, iterations: int, complete: bool):
    import mixfold as mf

    x = data["x"] if complete else data["xm"]
    est = mf.MixtureEstimator([mf.MultivariateGaussianEstimator(missing=not complete)] * K)
    init = mf.MixtureDistribution([mf.MultivariateGaussianDistribution(m, c,
                                                                       missing=not complete)
                                   for m, c in zip(data["mu"], data["cov"])], data["w"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mf.MissingEntriesWarning)
        res = mf.fit(x, est, init=init, max_iter=iterations, tol=0.0, progress=False)
    comps = res.model.components
    return res.seconds, [c.mu for c in comps], [c.cov for c in comps], []


def run_sklearn(data, iterations: int):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    xm = data["xm"]
    x = np.where(np.isnan(xm), np.nanmean(xm, axis=0), xm)  # mean imputation, not timed
    gm = GaussianMixture(K, covariance_type="full", tol=0.0, reg_covar=1e-6,
                         weights_init=data["w"], means_init=data["mu"],
                         precisions_init=np.linalg.inv(data["cov"]),
                         warm_start=True, max_iter=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        times = _timed(lambda: gm.fit(x), iterations)
    return times, gm.means_, gm.covariances_, ["timed: warm_start fit(max_iter=1) calls"]


def run_pomegranate(data, iterations: int, covariance_type: str):
    import torch
    from pomegranate.distributions import Normal
    from pomegranate.gmm import GeneralMixtureModel

    def t(a):  # pomegranate computes in float32 whatever it is given
        return torch.as_tensor(np.asarray(a, dtype=np.float32))

    xm = data["xm"]
    seen = ~np.isnan(xm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.masked is a prototype and says so
        x = torch.masked.MaskedTensor(t(np.where(seen, xm, 0.0)), torch.from_numpy(seen))
    covs = data["cov"] if covariance_type == "full" else \
        np.diagonal(data["cov"], axis1=1, axis2=2)
    model = GeneralMixtureModel([Normal(t(m), t(c), covariance_type=covariance_type)
                                 for m, c in zip(data["mu"], covs)], priors=t(data["w"]))

    def step():  # the body of pomegranate's own fit loop
        model.summarize(x)
        model.from_summaries()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.masked is a prototype and says so
        times = _timed(step, iterations)
    means = [d.means.double().numpy() for d in model.distributions]
    covs = [d.covs.double().numpy() for d in model.distributions]
    if covariance_type == "diag":
        covs = [np.diag(c) for c in covs]
    return times, means, covs, ["timed: summarize(X) + from_summaries(), float32"]


def child(library: str, data_dir: Path, iterations: int, result: Path) -> None:
    out: dict = {"library": library}
    try:
        data = dict(np.load(data_dir / "p11.npz"))
        if library.startswith("mixfold"):
            got = run_mixfold(data, iterations, complete=library == "mixfold-complete")
        elif library == "scikit-learn":
            got = run_sklearn(data, iterations)
        else:
            got = run_pomegranate(data, iterations, library.split("-")[1])
        times, means, covs, notes = got
        out.update(status="ok", seconds=[float(s) for s in times], notes=notes,
                   means=np.asarray(means).tolist(), covs=np.asarray(covs).tolist())
    except ImportError as err:
        out.update(status="not installed", detail=str(err))
    except Exception as err:  # noqa: BLE001 - reported in the table, the harness goes on
        out.update(status="failed", detail=f"{type(err).__name__}: {err}".splitlines()[0],
                   traceback=traceback.format_exc())
    finally:
        result.write_text(json.dumps(out))
        sys.stdout.flush()
        os._exit(0)  # skip interpreter teardown (torch atexit work is not measured)


# --- the table ---

def errors(means, covs, ref_means, ref_covs, sd: float) -> tuple[float, float]:
    """Largest mean and relative covariance error over components matched by their means."""
    from scipy.optimize import linear_sum_assignment

    means, covs = np.asarray(means), np.asarray(covs)
    cost = np.linalg.norm(means[:, None] - ref_means[None], axis=2)
    rows, cols = linear_sum_assignment(cost)
    mean_err = max(np.linalg.norm(means[i] - ref_means[j]) / sd for i, j in zip(rows, cols))
    cov_err = max(np.linalg.norm(covs[i] - ref_covs[j]) / np.linalg.norm(ref_covs[j])
                  for i, j in zip(rows, cols))
    return float(mean_err), float(cov_err)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"N={QUICK_N}, {QUICK_ITERATIONS} "
                    f"iterations")
    ap.add_argument("--n", type=int, default=None, help=f"rows (default {N})")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--libraries", default=",".join(LIBRARIES))
    ap.add_argument("--timeout", type=float, default=None, help="seconds per library")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--child", nargs=4, metavar=("LIBRARY", "DATA_DIR", "ITERATIONS", "OUT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        library, data_dir, iterations, result = args.child
        child(library, Path(data_dir), int(iterations), Path(result))
        return
    n = args.n or (QUICK_N if args.quick else N)
    iterations = args.iterations or (QUICK_ITERATIONS if args.quick else ITERATIONS)
    timeout = args.timeout or (120.0 if args.quick else 3600.0)
    libraries = [lib for lib in args.libraries.split(",") if lib]
    if "mixfold-complete" not in libraries:
        libraries.insert(0, "mixfold-complete")  # the reference every error is measured from
    results = {}
    with tempfile.TemporaryDirectory(prefix="mixfold-p11-") as tmp:
        data_dir = Path(tmp)
        generate(data_dir, n)
        x = np.load(data_dir / "p11.npz")["x"]
        sd = float(np.sqrt(np.var(x, axis=0)).mean())
        for lib in libraries:
            if lib != "mixfold-complete" and results.get("mixfold-complete", {}).get("status") \
                    == "ok":
                _start_from_reference(data_dir, results["mixfold-complete"])
            out = data_dir / f"{lib}.json"
            try:
                subprocess.run([sys.executable, __file__, "--child", lib, str(data_dir),
                                str(iterations), str(out)], timeout=timeout, check=False)
                results[lib] = json.loads(out.read_text())
            except (subprocess.TimeoutExpired, FileNotFoundError, json.JSONDecodeError) as err:
                results[lib] = {"library": lib, "status": "failed",
                                "detail": f"{type(err).__name__}: {err}"}
    print(f"P11: full-covariance mixture, N={n:,}, D={D}, K={K}, {MISSING:.0%} of entries "
          f"missing at random, {iterations} EM iterations from the complete data's fit")
    ref = results["mixfold-complete"]
    ours = results.get("mixfold", {})
    ours_s = statistics.median(ours["seconds"]) if ours.get("status") == "ok" else None
    print(f"{'library':38} {'s/iter':>9} {'/ mixfold':>10} {'mean err':>9} {'cov err':>9}")
    for lib in libraries:
        r = results[lib]
        if r["status"] != "ok":
            print(f"{LABELS[lib]:38} {r['status']}: {r.get('detail', '')[:90]}")
            continue
        s = statistics.median(r["seconds"])
        ratio = f"{s / ours_s:10.2f}" if ours_s else f"{'-':>10}"
        if ref.get("status") == "ok":
            r["mean_error"], r["cov_error"] = errors(r["means"], r["covs"],
                                                     np.asarray(ref["means"]),
                                                     np.asarray(ref["covs"]), sd)
            err = f"{r['mean_error']:9.2e} {r['cov_error']:9.2e}"
        else:
            err = f"{'-':>9} {'-':>9}"
        print(f"{LABELS[lib]:38} {s:9.4f} {ratio} {err}")
    if args.json:
        for r in results.values():
            r.pop("means", None)
            r.pop("covs", None)
        args.json.write_text(json.dumps({"n": n, "iterations": iterations,
                                         "results": results}, indent=1))


if __name__ == "__main__":
    main()
