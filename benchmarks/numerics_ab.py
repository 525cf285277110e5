"""A/B of two mixfold source trees on the speed cases, in one run: P1, P2, P4 and P7 (and P3,
or E1 -- the engines benchmark's model, 10^6 rows, K=4 full covariances in D=3 -- with
--cases), alternating the two trees child by child so that both see the same machine.

    python benchmarks/numerics_ab.py --baseline /path/to/main/src            # full sizes
    python benchmarks/numerics_ab.py --baseline /path/to/main/src --quick    # smoke run

``--candidate`` defaults to this checkout's ``src``. Each case's data and start are generated
once (``benchmarks/run.py``'s generators); every child is ``benchmarks/_peers.py run ...
mixfold`` with ``PYTHONPATH`` set to one tree, ``--repeats`` times per tree in the order
A B B A A B ... The table gives each tree's median seconds per iteration over all its
children's iterations, the ratio candidate / baseline (the issue's bound: within 1.03) and the
two final mean log-likelihoods per row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as side_by_side  # noqa: E402 - benchmarks/run.py: the cases, generators and children

SPEED_CASES = ("P1", "P2", "P4", "P7")
#: cases of this A/B only (``--cases``): E1 is the engines benchmark's model on one process
CASES = {**side_by_side.CASES,
         "E1": side_by_side.Case("E1", "engines model, full GMM", "full_gmm", "e1", ["mixfold"])}


def run_tree(case: side_by_side.Case, tree: Path, data_dir: Path, iterations: int,
             timeout: float) -> dict:
    """One child of ``case`` importing mixfold from ``tree``."""
    library = "mixfold-float32" if case.name == "P7" else "mixfold"
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree) + ("" if old is None else os.pathsep + old)
    try:
        return side_by_side.run_child(case, library, data_dir, iterations, timeout, "warm_start")
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="the src directory of tree A")
    ap.add_argument("--candidate", type=Path, default=HERE.parent / "src",
                    help="the src directory of tree B (default: this checkout)")
    ap.add_argument("--cases", default=",".join(SPEED_CASES))
    ap.add_argument("--repeats", type=int, default=3, help="children per tree and case")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (N/100), 3 iterations")
    args = ap.parse_args()
    names = [c.strip().upper() for c in args.cases.split(",") if c.strip()]
    iterations = side_by_side.QUICK_ITERATIONS if args.quick else side_by_side.ITERATIONS
    scale = side_by_side.QUICK_SCALE if args.quick else 1.0
    timeout = 120.0 if args.quick else 3600.0
    trees = {"A": args.baseline.resolve(), "B": args.candidate.resolve()}
    print(f"A = {trees['A']}\nB = {trees['B']}\n{iterations} EM iterations per child, "
          f"{args.repeats} children per tree, sizes x {scale:g}")
    print(f"{'case':5s} {'A s/iter':>10s} {'B s/iter':>10s} {'B/A':>7s} "
          f"{'A mean LL/row':>17s} {'B mean LL/row':>17s}")
    failed = False
    with tempfile.TemporaryDirectory(prefix="mixfold-ab-") as tmp:
        made: set[str] = set()
        for name in names:
            case = CASES[name]
            data_dir = Path(tmp) / case.data
            if case.data not in made:
                side_by_side.generate(case.data, data_dir, scale, timeout)
                made.add(case.data)
            seconds: dict[str, list[float]] = {"A": [], "B": []}
            ll: dict[str, float] = {}
            for i in range(args.repeats):
                for key in ("AB" if i % 2 == 0 else "BA"):
                    r = run_tree(case, trees[key], data_dir, iterations, timeout)
                    if r.get("status") != "ok":
                        print(f"{name:5s} tree {key} failed: {r.get('detail')}")
                        failed = True
                        break
                    seconds[key] += r["seconds"]
                    ll[key] = r["log_likelihood"]
            if not (seconds["A"] and seconds["B"]):
                continue
            a, b = statistics.median(seconds["A"]), statistics.median(seconds["B"])
            print(f"{name:5s} {a:10.4f} {b:10.4f} {b / a:7.3f} {ll['A']:17.10g} {ll['B']:17.10g}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
