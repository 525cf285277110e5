"""Load a peer's own test module from its installed package, with only its import of the
estimators rewritten to mixfold's wrappers (the source is read at test time, never copied here)."""

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest


def installed_tests(package: str, relative: str) -> Path:
    """The path of a test file shipped inside the installed ``package`` (skip when absent)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        pytest.skip(f"{package} is not installed", allow_module_level=True)
    path = Path(spec.origin).parent / relative
    if not path.is_file():
        pytest.skip(f"{package}'s wheel does not ship {relative}", allow_module_level=True)
    return path


def load_with_imports(path: Path, rewrites: dict[str, str], namespace: dict[str, Any]) -> None:
    """Execute the test module at ``path`` into ``namespace`` with each import statement of
    ``rewrites`` (a regular expression of the whole statement) replaced; a rewrite that
    matches nothing fails, so a changed upstream file is noticed rather than run unchanged."""
    source = path.read_text()
    for pattern, replacement in rewrites.items():
        source, count = re.subn(pattern, replacement, source, flags=re.M)
        if count == 0:
            raise AssertionError(f"{path}: no import matches {pattern!r}")
    exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - the peer's own tests


def exclude(namespace: dict[str, Any], reasons: dict[str, str]) -> None:
    """Mark each test named in ``reasons`` (``test_x``, or ``Class.test_x`` for a method) as
    skipped with its reason; a name the suite does not have fails."""
    for name, reason in reasons.items():
        owner, _, attribute = name.rpartition(".")
        holder = namespace[owner] if owner else None
        test = getattr(holder, attribute, None) if owner else namespace.get(attribute)
        if test is None:
            raise AssertionError(f"excluded test {name!r} is not in the peer's suite")
        marked = pytest.mark.skip(reason=reason)(test)
        if owner:
            setattr(holder, attribute, marked)
        else:
            namespace[attribute] = marked
