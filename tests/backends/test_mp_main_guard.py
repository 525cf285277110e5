"""A script that fits on ``backend="mp"`` without the main guard gets one line saying so."""

import subprocess
import sys
import textwrap


def test_missing_main_guard_is_one_clear_error(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, mixfold
        x = np.random.default_rng(0).normal(size=200)
        mixfold.optimize(x, mixfold.GaussianEstimator(), backend="mp", num_workers=2,
                         progress=False)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError: mp worker 0 exited while starting")
    assert 'put the code that fits under `if __name__ == "__main__":`' in last
    assert "ConnectionResetError" not in done.stderr and "BrokenPipeError" not in done.stderr
