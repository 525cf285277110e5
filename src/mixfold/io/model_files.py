"""Model files: a fitted distribution as JSON. Loading never unpickles or evaluates anything.

A file is ``{"format": "mixfold-model", "version": 1, "model": <Distribution.to_dict()>}``; family
names are looked up in the registry of known families, parameters go through each family's
constructor (which validates them), and numbers round-trip exactly (JSON keeps 17 significant
digits).

Loading treats the file as untrusted input and checks it before and after building the model:
at most ``max_bytes`` bytes are read (64 MiB by default; a larger file, a device or a pipe that
keeps going is refused), a pipe or device is opened without blocking and must end within
``timeout`` seconds, a document whose parsed form would take more than :data:`MEMORY_FACTOR`
times its size is refused before parsing, JSON nesting deeper than :data:`MAX_DEPTH` and
non-finite numbers
(``NaN``, ``Infinity``, ``1e999``) are refused, and the document must have exactly the shape of
the model it describes (:func:`check_document_shape`): no field the family does not know, numbers
where numbers are expected, lists of the right lengths. Every failure is a
:class:`~mixfold.ModelFileError` that names the file and the place in it.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import stat
import time
import warnings
from pathlib import Path
from typing import Any

from mixfold.errors import ModelFileError
from mixfold.families._protocol import Distribution, family_class
from mixfold.io.outputs import atomic_output

__all__ = ["save", "load", "FORMAT", "VERSION", "MAX_FILE_BYTES", "MAX_DEPTH",
           "model_from_document", "check_document_shape", "write_json_atomic",
           "read_json_bounded", "read_bytes_bounded", "json_depth"]

FORMAT = "mixfold-model"
VERSION = 1
#: Larger files are refused before they are parsed (``load(path, max_bytes=...)`` raises it).
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Deepest JSON nesting (objects and arrays) a model file may have.
MAX_DEPTH = 200
#: A pipe or device being read as a model file must end within this many seconds.
READ_TIMEOUT_S = 10.0
#: A document whose parsed form would exceed this multiple of its size (plus the floor) is
#: refused before parsing: empty containers and short strings cost far more than their text.
MEMORY_FACTOR = 10
MEMORY_FLOOR = 64 * 1024 * 1024


def write_json_atomic(path: str | os.PathLike, doc: Any) -> Path:
    """Write ``doc`` as JSON to ``path`` through :func:`~mixfold.io.outputs.atomic_output`: a
    regular file is replaced atomically (a temporary file beside it, fsync, rename), a FIFO or
    a character device is written as a stream, a socket, block device or folder is refused."""
    text = json.dumps(doc, allow_nan=False, indent=1)
    with atomic_output(path, what="a model") as fh:
        fh.write(text)
    return Path(path)


def save(model: Distribution, path: str | os.PathLike) -> Path:
    """Write ``model`` to ``path`` as JSON, atomically (a temporary file, then a rename).
    A fitted wrapper of :mod:`mixfold.sklearn` writes its fitted model (``model_``);
    :func:`load` reads it back as that model (pickle keeps the wrapper itself).

    Parameters
    ----------
    model : Distribution
        Any fitted (or hand-built) mixfold distribution.
    path : str or path
        The file to write; a kill at any instant leaves the old file or the new one.

    Returns
    -------
    path : Path
        The file written.

    Raises
    ------
    TypeError
        ``model`` is not a mixfold Distribution.

    Warns
    -----
    RuntimeWarning
        The file is larger than :func:`load` reads by default (``MAX_FILE_BYTES``, 64 MiB): the
        warning says the ``max_bytes`` that reads it back.

    Examples
    --------
    >>> import tempfile, os, mixfold
    >>> d = mixfold.GaussianDistribution(1.5, 0.25)
    >>> p = mixfold.save(d, os.path.join(tempfile.mkdtemp(), "m.json"))
    >>> mixfold.load(p) == d
    True
    """
    model = getattr(model, "model_", model)  # a fitted scikit-learn wrapper: its model
    if not isinstance(model, Distribution):
        raise TypeError(f"model must be a mixfold Distribution or a fitted mixfold.sklearn "
                        f"estimator, got {type(model).__name__}")
    folder = Path(os.path.realpath(path)).parent
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot save to {str(path)!r}: the folder {str(folder)!r} "
                                f"does not exist")
    written = write_json_atomic(path, model_document(model))
    size = written.stat().st_size if written.is_file() else 0
    if size > MAX_FILE_BYTES:
        warnings.warn(f"model file {str(path)!r} is {size} bytes, more than the "
                      f"{MAX_FILE_BYTES} load() reads by default: read it back with "
                      f"load(path, max_bytes={size}) (the CLI: --max-model-bytes {size})",
                      RuntimeWarning, stacklevel=2)
    return written


def model_document(model: Distribution) -> dict[str, Any]:
    """The JSON document of ``model`` (what :func:`save` writes)."""
    return {"format": FORMAT, "version": VERSION, "model": model.to_dict()}


def load(path: str | os.PathLike, *, max_bytes: int = MAX_FILE_BYTES,
         timeout: float = READ_TIMEOUT_S) -> Distribution:
    """Read a model written by :func:`save`; a malformed file raises :class:`ModelFileError`.

    Loading never unpickles or evaluates: the file is untrusted input, checked field by field
    against the model it describes (the module docstring lists every check).

    Parameters
    ----------
    path : str or path
        The model file.
    max_bytes : int, default=64 MiB
        The most bytes read; a larger file is refused.
    timeout : float
        Seconds after which a pipe or device that has not ended is refused.

    Returns
    -------
    model : Distribution

    Raises
    ------
    ModelFileError
        A malformed, oversized, too deeply nested or non-finite file, an unknown family, or a
        field, type or list length that does not match, naming the place.

    Examples
    --------
    >>> import tempfile, os, mixfold
    >>> p = os.path.join(tempfile.mkdtemp(), "m.json")
    >>> with open(p, "w") as fh:
    ...     _ = fh.write('{"format": "mixfold-model", "version": 1, '
    ...                  '"model": {"family": "Gaussian", "mu": "0", "sigma2": 1}}')
    >>> mixfold.load(p)
    Traceback (most recent call last):
    ...
    mixfold.errors.ModelFileError: ...: at model['mu']: expected a number, got a string '0'
    """
    doc = read_json_bounded(path, max_bytes, timeout)
    return model_from_document(doc, str(path))


def read_bytes_bounded(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES,
                       timeout: float = READ_TIMEOUT_S, *,
                       raise_with: str = "load(..., max_bytes=...)") -> bytes:
    """The bytes of the file at ``path``, refusing more than ``max_bytes`` and a pipe or device
    still open after ``timeout`` seconds with :class:`ModelFileError` (whose message says that
    ``raise_with`` raises the limit)."""
    path = Path(path)
    raw = _read_bounded(path, max_bytes, timeout)
    if len(raw) > max_bytes:
        raise ModelFileError(f"{path}: more than {max_bytes} bytes: over the size limit "
                             f"({raise_with} raises it)")
    return raw


def read_json_bounded(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES,
                      timeout: float = READ_TIMEOUT_S, *, max_depth: int = MAX_DEPTH,
                      raise_with: str = "load(..., max_bytes=...)") -> Any:
    """Parse the JSON file at ``path``, refusing more than ``max_bytes`` bytes, a pipe or device
    still open after ``timeout`` seconds, a document whose parsed form would take more than
    :data:`MEMORY_FACTOR` times its size in memory, nesting deeper than ``max_depth`` and
    non-finite numbers, with :class:`ModelFileError`."""
    path = Path(path)
    raw = read_bytes_bounded(path, max_bytes, timeout, raise_with=raise_with)
    estimate = _parsed_size_estimate(raw)
    if estimate > MEMORY_FACTOR * len(raw) + MEMORY_FLOOR:
        raise ModelFileError(f"{path}: too many JSON values for its size: parsing would take "
                             f"about {estimate >> 20} MiB, more than {MEMORY_FACTOR} times "
                             f"the file's {len(raw)} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelFileError(f"{path}: not a JSON text file (not UTF-8: {err})") from None
    del raw
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ModelFileError(f"{path}: JSON nested more than {max_depth} levels deep") from None
    except ValueError as err:
        raise ModelFileError(f"{path}: not valid JSON: {err}") from None
    if json_depth(doc, max_depth) > max_depth:
        raise ModelFileError(f"{path}: JSON nested more than {max_depth} levels deep")
    return doc


def _read_bounded(path: Path, max_bytes: int, timeout: float) -> bytes:
    """At most ``max_bytes + 1`` bytes of ``path``. Opened non-blocking, so a FIFO without a
    writer cannot hang the open; a FIFO or character device is read against a deadline."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise  # the usual error for a missing file, not a fault of the file's contents
    except OSError as err:
        raise ModelFileError(f"{path}: cannot be read: {err}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read(max_bytes + 1)
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            return _read_stream(fd, path, max_bytes, timeout)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ModelFileError(f"{path}: cannot be read: {kind}")
    except OSError as err:
        raise ModelFileError(f"{path}: cannot be read: {err}") from None
    finally:
        os.close(fd)


def _read_stream(fd: int, path: Path, max_bytes: int, timeout: float) -> bytes:
    """Read a pipe or device until its end, ``max_bytes + 1`` bytes or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    chunks, total = [], 0
    # poll, not epoll: epoll refuses devices such as /dev/zero, which poll reports readable
    with getattr(selectors, "PollSelector", selectors.SelectSelector)() as waiting:
        waiting.register(fd, selectors.EVENT_READ)
        while total <= max_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ModelFileError(f"{path}: a pipe or device that did not end within "
                                     f"{timeout:g} s (load(..., timeout=...) raises it)")
            if not waiting.select(left):
                continue
            try:
                chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks)


def _parsed_size_estimate(raw: bytes) -> int:
    """Bytes the parsed document may take: each container, string and value at the size of
    an empty one of its kind in CPython (brackets and quotes inside strings overcount it)."""
    containers = raw.count(b"[") + raw.count(b"{")
    return 64 * containers + 28 * raw.count(b'"') + 40 * (raw.count(b",") + 1)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of the float64 range")
    return value


_CONTAINERS = frozenset((dict, list))


def json_depth(doc: Any, limit: int = MAX_DEPTH) -> int:
    """Deepest nesting of objects and arrays in ``doc``, up to ``limit + 1``.

    Iterative, holding one iterator per level (memory grows with the depth, not the size); a
    container holding no containers is measured without a Python-level pass over its items.
    """
    deepest, stack = 0, [iter((doc,))]
    while stack:
        for node in stack[-1]:
            if type(node) in _CONTAINERS:
                level = len(stack)
                deepest = max(deepest, level)
                if level > limit:
                    return level
                children = node.values() if type(node) is dict else node
                if not _CONTAINERS.isdisjoint(map(type, children)):
                    stack.append(iter(children))
                    break
        else:
            stack.pop()
    return deepest


def model_from_document(doc: Any, where: str = "model") -> Distribution:
    """The distribution in a parsed model document (see the module docstring)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFileError(f"{where}: not a mixfold model file (expected format {FORMAT!r})")
    if type(doc.get("version")) is not int or doc["version"] != VERSION:  # true == 1 in Python
        raise ModelFileError(f"{where}: unsupported version {doc.get('version')!r} "
                             f"(this mixfold reads version {VERSION})")
    unknown = sorted(set(doc) - {"format", "version", "model"})
    if unknown:
        raise ModelFileError(f"{where}: unknown top-level fields {unknown}")
    try:
        model = Distribution.from_dict(doc["model"])
        canonical = model.to_dict()
    except Exception as err:  # noqa: BLE001 - any failure to build from untrusted input
        path, err = _failing_place(doc.get("model"), "model", err)
        raise ModelFileError(f"{where}: at {path}: invalid model description: "
                             f"{type(err).__name__}: {err}") from None
    check_document_shape(doc["model"], canonical, where)
    return model


def _failing_place(node: Any, path: str, err: Exception) -> tuple[str, Exception]:
    """The deepest family description under ``node`` that fails to build, and its error (only
    run once building the whole document has failed with ``err``)."""
    children: Any = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        if isinstance(child, (dict, list)):
            inner = _failing_place(child, f"{path}[{key!r}]", err)
            if inner[1] is not err:
                return inner
    if isinstance(node, dict) and "family" in node:
        try:
            Distribution.from_dict(node)
        except Exception as own:  # noqa: BLE001 - any failure to build from untrusted input
            return path, own
    return path, err


_NUMBERS = frozenset((int, float))
_JSON_KINDS = ((bool, "a boolean"), ((int, float), "a number"), (str, "a string"),
               (list, "a list"), (dict, "an object"), (type(None), "null"))


def _kind(value: Any) -> str:
    for types, name in _JSON_KINDS:  # bool before number: True is an int in Python
        if isinstance(value, types):
            return name
    return type(value).__name__


def check_document_shape(doc: Any, canonical: Any, where: str = "model",
                         path: str = "model") -> None:
    """Check that a model document has the shape of the model built from it.

    ``canonical`` is ``to_dict()`` of that model: the document must use the same JSON kind at
    every place (a number, not a string that happens to parse as one), lists of the same
    lengths, and no object field the model does not have (a family's optional fields, its
    ``optional_params`` mapping each to the JSON of its default, may be left out of the canonical
    form when they hold defaults; given anyway, they are checked against that default).
    """
    kind, expected = _kind(doc), _kind(canonical)
    if kind != expected:
        raise ModelFileError(f"{where}: at {path}: expected {expected}, got {kind} {doc!r:.60}")
    if isinstance(doc, list):
        if len(doc) != len(canonical):
            raise ModelFileError(f"{where}: at {path}: expected a list of {len(canonical)} "
                                 f"items, got {len(doc)}")
        if _NUMBERS.issuperset(map(type, doc)) and _NUMBERS.issuperset(map(type, canonical)):
            return  # a list of numbers where numbers belong: no walk over its items
        for i, (d, c) in enumerate(zip(doc, canonical)):
            check_document_shape(d, c, where, f"{path}[{i}]")
    elif isinstance(doc, dict):
        optional: dict[str, Any] = {}
        family_name = canonical.get("family")
        if isinstance(family_name, str):
            optional = getattr(family_class(family_name), "optional_params", {})
        unknown = sorted(set(doc) - set(canonical) - set(optional), key=str)
        if unknown:
            raise ModelFileError(f"{where}: at {path}: unknown field {unknown[0]!r} "
                                 f"(expected only {sorted(canonical)})")
        for key in doc:  # an optional field left at its default is checked against the default
            expected = canonical[key] if key in canonical else optional[key]
            check_document_shape(doc[key], expected, where, f"{path}[{key!r}]")
