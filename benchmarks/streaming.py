"""Out-of-core benchmark P9: the P1 model fitted from Parquet, one pass per EM iteration.

    python benchmarks/streaming.py            # P9: 10,000,000 rows x 10 float64 (800 MB)
    python benchmarks/streaming.py --quick    # a smoke run: 200,000 rows
    python benchmarks/streaming.py --rows N --iterations K [--json out.json]

P1's data (a K=16 diagonal Gaussian mixture in D=10, fixed seed) is written once to a temporary
folder as one Parquet file in row groups of 100,000 rows, block by block, so no process ever
holds all of it. Then, each in a subprocess of its own (so that its ``ru_maxrss`` is its own):

- stream: ``mixfold.fit(RowBlocks.parquet(folder), MixtureEstimator([DiagonalGaussian] * 16))``:
  every EM iteration reads, encodes, folds and drops each row group;
- memory: the in-memory P1 fit of the first N / 10 rows (P1 itself at full size: 1,000,000).

Reported: the peak RSS of the streamed fit against the 300 MB budget, and its median seconds
per pass against the in-memory seconds per iteration x 10 (the same work per row; the ratio is
the cost of reading Parquet and encoding every pass). Initialisation (a pass learning the
vocabularies and counting rows, a pass drawing the seeded sample, one EM step) is timed apart.
This parent process only starts the children: it never imports NumPy or holds the data.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FULL_ROWS, QUICK_ROWS = 10_000_000, 200_000
ITERATIONS, QUICK_ITERATIONS = 5, 3
ROW_GROUP_ROWS = 100_000
RSS_BUDGET_MB = 300.0
DIM, COMPONENTS = 10, 16


# --- children (run as ``streaming.py _child <what> ...``) ---

def _p1_blocks(n_rows: int, block_rows: int, seed: int = 0):
    """P1's mixture (benchmarks/backends.py p1_data's parameters), drawn block by block."""
    import numpy as np

    rng = np.random.default_rng(seed)
    means = rng.normal(0, 4, size=(COMPONENTS, DIM))
    scales = rng.uniform(0.5, 2.0, size=(COMPONENTS, DIM))
    for i, begin in enumerate(range(0, n_rows, block_rows)):
        n = min(block_rows, n_rows - begin)
        block_rng = np.random.default_rng([seed, i])
        z = block_rng.integers(0, COMPONENTS, size=n)
        yield means[z] + scales[z] * block_rng.normal(size=(n, DIM))


def _child_generate(folder: str, n_rows: int) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(folder) / "p9.parquet"
    schema = pa.schema([(f"x{j}", pa.float64()) for j in range(DIM)])
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        for block in _p1_blocks(n_rows, ROW_GROUP_ROWS):
            writer.write_table(pa.Table.from_arrays([block[:, j] for j in range(DIM)],
                                                    schema=schema), row_group_size=ROW_GROUP_ROWS)
    return {"path": str(path), "bytes": path.stat().st_size}


def _estimator():
    import mixfold

    return mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * COMPONENTS)


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _child_stream(folder: str, iterations: int) -> dict:
    import mixfold

    baseline = _peak_rss_mb()
    result = mixfold.fit(mixfold.RowBlocks.parquet(folder), _estimator(), max_iter=iterations,
                         tol=0.0, progress=False)
    return {"seconds": result.seconds, "init_seconds": result.init_seconds,
            "n_rows": result.n_rows, "log_likelihood": result.final_log_likelihood,
            "peak_rss_mb": _peak_rss_mb(), "import_rss_mb": baseline}


def _child_memory(n_rows: int, iterations: int) -> dict:
    import numpy as np

    import mixfold

    x = np.concatenate(list(_p1_blocks(n_rows, ROW_GROUP_ROWS)))
    result = mixfold.fit(x, _estimator(), max_iter=iterations, tol=0.0, progress=False)
    return {"seconds": result.seconds, "init_seconds": result.init_seconds,
            "n_rows": result.n_rows, "log_likelihood": result.final_log_likelihood,
            "peak_rss_mb": _peak_rss_mb()}


def _child(argv: list[str]) -> None:
    what, *args = argv
    if what == "generate":
        out = _child_generate(args[0], int(args[1]))
    elif what == "stream":
        out = _child_stream(args[0], int(args[1]))
    else:
        out = _child_memory(int(args[0]), int(args[1]))
    print(json.dumps(out))


# --- the parent ---

def run_child(*args: object, timeout: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "_child", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median(values: list[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else 0.5 * (s[mid - 1] + s[mid])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS:,} rows")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--iterations", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    n_rows = args.rows or (QUICK_ROWS if args.quick else FULL_ROWS)
    iterations = args.iterations or (QUICK_ITERATIONS if args.quick else ITERATIONS)
    memory_rows = max(n_rows // 10, 1)

    with tempfile.TemporaryDirectory(prefix="mixfold-p9-") as folder:
        data = run_child("generate", folder, n_rows, timeout=args.timeout)
        stream = run_child("stream", folder, iterations, timeout=args.timeout)
    memory = run_child("memory", memory_rows, iterations, timeout=args.timeout)

    per_pass = median(stream["seconds"])
    reference = 10 * median(memory["seconds"])
    rss_ok = stream["peak_rss_mb"] <= RSS_BUDGET_MB
    print(f"P9  out-of-core P1: {n_rows:,} rows x {DIM} float64 "
          f"({n_rows * DIM * 8 / 1e6:.0f} MB as float64; Parquet file {data['bytes'] / 1e6:.0f} MB "
          f"in row groups of {ROW_GROUP_ROWS:,}), K={COMPONENTS} diagonal GMM, "
          f"{iterations} iterations, cpu_count={os.cpu_count()}")
    print(f"  streamed   s/pass {per_pass:9.3f}   init {stream['init_seconds']:8.2f} s   "
          f"peak RSS {stream['peak_rss_mb']:7.1f} MB (after import {stream['import_rss_mb']:.1f})"
          f"   budget {RSS_BUDGET_MB:.0f} MB: {'met' if rss_ok else 'EXCEEDED'}")
    print(f"  in memory  s/iter {median(memory['seconds']):9.3f} on {memory_rows:,} rows "
          f"(x10 = {reference:.3f})   peak RSS {memory['peak_rss_mb']:7.1f} MB")
    print(f"  s/pass / (in-memory s/iter x 10) = {per_pass / reference:.2f}")
    print(f"  final mean LL/row: streamed {stream['log_likelihood']:.10g}, "
          f"in memory (first {memory_rows:,} rows) {memory['log_likelihood']:.10g}")
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": n_rows, "iterations": iterations,
                                         "stream": stream, "memory": memory,
                                         "ratio": per_pass / reference, "rss_ok": rss_ok},
                                        indent=2))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        _child(sys.argv[2:])
    else:
        main()
