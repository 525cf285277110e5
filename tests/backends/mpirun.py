"""Run a Python command under ``mpiexec`` from a test, the way ENGINES.md says it must be done."""

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_mpiexec(ranks: int, args: list[str], timeout: float = 120,
                thread_vars: bool = True) -> str:
    """``mpiexec -n RANKS python ARGS`` from the repository root; returns its output.

    Ranks hold BLAS and OpenMP to one thread (MPICH does not bind ranks to cores), see the
    repository (for ``tests.backends`` helpers) and its sources, and run in a session of their
    own, so that on a timeout the whole process group is killed and no rank outlives the test.
    A non-zero exit fails the test with the ranks' output. ``thread_vars=False`` runs the ranks
    as a user would, without any thread variable.
    """
    path = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "src"),
                                       os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    if not thread_vars:
        env = {k: v for k, v in env.items()
               if not k.endswith(("_NUM_THREADS", "_MAXIMUM_THREADS"))}
    mpiexec = Path(sys.executable).with_name("mpiexec")
    proc = subprocess.Popen([str(mpiexec), "-n", str(ranks), sys.executable, *args], env=env,
                            cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    assert proc.returncode == 0, log
    return log
