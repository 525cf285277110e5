"""A/B children: one measurement in a fresh Python process importing mixfold from a given
tree, its result the JSON object on the last line it prints."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def json_child(tree: Path, code: str, **env: str) -> dict:
    """Run ``code`` in a child with ``tree`` first on its path (and ``env`` set); its last line."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(tree), **env})
    return json.loads(done.stdout.strip().splitlines()[-1])


def tree_arguments(ap: argparse.ArgumentParser, here: Path) -> None:
    """``--baseline`` (tree A's src, required) and ``--candidate`` (tree B's, default this
    checkout's, ``here`` being its benchmarks/ folder)."""
    ap.add_argument("--baseline", type=Path, required=True, help="the src directory of tree A")
    ap.add_argument("--candidate", type=Path, default=here.parent / "src",
                    help="the src directory of tree B (default: this checkout's)")
