"""Every Python block of the README runs as written, as a script of its own (the way a user pastes
it into a file): blocks that start real engines are ``slow``, the MPI one runs under mpiexec."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
ENGINES = re.compile(r'backend="(spark|dask|ray)"')


def _cases():
    return [pytest.param(code, id=f"block{i + 1}",
                         marks=[pytest.mark.slow] if ENGINES.search(code) or "mpi4py" in code
                         else [])
            for i, code in enumerate(BLOCKS)]


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("code", _cases())
def test_readme_block_runs(code, tmp_path):
    script = tmp_path / "block.py"
    script.write_text(code)
    if "mpi4py" in code:
        from tests.backends.mpirun import run_mpiexec

        log = run_mpiexec(2, [str(script)], timeout=300)
        assert log.count("[") >= 2  # both ranks printed their weights
        return
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    if 'backend="mp"' in code and "print(plan.describe())" in code:
        # printed once: the spawned workers did not run the script's code again
        heads = [line for line in done.stdout.splitlines()
                 if line.startswith(("model parallel:", "data parallel:"))]
        assert len(heads) == 1, done.stdout


SHELL_BLOCKS = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
COMMAND_LINE = [b for b in SHELL_BLOCKS if "mixfold spec" in b]


@pytest.mark.slow  # one mp fit and a select over six K: about 20 s
def test_readme_command_line_block_runs_as_written(tmp_path):
    """The command-line block, in an empty folder, with ``mixfold`` and ``python`` meaning this
    interpreter (and so this checkout): every line must succeed, ``set -e -o pipefail``."""
    assert len(COMMAND_LINE) == 1
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, run in (("mixfold", f'{sys.executable} -m mixfold'), ("python", sys.executable)):
        (shims / name).write_text(f'#!/bin/sh\nexec {run} "$@"\n')
        (shims / name).chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg"}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", COMMAND_LINE[0]], cwd=work,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mixfold: error" not in done.stderr and "Traceback" not in done.stderr
    # every file a later line reads was written by an earlier one, none overwritten by another
    for name in ("model.json", "points.json", "refit.json", "scores.txt", "labels.csv",
                 "posteriors.jsonl", "drawn.jsonl", "bic.png"):
        assert (work / name).stat().st_size > 0, name
    assert done.stdout.count("rows 3000  total log-likelihood") == 1
