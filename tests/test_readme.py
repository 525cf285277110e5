"""Every Python block of the README runs as written, as a script of its own (the way a user pastes
it into a file): blocks that start real engines are ``slow``, the MPI one runs under mpiexec."""

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
