"""Model specs: a small JSON (or YAML) description of an estimator tree, and back.

A spec node is either a family name, for a leaf with default options::

    "gaussian"

or an object with exactly one *kind* key. For a leaf its value holds the leaf's options; for a
combinator it holds the children, and the combinator's own options sit beside it::

    {"categorical": {"pseudo_count": 0.5}}
    {"mixture": {"record": {"age": "gaussian", "plan": "categorical"}}, "k": 3}

Kinds and what their value holds (options in brackets; every node also takes ``keys``, a name
that ties parameters across the tree):

- leaves, value = an object of the estimator's options (may be ``{}``): ``gaussian``,
  ``diagonal_gaussian`` [dim], ``multivariate_gaussian`` [dim], ``multivariate_student_t``
  [dim, nu: fixed, else estimated], ``categorical`` [levels,
  pseudo_count], ``poisson``, ``exponential``, ``gamma``, ``binomial`` [n, required],
  ``bernoulli``, ``geometric``, ``log_gaussian``, ``von_mises``, ``negative_binomial`` [max_r,
  min_mean], ``beta`` [max_concentration], ``dirichlet`` [dim, max_concentration],
  ``multinomial`` [levels, pseudo_count, trials], ``student_t`` [nu: fixed, else estimated,
  start_nu, max_nu], ``weibull`` [max_shape] (and each estimator's floors),
  ``lda`` [n_topics, alpha, eta, vocabulary, unknown, doc_iterations, doc_tol, n_documents];
- ``mixture``: a list of component specs, or one spec repeated ``k`` times [k, pseudo_count,
  weights_prior];
- ``hidden_markov``: a list of emission specs, or one spec repeated ``states`` times [states,
  pseudo_count, terminal, initial_prior, transition_prior];
- ``record``: an object field name -> spec. The field ``"*"`` stands for every column of the
  data not named otherwise: ``"*": "auto"`` picks each column's family from its type (see
  :mod:`mixfold.io.tables`), ``"*": "gaussian"`` makes them all Gaussian;
- ``composite``: a list of factor specs (tuple rows, or columns of a 2-D array in order);
- ``sequence``: the item spec [length: a spec of the length law];
- ``optional``: the inner spec [missing: the values that mean missing, JSON ``null`` for None and
  ``"NaN"`` for a float NaN; default ``[null, "NaN"]``; pseudo_count];
- ``zero_inflated``: the inner spec, a count family (``poisson``, ``negative_binomial``,
  ``binomial``) [pseudo_count].

:func:`estimator_from_spec` builds the estimator; :func:`spec_from_estimator` writes the canonical
spec of one (shortest form: bare names for default leaves, ``k``/``states`` for repeated
children), so the two round-trip. A bad spec raises :class:`SpecError` naming the path to the bad
node, e.g. ``$.mixture.record.plan``.

>>> spec = {"mixture": {"record": {"age": "gaussian", "plan": "categorical"}}, "k": 3}
>>> est = estimator_from_spec(spec)
>>> est.num_components, sorted(est.components[0].fields)
(3, ['age', 'plan'])
>>> spec_from_estimator(est) == spec
True
>>> estimator_from_spec({"mixture": "gausian", "k": 2})
Traceback (most recent call last):
...
mixfold.spec.SpecError: spec $.mixture: unknown kind 'gausian' (did you mean 'gaussian'?)
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mixfold.families import (CompositeEstimator, Estimator, HiddenMarkovEstimator,
                              MixtureEstimator, OptionalEstimator, RecordEstimator,
                              SequenceEstimator, ZeroInflatedEstimator)
from mixfold.errors import ModelFileError, ParameterError
from mixfold.families._protocol import LEAF_KINDS as _registered_kinds
from mixfold.families.optional import MissingMarkers
from mixfold.io.model_files import MAX_FILE_BYTES, json_depth, read_bytes_bounded, read_json_bounded

__all__ = ["SpecError", "NoDefault", "LeftOut", "estimator_from_spec", "spec_from_estimator",
           "load_spec", "LEAF_KINDS", "COMBINATOR_KINDS", "AUTO", "ANY_COLUMN", "MAX_SPEC_BYTES",
           "MAX_SPEC_DEPTH"]

#: Leaf kinds and their estimator classes (every family registered by ``@family``, which names
#: its kind); a leaf's options are its constructor's arguments.
LEAF_KINDS: dict[str, type[Estimator]] = _registered_kinds
#: Combinator kinds and the options each takes beside its kind key.
COMBINATOR_KINDS: dict[str, tuple[str, ...]] = {
    "mixture": ("k", "pseudo_count", "keys", "weights_prior"),
    "hidden_markov": ("states", "pseudo_count", "terminal", "keys", "initial_prior",
                      "transition_prior"),
    "record": ("keys",),
    "composite": ("keys",),
    "sequence": ("length", "keys"),
    "optional": ("missing", "pseudo_count", "keys"),
    "zero_inflated": ("pseudo_count", "keys"),
}
#: ``"*": AUTO`` in a record: every other column with the family its type suggests.
AUTO = "auto"
#: The record field that stands for the data's columns not named in the record.
ANY_COLUMN = "*"
_NAN = "NaN"
#: Largest spec file (bytes): as a model file (a spec may list a large vocabulary).
MAX_SPEC_BYTES = MAX_FILE_BYTES
#: Deepest nesting of a spec (objects and lists): real specs are a handful of levels deep.
MAX_SPEC_DEPTH = 64


class SpecError(ValueError):
    """A spec that does not describe an estimator; ``path`` is where (``$.mixture.record.age``)."""

    def __init__(self, message: str, path: str | None = "$"):
        self.path = path
        self.message = message
        super().__init__(message if path is None else f"spec {path}: {message}")


class NoDefault:
    """A spec node standing for a data column with no default family; building it raises a
    :class:`SpecError` with ``message`` (so only the columns a spec really uses must have one).
    """

    def __init__(self, message: str):
        self.message = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NoDefault) and other.message == self.message

    def __repr__(self) -> str:
        return f"NoDefault({self.message!r})"


class LeftOut(NoDefault):
    """A spec node for a data column that ``"*": "auto"`` leaves out (an identifier: every value
    a distinct integer), ``message`` saying why; naming the column in the spec models it."""

    def __repr__(self) -> str:
        return f"LeftOut({self.message!r})"


def _kinds() -> list[str]:
    return [*LEAF_KINDS, *COMBINATOR_KINDS]


def _unknown_kind(name: Any, path: str) -> SpecError:
    close = difflib.get_close_matches(str(name), _kinds(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(_kinds())})"
    return SpecError(f"unknown kind {name!r}{hint}", path)


# ---------------------------------------------------------------------------------------------
# spec -> estimator


def estimator_from_spec(spec: Any, columns: Mapping[str, Any] | None = None) -> Estimator:
    """The estimator a spec describes (module docstring).

    ``columns`` maps the data's column names to the spec node each gets by default (see
    :func:`mixfold.io.tables.column_specs`). It applies to the record that reads the data's
    columns (the root, or the components of root mixtures): its fields must be columns, and
    ``"*"`` there stands for the rest.

    >>> est = estimator_from_spec({"sequence": "categorical", "length": "poisson"})
    >>> est  # doctest: +NORMALIZE_WHITESPACE
    SequenceEstimator(CategoricalEstimator(pseudo_count=0.0),
                      PoissonEstimator(min_lam=1e-10, prior_shape=0.0, prior_rate=0.0))
    """
    if json_depth(spec, MAX_SPEC_DEPTH) > MAX_SPEC_DEPTH:  # before the recursion over it
        raise SpecError(f"nested more than {MAX_SPEC_DEPTH} levels deep (the limit of a spec)")
    return _build(spec, "$", columns)


def _build(node: Any, path: str, columns: Mapping[str, Any] | None) -> Estimator:
    if isinstance(node, NoDefault):
        raise SpecError(node.message, path)
    if isinstance(node, str):
        if node not in LEAF_KINDS:
            if node in COMBINATOR_KINDS:
                raise SpecError(f"{node!r} is a combinator: write {{{node!r}: ...}} with its "
                                f"children", path)
            raise _unknown_kind(node, path)
        return LEAF_KINDS[node]()
    if not isinstance(node, Mapping):
        raise SpecError(f"expected a family name or an object with one kind key, got "
                        f"{_describe(node)}", path)
    kinds = [k for k in node if k in LEAF_KINDS or k in COMBINATOR_KINDS]
    if len(kinds) != 1:
        if kinds:
            raise SpecError(f"an object holds exactly one kind key, got {kinds}", path)
        if len(node) == 1:
            raise _unknown_kind(next(iter(node)), path)
        raise SpecError(f"no kind key among {list(node)} (kinds: {', '.join(_kinds())})", path)
    kind = kinds[0]
    body, options = node[kind], {k: v for k, v in node.items() if k != kind}
    here = f"{path}.{kind}"
    if kind in LEAF_KINDS:
        if options:
            raise SpecError(f"a leaf takes its options inside its own object: write "
                            f"{{{kind!r}: {{{', '.join(repr(k) + ': ...' for k in options)}}}}}",
                            path)
        return _build_leaf(kind, body, here)
    allowed = COMBINATOR_KINDS[kind]
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise SpecError(f"unknown option {unknown[0]!r} for {kind} (options: {list(allowed)})",
                        path)
    return _COMBINATORS[kind](body, options, here, path, columns)


def _build_leaf(kind: str, options: Any, path: str) -> Estimator:
    cls = LEAF_KINDS[kind]
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise SpecError(f"a leaf's value is an object of its options, got {_describe(options)}",
                        path)
    allowed = _leaf_options(cls)
    unknown = [k for k in options if k not in allowed]
    if unknown:
        raise SpecError(f"unknown option {unknown[0]!r} for {kind} (options: {allowed})", path)
    params = inspect.signature(cls.__init__).parameters
    required = [n for n in allowed if params[n].default is inspect.Parameter.empty]
    absent = [n for n in required if n not in options]
    if absent:
        raise SpecError(f"{kind} needs the option {absent[0]!r}: write {{{kind!r}: "
                        f"{{{absent[0]!r}: ...}}}}", path)
    try:
        return cls(**options)
    except (TypeError, ValueError) as err:
        raise SpecError(str(err), path) from None


def _leaf_options(cls: type) -> list[str]:
    params = inspect.signature(cls.__init__).parameters
    return [n for n in params if n != "self"]


def _children(body: Any, count: Any, count_name: str, path: str,
              columns: Mapping[str, Any] | None) -> list[Estimator]:
    """A list of child specs, or one spec repeated ``count`` times."""
    if isinstance(body, list):
        if count is not None and count != len(body):
            raise SpecError(f"{count_name}={count!r} but the list holds {len(body)} children",
                            path)
        if not body:
            raise SpecError("the list of children is empty", path)
        return [_build(child, f"{path}[{i}]", columns) for i, child in enumerate(body)]
    if count is None:
        count = 1
    if not (isinstance(count, int) and not isinstance(count, bool) and count >= 1):
        raise SpecError(f"{count_name} must be an integer >= 1, got {count!r}", path)
    return [_build(body, path, columns)] * count


def _number(options: Mapping[str, Any], name: str, path: str, default: float = 0.0) -> float:
    v = options.get(name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise SpecError(f"{name} must be a finite number >= 0, got {v!r}", path)
    return float(v)


def _keys(options: Mapping[str, Any], path: str) -> str | None:
    v = options.get("keys")
    if v is not None and not isinstance(v, str):
        raise SpecError(f"keys must be a string, got {v!r}", path)
    return v


def _mixture(body: Any, options: Mapping[str, Any], here: str, path: str,
             columns: Mapping[str, Any] | None) -> Estimator:
    comps = _children(body, options.get("k"), "k", here, columns)
    try:
        return MixtureEstimator(comps, _number(options, "pseudo_count", path),
                                _keys(options, path), weights_prior=options.get("weights_prior"))
    except ParameterError as err:
        raise SpecError(str(err), path) from None


def _hidden_markov(body: Any, options: Mapping[str, Any], here: str, path: str,
                   columns: Mapping[str, Any] | None) -> Estimator:
    emissions = _children(body, options.get("states"), "states", here, None)
    terminal = options.get("terminal", False)
    if not isinstance(terminal, bool):
        raise SpecError(f"terminal must be true or false, got {terminal!r}", path)
    try:
        return HiddenMarkovEstimator(emissions, _number(options, "pseudo_count", path), terminal,
                                     _keys(options, path),
                                     initial_prior=options.get("initial_prior"),
                                     transition_prior=options.get("transition_prior"))
    except ParameterError as err:
        raise SpecError(str(err), path) from None


def _record(body: Any, options: Mapping[str, Any], here: str, path: str,
            columns: Mapping[str, Any] | None) -> Estimator:
    if not isinstance(body, Mapping) or not body:
        raise SpecError(f"a record's value is an object field name -> spec, got "
                        f"{_describe(body)}", here)
    for name in body:
        if name != ANY_COLUMN and columns is not None and name not in columns:
            raise SpecError(f"unknown column {name!r} (the data has {list(columns)})",
                            f"{here}.{name}")
    if ANY_COLUMN not in body:
        fields = {name: _build(child, f"{here}.{name}", None) for name, child in body.items()}
    else:  # the data's columns in their order, the named ones as the spec says
        rest = body[ANY_COLUMN]
        if columns is None:
            raise SpecError("'*' stands for the data's other columns: this spec needs the data",
                            f"{here}.{ANY_COLUMN}")
        fields = {}
        for name, default in columns.items():
            if name not in body and rest == AUTO and isinstance(default, LeftOut):
                continue  # an identifier column: modelled only when the spec names it
            child = body.get(name, default if rest == AUTO else rest)
            fields[name] = _build(child, f"{here}.{name}", None)
        if not fields:
            raise SpecError("the data has no columns for '*'", f"{here}.{ANY_COLUMN}")
    return RecordEstimator(fields, _keys(options, path))


def _composite(body: Any, options: Mapping[str, Any], here: str, path: str,
               columns: Mapping[str, Any] | None) -> Estimator:
    if not isinstance(body, list) or not body:
        raise SpecError(f"a composite's value is a non-empty list of factor specs, got "
                        f"{_describe(body)}", here)
    factors = [_build(f, f"{here}[{i}]", None) for i, f in enumerate(body)]
    return CompositeEstimator(factors, _keys(options, path))


def _sequence(body: Any, options: Mapping[str, Any], here: str, path: str,
              columns: Mapping[str, Any] | None) -> Estimator:
    length = options.get("length")
    length_est = None if length is None else _build(length, f"{path}.length", None)
    return SequenceEstimator(_build(body, here, None), length_est, _keys(options, path))


def _optional(body: Any, options: Mapping[str, Any], here: str, path: str,
              columns: Mapping[str, Any] | None) -> Estimator:
    missing = options.get("missing", [None, _NAN])
    if not isinstance(missing, list):
        raise SpecError(f"missing must be a list of values, got {_describe(missing)}", path)
    markers = tuple(math.nan if m == _NAN else m for m in missing)
    try:
        return OptionalEstimator(_build(body, here, None), markers,
                                 _number(options, "pseudo_count", path), _keys(options, path))
    except ValueError as err:
        raise SpecError(str(err), path) from None


def _zero_inflated(body: Any, options: Mapping[str, Any], here: str, path: str,
                   columns: Mapping[str, Any] | None) -> Estimator:
    inner = _build(body, here, None)
    pseudo_count, keys = _number(options, "pseudo_count", path), _keys(options, path)
    try:
        return ZeroInflatedEstimator(inner, pseudo_count, keys)
    except ParameterError as err:  # an inner family not over counts
        raise SpecError(str(err), here) from None


_COMBINATORS: dict[str, Callable[..., Estimator]] = {
    "mixture": _mixture, "hidden_markov": _hidden_markov, "record": _record,
    "composite": _composite, "sequence": _sequence, "optional": _optional,
    "zero_inflated": _zero_inflated,
}


def _describe(v: Any) -> str:
    return f"{type(v).__name__} {v!r}" if not isinstance(v, (dict, list)) else type(v).__name__


# ---------------------------------------------------------------------------------------------
# estimator -> spec


def spec_from_estimator(est: Estimator) -> Any:
    """The canonical spec of an estimator tree (inverse of :func:`estimator_from_spec`).

    >>> from mixfold import MixtureEstimator, PoissonEstimator
    >>> spec_from_estimator(MixtureEstimator([PoissonEstimator()] * 4, pseudo_count=1.0))
    {'mixture': 'poisson', 'k': 4, 'pseudo_count': 1.0}
    """
    for kind, cls in LEAF_KINDS.items():
        if type(est) is cls:
            return _leaf_spec(kind, est)
    extra: dict[str, Any] = {}
    if isinstance(est, MixtureEstimator):
        node = _repeated("mixture", est.components, "k")
        extra.update(pseudo_count=est.pseudo_count, weights_prior=_listed(est.weights_prior))
    elif isinstance(est, HiddenMarkovEstimator):
        node = _repeated("hidden_markov", est.emissions, "states")
        extra.update(pseudo_count=est.pseudo_count, terminal=est.terminal,
                     initial_prior=_listed(est.initial_prior),
                     transition_prior=_listed(est.transition_prior))
    elif isinstance(est, RecordEstimator):
        node = {"record": {n: spec_from_estimator(f) for n, f in est.fields.items()}}
    elif isinstance(est, CompositeEstimator):
        node = {"composite": [spec_from_estimator(f) for f in est.factors]}
    elif isinstance(est, SequenceEstimator):
        node = {"sequence": spec_from_estimator(est.item)}
        if est.length is not None:
            node["length"] = spec_from_estimator(est.length)
    elif isinstance(est, OptionalEstimator):
        node = {"optional": spec_from_estimator(est.inner)}
        missing = _missing_spec(est.missing)
        if missing != [None, _NAN]:
            node["missing"] = missing
        extra["pseudo_count"] = est.pseudo_count
    elif isinstance(est, ZeroInflatedEstimator):
        node = {"zero_inflated": spec_from_estimator(est.inner)}
        extra["pseudo_count"] = est.pseudo_count
    else:
        raise SpecError(f"no spec kind for a {type(est).__name__}")
    node.update({k: v for k, v in extra.items() if v})
    if est.keys is not None:
        node["keys"] = est.keys
    return node


def _listed(value: Any) -> Any:
    """An array-valued option as JSON writes it (None stays None)."""
    return None if value is None else np.asarray(value, dtype=np.float64).tolist()


def _leaf_spec(kind: str, est: Estimator) -> Any:
    cls = type(est)
    params = inspect.signature(cls.__init__).parameters
    options = {}
    for name in _leaf_options(cls):
        value = getattr(est, name)
        if isinstance(value, tuple):
            value = list(value)
        default = params[name].default
        if default is inspect.Parameter.empty or value != default:
            options[name] = value
    return {kind: options} if options else kind


def _repeated(kind: str, children: tuple[Estimator, ...], count_name: str) -> dict[str, Any]:
    specs = [spec_from_estimator(c) for c in children]
    if all(s == specs[0] for s in specs):
        return {kind: specs[0], count_name: len(specs)}
    return {kind: specs}


def _missing_spec(markers: MissingMarkers) -> list[Any]:
    out: list[Any] = [None] if markers.none else []
    if markers.nan:
        out.append(_NAN)
    return out + sorted(markers.values, key=repr)


# ---------------------------------------------------------------------------------------------
# reading specs


def load_spec(source: str | os.PathLike, *, max_bytes: int = MAX_SPEC_BYTES) -> Any:
    """A spec from a JSON or YAML file, inline JSON text (starting with ``{``, ``[`` or ``"``),
    or a bare family name (``gaussian``).

    YAML (``.yaml`` / ``.yml`` files) needs PyYAML; JSON always works. A spec is untrusted input
    with the guards of a model file: at most ``max_bytes`` bytes, a pipe that does not end
    within the model files' timeout refused, nesting at most ``MAX_SPEC_DEPTH`` (64) deep, JSON
    whose parsed form would take far more memory than its text refused, and no YAML aliases
    (``*name``: an alias repeats a node, so a few hundred bytes could expand to billions).
    Each violation is a :class:`SpecError` naming the limit.

    >>> load_spec('{"mixture": "gaussian", "k": 2}')
    {'mixture': 'gaussian', 'k': 2}
    >>> load_spec("[" * 100 + "]" * 100)
    Traceback (most recent call last):
    ...
    mixfold.spec.SpecError: the inline spec: nested more than 64 levels deep (the limit of a spec)
    """
    text = str(source).strip()
    if text.startswith(("{", '"', "[")):
        if len(text.encode()) > max_bytes:
            raise SpecError(f"the inline spec: more than {max_bytes} bytes: over the size "
                            f"limit of a spec (load_spec(..., max_bytes=...) raises it)", None)
        return _parse_json(text, "the inline spec")
    path = Path(source)
    if not path.exists() and text.isidentifier():
        return text  # a bare family name: ``--model gaussian``
    if not path.exists() or path.is_dir():
        raise SpecError(f"no such spec file: {str(path)!r} (give a JSON/YAML file or inline JSON)",
                        None)
    try:
        if path.suffix.lower() not in (".yaml", ".yml"):
            return read_json_bounded(path, max_bytes, max_depth=MAX_SPEC_DEPTH,
                                     raise_with="load_spec(..., max_bytes=...)")
        content = read_bytes_bounded(path, max_bytes,
                                     raise_with="load_spec(..., max_bytes=...)").decode()
    except ModelFileError as err:
        raise SpecError(f"spec file {err}", None) from None
    except UnicodeDecodeError as err:
        raise SpecError(f"cannot read the spec file {str(path)!r}: {err}", None) from None
    return _parse_yaml(content, path)


def _parse_yaml(content: str, path: Path) -> Any:
    try:
        import yaml
    except ImportError:
        raise SpecError(f"{str(path)!r} is YAML, which needs PyYAML (pip install pyyaml); "
                        f"or write the spec as JSON", None) from None
    try:
        return yaml.load(content, Loader=_guarded_yaml_loader(yaml))  # noqa: S506 - safe base
    except yaml.YAMLError as err:
        raise SpecError(f"{str(path)!r} is not valid YAML: "
                        f"{' '.join(str(err).split())}", None) from None
    except _YamlLimit as err:
        raise SpecError(f"{str(path)!r}: {err}", None) from None


class _YamlLimit(Exception):
    """A YAML spec over a guard (an alias, too deep)."""


def _guarded_yaml_loader(yaml: Any) -> type:
    """PyYAML's safe loader, refusing aliases and nesting deeper than MAX_SPEC_DEPTH while it
    composes the document (before anything is expanded or built)."""

    class GuardedLoader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _YamlLimit(f"line {event.start_mark.line + 1}: YAML aliases "
                                 f"(*{event.anchor}) are not allowed in a spec (an alias "
                                 f"repeats a node: write the node out)")
            self.depth += 1
            if self.depth > MAX_SPEC_DEPTH:
                mark = self.peek_event().start_mark
                raise _YamlLimit(f"line {mark.line + 1}: nested more than {MAX_SPEC_DEPTH} "
                                 f"levels deep (the limit of a spec)")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return GuardedLoader


def _parse_json(text: str, where: str) -> Any:
    try:
        doc = json.loads(text)
    except RecursionError:
        doc = None
    except ValueError as err:
        raise SpecError(f"{where} is not valid JSON: {err}", None) from None
    if doc is None or json_depth(doc, MAX_SPEC_DEPTH) > MAX_SPEC_DEPTH:
        raise SpecError(f"{where}: nested more than {MAX_SPEC_DEPTH} levels deep (the limit "
                        f"of a spec)", None)
    return doc
