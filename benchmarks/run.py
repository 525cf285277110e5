"""Side-by-side benchmarks: mixfold against its peers on the P1-P4 and P7 cases.

    python benchmarks/run.py                       # the full run (P1: 1,000,000 rows; long)
    python benchmarks/run.py --quick               # tiny sizes, 3 iterations (CI smoke run)
    python benchmarks/run.py --cases P1,P4 [--libraries mixfold,mixle] [--json out.json]

For each case the data and the starting parameters are generated once (fixed seeds) and saved
to a temporary directory (``*.npy`` + ``start.npz``), so every library reads the same bytes and
starts from the same parameters. Each library then runs in its own subprocess
(``benchmarks/_peers.py``) so that its peak RSS (``ru_maxrss`` of that child) is its own, for the
same number of EM iterations (20; 3 with --quick) in one call of its own fit, clocked by a
per-iteration hook inside its own loop, initialisation excluded. The table reports the
median seconds per iteration, the child's peak RSS, the final mean log-likelihood per row
(computed by one NumPy scorer from each library's final parameters) and the time ratio
peer / mixfold. BLAS, OpenMP, numba and torch threads are left at their defaults (every child
inherits the same environment); the footnotes say what they were.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _table import markdown_header, markdown_row

HERE = Path(__file__).resolve().parent
ITERATIONS, QUICK_ITERATIONS = 20, 3
QUICK_SCALE = 0.01  # --quick: N / 100


@dataclass
class Case:
    name: str
    title: str
    kind: str  # the model, as _peers.py names it
    data: str  # the data set, as _peers.py's GENERATORS name it; cases may share one
    libraries: list[str]


CASES = {c.name: c for c in [
    Case("P1", "diagonal GMM", "diag_gmm", "p1",
         ["mixfold", "scikit-learn", "mixle", "pomegranate"]),
    Case("P2", "full-covariance GMM", "full_gmm", "p2", ["mixfold", "scikit-learn", "pomegranate"]),
    Case("P3", "Gaussian HMM", "hmm", "p3", ["mixfold", "hmmlearn", "pomegranate"]),
    Case("P4", "mixture of records", "records", "p4", ["mixfold", "mixle"]),
    Case("P7", "P1 with a float32 E-step", "diag_gmm", "p1", ["mixfold", "mixfold-float32"]),
]}


# --- running the children ---
#
# This process never holds the data (it does not even import NumPy): Linux carries a process's
# peak RSS across fork + exec into the child's ru_maxrss, so a fat parent would inflate every
# child's figure. The data is generated in a child of its own, too.

def generate(key: str, directory: Path, scale: float, timeout: float) -> dict:
    cmd = [sys.executable, str(HERE / "_peers.py"), "generate", key, str(directory), str(scale)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"generating {key} failed:\n{proc.stderr}")
    # the kernel writes the fresh files back in the following seconds: wait for it here, or the
    # first timed child shares the machine with it (P1 ran 7% slower first than last)
    os.sync()
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_child(case: Case, library: str, data_dir: Path, iterations: int, timeout: float,
              sklearn_timing: str) -> dict:
    result = data_dir / f"result-{case.name}-{library}.json"
    cmd = [sys.executable, str(HERE / "_peers.py"), "run", case.kind, library, str(data_dir),
           str(iterations), str(result), "--sklearn-timing", sklearn_timing]
    if library == "mixfold-float32":
        cmd += ["--precision", "float32"]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"library": library, "status": "failed", "detail": f"timed out after {timeout}s"}
    wall = time.perf_counter() - t
    if not result.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"library": library, "status": "failed",
                "detail": f"exit {proc.returncode}: {' | '.join(tail)}"}
    out = json.loads(result.read_text())
    out["child_wall_s"] = wall
    if out.get("status") == "ok":
        out["median_s"] = statistics.median(out["seconds"])
    return out


# --- the table ---

COLUMNS = markdown_header(["case", "library", "s/iter", "iters", "peak RSS MB",
                           "final mean LL/row", "peer/mixfold", "timed by"],
                          [False, False, True, True, True, True, True, False])


def row_text(case: str, r: dict, reference: dict | None) -> str:
    lib = r["library"]
    if r["status"] != "ok":
        msg = "not installed" if r["status"] == "not installed" else f"failed: {r['detail']}"
        return markdown_row([case, lib, msg, "", "", "", "", ""])
    ratio = ""
    if reference is not None and reference.get("status") == "ok" and reference is not r:
        ratio = f"{r['median_s'] / reference['median_s']:.2f}"
    elif reference is r:
        ratio = "1.00"
    return markdown_row([case, lib, f"{r['median_s']:.4f}", len(r["seconds"]),
                         f"{r['peak_rss_mb']:.1f}", f"{r['log_likelihood']:.10g}", ratio,
                         r.get("timed_by", "")])


def thread_settings() -> dict:
    info = {"cpu_count": os.cpu_count()}
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        if var in os.environ:
            info[var] = os.environ[var]
    return info


FOOTNOTES = """\
Notes
  s/iter: median wall seconds of one EM iteration (initialisation excluded) over the iterations
    run; peak RSS: ru_maxrss of that library's own subprocess, read right after its EM loop
    (interpreter + imports + the loaded data + the fit); final mean LL/row: mean log-likelihood
    per row (per sequence for P3) of the parameters after the last iteration, computed by the
    same NumPy float64 scorer for every library (benchmarks/_peers.py).
  Start: every library starts from the same parameters (start.npz): K distinct data rows as the
    means and the data's (co)variance (P1, P2, P4), quantile means and the data's variance with
    a 0.6 self-transition (P3), Dirichlet(20) level probabilities and row counts + 0.5 as rates
    (P4), uniform weights.
  Timing: every library runs ONE call of its own fit for all the iterations, from the shared
    start, and is clocked from inside its own loop by a per-iteration hook (column "timed by"):
    the gaps between consecutive stamps are its iterations; setup before the loop (input checks,
    the start's initialisation) is excluded for every library alike.
  mixfold: fit(init=<the shared start>, max_iter, tol=0) -> FitResult.seconds (its loop's own
    per-iteration clock; no initialisation runs when init is a model).
  scikit-learn: one GaussianMixture(weights_init/means_init/precisions_init = the start,
    max_iter, tol=0, reg_covar=1e-6).fit(X); stamped after _initialize_parameters and at
    _print_verbose_msg_iter_end (called by BaseMixture's loop after every M-step; private API,
    verbose=0). Its final E-step after the loop is not an iteration and is not counted.
    --sklearn-timing warm_start times fit(max_iter=1, warm_start=True) calls instead (each
    call validates X and ends with an extra E-step: it overstates the per-iteration cost).
  hmmlearn: one GaussianHMM(implementation="scaling", init_params="", covars_prior=0,
    n_iter).fit(X, lengths) with the start set on the model; its monitor_ replaced by a
    ConvergenceMonitor subclass stamped at _reset (after the init) and at report (after every
    M-step), converged only at n_iter.
  pomegranate: float32 throughout (its modules compute and keep their statistics in the dtype
    of their float32 _device parameter even when given float64, so it gets the data converted
    to float32 while loading); one fit(X) with max_iter, tol=-inf; stamped at the loop's first
    summarize and after every from_summaries (instance hooks on its own loop). DenseHMM always
    models an end state: started at 1/T, left to re-estimate, and dropped (transition rows
    renormalised) for the common LL.
  mixle: optimize(prev_estimate=<the start>, enc_data=<pre-encoded>, engine=FUSED_NUMPY_ENGINE
    (its fused numba kernels), delta=None); per-iteration times are the gaps between its
    on_step callbacks (the first includes the numba compile). P4 rows are (float, level, count)
    tuples for a CompositeDistribution, pre-encoded outside the timing.
  LLs differ in the last digits for known reasons: mixfold and scikit-learn add reg_covar=1e-6
    to every variance, hmmlearn runs plain ML (covars_prior=0), pomegranate runs in float32 and
    (P3) fits an end state, and each library has its own variance floors.
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (N/100), 3 iterations")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated, e.g. P1,P4")
    ap.add_argument("--libraries", default=None, help="only these libraries (comma-separated)")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--scale", type=float, default=None,
                    help="multiply every case's size by this (default 1; 0.01 with --quick)")
    ap.add_argument("--sklearn-timing", default="hook", choices=["hook", "warm_start"],
                    help="hook: one fit() timed inside its loop (the headline); warm_start: the "
                    "old fit(max_iter=1) calls, for comparison")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per child")
    ap.add_argument("--json", type=Path, default=None, help="also write every result here")
    args = ap.parse_args()
    names = [c.strip().upper() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    only = None if args.libraries is None else {s.strip() for s in args.libraries.split(",")}
    iterations = args.iterations or (QUICK_ITERATIONS if args.quick else ITERATIONS)
    scale = args.scale or (QUICK_SCALE if args.quick else 1.0)
    timeout = args.timeout or (120.0 if args.quick else 3600.0)

    threads = thread_settings()
    print(f"mixfold side-by-side benchmarks — {time.strftime('%Y-%m-%d %H:%M')}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, {iterations} EM iterations"
          f"{f', sizes x {scale:g}' if scale != 1 else ''}", flush=True)
    print(COLUMNS, flush=True)
    results: dict[str, list[dict]] = {}
    sizes: dict[str, str] = {}
    data_bytes: dict[str, int] = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="mixfold-bench-") as tmp:
        made: dict[str, dict] = {}
        for name in names:
            case = CASES[name]
            directory = Path(tmp) / case.data
            if case.data not in made:
                made[case.data] = generate(case.data, directory, scale, timeout)
                threads.update(made[case.data].get("threads", {}))
            sizes[name], data_bytes[name] = made[case.data]["size"], made[case.data]["bytes"]
            rows, reference = [], None
            for lib in case.libraries:
                if only is not None and lib not in only:
                    continue
                r = run_child(case, lib, directory, iterations, timeout, args.sklearn_timing)
                rows.append(r)
                if lib == "mixfold":
                    reference = r
                failed |= r["status"] == "failed"
                print(row_text(name, r, reference), flush=True)
            results[name] = rows
    print()
    for name in names:
        print(f"{name}  {CASES[name].title}: {sizes[name]}, data {data_bytes[name] / 2**20:.3g} "
              f"MB")
    print_checks(results, data_bytes)
    notes = sorted({f"{name} {r['library']}: {n}" for name, rows in results.items()
                    for r in rows for n in r.get("notes", [])})
    child_threads = {}
    for rows in results.values():
        for r in rows:
            child_threads.update(r.get("threads") or {})
    print(f"\nThreads (defaults, the same environment for every child): {threads}"
          + (f", in the children: {child_threads}" if child_threads else ""))
    print("\n" + FOOTNOTES + "  Per run:\n" + "\n".join(f"    {n}" for n in notes))
    for rows in results.values():
        for r in rows:
            if r["status"] == "failed" and "traceback" in r:
                print(f"\n{r['library']} traceback:\n{r['traceback']}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"iterations": iterations, "quick": args.quick,
                                         "threads": threads, "sizes": sizes,
                                         "results": results}, indent=1))
    return 1 if failed else 0


def print_checks(results: dict[str, list[dict]], data_bytes: dict[str, int]) -> None:
    def ok(name: str, lib: str) -> dict | None:
        r = next((r for r in results.get(name, []) if r["library"] == lib), None)
        return r if r is not None and r["status"] == "ok" else None

    if (r := ok("P1", "mixfold")) is not None:
        limit = 2.5 * data_bytes["P1"] / 2**20
        over = r["peak_rss_mb"] - r["baseline_rss_mb"]
        print(f"P1  mixfold peak RSS {r['peak_rss_mb']:.1f} MB vs 2.5x the data's bytes "
              f"{limit:.1f} MB: {'within' if r['peak_rss_mb'] <= limit else 'OVER'} "
              f"(interpreter + imports {r['baseline_rss_mb']:.1f} MB, so {over:.1f} MB above that)")
    a, b = ok("P7", "mixfold"), ok("P7", "mixfold-float32")
    if a is not None and b is not None:
        rel = abs(b["log_likelihood"] - a["log_likelihood"]) / abs(a["log_likelihood"])
        print(f"P7  float32 / float64 E-step time {b['median_s'] / a['median_s']:.2f}; relative "
              f"difference of the final LLs {rel:.2e} (target <= 1e-6: "
              f"{'met' if rel <= 1e-6 else 'NOT met'})")


if __name__ == "__main__":
    sys.exit(main())
