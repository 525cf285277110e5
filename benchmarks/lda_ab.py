"""A/B of two mixfold source trees on LDA, in one run: the same CSR corpus fitted by each tree
in child processes alternating A B B A A B ..., one core each (BLAS and OpenMP limited to one
thread), from scikit-learn's seeded start topics (``sparse_lda.py``'s corpus and start).

    python benchmarks/lda_ab.py --baseline /path/to/main/src                 # default size
    python benchmarks/lda_ab.py --baseline /path/to/main/src --docs 2000     # smoke run

``--candidate`` defaults to this checkout's ``src``. The table gives each tree's median seconds
per EM pass over all its children's passes (the fit's own per-iteration times), the ratio
candidate / baseline and whether the two trees' fitted topics are bit-identical.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core: set before NumPy starts its thread pools

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import scipy.sparse as sp  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _children import json_child, tree_arguments  # noqa: E402
from sparse_lda import corpus  # noqa: E402 - the same corpus and start

CHILD = """
import hashlib, json, sys, warnings
import scipy.sparse as sp
import mixfold
from mixfold import LDADistribution, LDAEstimator
sys.path.insert(0, {here!r})
from sparse_lda import start_topics
x, k, passes = sp.load_npz({path!r}), {k}, {passes}
start = LDADistribution(start_topics(k, x.shape[1]), 1.0 / k)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    res = mixfold.fit(x, LDAEstimator(k, alpha=1.0 / k), init=start, max_iter=passes, tol=0.0,
                      progress=False)
print(json.dumps({{"seconds": list(res.seconds[1:]),
                  "topics": hashlib.sha256(res.model.topics.tobytes()).hexdigest()}}))
"""


def child(tree: Path, path: str, k: int, passes: int) -> dict:
    """One fit in a child process importing mixfold from ``tree``."""
    return json_child(tree, CHILD.format(here=str(HERE), path=path, k=k, passes=passes))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tree_arguments(ap, HERE)
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--words", type=int, default=5_000)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--passes", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3, help="children per tree")
    args = ap.parse_args()
    trees = {"A": args.baseline.resolve(), "B": args.candidate.resolve()}
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "corpus.npz")
        sp.save_npz(path, corpus(args.docs, args.words, args.density, args.topics))
        for i in range(args.repeats):
            for name in ("AB" if i % 2 == 0 else "BA"):
                runs[name].append(child(trees[name], path, args.topics, args.passes))
    median = {n: statistics.median(s for r in rs for s in r["seconds"]) for n, rs in runs.items()}
    same = len({r["topics"] for rs in runs.values() for r in rs}) == 1
    print(f"A = {trees['A']}\nB = {trees['B']}")
    print(f"{args.docs} documents, {args.words} words, density {args.density}, "
          f"{args.topics} topics, {args.passes} passes, {args.repeats} children per tree")
    print(f"{'case':6}{'A s/pass':>11}{'B s/pass':>11}{'B/A':>8}  topics bit-identical")
    print(f"{'LDA':6}{median['A']:11.4f}{median['B']:11.4f}{median['B'] / median['A']:8.3f}  "
          f"{'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
