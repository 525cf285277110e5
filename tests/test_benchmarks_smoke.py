"""Smoke test of the side-by-side benchmark harness: it runs and prints a row per library.

Nothing about speed is asserted; a peer that is not installed prints "not installed".
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = {"P1": ["mixfold", "scikit-learn", "mixle", "pomegranate"], "P4": ["mixfold", "mixle"]}


@pytest.mark.slow
def test_quick_benchmark_prints_a_row_per_library():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick",
                           "--cases", "P1,P4"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    number = r"-?\d+(\.\d+)?(e[-+]?\d+)?"
    for case, libraries in EXPECTED.items():
        for lib in libraries:
            row = [ln for ln in lines
                   if re.match(rf"{case}\s+{re.escape(lib)}\s+(not installed|failed|-?\d)", ln)]
            assert len(row) == 1, f"no single {case} row for {lib} in:\n{proc.stdout}"
            fields = row[0].split()
            # s/iter, iterations, RSS, LL, ratio, then how it was timed (one label, no spaces)
            assert fields[2:4] == ["not", "installed"] or (
                len(fields) == 8 and all(re.fullmatch(number, f) for f in fields[2:7])
                and fields[3] == "3"), row[0]


@pytest.mark.slow
def test_quick_scaling_run_fits_an_exponent_per_sweep():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scaling.py"), "--quick",
                           "--sweeps", "N,S"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = [ln.split() for ln in proc.stdout.splitlines() if re.match(r"[NS]\s+\d\.0\s", ln)]
    assert [(row[0], row[1]) for row in summary] == [("N", "1.0"), ("S", "2.0")], proc.stdout
    assert all(re.fullmatch(r"-?\d+\.\d+", f) for row in summary for f in row[2:4])


@pytest.mark.slow
def test_p1_profile_reports_every_step():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "p1_profile.py"), "--rows",
                           "20000", "--iterations", "3"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = dict(re.findall(r"^\s+(\w+|\(whole iteration\))\s+(\d+\.\d+) ms$", proc.stdout,
                            re.MULTILINE))
    for step in ("layout", "score", "exp_scores", "normalise", "accumulate", "(whole iteration)"):
        assert step in steps, proc.stdout
    assert float(steps["score"]) > 0 and float(steps["normalise"]) > 0


@pytest.mark.slow
def test_runtime_benchmark_prints_startup_and_a_row_per_library():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "runtime.py"), "--quick"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^mixfold\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+$", proc.stdout, re.MULTILINE)
    for case in ("SMALL", "P3"):
        for load in ("quiet", "loaded"):
            for lib in ("mixfold", "mixfold 1 thread", "hmmlearn"):
                row = re.search(rf"^{case}\s+{load}\s+{lib}\s+(\d+\.\d+)\s", proc.stdout,
                                re.MULTILINE)
                assert row and float(row.group(1)) > 0, (case, load, lib, proc.stdout)


@pytest.mark.slow
def test_small_data_benchmark_prints_a_row_per_data_set_and_covariance():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "small_data.py"),
                           "--repeats", "1", "--max-iter", "3", "--datasets", "iris,wine",
                           "--baseline", str(ROOT / "src")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # data, n x d, K, covariance, iterations, then wall s, ratio and cpu s, cpu ratio per side
    rows = re.findall(r"^(iris|wine)\s+\d+x\d+\s+3\s+(\w+)\s+3/3(?:\s+\d+\.\d+){6}$",
                      proc.stdout, re.MULTILINE)
    assert sorted(rows) == sorted((d, k) for d in ("iris", "wine")
                                  for k in ("full", "tied", "diag", "spherical")), proc.stdout
    ab = re.findall(r"^(iris|wine)/(\w+)\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+$", proc.stdout,
                    re.MULTILINE)  # the A/B rows: baseline, this tree, their ratio
    assert sorted(ab) == sorted(rows), proc.stdout


@pytest.mark.slow
def test_quick_precision_run_prints_every_band_and_the_whole_fits():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "precision.py"), "--quick",
                           "--fit-rows", "3000"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for precision in ("float64", "float32 unscreened", "float32", "float16@cpu", "bfloat16@cpu"):
        assert any(line.startswith(f"{precision} ") and line.rstrip().endswith("yes")
                   for line in lines), (precision, proc.stdout)
    fits = lines[next(i for i, line in enumerate(lines) if line.startswith("whole fits")):]
    for band in ("bfloat16", "float16", "float32"):  # each whole fit within its promise
        row = next(line.split() for line in fits if line.startswith(band + " "))
        assert float(row[1]) <= float(row[2]), row
