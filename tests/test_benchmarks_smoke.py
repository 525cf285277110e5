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
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")]
            for ln in proc.stdout.splitlines() if ln.startswith("| P")]  # Markdown rows
    number = r"-?\d+(\.\d+)?(e[-+]?\d+)?"
    for case, libraries in EXPECTED.items():
        for lib in libraries:
            row = [r for r in rows if r[:2] == [case, lib]]
            assert len(row) == 1, f"no single {case} row for {lib} in:\n{proc.stdout}"
            cells = row[0]
            # s/iter, iterations, RSS, LL, ratio, then how it was timed
            assert cells[2] == "not installed" or (
                len(cells) == 8 and all(re.fullmatch(number, f) for f in cells[2:7])
                and cells[3] == "3"), row[0]


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
    # import, first HMM fit (warm, empty cache), first small mixtures
    assert re.search(r"^mixfold(\s+\d+\.\d+){4}$", proc.stdout, re.MULTILINE)
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
    cells = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines
             if ln.startswith("| ")]  # Markdown rows
    for precision in ("float64", "float32 unscreened", "float32", "float16@cpu", "bfloat16@cpu"):
        assert any(r[0] == precision and r[-1] == "yes" for r in cells), (precision, proc.stdout)
    at = next(i for i, line in enumerate(lines) if line.startswith("whole fits"))
    fits = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines[at:]
            if ln.startswith("| ")]
    for band in ("bfloat16", "float16", "float32"):  # each whole fit within its promise
        row = next(r for r in fits if r[0] == band)
        assert float(row[1]) <= float(row[2]), row


def test_record_replaces_only_its_section_and_keeps_the_readme_on_failure(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import record
    finally:
        sys.path.pop(0)
    readme = tmp_path / "README.md"
    readme.write_text("# B\n\n<!-- record: a -->\nold a\n<!-- /record: a -->\n\n"
                      "<!-- record: b -->\nold b\n<!-- /record: b -->\n")
    monkeypatch.setattr(record, "README", readme)
    table = "print('| x | y |'); print('| --- | --- |'); print('| 1 | 2 |')"
    assert record.main(["a", "--", sys.executable, "-c", table]) == 0
    text = readme.read_text()
    assert "old a" not in text and "| 1 | 2 |" in text and "old b" in text  # b untouched
    assert re.search(r"cores; load [\d.?]+ before, [\d.?]+ after", text)
    assert record.main(["c", "--", sys.executable, "-c", "print('plain')"]) == 0
    assert "## c" in readme.read_text() and "```\nplain\n```" in readme.read_text()
    before = readme.read_text()
    assert record.main(["a", "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert readme.read_text() == before and record.recorded(before) == ["a", "b", "c"]


@pytest.mark.slow
def test_semi_markov_benchmark_prints_agreeing_rows():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "semi_markov.py"),
                           "--quick", "--repeats", "1"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [ln.split("|")[1:-1] for ln in proc.stdout.splitlines() if re.match(r"\| \d", ln)]
    assert [r[0].strip() for r in rows] == ["5", "10"], proc.stdout
    assert all(float(r[5]) < 1e-10 and float(r[6]) < 1e-10 for r in rows), proc.stdout


@pytest.mark.slow
def test_accelerated_benchmark_prints_a_row_per_case():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accelerated.py"), "--scale",
                           "0.002", "--backends", "local", "--cases", "P1,P4"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [ln.split("|")[1:-1] for ln in proc.stdout.splitlines() if ln.startswith("| P")]
    assert [r[0].split()[0] for r in rows] == ["P1", "P4"], proc.stdout
    for r in rows:  # folds are counts, and neither fit's log-likelihood ever fell
        assert r[2].strip().isdigit() and r[3].strip().isdigit() and r[-1].strip() == "no"


@pytest.mark.slow
def test_accelerated_floor_benchmark_counts_the_oracles_folds():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accelerated_floor.py"),
                           "--scale", "0.01", "--folds", "10"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stops = re.search(r"stops at fold: plain EM (\d+), oracle (\d+)", proc.stdout)
    assert stops is not None, proc.stdout
    # with EM's exact Jacobian at the optimum the extrapolation stops sooner than plain EM
    assert int(stops.group(2)) < int(stops.group(1)), proc.stdout


@pytest.mark.slow
def test_band_steps_reports_every_band_the_probes_and_the_bound():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "band_steps.py"), "--rows",
                           "40000", "--repeats", "1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT / "src"),
                                            "MIXFOLD_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folds = dict(re.findall(r"^\| (\S+) \| (\d+\.\d+) \| \d+\.\d+x \| \d+\.\d+x \|$", proc.stdout,
                            re.MULTILINE))
    assert set(folds) == {"float64", "float32u", "float32", "float16@cpu", "bfloat16@cpu"}, \
        proc.stdout
    assert all(float(v) > 0 for v in folds.values())
    measured = dict(re.findall(r"^\| ([^|]+?) \| (-?\d[^|]*) \|$", proc.stdout, re.MULTILINE))
    assert 0 < float(measured["rows with several candidates"]) < 1
    # each statistics GEMM against float64's of the same posteriors and features: within the
    # bound of float32 sums of 2048 rows (the tiles' split products add 3 * 2**-16 at most)
    bound = 2047 * 2.0 ** -24 + 3 * 2.0 ** -16
    errors = [float(v) for k, v in measured.items() if k.endswith("error / sum of abs(r z)")]
    assert errors and all(0 <= e < bound for e in errors), measured
    assert "The goal allows a bfloat16 block" in proc.stdout


@pytest.mark.slow
def test_calibration_benchmark_prints_every_band_per_engine():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "calibration.py"),
                           "--quick", "--engines", "dask,ray"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [[c.strip() for c in ln.split("|")[1:-1]] for ln in proc.stdout.splitlines()
            if re.match(r"\| (local|dask|ray) ", ln)]
    bands = ["float32", "float64", "bfloat16", "float16", "dd"]
    assert sorted((r[0], r[2]) for r in rows) == sorted(
        (e, b) for e in ("local", "dask", "ray") for b in bands), proc.stdout
    for r in rows:  # rows per second, its ratio to the local core, the band's error
        assert float(r[3].replace(",", "")) > 0 and float(r[4]) > 0 and float(r[5]) >= 0, r
        assert (float(r[5]) == 0) == (r[2] == "float64"), r
