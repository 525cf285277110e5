"""Smoke test of benchmarks/planner.py: it plans, prints the plan and a time (not asserted)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_planner_benchmark_runs_at_a_small_size():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "planner.py"),
                           "--components", "200", "--repeats", "1", "--no-seed"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "model parallel: component axis of 'visits/item', 200 units over 8 devices" in out
    assert len(re.findall(r"^  (cpu|gpu):\d", out, flags=re.M)) == 8
    assert re.search(r"^planning: median \d+\.\d+ s", out, flags=re.M), out
