"""No engine mixfold starts by default listens beyond loopback (a real fit, real sockets)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("listen_child.py")
ROOT = Path(__file__).parents[2]
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
ENGINES = {"mp": None, "spark": "pyspark", "dask": "distributed", "ray": "ray"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", sorted(ENGINES))
def test_engines_mixfold_starts_listen_on_loopback_only(backend):
    if ENGINES[backend]:
        pytest.importorskip(ENGINES[backend])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(CHILD), backend], env=env, capture_output=True,
                         text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert "done" in lines
    sockets = [json.loads(line) for line in lines if line.startswith('{"pid"')]
    exposed = [s for s in sockets if s["address"] not in LOOPBACK]
    assert exposed == [], exposed
    if backend == "mp":
        assert sockets == []  # pipes only
    else:
        assert sockets  # the engine does listen: on loopback
