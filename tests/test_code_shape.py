"""Short functions: no function in the package is longer than :data:`MAX_LINES` lines of code
(its signature and body; a docstring is documentation, not code, and is not counted)."""

from __future__ import annotations

import ast
from pathlib import Path

import mixfold

SRC = Path(mixfold.__file__).parent
MAX_LINES = 80


def code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from ``def`` to the function's last line, less its docstring's."""
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        lines -= first.end_lineno - first.lineno + 1
    return lines


def long_functions(root: Path, limit: int) -> list[str]:
    """``path:line name (N lines)`` of every function under ``root`` longer than ``limit``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and code_lines(node) > limit:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} "
                             f"({code_lines(node)} lines)")
    return found


def test_no_function_is_longer_than_the_limit():
    too_long = long_functions(SRC, MAX_LINES)
    assert not too_long, f"functions over {MAX_LINES} lines: " + "; ".join(too_long)


def test_the_measure_counts_code_not_the_docstring(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES - 1))  # with def: the limit
    doc = '    """' + "\n" * 30 + '    """\n'
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def short():\n{doc}{body}\n\n"
                                           f"def long():\n{body}\n    return x0\n")
    assert long_functions(tmp_path / "pkg", MAX_LINES) == [
        f"pkg/m.py:{MAX_LINES + 33} long ({MAX_LINES + 1} lines)"]


#: The combinators' files: at most this many functions and methods written in each (their
#: machinery shared with others lives in ``units``, ``competing_units``, ``_states`` and
#: ``compute/``), and the mixture's file at most this many lines.
COMBINATOR_DEFS = {"families/mixture.py": 24, "families/hidden_markov.py": 24}
MIXTURE_LINES = 220


def defs_in(path: Path) -> int:
    """Functions and methods defined anywhere in the file at ``path``."""
    return sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               for node in ast.walk(ast.parse(path.read_text(), str(path))))


def test_combinators_write_few_methods_and_the_mixture_is_short():
    counts = {name: defs_in(SRC / name) for name in COMBINATOR_DEFS}
    assert counts == {name: min(counts[name], most) for name, most in COMBINATOR_DEFS.items()}
    assert len((SRC / "families/mixture.py").read_text().splitlines()) <= MIXTURE_LINES


def test_defs_in_counts_methods_and_functions(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    def g():\n        pass\n\n\n"
                                   "class C:\n    def m(self):\n        pass\n")
    assert defs_in(tmp_path / "m.py") == 3
