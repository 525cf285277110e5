"""Plain EM against SQUAREM (``optimize(accelerate="squarem")``): folds and wall time to converge.

    PYTHONPATH=src python benchmarks/accelerated.py [--scale 0.05] [--tol 1e-8]
                                                    [--cases P1,P2,P3,P4] [--backends local,dask]

P1 (diagonal GMM), P2 (full covariance), P3 (Gaussian HMM) and P4 (mixture of records) are the
data sets and shared starts of ``benchmarks/run.py`` (``_peers.py``, sizes times ``--scale``).
Each case is fitted from the same start to the same ``tol`` twice per backend, plain and
accelerated, in the same run; the table gives the folds over the data (E-steps: on a cluster,
round trips), the wall time, both final mean log-likelihoods per row and the ratios. On
``dask`` the fits run on a ``LocalCluster`` of ``--workers`` processes opened once.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mixfold as mf  # noqa: E402
from _peers import GENERATORS  # noqa: E402

CASES = {"P1": ("p1", "diag_gmm"), "P2": ("p2", "full_gmm"), "P3": ("p3", "hmm"),
         "P4": ("p4", "records")}


def model_of(kind: str, data: dict, start: dict) -> tuple[object, mf.Estimator, mf.Distribution]:
    """(rows, estimator, shared start) of one case."""
    if kind == "diag_gmm":
        est = mf.MixtureEstimator([mf.DiagonalGaussianEstimator()] * len(start["w"]))
        init = mf.MixtureDistribution([mf.DiagonalGaussianDistribution(m, v)
                                       for m, v in zip(start["mu"], start["var"])], start["w"])
        return data["x"], est, init
    if kind == "full_gmm":
        est = mf.MixtureEstimator([mf.MultivariateGaussianEstimator()] * len(start["w"]))
        init = mf.MixtureDistribution([mf.MultivariateGaussianDistribution(m, c)
                                       for m, c in zip(start["mu"], start["cov"])], start["w"])
        return data["x"], est, init
    if kind == "hmm":
        est = mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * len(start["initial"]))
        init = mf.HiddenMarkovDistribution(
            [mf.GaussianDistribution(m, v) for m, v in zip(start["mu"], start["var"])],
            start["initial"], start["transitions"])
        return list(data["seqs"]), est, init
    levels = list(range(start["probs"].shape[1]))
    est = mf.MixtureEstimator([mf.RecordEstimator({
        "x": mf.GaussianEstimator(), "c": mf.CategoricalEstimator(levels),
        "n": mf.PoissonEstimator()})] * len(start["w"]))
    init = mf.MixtureDistribution([mf.RecordDistribution({
        "x": mf.GaussianDistribution(m, v), "c": mf.CategoricalDistribution(p, levels=levels),
        "n": mf.PoissonDistribution(lam)})
        for m, v, p, lam in zip(start["mu"], start["var"], start["probs"], start["lam"])],
        start["w"])
    rows = [{"x": x, "c": int(c), "n": int(n)} for x, c, n in zip(data["x"], data["c"], data["n"])]
    return rows, est, init


def one_fit(rows, est, init, backend, tol, max_iter, accelerate) -> dict:
    t0 = time.perf_counter()
    res = mf.fit(rows, est, init=init, tol=tol, max_iter=max_iter, backend=backend,
                 accelerate=accelerate, progress=False)
    return {"folds": res.folds, "seconds": time.perf_counter() - t0,
            "ll": res.final_log_likelihood, "stop": res.stop_reason,
            "fell": bool(np.any(np.diff(res.log_likelihood)
                                < -1e-12 * np.abs(res.log_likelihood[1:]))),
            "warnings": len(res.warnings)}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.05, help="data sizes times this")
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--max-iter", type=int, default=5000)
    ap.add_argument("--cases", default="P1,P2,P3,P4")
    ap.add_argument("--backends", default="local,dask")
    ap.add_argument("--workers", type=int, default=2, help="Dask LocalCluster workers")
    args = ap.parse_args(argv)
    client = None
    backends = args.backends.split(",")
    if "dask" in backends:
        from mixfold.backends.dask import local_dask_client

        client = local_dask_client(args.workers)
    rows_out = []
    try:
        print(f"tol={args.tol:g}, scale={args.scale:g}, max_iter={args.max_iter}")
        print("| case | backend | plain folds | squarem folds | fold ratio | plain s | squarem s "
              "| time ratio | plain mean ll | squarem mean ll | squarem - plain | fell |")
        print("|" + " --- |" * 12)
        for case in args.cases.split(","):
            name, kind = CASES[case]
            data, start, label = GENERATORS[name](args.scale)
            rows, est, init = model_of(kind, data, start)
            for backend in backends:
                engine = client if backend == "dask" else backend
                one_fit(rows, est, init, engine, args.tol, 2, None)  # compiles, warms the engine
                plain = one_fit(rows, est, init, engine, args.tol, args.max_iter, None)
                fast = one_fit(rows, est, init, engine, args.tol, args.max_iter, "squarem")
                row = {"case": case, "label": label, "backend": backend, "plain": plain,
                       "squarem": fast}
                rows_out.append(row)
                print(f"| {case} ({label}) | {backend} | {plain['folds']} | {fast['folds']} | "
                      f"{plain['folds'] / fast['folds']:.2f} | {plain['seconds']:.2f} | "
                      f"{fast['seconds']:.2f} | {plain['seconds'] / fast['seconds']:.2f} | "
                      f"{plain['ll']:.10f} | {fast['ll']:.10f} | "
                      f"{fast['ll'] - plain['ll']:+.2e} | "
                      f"{'yes' if fast['fell'] or plain['fell'] else 'no'} |", flush=True)
    finally:
        if client is not None:
            cluster = client.cluster
            client.close()
            cluster.close()
    return rows_out


if __name__ == "__main__":
    main()
