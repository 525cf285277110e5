"""A/B of two mixfold source trees on the sequence combinators, in one run: a fit of the
explicit-duration HMM (its compiled segment kernels), the HMM, the Markov chain and the sequence
of iid items, each tree's children alternating A B B A A B ... on the same rows and start.

    python benchmarks/sequences_ab.py --baseline /path/to/main/src             # default sizes
    python benchmarks/sequences_ab.py --baseline /path/to/main/src --quick     # smoke run

``--candidate`` defaults to this checkout's ``src``. Every child generates the case's rows from
a fixed seed with NumPy alone, fits them from a fixed start for ``--iterations`` EM iterations
(``tol=0``) and reports the fit's seconds per iteration after the first (the kernels' loading
and compiling stay out) and a hash of the fitted model's dict form. The table gives each tree's
median seconds per iteration over all its children's iterations, the ratio candidate /
baseline and whether the two trees' fitted models are bit-identical. ``--threads`` (default 1)
sets the row threads of every child.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _children import json_child, tree_arguments  # noqa: E402

#: case -> (the code that makes ``rows``, ``est`` and ``start`` from ``n`` and ``rng``, n, quick n)
CASES = {
    "HSMM": ("""
from mixfold import (GaussianDistribution, GaussianEstimator, HiddenSemiMarkovDistribution,
                     HiddenSemiMarkovEstimator, PoissonDistribution, PoissonEstimator)
s, d, length = 4, 30, 300
rows = [rng.normal(np.repeat(rng.integers(0, s, length // 10), 10).astype(float), 0.7)
        for _ in range(n)]
moves = (np.ones((s, s)) - np.eye(s)) / (s - 1)
start = HiddenSemiMarkovDistribution([GaussianDistribution(k - 0.3, 1.0) for k in range(s)],
                                     [PoissonDistribution(6.0 + k) for k in range(s)],
                                     np.full(s, 1 / s), moves, max_duration=d)
est = HiddenSemiMarkovEstimator([GaussianEstimator()] * s, [PoissonEstimator()] * s,
                                max_duration=d)
""", 200, 10),
    "HMM": ("""
from mixfold import (GaussianDistribution, GaussianEstimator, HiddenMarkovDistribution,
                     HiddenMarkovEstimator)
s, length = 4, 200
rows = [rng.normal(np.repeat(rng.integers(0, s, length // 10), 10).astype(float), 0.7)
        for _ in range(n)]
step = np.full((s, s), 0.1 / (s - 1)) + np.eye(s) * (0.9 - 0.1 / (s - 1))
start = HiddenMarkovDistribution([GaussianDistribution(k - 0.3, 1.0) for k in range(s)],
                                 np.full(s, 1 / s), step)
est = HiddenMarkovEstimator([GaussianEstimator()] * s)
""", 2000, 50),
    "MarkovChain": ("""
from mixfold import MarkovChainDistribution, MarkovChainEstimator, PoissonEstimator
from mixfold import PoissonDistribution
k = 20
rows = [rng.integers(0, k, rng.integers(1, 60)).tolist() for _ in range(n)]
start = MarkovChainDistribution(np.full(k, 1 / k), np.full((k, k), 1 / k),
                                length=PoissonDistribution(10.0))
est = MarkovChainEstimator(list(range(k)), length=PoissonEstimator())
""", 50_000, 500),
    "Sequence": ("""
from mixfold import (CategoricalDistribution, CategoricalEstimator, PoissonDistribution,
                     PoissonEstimator, SequenceDistribution, SequenceEstimator)
k = 50
rows = [rng.integers(0, k, rng.integers(0, 40)).tolist() for _ in range(n)]
start = SequenceDistribution(CategoricalDistribution(np.full(k, 1 / k).tolist(), levels=range(k)),
                             PoissonDistribution(10.0))
est = SequenceEstimator(CategoricalEstimator(list(range(k))), PoissonEstimator())
""", 50_000, 500),
}

CHILD = """
import hashlib, json, warnings
import numpy as np
import mixfold
rng, n = np.random.default_rng(0), {n}
{setup}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    res = mixfold.fit(rows, est, init=start, max_iter={iterations}, tol=0.0, progress=False)
model = json.dumps(res.model.to_dict(), sort_keys=True)
print(json.dumps({{"seconds": list(res.seconds[1:]),
                  "model": hashlib.sha256(model.encode()).hexdigest()}}))
"""


def child(tree: Path, case: str, n: int, iterations: int, threads: int) -> dict:
    """One fit of ``case`` in a child process importing mixfold from ``tree``."""
    code = CHILD.format(n=n, setup=CASES[case][0], iterations=iterations)
    return json_child(tree, code, MIXFOLD_NUM_THREADS=str(threads))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tree_arguments(ap, HERE)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3, help="children per tree and case")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 3 iterations")
    args = ap.parse_args()
    trees = {"A": args.baseline.resolve(), "B": args.candidate.resolve()}
    iterations = 3 if args.quick else args.iterations
    print(f"A = {trees['A']}\nB = {trees['B']}")
    print(f"{iterations} iterations a fit, {args.repeats} children per tree and case, "
          f"{args.threads} row thread(s)")
    print(f"{'case':12}{'rows':>8}{'A s/iter':>11}{'B s/iter':>11}{'B/A':>8}  model bit-identical")
    for case in [c.strip() for c in args.cases.split(",") if c.strip()]:
        n = CASES[case][2] if args.quick else CASES[case][1]
        runs: dict[str, list[dict]] = {"A": [], "B": []}
        for i in range(args.repeats):
            for name in ("AB" if i % 2 == 0 else "BA"):
                runs[name].append(child(trees[name], case, n, iterations, args.threads))
        median = {t: statistics.median(s for r in rs for s in r["seconds"])
                  for t, rs in runs.items()}
        same = len({r["model"] for rs in runs.values() for r in rs}) == 1
        print(f"{case:12}{n:>8}{median['A']:11.4f}{median['B']:11.4f}"
              f"{median['B'] / median['A']:8.3f}  {'yes' if same else 'NO'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
