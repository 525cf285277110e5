"""Model files: a fitted distribution as JSON. Loading never unpickles or evaluates anything.

A file is ``{"format": "mixfold-model", "version": 1, "model": <Distribution.to_dict()>}``; family
names are looked up in the registry of known families, parameters go through each family's
constructor (which validates them), and numbers round-trip exactly (JSON keeps 17 significant
digits).

Loading treats the file as untrusted input and checks it before and after building the model:
at most ``max_bytes`` bytes are read (64 MiB by default; a larger file, a device or a pipe that
keeps going is refused), JSON nesting deeper than :data:`MAX_DEPTH` and non-finite numbers
(``NaN``, ``Infinity``, ``1e999``) are refused, and the document must have exactly the shape of
the model it describes (:func:`check_document_shape`): no field the family does not know, numbers
where numbers are expected, lists of the right lengths. Every failure is a
:class:`~mixfold.ModelFileError` that names the file and the place in it.
"""

from __future__ import annotations

import errno
import glob
import json
import math
import os
import secrets
import stat
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, stale temporary files are left alone
    fcntl = None  # type: ignore[assignment]

from mixfold.errors import ModelFileError
from mixfold.families._protocol import Distribution, family_class

__all__ = ["save", "load", "FORMAT", "VERSION", "MAX_FILE_BYTES", "MAX_DEPTH",
           "model_from_document", "check_document_shape", "write_json_atomic",
           "read_json_bounded"]

FORMAT = "mixfold-model"
VERSION = 1
#: Larger files are refused before they are parsed (``load(path, max_bytes=...)`` raises it).
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Deepest JSON nesting (objects and arrays) a model file may have.
MAX_DEPTH = 200


def write_json_atomic(path: str | os.PathLike, doc: Any) -> Path:
    """Write ``doc`` as JSON to ``path``; a regular file is replaced atomically.

    A regular file (or a new path) gets a temporary file in the same directory, flushed to disk
    (fsync), then renamed over it: a reader sees the old file or the new one, never a half-written
    one, even if the process is killed mid-write. The new file gets the old file's permissions,
    or the user's umask for a new path. A symbolic link is followed and its target replaced. A
    character device or a FIFO (``/dev/stdout``, ``/dev/null``, a pipe) is written as a stream,
    never replaced; a socket, a block device or a directory is refused with an ``OSError``. The
    temporary file is named ``.<name>.mixfold-<random>.tmp``; one left behind by a killed writer
    is removed by the next write of the same path.
    """
    text = json.dumps(doc, allow_nan=False, indent=1)
    path = Path(path)
    target = Path(os.path.realpath(path))  # a symlink's target is what the user means to write
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        _write_special(target, mode, text, path)
        return path
    directory = target.parent
    _remove_stale_temporaries(target)
    fd, tmp = _locked_temporary(target)
    try:
        with os.fdopen(fd, "w") as fh:  # closing it releases the lock
            if mode is not None:  # keep a file's permissions (a private model stays private)
                os.fchmod(fh.fileno(), stat.S_IMODE(mode))
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)
    return path


def _write_special(target: Path, mode: int, text: str, path: Path) -> None:
    """Stream ``text`` into a character device or a FIFO; refuse any other non-regular file."""
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a block device" if stat.S_ISBLK(mode) else "not a regular file")
        raise OSError(errno.EINVAL, f"cannot write a model to {kind}", str(path))
    try:  # non-blocking open: a FIFO nobody reads is an error, not a hang
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "no process is reading from this FIFO", str(path)) \
                from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


_TEMPORARY = ".{name}.mixfold-{tag}.tmp"


def _locked_temporary(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target`` (permissions from the umask), opened and held
    under an exclusive lock for as long as it is open: the lock tells live writers from dead."""
    while True:
        tmp = str(target.with_name(_TEMPORARY.format(name=target.name,
                                                     tag=secrets.token_hex(4))))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     0o666)
        if fcntl is None:
            return fd, tmp
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:  # a cleaner may have removed it before the lock was taken: start over
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)


def _remove_stale_temporaries(target: Path) -> None:
    """Remove temporary files of ``target`` whose writer is gone (nobody holds their lock)."""
    if fcntl is None:
        return
    pattern = _TEMPORARY.format(name=glob.escape(target.name), tag="*")
    for stale in glob.glob(os.path.join(glob.escape(str(target.parent)), pattern)):
        try:
            fd = os.open(stale, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.unlink(stale)
        except OSError:  # locked: a live writer's file
            pass
        finally:
            os.close(fd)


def _fsync_directory(directory: Path) -> None:
    try:  # makes the rename itself durable; not every platform can open a directory
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
    return write_json_atomic(path, model_document(model))


def model_document(model: Distribution) -> dict[str, Any]:
    """The JSON document of ``model`` (what :func:`save` writes)."""
    return {"format": FORMAT, "version": VERSION, "model": model.to_dict()}


def load(path: str | os.PathLike, *, max_bytes: int = MAX_FILE_BYTES) -> Distribution:
    """Read a model written by :func:`save`; a malformed file raises :class:`ModelFileError`.

    At most ``max_bytes`` bytes are read; see the module docstring for every check.

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
    doc = read_json_bounded(path, max_bytes)
    return model_from_document(doc, str(path))


def read_json_bounded(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> Any:
    """Parse the JSON file at ``path``, refusing more than ``max_bytes`` bytes, nesting deeper
    than :data:`MAX_DEPTH` and non-finite numbers, with :class:`ModelFileError`."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:  # read at most max_bytes + 1: a pipe or device may not end
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise  # the usual error for a missing file, not a fault of the file's contents
    except OSError as err:
        raise ModelFileError(f"{path}: cannot be read: {err}") from None
    if len(raw) > max_bytes:
        raise ModelFileError(f"{path}: more than {max_bytes} bytes: over the size limit "
                             f"(load(..., max_bytes=...) raises it)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelFileError(f"{path}: not a JSON text file (not UTF-8: {err})") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ModelFileError(f"{path}: JSON nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as err:
        raise ModelFileError(f"{path}: not valid JSON: {err}") from None
    if _depth(doc) > MAX_DEPTH:
        raise ModelFileError(f"{path}: JSON nested more than {MAX_DEPTH} levels deep")
    return doc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of the float64 range")
    return value


def _depth(doc: Any) -> int:
    """Deepest nesting of objects and arrays in ``doc``, up to MAX_DEPTH + 1 (iterative)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                return level
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return deepest


def model_from_document(doc: Any, where: str = "model") -> Distribution:
    """The distribution in a parsed model document (see the module docstring)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFileError(f"{where}: not a mixfold model file (expected format {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise ModelFileError(f"{where}: unsupported version {doc.get('version')!r} "
                             f"(this mixfold reads version {VERSION})")
    unknown = sorted(set(doc) - {"format", "version", "model"})
    if unknown:
        raise ModelFileError(f"{where}: unknown top-level fields {unknown}")
    try:
        model = Distribution.from_dict(doc["model"])
        canonical = model.to_dict()
    except Exception as err:  # noqa: BLE001 - any failure to build from untrusted input
        raise ModelFileError(f"{where}: invalid model description: {type(err).__name__}: "
                             f"{err}") from None
    check_document_shape(doc["model"], canonical, where)
    return model


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
    lengths, and no object field the model does not have (a family's optional fields, named in
    its ``optional_params``, may be left out of the canonical form when they hold defaults).
    """
    kind, expected = _kind(doc), _kind(canonical)
    if kind != expected:
        raise ModelFileError(f"{where}: at {path}: expected {expected}, got {kind} {doc!r:.60}")
    if isinstance(doc, list):
        if len(doc) != len(canonical):
            raise ModelFileError(f"{where}: at {path}: expected a list of {len(canonical)} "
                                 f"items, got {len(doc)}")
        for i, (d, c) in enumerate(zip(doc, canonical)):
            check_document_shape(d, c, where, f"{path}[{i}]")
    elif isinstance(doc, dict):
        optional: tuple = ()
        family_name = canonical.get("family")
        if isinstance(family_name, str):
            optional = getattr(family_class(family_name), "optional_params", ())
        unknown = sorted(set(doc) - set(canonical) - set(optional), key=str)
        if unknown:
            raise ModelFileError(f"{where}: at {path}: unknown field {unknown[0]!r} "
                                 f"(expected only {sorted(canonical)})")
        for key in canonical:
            if key in doc:
                check_document_shape(doc[key], canonical[key], where, f"{path}[{key!r}]")
