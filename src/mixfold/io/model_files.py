"""Model files: a fitted distribution as JSON. Loading never unpickles or evaluates anything.

A file is ``{"format": "mixfold-model", "version": 1, "model": <Distribution.to_dict()>}``; family
names are looked up in the registry of known families, parameters go through each family's
constructor (which validates them), and numbers round-trip exactly (JSON keeps 17 significant
digits).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from mixfold.errors import ModelFileError
from mixfold.families._protocol import Distribution

__all__ = ["save", "load", "FORMAT", "VERSION", "MAX_FILE_BYTES"]

FORMAT = "mixfold-model"
VERSION = 1
#: Larger files are refused before they are parsed.
MAX_FILE_BYTES = 512 * 1024 * 1024


def save(model: Distribution, path: str | os.PathLike) -> Path:
    """Write ``model`` to ``path`` as JSON, atomically (a temporary file, then a rename).

    >>> import tempfile, os, mixfold
    >>> d = mixfold.GaussianDistribution(1.5, 0.25)
    >>> p = mixfold.save(d, os.path.join(tempfile.mkdtemp(), "m.json"))
    >>> mixfold.load(p) == d
    True
    """
    if not isinstance(model, Distribution):
        raise TypeError(f"model must be a mixfold Distribution, got {type(model).__name__}")
    doc = {"format": FORMAT, "version": VERSION, "model": model.to_dict()}
    text = json.dumps(doc, allow_nan=False, indent=1)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=".mixfold-")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load(path: str | os.PathLike) -> Distribution:
    """Read a model written by :func:`save`; a malformed file raises :class:`ModelFileError`."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ModelFileError(f"{path}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit")
    try:
        doc = json.loads(path.read_text(), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as err:
        raise ModelFileError(f"{path}: not valid JSON: {err}") from None
    return model_from_document(doc, str(path))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not allowed")


def model_from_document(doc: Any, where: str = "model") -> Distribution:
    """The distribution in a parsed model document (see the module docstring)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFileError(f"{where}: not a mixfold model file (expected format {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise ModelFileError(f"{where}: unsupported version {doc.get('version')!r} "
                             f"(this mixfold reads version {VERSION})")
    try:
        return Distribution.from_dict(doc["model"])
    except (KeyError, TypeError, ValueError, IndexError, RecursionError) as err:
        raise ModelFileError(f"{where}: invalid model description: {type(err).__name__}: "
                             f"{err}") from None
