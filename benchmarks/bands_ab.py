"""A/B of the CPU bands' fused E-step between two mixfold source trees, in one run: P10's model
(P1's shape, K=16 diagonal Gaussians in D=10), one fold per band as a fit runs it (features kept
by the handle's cache), process time per fold, children of the two trees alternating.

    PYTHONPATH=src python benchmarks/bands_ab.py --baseline OTHER/src [--rows 1000000]
        [--rounds 3] [--folds 8] [--threads 1] [--bands float64,float32u,float32,...]

Each child imports mixfold from one tree (``PYTHONPATH``), draws the same rows (fixed seed),
runs a warm-up fold and then ``--folds`` folds per band, and reports the least process time of
a fold (CPU seconds of all its threads: on a machine others share, a fold's own work, not its
waits). Children go A B B A A B ...; the table gives each tree's least over its children and the
ratio B / A, then per tree each band's ratio to the unscreened NumPy float32 fold
(``float32u``) and to float64. On a busy machine only the ratios of one run mean anything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _children import json_child, tree_arguments  # noqa: E402

DEFAULT_BANDS = "float64,float32u,float32,float16@cpu,bfloat16@cpu"

CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, {here!r})
from precision import p1_mixture, unscreened
from mixfold.compute.fold import fold_rows
from mixfold.compute.feature_cache import FeatureCache
from mixfold.precision import resolve_precision

model = p1_mixture()
enc = model.encoder().encode(model.sampler(1).sample({rows}))
weights = np.ones(enc.n_rows)
factory = model.estimator().accumulator_factory()
out = {{}}
for band in {bands!r}:
    cache = FeatureCache.for_rows(enc.nbytes)
    precision = resolve_precision("float32" if band == "float32u" else band)
    best = float("inf")
    for i in range({folds} + 1):  # the first fold lays the features out
        acc = factory.make()
        with cache.active():
            t = time.process_time()
            if band == "float32u":
                with unscreened():
                    fold_rows(acc, enc, weights, model, precision, 1 << 20)
            else:
                fold_rows(acc, enc, weights, model, precision, 1 << 20)
            if i:
                best = min(best, time.process_time() - t)
    out[band] = best
print(json.dumps(out))
"""


def child(tree: Path, rows: int, bands: list[str], folds: int, threads: int) -> dict:
    return json_child(tree, CHILD.format(here=str(HERE), rows=rows, bands=bands, folds=folds),
                      MIXFOLD_NUM_THREADS=str(threads))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tree_arguments(ap, HERE)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3, help="children per tree")
    ap.add_argument("--folds", type=int, default=8, help="timed folds per band and child")
    ap.add_argument("--threads", type=int, default=1, help="MIXFOLD_NUM_THREADS of a child")
    ap.add_argument("--bands", default=DEFAULT_BANDS)
    args = ap.parse_args()
    bands = [b.strip() for b in args.bands.split(",") if b.strip()]
    trees = {"A": args.baseline.resolve(), "B": args.candidate.resolve()}
    order = [("A", "B") if i % 2 == 0 else ("B", "A") for i in range(args.rounds)]
    best: dict[str, dict[str, float]] = {"A": {}, "B": {}}
    for pair in order:
        for name in pair:
            got = child(trees[name], args.rows, bands, args.folds, args.threads)
            for band, s in got.items():
                best[name][band] = min(best[name].get(band, float("inf")), s)
    print(f"P10 fold, {args.rows:,} rows, {args.threads} thread(s), process ms per fold "
          f"(least of {args.rounds} children x {args.folds} folds); A={trees['A']}, "
          f"B={trees['B']}")
    print("| band | A ms | B ms | B/A | A vs float32u | B vs float32u | A vs float64 "
          "| B vs float64 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for band in bands:
        a, b = best["A"][band] * 1e3, best["B"][band] * 1e3
        ref = {t: (best[t].get("float32u"), best[t].get("float64")) for t in "AB"}
        cells = []
        for t, v in (("A", a), ("B", b)):
            u, d = ref[t]
            cells.append(f"{u * 1e3 / v:.2f}x" if u else "-")
            cells.append(f"{d * 1e3 / v:.2f}x" if d else "-")
        print(f"| {band} | {a:.1f} | {b:.1f} | {b / a:.3f} | {cells[0]} | {cells[2]} | "
              f"{cells[1]} | {cells[3]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
