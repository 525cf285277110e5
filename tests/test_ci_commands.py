"""`.ci/run` runs the README's commands exactly: the test command and the documentation's."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_commands_as_written():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    tests = next(b for b in blocks if 'pytest -q -m "not slow"' in b).strip()
    docs = next(b for b in blocks if "sphinx -W" in b).strip().splitlines()
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith(("#", "set ", "cd "))]
    assert ci == [tests, *docs]
