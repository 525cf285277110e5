"""Checkpoints: the state of a fit after every EM iteration, written atomically, resumed exactly.

``optimize(..., checkpoint=path)`` writes after each accepted iteration a JSON file holding the
model (as a model file document: the same schema checks on reading), the number of iterations
done, the per-iteration log-likelihood and seconds, the fit's warnings, the seed, and a
fingerprint of the data and the estimator, and a SHA-256 checksum of all of it. The file is
replaced atomically (temporary file in the same directory, fsync, rename), so a fit killed at any
instant leaves either the previous checkpoint or the new one.

Reading checks a checkpoint like a model file: exactly its fields, each of its type, a checksum
that matches (one altered number is refused), and a model with the structure the estimator
produces (families, components, fields); every failure is a :class:`~mixfold.CheckpointError`
naming the field or the place.

Given an existing checkpoint, the same call continues from it. EM after the seeded start draws
no random numbers (the start itself is a hash of the seed and the row indices, see
:class:`~mixfold.families.InitRandom`), so the model, the iteration count and the log-likelihood
history are the whole state: a resumed fit repeats, bit for bit, the iterations the interrupted
one would have run. Resuming against other data, another estimator or another seed is refused
with :class:`~mixfold.CheckpointError`.

Reading refuses a file over 64 MiB (as a model file) unless the path says otherwise: a fit whose
model is larger (a categorical over a million levels) passes
``checkpoint=CheckpointPath(path, max_bytes=...)``, and the refusal names that limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mixfold.errors import CheckpointError, ModelFileError
from mixfold.families._protocol import Distribution, Estimator
from mixfold.io.model_files import (
    MAX_FILE_BYTES,
    model_document,
    model_from_document,
    read_json_bounded,
    write_json_atomic,
)
from mixfold.io.outputs import check_destination

__all__ = ["Checkpoint", "CheckpointFile", "CheckpointPath", "fit_fingerprint", "write_checkpoint",
           "read_checkpoint", "check_resumable", "check_model_fits", "check_checkpoint_path",
           "FORMAT", "VERSION"]

FORMAT = "mixfold-checkpoint"
VERSION = 2  # 2: with a checksum of its contents
#: Stop reasons after which a resumed fit has nothing left to do.
FINISHED = ("converged", "decrease")
_MAX_DIGEST_DEPTH = 200
_BY_NAME = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
            type)


class CheckpointPath(os.PathLike):
    """A checkpoint path with the largest file that may be read back from it: pass it as
    ``fit(..., checkpoint=CheckpointPath(path, max_bytes=...))`` when the fit's model makes its
    checkpoint larger than the 64 MiB a file is allowed by default.

    >>> import os, tempfile, numpy as np, mixfold
    >>> path = CheckpointPath(os.path.join(tempfile.mkdtemp(), "fit.json"), max_bytes=100)
    >>> x = np.random.default_rng(0).normal(size=100)
    >>> _ = mixfold.fit(x, mixfold.GaussianEstimator(), max_iter=2, progress=False,
    ...                 checkpoint=path)
    >>> mixfold.fit(x, mixfold.GaussianEstimator(), progress=False, checkpoint=path)
    Traceback (most recent call last):
    ...
    mixfold.errors.CheckpointError: checkpoint ...: more than 100 bytes: over the size limit ...
    """

    def __init__(self, path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES):
        if not (isinstance(max_bytes, int) and not isinstance(max_bytes, bool)
                and max_bytes >= 1):
            raise ValueError(f"max_bytes must be an integer >= 1, got {max_bytes!r}")
        self.path = os.fspath(path)
        self.max_bytes = max_bytes

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"CheckpointPath({self.path!r}, max_bytes={self.max_bytes})"


def _max_bytes(path: str | os.PathLike) -> int:
    return path.max_bytes if isinstance(path, CheckpointPath) else MAX_FILE_BYTES


@dataclass
class Checkpoint:
    """A fit's state after ``iterations`` accepted EM iterations.

    ``log_likelihood`` / ``seconds`` are the history as on :class:`~mixfold.FitResult`;
    ``stop_reason`` is set when the fit stopped for good ("converged" or "decrease"), else None.
    """

    model: Distribution
    iterations: int
    log_likelihood: list[float]
    seconds: list[float]
    seed: int
    fingerprint: dict[str, Any]
    init_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    #: a variational fit's evidence lower bound per iteration (empty for EM)
    lower_bound: list[float] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.stop_reason in FINISHED


def _feed(h: Any, obj: Any, depth: int = 0) -> None:
    """Feed a canonical byte form of ``obj`` (arrays, numbers, containers, public attributes of
    objects) to the hash ``h``; the same structure gives the same bytes in every process."""
    if depth > _MAX_DIGEST_DEPTH:
        raise ValueError("structure nested too deeply to fingerprint")
    if isinstance(obj, _BY_NAME):  # code and modules: who they are, not what they hold
        h.update(f"N{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', obj)!s};"
                 .encode())
    elif isinstance(obj, np.ndarray):
        h.update(f"A{obj.dtype.str}{obj.shape}".encode())
        if obj.dtype.kind == "O":
            for item in obj.ravel():
                _feed(h, item, depth + 1)
        else:
            h.update(np.ascontiguousarray(obj).tobytes())
    elif obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, np.generic)):
        h.update(f"S{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}(".encode())
        for item in obj:
            _feed(h, item, depth + 1)
        h.update(b")")
    elif isinstance(obj, (set, frozenset)):
        _feed(h, sorted(obj, key=repr), depth + 1)
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}{{".encode())
        for key in sorted(obj, key=repr):
            _feed(h, key, depth + 1)
            _feed(h, obj[key], depth + 1)
        h.update(b"}")
    else:
        cls = type(obj)
        h.update(f"O{cls.__module__}.{cls.__qualname__}<".encode())
        for name in sorted(_public_attributes(obj)):
            h.update(name.encode())
            _feed(h, getattr(obj, name), depth + 1)
        h.update(b">")


def _public_attributes(obj: Any) -> set[str]:
    names = set(getattr(obj, "__dict__", {}))
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    return {n for n in names if not n.startswith("_") and hasattr(obj, n)}


def _digest(*objs: Any) -> str:
    h = hashlib.sha256()
    for obj in objs:
        _feed(h, obj)
    return h.hexdigest()


def fit_fingerprint(handle: Any, estimator: Estimator, seed: int) -> dict[str, Any]:
    """What identifies a fit's input: rows, total weight, the bound estimator's structure, the
    seeded initialisation sample (available on every backend) and, where the encoded rows are
    held in this process, all of them."""
    sample, sample_weights = handle.init_sample(seed)
    enc, weights = getattr(handle, "enc", None), getattr(handle, "weights", None)
    return {
        "rows": int(handle.n_rows),
        "total_weight": float(handle.total_weight),
        "estimator": _digest(estimator),
        "sample": _digest(sample, sample_weights),
        "data": None if enc is None or weights is None else _digest(enc, weights),
    }


def write_checkpoint(path: str | os.PathLike, ckpt: Checkpoint) -> Path:
    """Write ``ckpt`` to ``path`` atomically (see the module docstring)."""
    doc = {
        "format": FORMAT, "version": VERSION,
        "iterations": int(ckpt.iterations),
        "log_likelihood": [float(v) for v in ckpt.log_likelihood],
        "seconds": [float(v) for v in ckpt.seconds],
        "init_seconds": float(ckpt.init_seconds),
        "warnings": list(ckpt.warnings),
        "stop_reason": ckpt.stop_reason,
        "seed": int(ckpt.seed),
        "fingerprint": ckpt.fingerprint,
        "model": model_document(ckpt.model),
    }
    if ckpt.lower_bound:  # a variational fit's: its resume climbs on from the last bound
        doc["lower_bound"] = [float(v) for v in ckpt.lower_bound]
    doc["checksum"] = _checksum(doc)
    return write_json_atomic(path, doc)


def _checksum(doc: dict[str, Any]) -> str:
    """SHA-256 of the document without its checksum, in one canonical JSON spelling (floats
    round-trip exactly through JSON, so the reader recomputes the writer's bytes)."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def read_checkpoint(path: str | os.PathLike) -> Checkpoint | None:
    """The checkpoint at ``path``; None when there is no file. A file that is not a complete
    mixfold checkpoint, or larger than the path allows (:class:`CheckpointPath`), raises
    :class:`~mixfold.CheckpointError`.

    >>> import os, tempfile, numpy as np, mixfold
    >>> path = os.path.join(tempfile.mkdtemp(), "fit.json")
    >>> x = np.random.default_rng(0).normal(size=500)
    >>> est = mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 2)
    >>> first = mixfold.fit(x, est, max_iter=3, tol=0, progress=False, checkpoint=path)
    >>> read_checkpoint(path).iterations
    3
    >>> more = mixfold.fit(x, est, max_iter=8, tol=0, progress=False, checkpoint=path)
    >>> more.iterations, more.log_likelihood[:3] == first.log_likelihood
    (8, True)
    """
    max_bytes, path = _max_bytes(path), Path(path)
    if not path.exists():
        return None
    try:
        doc = read_json_bounded(path, max_bytes, raise_with="checkpoint=CheckpointPath(path, "
                                                            "max_bytes=...)")
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise CheckpointError(f"{path}: not a mixfold checkpoint (expected format "
                                  f"{FORMAT!r})")
        version = doc.get("version")
        if type(version) is not int or version != VERSION:
            older = " (written by an older mixfold, without a checksum)" \
                if type(version) is int and version < VERSION else ""
            raise CheckpointError(f"{path}: unsupported checkpoint version {version!r}{older}; "
                                  f"this mixfold reads {VERSION}: remove the file to start "
                                  f"afresh")
        _check_fields(doc, path)
        if doc["checksum"] != _checksum(doc):
            raise CheckpointError(f"{path}: the checksum does not match the contents: the file "
                                  f"was altered or damaged after it was written; remove it to "
                                  f"start afresh")
        ckpt = Checkpoint(
            model=model_from_document(doc["model"], f"{path} (model)"),
            iterations=doc["iterations"], log_likelihood=[float(v) for v in
                                                          doc["log_likelihood"]],
            seconds=[float(v) for v in doc["seconds"]], seed=doc["seed"],
            fingerprint=doc["fingerprint"], init_seconds=float(doc["init_seconds"]),
            warnings=list(doc["warnings"]), stop_reason=doc["stop_reason"],
            lower_bound=[float(v) for v in doc.get("lower_bound", [])])
    except ModelFileError as err:
        raise CheckpointError(f"checkpoint {err}") from None
    if not 0 <= ckpt.iterations <= len(ckpt.log_likelihood) <= ckpt.iterations + 1:
        raise CheckpointError(f"{path}: {ckpt.iterations} iterations but "
                              f"{len(ckpt.log_likelihood)} log-likelihood values")
    if len(ckpt.lower_bound) > len(ckpt.log_likelihood):
        raise CheckpointError(f"{path}: {len(ckpt.lower_bound)} lower bounds but "
                              f"{len(ckpt.log_likelihood)} log-likelihood values")
    if len(ckpt.seconds) != len(ckpt.log_likelihood):
        raise CheckpointError(f"{path}: {len(ckpt.seconds)} iteration times but "
                              f"{len(ckpt.log_likelihood)} log-likelihood values")
    return ckpt


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# field -> (check, what is expected); a checkpoint has exactly these fields
_FIELDS: dict[str, tuple[Any, str]] = {
    "format": (lambda v: True, "the format"),
    "version": (lambda v: True, "the version"),
    "iterations": (_is_count, "an integer >= 0"),
    "log_likelihood": (lambda v: isinstance(v, list) and all(map(_is_number, v)),
                       "a list of numbers"),
    "seconds": (lambda v: isinstance(v, list) and all(_is_number(x) and x >= 0 for x in v),
                "a list of numbers >= 0"),
    "init_seconds": (lambda v: _is_number(v) and v >= 0, "a number >= 0"),
    "warnings": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                 "a list of strings"),
    "stop_reason": (lambda v: v is None or v in FINISHED,
                    f"null or one of {', '.join(map(repr, FINISHED))}"),
    "seed": (_is_count, "an integer >= 0"),
    "fingerprint": (lambda v: isinstance(v, dict), "an object"),
    "model": (lambda v: isinstance(v, dict), "a model document"),
    "checksum": (lambda v: isinstance(v, str), "a string"),
}
# fields a checkpoint may leave out
_OPTIONAL: dict[str, tuple[Any, str]] = {
    "lower_bound": (lambda v: isinstance(v, list) and all(map(_is_number, v)),
                    "a list of numbers"),
}
_FINGERPRINT: dict[str, tuple[Any, str]] = {
    "rows": (_is_count, "an integer >= 0"),
    "total_weight": (_is_number, "a number"),
    "estimator": (lambda v: isinstance(v, str), "a string"),
    "sample": (lambda v: isinstance(v, str), "a string"),
    "data": (lambda v: v is None or isinstance(v, str), "null or a string"),
}


def _check_fields(doc: dict[str, Any], path: Path) -> None:
    """Exactly the fields of a checkpoint, each of its type (``model`` is checked as a model
    file), else a :class:`~mixfold.CheckpointError` naming the field."""
    for rules, optional, where, key in ((_FIELDS, _OPTIONAL, "", None),
                                        (_FINGERPRINT, {}, "fingerprint.", "fingerprint")):
        node = doc if key is None else doc[key]  # checked to be an object in the first pass
        unknown = sorted(set(node) - set(rules) - set(optional), key=str)
        if unknown:
            raise CheckpointError(f"{path}: unknown field {where}{unknown[0]!r} (a checkpoint "
                                  f"has only {', '.join([*rules, *optional])})")
        for name, (ok, expected) in {**rules, **optional}.items():
            if name in optional and name not in node:
                continue
            if name not in node:
                raise CheckpointError(f"{path}: malformed checkpoint: field {where}{name} is "
                                      f"missing")
            if not ok(node[name]):
                raise CheckpointError(f"{path}: field {where}{name} must be {expected}, got "
                                      f"{node[name]!r:.60}")


def check_resumable(ckpt: Checkpoint, fingerprint: dict[str, Any], seed: int,
                    path: str | os.PathLike) -> None:
    """Refuse a checkpoint written by a fit of other data, another estimator or another seed."""
    if ckpt.seed != seed:
        raise CheckpointError(f"{path}: written by a fit with seed={ckpt.seed}, this fit has "
                              f"seed={seed}; remove the file to start afresh")
    theirs = ckpt.fingerprint
    what = {"rows": "the number of rows", "total_weight": "the total row weight",
            "estimator": "the estimator", "sample": "the data", "data": "the data"}
    for key, name in what.items():
        if key == "data" and (theirs.get(key) is None or fingerprint[key] is None):
            continue  # the rows were not in the driver on one side: the sample decides
        if theirs.get(key) != fingerprint[key]:
            raise CheckpointError(f"{path}: written by a fit of different input ({name} "
                                  f"differs: expected {theirs.get(key)!r}, this fit has "
                                  f"{fingerprint[key]!r}); remove the file to start afresh")


def check_checkpoint_path(path: str | os.PathLike) -> None:
    """Refuse, before any work, a checkpoint path that cannot be written: a folder, or a file
    in a folder that does not exist or is not writable."""
    check_destination(path, (), "checkpoint")


def check_model_fits(model: Distribution, estimator: Estimator,
                     path: str | os.PathLike) -> None:
    """Refuse a checkpointed model whose structure is not what ``estimator`` (bound to this
    fit's encoder) produces: other families, another number of components, fields or levels."""
    difference = structure_difference(model, estimator)
    if difference:
        raise CheckpointError(f"{path}: the checkpoint's model does not fit this estimator: "
                              f"{difference}; remove the file to start afresh")


def structure_difference(model: Distribution, estimator: Estimator) -> str | None:
    """Where ``model``'s structure differs from what ``estimator`` produces (other families,
    another number of components, fields or levels), or None (also for an estimator that
    cannot estimate without data)."""
    try:  # the estimator's model from empty statistics: its structure, without the data
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = estimator.estimate(0.0, estimator.accumulator_factory().make().value())
    except Exception:  # noqa: BLE001 - an estimator that needs data: nothing to compare
        return None
    return _structure_difference(model.to_dict(), reference.to_dict(), "model")


#: The kinds of value a ``to_dict`` form holds besides dicts and lists.
_VALUES = frozenset({float, int, bool, str, type(None)})


def _structure_difference(theirs: Any, ours: Any, where: str) -> str | None:
    """Where two ``to_dict`` forms differ in structure (families, fields, list lengths, kinds
    of value), or None; parameter values may differ."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if theirs.get("family") != ours.get("family"):
            return (f"at {where}: a {theirs.get('family')} where the estimator has a "
                    f"{ours.get('family')}")
        if set(theirs) != set(ours):
            return f"at {where}: fields {sorted(theirs)}, the estimator's are {sorted(ours)}"
        for key in ours:
            found = _structure_difference(theirs[key], ours[key], f"{where}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(theirs) != len(ours):
            return f"at {where}: {len(theirs)} items, the estimator has {len(ours)}"
        if _VALUES.issuperset(map(type, theirs)) and _VALUES.issuperset(map(type, ours)):
            return None  # values only (a row of a covariance): told apart in one pass each
        for i, (a, b) in enumerate(zip(theirs, ours)):
            if type(a) in _VALUES and type(b) in _VALUES:
                continue  # two values (a covariance's numbers): they may differ
            found = _structure_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(ours, (dict, list)) or isinstance(theirs, (dict, list)):
        return f"at {where}: {type(theirs).__name__} where the estimator has {type(ours).__name__}"
    return None


class CheckpointFile:
    """The checkpoint of one fit: what it resumes from (``resumed``) and :meth:`save` per
    iteration. Opening reads and checks an existing file against this fit's input."""

    def __init__(self, path: str | os.PathLike, handle: Any, estimator: Estimator, seed: int):
        self.path = Path(path)
        self.seed = int(seed)
        self.fingerprint = fit_fingerprint(handle, estimator, seed)
        self.max_bytes, self.warned = _max_bytes(path), False
        self.resumed = read_checkpoint(path)
        if self.resumed is not None:
            check_resumable(self.resumed, self.fingerprint, self.seed, self.path)
            check_model_fits(self.resumed.model, estimator, self.path)

    def save(self, result: Any) -> None:
        """Write the state of ``result`` (a :class:`~mixfold.FitResult`) atomically; warn once
        when the file is larger than a resume reads back by default."""
        stop = result.stop_reason if result.stop_reason in FINISHED else None
        write_checkpoint(self.path, Checkpoint(
            model=result.model, iterations=result.iterations,
            log_likelihood=result.log_likelihood, seconds=result.seconds, seed=self.seed,
            fingerprint=self.fingerprint, init_seconds=result.init_seconds,
            warnings=result.warnings, stop_reason=stop, lower_bound=result.lower_bound))
        size = self.path.stat().st_size if self.path.is_file() else 0
        if size > self.max_bytes and not self.warned:
            self.warned = True
            warnings.warn(f"checkpoint {str(self.path)!r} is {size} bytes, more than the "
                          f"{self.max_bytes} a resume reads: resume with checkpoint="
                          f"CheckpointPath(path, max_bytes={size * 2})", RuntimeWarning,
                          stacklevel=2)
