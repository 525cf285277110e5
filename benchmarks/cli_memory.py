"""Peak memory of the CLI's streaming paths against drawing or reading everything first.

``PYTHONPATH=src python benchmarks/cli_memory.py`` prints one table: for each row count, the peak
resident memory (ru_maxrss, KiB) of a fresh process running ``mixfold sample -n N`` (drawn and
printed in blocks) beside a fresh process that draws all N rows with the sampler and then prints
them (what ``sample`` did before), and the ratio. Rows go to /dev/null; the model is a mixture of
records (a Gaussian and a categorical field), as in the README.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import mixfold

SIZES = (10_000, 100_000, 400_000, 1_000_000)

STREAMED = ("import resource, sys\nfrom mixfold.cli import main\n"
            "try:\n    main(['sample', sys.argv[1], '-n', sys.argv[2], '--seed', '0'])\n"
            "except SystemExit:\n    pass\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")
ALL_FIRST = ("import json, resource, sys\nimport mixfold\nfrom mixfold.cli import _jsonable\n"
             "rows = mixfold.load(sys.argv[1]).sampler(0).sample(int(sys.argv[2]))\n"
             "for row in rows:\n    print(json.dumps(_jsonable(row)))\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")


def model_file(folder: Path) -> Path:
    record = [mixfold.RecordDistribution({
        "age": mixfold.GaussianDistribution(30.0 + 20 * k, 25.0),
        "plan": mixfold.CategoricalDistribution([0.2, 0.3, 0.5], levels=["a", "b", "c"])})
        for k in range(3)]
    return mixfold.save(mixfold.MixtureDistribution(record, [0.5, 0.3, 0.2]), folder / "m.json")


def peak_kib(code: str, path: Path, n: int) -> int:
    done = subprocess.run([sys.executable, "-c", code, str(path), str(n)], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return int(done.stderr.split()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = model_file(Path(folder))
        print(f"{'rows':>10}  {'mixfold sample (KiB)':>21}  {'all rows first (KiB)':>21}  "
              f"{'ratio':>6}")
        for n in SIZES:
            streamed, first = peak_kib(STREAMED, path, n), peak_kib(ALL_FIRST, path, n)
            print(f"{n:>10}  {streamed:>21}  {first:>21}  {first / streamed:>6.2f}")


if __name__ == "__main__":
    main()
