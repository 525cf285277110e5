"""Spec files are untrusted input: size, depth, aliases and memory bounded, one line each."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mixfold
from mixfold.cli import main
from mixfold.spec import MAX_SPEC_DEPTH, SpecError, estimator_from_spec, load_spec

from .cli_lines import one_error_line

yaml = pytest.importorskip("yaml")


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.random.default_rng(0).normal(size=50))
    return path


def test_a_deeply_nested_json_spec_is_one_line_naming_the_limit(tmp_path, data):
    deep = tmp_path / "deep.json"
    deep.write_text('{"mixture": ' * 5000 + '"gaussian"' + "}" * 5000)
    with pytest.raises(SpecError, match=f"nested more than {MAX_SPEC_DEPTH} levels"):
        load_spec(deep)
    one_error_line(CliRunner().invoke(main, ["fit", str(data), "--model", str(deep)]),
                    "deep.json", f"more than {MAX_SPEC_DEPTH} levels")
    inline = "[" * 100_000 + "]" * 100_000
    one_error_line(CliRunner().invoke(main, ["fit", str(data), "--model", inline]),
                    "the inline spec", "levels deep")


def test_a_spec_built_in_code_is_bounded_too():
    node: object = "gaussian"
    for _ in range(5000):
        node = {"mixture": node, "k": 1}
    with pytest.raises(SpecError, match="nested more than"):
        estimator_from_spec(node)
    ok = "gaussian"
    for _ in range(10):
        ok = {"mixture": ok, "k": 1}
    assert estimator_from_spec(ok).num_components == 1


def test_yaml_aliases_are_refused_self_reference_and_bomb(tmp_path, data):
    selfref = tmp_path / "self.yaml"
    selfref.write_text("&a {mixture: *a, k: 2}\n")
    one_error_line(CliRunner().invoke(main, ["fit", str(data), "--model", str(selfref)]),
                    "self.yaml", "aliases", "not allowed")
    bomb = tmp_path / "bomb.yaml"
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb.write_text("\n".join(lines) + "\n")
    assert bomb.stat().st_size < 1000  # 10**9 leaves once expanded
    with pytest.raises(SpecError, match="line 2: YAML aliases"):
        load_spec(bomb)


def _peak_kib_loading(path):
    """Peak memory (KiB) of a fresh process that loads the spec at ``path``, and its output."""
    code = ("import resource, sys\nfrom mixfold.spec import load_spec, SpecError\n"
            "try:\n    print(load_spec(sys.argv[1]))\nexcept SpecError as e:\n    print(e)\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(mixfold.__file__).parents[1])}  # this mixfold
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    message, peak = done.stdout.splitlines()
    return int(peak), message


def test_the_yaml_bomb_is_refused_in_bounded_memory_in_a_fresh_process(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb.write_text("\n".join(lines) + "\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("mixture: gaussian\nk: 2\n")
    baseline, _ = _peak_kib_loading(plain)
    peak, message = _peak_kib_loading(bomb)
    assert "aliases" in message
    assert peak - baseline < 50_000  # KiB: no expansion (10^9 leaves would take gigabytes)


def test_deep_yaml_is_refused_by_depth_not_by_recursion(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(SpecError, match=f"nested more than {MAX_SPEC_DEPTH} levels"):
        load_spec(deep)


def test_an_oversized_spec_names_the_limit_and_how_to_raise_it(tmp_path):
    spec = {"categorical": {"levels": [f"level-{i}" for i in range(2000)]}}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(SpecError, match=r"more than 1000 bytes.*load_spec\(\.\.\., max_bytes"):
        load_spec(path, max_bytes=1000)
    assert load_spec(path) == spec
    with pytest.raises(SpecError, match="more than 1000 bytes"):
        load_spec(json.dumps(spec), max_bytes=1000)


def test_an_anchor_without_alias_and_ordinary_yaml_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("mixture: &leaf gaussian\nk: 3\n")
    assert load_spec(path) == {"mixture": "gaussian", "k": 3}
