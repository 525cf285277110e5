"""Startup and threads: ``import mixfold`` and the first HMM fit in a fresh process, and the HMM
fold's threads on a quiet and on a busy machine, beside hmmlearn in the same run.

    python benchmarks/runtime.py                   # everything (a few minutes)
    python benchmarks/runtime.py --quick           # small sizes, fewer repeats (a smoke run)
    python benchmarks/runtime.py --baseline ../main/src   # adds rows for another mixfold tree
    python benchmarks/runtime.py --startup-only    # import and first fits alone

Startup: the median over fresh processes of ``import mixfold``, and of the first HMM fit (3
iterations, 20 sequences x 50 steps, 3 states) counted from the start of the import, with a
warm kernel cache (a process has compiled it before) and once with an empty one; and of a
notebook's first Gaussian mixtures (150 x 4 rows, K=3, a diagonal then a full fit, 20
iterations each), warm cache.

Threads: two Gaussian HMM cases, each library from the same start for a fixed number of
iterations (``benchmarks/_peers.py``: per-iteration stamps from inside each EM loop, median,
first iteration dropped): SMALL, 100 sequences x 100 steps, 2 states, 30 iterations (10,000
items: little work per fold, where thread hand-overs cost most); P3, 2,000 sequences x 500
steps, 5 states, 5 iterations. Each runs quiet, then *loaded*: twice as many busy processes as
cores (``while True`` loops, each ending by itself after a deadline, stopped when the run ends).
Rows: mixfold's default threads, mixfold on one thread (``MIXFOLD_NUM_THREADS=1``), hmmlearn;
ratios against the one-thread row and against hmmlearn (> 1: mixfold faster).
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
from contextlib import contextmanager, nullcontext
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

FIRST_FIT = """
import time
t = time.perf_counter()
import mixfold
imported = time.perf_counter() - t
import numpy as np
rows = [np.random.default_rng(0).normal(size=50).tolist() for _ in range(20)]
mixfold.optimize(rows, mixfold.HiddenMarkovEstimator([mixfold.GaussianEstimator()] * 3),
                 max_iter=3, progress=False)
print(imported, time.perf_counter() - t)
"""
FIRST_MIXTURE = """
import time
t = time.perf_counter()
import mixfold
import numpy as np
x = np.random.default_rng(0).normal(size=(150, 4)) + np.repeat([[0.0], [4.0], [8.0]], 50, axis=0)
for leaf in (mixfold.DiagonalGaussianEstimator(), mixfold.MultivariateGaussianEstimator()):
    mixfold.optimize(x, mixfold.MixtureEstimator([leaf] * 3), max_iter=20, progress=False)
print(time.perf_counter() - t)
"""
IMPORT_ONLY = "import time; t = time.perf_counter(); import mixfold; print(time.perf_counter() - t)"


def _env(src: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MIXFOLD_NUM_THREADS",)}
    return {**env, "PYTHONPATH": str(src), **extra}


def _child(code: str, env: dict[str, str]) -> list[float]:
    out = subprocess.run([sys.executable, "-c", code], env=env, text=True, capture_output=True,
                         timeout=600, check=True)
    return [float(v) for v in out.stdout.split()]


def startup(src: Path, repeats: int) -> dict[str, float]:
    """Median seconds: import; first fit with a warm cache; first fit with an empty cache;
    first small mixtures with a warm cache."""
    _child(FIRST_FIT, _env(src))  # warms this tree's kernel cache
    _child(FIRST_MIXTURE, _env(src))
    imports = [_child(IMPORT_ONLY, _env(src))[0] for _ in range(repeats)]
    warm = [_child(FIRST_FIT, _env(src))[1] for _ in range(repeats)]
    with tempfile.TemporaryDirectory() as empty:
        cold = _child(FIRST_FIT, _env(src, NUMBA_CACHE_DIR=empty))[1]
    mixtures = [_child(FIRST_MIXTURE, _env(src))[0] for _ in range(repeats)]
    return {"import": statistics.median(imports), "first fit (warm cache)":
            statistics.median(warm), "first fit (empty cache)": cold,
            "first mixtures (warm cache)": statistics.median(mixtures)}


# --- the threads: one child per (case, library), the same data and start for each ---

CASES = {  # name -> (sequences, steps, states, iterations); quick sizes after
    "SMALL": ((100, 100, 2, 30), (50, 100, 2, 10)),
    "P3": ((2_000, 500, 5, 5), (200, 500, 5, 4)),
}


def run_case(case: str, library: str, quick: bool) -> float:
    """(child side) the median s/iter of ``library`` on ``case``."""
    sys.path.insert(0, str(HERE))
    from _peers import hmm_start, p3_data, run_hmmlearn, run_mixfold

    n, steps, s, iterations = CASES[case][quick]
    seqs = p3_data(n, steps, s)
    run = run_hmmlearn if library == "hmmlearn" else run_mixfold
    times = run("hmm", {"seqs": seqs}, hmm_start(seqs, s), iterations)[0]
    return statistics.median(times[1:])


def threads_row(case: str, library: str, src: Path, quick: bool) -> float:
    extra = {"MIXFOLD_NUM_THREADS": "1"} if library.endswith("1 thread") else {}
    name = "hmmlearn" if library == "hmmlearn" else "mixfold"
    out = subprocess.run([sys.executable, __file__, "--child", case, name]
                         + (["--quick"] if quick else []), env=_env(src, **extra), text=True,
                         capture_output=True, timeout=900)
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
        return float("nan")
    return float(out.stdout.split()[-1])


@contextmanager
def busy_processes(count: int, seconds: float):
    """``count`` processes spinning on a core each, ending by themselves after ``seconds``."""
    code = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    try:
        time.sleep(0.5)  # all of them running before the first timing
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--baseline", type=Path, help="another mixfold source tree, for A/B rows")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--startup-only", action="store_true", help="the startup table alone")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "LIBRARY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(run_case(*args.child, args.quick))
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    trees = {"mixfold": SRC, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    repeats = 2 if args.quick else args.repeats
    print(f"# runtime.py — {platform.node()} ({cores} cores), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print(f"## startup (median of {repeats} fresh processes, seconds)\n")
    print(f"{'tree':<10} {'import':>8} {'first fit (warm cache)':>24} "
          f"{'first fit (empty cache)':>25} {'first mixtures (warm cache)':>28}")
    results: dict = {"startup": {}, "threads": []}
    for tree, src in trees.items():
        r = startup(src, repeats)
        results["startup"][tree] = r
        print(f"{tree:<10} {r['import']:>8.3f} {r['first fit (warm cache)']:>24.3f} "
              f"{r['first fit (empty cache)']:>25.3f} {r['first mixtures (warm cache)']:>28.3f}")
    if args.startup_only:
        return
    libraries = [f"{t}{suffix}" for t in trees for suffix in ("", " 1 thread")] + ["hmmlearn"]
    print(f"\n## threads (median s/iter; loaded = {2 * cores} busy processes on {cores} cores)\n")
    print(f"{'case':<6} {'load':<7} {'library':<20} {'s/iter':>9} {'vs 1 thread':>12} "
          f"{'vs hmmlearn':>12}")
    for case in CASES:
        for load in ("quiet", "loaded"):
            with busy_processes(2 * cores, 900) if load == "loaded" else nullcontext():
                row = {lib: threads_row(case, lib, trees[lib.split(" ")[0]]
                                        if lib != "hmmlearn" else SRC, args.quick)
                       for lib in libraries}
            for lib, sec in row.items():
                one = f"{row[lib + ' 1 thread'] / sec:.2f}" if lib in trees else ""
                print(f"{case:<6} {load:<7} {lib:<20} {sec:>9.4f} {one:>12} "
                      f"{row['hmmlearn'] / sec:>12.2f}")
                results["threads"].append({"case": case, "load": load, "library": lib,
                                           "s_per_iter": sec})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
