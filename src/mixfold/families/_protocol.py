"""The family protocol: Distribution, Encoder, Accumulator (+ factory), Estimator, Sampler.

A model is a tree of distributions. Its estimator (the same tree, without parameters) makes an
encoder that turns raw rows into :class:`Encoded` columnar arrays once, and accumulators that fold
encoded rows into sufficient statistics. Accumulators form a commutative monoid under
:meth:`Accumulator.combine`; their statistics are float64 buffers of fixed shapes, so the whole
tree's statistics flatten into one payload (:meth:`Accumulator.to_array`) whose layout depends only
on the estimator tree. Latent nodes (mixtures, hidden Markov models) pass per-row posteriors down as
row weights, so leaves only ever do weighted sums.

These are the roles' definitions; a family author reads (and imports from)
:mod:`mixfold.families.contract`, which exports them beside the leaf bases, the capabilities of
:mod:`mixfold.capabilities` (also re-exported here) and the combinators' hooks.
"""

from __future__ import annotations

import copy
import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from mixfold.capabilities import (
    CentredStatistics,
    CompensatedAccumulation,
    FusedFold,
    LinearInFeatures,
    RelativeScoring,
    RunsInBands,
    SeedsFromPoints,
    StackedScoring,
    StackedUpdate,
)
from mixfold.compute.encoded import ArrayEncoded, Encoded, InitRandom, as_weights
from mixfold.errors import ParameterError
from mixfold.options import Rule, check_options
from mixfold.precision.bands import FLOAT64, Precision

__all__ = [
    "Encoded", "ArrayEncoded", "Encoder", "Accumulator", "AccumulatorFactory", "Estimator",
    "Distribution", "Sampler", "InitRandom", "family", "family_class", "as_weights", "is_na",
    "NodeStatistics", "LEAF_KINDS",
    # optional capabilities a family declares by inheriting them (mixfold.capabilities)
    "StackedScoring", "SeedsFromPoints", "RunsInBands", "StackedUpdate", "FusedFold",
    "LinearInFeatures", "CompensatedAccumulation", "CentredStatistics", "RelativeScoring",
]

# ---------------------------------------------------------------------------------------------
# Roles


class NodeStatistics(NamedTuple):
    """The statistics of one node of a model tree (what :meth:`Accumulator.value` gives and
    :meth:`Estimator.estimate` reads): copies of its own arrays, in ``own_arrays`` order, and
    its children's, in ``children`` order. A tuple, so ``(sums,), _ = stats`` still reads it."""

    own: tuple[np.ndarray, ...]
    children: tuple[NodeStatistics, ...]


class Encoder(ABC):
    """Turns raw values of one node into :class:`Encoded` arrays (once per fit).

    ``fit`` learns what must be fixed before encoding (categorical levels); ``encode`` raises
    :class:`~mixfold.DataError` naming the row and field of a value it cannot encode.
    """

    def fit(self, values: Any) -> Encoder:
        """An encoder with its vocabularies learnt from ``values``; most encoders return self."""
        return self

    @abstractmethod
    def encode(self, values: Any) -> Encoded:
        """Encode a batch of raw values (a sequence or array of rows) for this node."""

    def merge(self, other: Encoder) -> Encoder:
        """One encoder for the union of what ``self`` and ``other`` were fitted on.

        Vocabulary learning is a fold too: shards (MPI ranks, Spark partitions, streamed blocks)
        fit their own rows and the fitted encoders merge. Encoders with nothing to learn must be
        equal.
        """
        if self != other:
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return self

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(type(self))


class Accumulator(ABC):
    """Running weighted sufficient statistics of one model node.

    Subclasses hold float64 buffers of fixed shapes (``own_arrays``) and the accumulators of their
    children (``children``); everything else — combine, flat payload, key tying — follows.
    """

    keys: str | None = None

    def own_arrays(self) -> list[np.ndarray]:
        """This node's statistic buffers (float64, fixed shapes), mutated in place."""
        return []

    def children(self) -> Sequence[Accumulator]:
        """The accumulators of child nodes, in a fixed order."""
        return ()

    def arrays(self) -> list[np.ndarray]:
        """All statistic buffers of this subtree, in payload order."""
        out = list(self.own_arrays())
        for child in self.children():
            out.extend(child.arrays())
        return out

    @abstractmethod
    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Distribution,
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        """E-step: add the rows of ``enc`` with row weights under ``model``.

        Returns the per-row log-density under ``model`` when the update computed it anyway (a
        mixture's log-sum-exp), else ``None``, so the fit loop scores rows only once.
        """

    @abstractmethod
    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        """Add the rows with seeded random posteriors for latent nodes (no model yet)."""

    def rows_per_chunk(self, model: Distribution, precision: Precision, chunk_rows: int) -> int:
        """Rows :meth:`seq_update` takes per call when the fold asks for ``chunk_rows`` (which
        bounds a chunk's rows-by-components temporaries). An update whose temporaries do not
        grow with the rows may take more: fewer chunks, fewer waits for the last row block."""
        return chunk_rows

    def combine(self, other: Accumulator) -> Accumulator:
        """Add ``other``'s statistics into this accumulator (same estimator tree); returns self."""
        mine, theirs = self.arrays(), other.arrays()
        if len(mine) != len(theirs):
            raise ValueError("cannot combine accumulators of different estimator trees")
        if _references_differ(self, other):  # (statistics about another point: moved first)
            theirs = copy.deepcopy(other).align_references(self).arrays()
        for a, b in zip(mine, theirs):
            a += b
        return self

    def value(self) -> NodeStatistics:
        """The statistics as nested ``NodeStatistics`` of array copies (what
        ``Estimator.estimate`` reads)."""
        return NodeStatistics(tuple([a.copy() for a in self.own_arrays()]),
                              tuple([c.value() for c in self.children()]))

    def from_value(self, value: Any) -> Accumulator:
        """Set the statistics from ``value()`` output; returns self."""
        own, kids = value
        for a, v in zip(self.own_arrays(), own, strict=True):
            a[...] = v
        for child, v in zip(self.children(), kids, strict=True):
            child.from_value(v)
        return self

    def payload_size(self) -> int:
        """Length of the flat float64 payload; depends only on the estimator tree."""
        return sum(a.size for a in self.arrays())

    def to_array(self) -> np.ndarray:
        """All statistics as one flat float64 array (what a backend reduces)."""
        arrays = self.arrays()
        if not arrays:
            return np.zeros(0)
        return np.concatenate([a.ravel() for a in arrays])

    def from_array(self, flat: np.ndarray) -> Accumulator:
        """Set the statistics from a flat payload made by ``to_array``; returns self."""
        flat = np.asarray(flat, dtype=np.float64)
        if flat.ndim != 1 or flat.size != self.payload_size():
            raise ValueError(f"payload must be a flat array of {self.payload_size()} floats, "
                             f"got shape {flat.shape}")
        pos = 0
        for a in self.arrays():
            a[...] = flat[pos:pos + a.size].reshape(a.shape)
            pos += a.size
        return self

    def align_references(self, other: Accumulator) -> Accumulator:
        """Recentre every :class:`CentredStatistics` node of this tree on the reference of the
        same node of ``other`` (same estimator tree), so that the two add up; returns self."""
        if isinstance(self, CentredStatistics) and isinstance(other, CentredStatistics):
            point = other.reference()
            if point is not None:
                self.recentre(point)
        for mine, theirs in zip(self.children(), other.children(), strict=True):
            mine.align_references(theirs)
        return self

    def key_merge(self, pooled: dict[str, np.ndarray]) -> None:
        """Pool the statistics of keyed subtrees into ``pooled`` (key -> summed payload).

        A keyed node ties its whole subtree: every node with the same key gets the summed
        statistics, hence identical parameters. Keys below a keyed node are subsumed by it.
        Statistics summed about a reference point are recentred on the pool's first.
        """
        if self.keys is not None:
            flat = self.to_array()
            if self.keys in pooled:
                if pooled[self.keys].size != flat.size:
                    raise ValueError(f"nodes tied by key {self.keys!r} have different structures")
                first = copy.deepcopy(self).from_array(pooled[self.keys])
                flat = self.align_references(first).to_array()
                pooled[self.keys] = pooled[self.keys] + flat
            else:
                pooled[self.keys] = flat
            return
        for child in self.children():
            child.key_merge(pooled)

    def key_replace(self, pooled: dict[str, np.ndarray]) -> None:
        """Replace keyed subtrees' statistics by the pooled sums from :meth:`key_merge`."""
        if self.keys is not None:
            self.from_array(pooled[self.keys])
            return
        for child in self.children():
            child.key_replace(pooled)

    def tie_keys(self) -> None:
        """Pool and redistribute keyed statistics (once after the reduce, before the M-step)."""
        pooled: dict[str, np.ndarray] = {}
        self.key_merge(pooled)
        if pooled:
            self.key_replace(pooled)


def _references_differ(mine: Accumulator, theirs: Accumulator) -> bool:
    """Whether a :class:`CentredStatistics` node of ``theirs`` holds statistics about another
    point than the same node of ``mine`` (both holding weight)."""
    if isinstance(mine, CentredStatistics) and isinstance(theirs, CentredStatistics):
        a, b = mine.reference(), theirs.reference()
        if a is not None and b is not None and \
                np.any(np.abs(a - b) > 8 * np.finfo(float).eps * np.abs(a)):
            return True
    return any(_references_differ(m, t) for m, t in zip(mine.children(), theirs.children()))


class AccumulatorFactory:
    """Makes empty accumulators for one estimator tree (``make()``), e.g. one per shard."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[], Accumulator]):
        self._make = make

    def make(self) -> Accumulator:
        return self._make()


class Estimator(ABC):
    """The structure of a model without parameters: how to accumulate and how to estimate.

    ``keys`` ties this node's parameters to every other node with the same key.
    """

    keys: str | None = None
    #: Names of this node's own parameters (as in its distribution's ``to_dict``) held at
    #: their value in the fit's ``init`` while every other parameter is estimated: every
    #: estimator takes ``frozen=`` (:mod:`mixfold.families._frozen`).
    frozen: tuple[str, ...] = ()
    #: The distribution class this estimator estimates, when it is one family (leaves).
    distribution_class: ClassVar[type[Distribution] | None] = None
    #: What each constructor option accepts (option -> :class:`~mixfold.options.Rule`): the
    #: one table an estimator declares, checked at construction by :meth:`check_options`.
    option_rules: ClassVar[Mapping[str, Rule]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:  # every estimator takes frozen=
            cls.__init__ = _taking_frozen(cls.__dict__["__init__"])
        if "bind" in cls.__dict__:  # and a bound estimator holds what it held
            cls.bind = _keeping_frozen(cls.__dict__["bind"])
        dist = cls.__dict__.get("distribution_class")
        if dist is not None and "estimator_class" not in vars(dist):  # the first one declared
            dist.estimator_class = cls
            if vars(dist).get("spec_kind"):
                LEAF_KINDS[dist.spec_kind] = cls

    def parts(self) -> tuple[Estimator, ...]:
        """The child estimators of a combinator, in its accumulator's ``children()`` order."""
        return ()

    def check_options(self, **values: Any) -> None:
        """Refuse, naming the estimator and the option, a value its rule does not accept."""
        check_options(type(self).__name__, self.option_rules, values, ParameterError)

    @abstractmethod
    def accumulator_factory(self) -> AccumulatorFactory:
        """A factory of empty accumulators for this estimator tree."""

    @abstractmethod
    def estimate(self, nobs: float, stats: Any) -> Distribution:
        """The M-step: parameters from summed statistics (``Accumulator.value()``), in float64."""

    @abstractmethod
    def encoder(self) -> Encoder:
        """The encoder for raw values of this node."""

    def bind(self, encoder: Encoder) -> Estimator:
        """This estimator with what the fitted ``encoder`` fixed (categorical levels)."""
        return self

    def n_parameters(self, model: Distribution) -> int:
        """The free parameters of ``model`` fitted by this (bound) estimator: parameters tied by
        ``keys`` count once, a covariance its siblings share (``covariance_keys``) once, and
        what the estimator holds (``frozen=``, a spherical variance's D - 1 copies) not at all.

        >>> from mixfold import GaussianEstimator, MixtureEstimator
        >>> import mixfold, numpy as np
        >>> tied = MixtureEstimator([GaussianEstimator(keys="g")] * 2)
        >>> m = mixfold.optimize(np.arange(8.0), tied, max_iter=1, progress=False)
        >>> m.n_parameters(), tied.n_parameters(m)
        (5, 3)
        """
        return model.n_parameters() - _not_free(self, model, self.accumulator_factory().make(),
                                                set())

    def held_parameters(self, model: Distribution) -> int:
        """How many of ``model``'s counted parameters this node's estimator does not estimate
        freely: by default those it holds (``frozen=``)."""
        return _frozen_count(model, self.frozen)

    def shared_parameters(self, model: Distribution) -> tuple[tuple[str, int], ...]:
        """(key, count) of parameters this node shares with its siblings naming the same key
        (counted at the first of them)."""
        return ()

    def initial_guess(self, sample: Encoded, weights: np.ndarray, rng: InitRandom) -> Distribution:
        """A starting model from a small weighted sample of rows (before the first full E-step).

        The default accumulates the sample with seeded random posteriors and estimates;
        combinators recurse so that each latent node can seed itself (k-means++ for Gaussian
        mixtures).
        """
        acc = self.accumulator_factory().make()
        acc.seq_initialize(sample, weights, rng)
        return self.estimate(float(weights.sum()), acc.value())


def _taking_frozen(init: Callable[..., None]) -> Callable[..., None]:
    if getattr(init, "takes_frozen", False):
        return init

    @functools.wraps(init)
    def __init__(self: Estimator, *args: Any, frozen: Sequence[str] = (), **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        names = (frozen,) if isinstance(frozen, str) else tuple(frozen)
        if not all(isinstance(n, str) for n in names):
            raise ParameterError(f"{type(self).__name__}: frozen must be parameter names, got "
                                 f"{frozen!r:.80}")
        declared = getattr(self.distribution_class, "parameter_coordinates", None)
        unknown = [n for n in names if declared is not None and n not in declared]
        if unknown:
            raise ParameterError(f"{type(self).__name__}: frozen names {unknown[0]!r}, not a "
                                 f"parameter of {self.distribution_class.__name__} (its "
                                 f"parameters: {', '.join(declared)})")
        if names:  # (unset, the class's empty default: reprs stay as they were)
            self.frozen = names

    __init__.takes_frozen = True  # type: ignore[attr-defined]
    return __init__


def _keeping_frozen(bind: Callable[..., Estimator]) -> Callable[..., Estimator]:
    @functools.wraps(bind)
    def keeping(self: Estimator, encoder: Encoder) -> Estimator:
        bound = bind(self, encoder)
        if self.frozen and bound is not self:
            bound.frozen = self.frozen
        return bound

    return keeping


class Sampler:
    """Draws raw values (in the same format the encoder reads) from a distribution.

    ``sample()`` gives one value, ``sample(n)`` a batch of ``n``.
    """

    def __init__(self, dist: Distribution, seed: int | np.random.Generator | None = None):
        self.dist = dist
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    def sample(self, n: int | None = None) -> Any:
        if n is None:
            batch = self.dist._sample(1, self.rng)
            return batch[0]
        if int(n) < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return self.dist._sample(int(n), self.rng)


_FAMILIES: dict[str, type[Distribution]] = {}
#: Spec kind -> estimator class of every registered leaf family (``mixfold.spec`` reads it):
#: filled when a family registered with a kind has its estimator declared.
LEAF_KINDS: dict[str, type[Estimator]] = {}


def family(name: str, kind: str | None = None) -> Callable[[type], type]:
    """Register a distribution class under ``name`` for model files (``mixfold.load``) and, for
    a leaf, under the spec kind ``kind`` (default: the leaf's name in snake case,
    ``"NegativeBinomial"`` -> ``"negative_binomial"``; a class that is not a
    :class:`~mixfold.families.contract.LeafDistribution` has one only when ``kind`` is given).
    Its estimator is the class that declares it as ``distribution_class``: the one place a
    family is named.

    >>> snake_case("NegativeBinomial"), snake_case("LDA"), snake_case("VonMises")
    ('negative_binomial', 'lda', 'von_mises')
    """

    def register(cls: type) -> type:
        if name in _FAMILIES and _FAMILIES[name] is not cls:
            raise ValueError(f"family name {name!r} registered twice")
        spec_kind = kind if kind is not None else \
            (snake_case(name) if getattr(cls, "spec_kind", None) == "" else None)
        if spec_kind is not None and spec_kind in LEAF_KINDS and \
                LEAF_KINDS[spec_kind].distribution_class is not cls:
            raise ValueError(f"spec kind {spec_kind!r} registered twice")
        _FAMILIES[name] = cls
        cls.family_name = name
        cls.spec_kind = spec_kind
        return cls

    return register


def snake_case(name: str) -> str:
    """A family's name as a spec kind: words joined by underscores, lower case."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def family_class(name: str) -> type[Distribution]:
    """The distribution class registered under ``name``."""
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown family {name!r}; known: {sorted(_FAMILIES)}") from None


#: Methods over many rows that take encoded rows or raw ones (encoded by the model's encoder).
ROW_METHODS = ("seq_log_density", "seq_posterior", "seq_viterbi")


def _taking_raw_rows(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def over_rows(self: Distribution, rows: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(rows, Encoded):
            rows = self.encoder().encode(rows)
        return method(self, rows, *args, **kwargs)

    over_rows.takes_raw_rows = True  # type: ignore[attr-defined]
    return over_rows


class Distribution(ABC):
    """A distribution with parameters: scores rows, samples, and knows its estimator and encoder.

    ``seq_log_density`` (and ``seq_posterior`` / ``seq_viterbi`` where a family has them) take
    encoded rows (``model.encoder().encode(rows)``, encoded once for repeated calls) or the raw
    rows themselves:

    >>> import numpy as np
    >>> from mixfold import GaussianDistribution, MixtureDistribution
    >>> m = MixtureDistribution([GaussianDistribution(0, 1), GaussianDistribution(5, 1)],
    ...                         [0.5, 0.5])
    >>> m.seq_posterior(np.array([0.1, 4.8])).argmax(axis=1).tolist()
    [0, 1]
    >>> bool(np.array_equal(m.seq_log_density([0.1, 4.8]),
    ...                     m.seq_log_density(m.encoder().encode([0.1, 4.8]))))
    True
    """

    family_name: ClassVar[str] = ""
    #: Its kind in specs (``mixfold.spec``), or None: set by ``@family``.
    spec_kind: ClassVar[str | None] = None
    #: The estimator class that declares this one its ``distribution_class``.
    estimator_class: ClassVar[type[Estimator]]
    #: How each parameter of ``to_dict`` maps to flat coordinates (``"real"``,
    #: ``"positive"``, ``"unit"``, ``"simplex"``, ``"covariance"``, ``"fixed"``, ``"part"``,
    #: ``"parts"``: :mod:`mixfold.families._flat`), for accelerated EM; None: not declared,
    #: and a fit of a tree holding the family runs plain EM.
    parameter_coordinates: ClassVar[Mapping[str, str] | None] = None
    #: Parameters the M-step solves together: ``frozen=`` holds all of them or none.
    estimated_jointly: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ROW_METHODS:  # every family's own row methods take raw rows too
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "takes_raw_rows", False):
                setattr(cls, name, _taking_raw_rows(method))

    @abstractmethod
    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        """Log-density of every encoded row, array of shape (n_rows,), vectorized over rows."""

    @abstractmethod
    def encoder(self) -> Encoder:
        """The encoder for values this distribution scores."""

    @abstractmethod
    def estimator(self, **options: Any) -> Estimator:
        """An estimator of this distribution's structure (the start of a refit)."""

    @abstractmethod
    def _sample(self, n: int, rng: np.random.Generator) -> Any:
        """``n`` raw values drawn with ``rng``."""

    @abstractmethod
    def _params(self) -> dict[str, Any]:
        """JSON-ready parameters for ``to_dict``."""

    @classmethod
    @abstractmethod
    def _from_params(cls, params: dict[str, Any]) -> Distribution:
        """Inverse of ``_params``."""

    def parts(self) -> tuple[Distribution, ...]:
        """The child distributions of a combinator, in its accumulator's ``children()`` order."""
        return ()

    @classmethod
    def hold_parameters(cls, estimated: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
        """The parameters (``to_dict`` form) an M-step estimates with ``held`` ones fixed, from
        the M-step's ``estimated`` ones: ``held`` put back, which is that estimate where no
        other parameter's M-step reads a held one (a family where one does overrides this)."""
        return {**estimated, **held}

    def n_parameters(self) -> int:
        """The number of free parameters (probabilities that sum to one count one less; values
        an estimator fixes, like a binomial's ``n``, are not counted), children included.

        >>> from mixfold import GaussianDistribution, MixtureDistribution
        >>> MixtureDistribution([GaussianDistribution(0, 1)] * 3, [0.2, 0.3, 0.5]).n_parameters()
        8
        """
        raise NotImplementedError(f"{type(self).__name__} does not count its parameters")

    def log_density(self, x: Any) -> float:
        """Log-density of one value ``x``."""
        return float(self.seq_log_density(self.encoder().encode([x]))[0])

    def sampler(self, seed: int | np.random.Generator | None = None) -> Sampler:
        """A seeded sampler: ``dist.sampler(0).sample(100)``."""
        return Sampler(self, seed)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: ``{"family": name, **parameters}``."""
        return {"family": self.family_name, **self._params()}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Distribution:
        """The distribution described by ``to_dict`` output (no code is run from the data)."""
        if not isinstance(d, dict) or not isinstance(d.get("family"), str):
            raise ValueError(f"a distribution dict needs a 'family' name, got {type(d).__name__}")
        params = {k: v for k, v in d.items() if k != "family"}
        return family_class(d["family"])._from_params(params)

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(self.family_name)

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({body})"


def is_na(v: Any) -> bool:
    """Whether ``v`` is pandas' ``NA`` or ``NaT``, or NumPy's ``NaT``: the missing values
    pandas columns hold besides ``None`` and float NaN (pandas is not imported).

    >>> import numpy as np
    >>> is_na(np.datetime64("NaT")), is_na(None), is_na(float("nan"))
    (True, False, False)
    """
    cls = type(v)
    if cls.__name__ in ("NAType", "NaTType") and cls.__module__.startswith("pandas"):
        return True
    return isinstance(v, (np.datetime64, np.timedelta64)) and bool(np.isnat(v))


def _not_free(est: Estimator, dist: Distribution, acc: Accumulator, seen: set[str]) -> int:
    """The parameters of ``dist``'s tree its count holds that ``est``'s tree does not fit
    freely: repeats of a node tied by ``keys``, held ones, repeats of a shared covariance."""
    if acc.keys is not None:
        if acc.keys in seen:
            return dist.n_parameters()
        seen.add(acc.keys)
    out = est.held_parameters(dist)
    shared: set[str] = set()
    for e, d, a in zip(est.parts(), dist.parts(), acc.children()):
        out += _not_free(e, d, a, seen)
        for key, count in e.shared_parameters(d):
            out += count if key in shared else 0
            shared.add(key)
    return out


def _frozen_count(dist: Distribution, names: Sequence[str]) -> int:
    """How many free parameters ``dist``'s parameters ``names`` hold, read from how each maps
    to coordinates (a probability vector has one fewer, a covariance its lower triangle)."""
    if not names:
        return 0
    params, kinds = dist.to_dict(), type(dist).parameter_coordinates or {}
    out = 0
    for name in names:
        kind, value = kinds.get(name, "real"), params[name]
        if kind == "part":
            out += 0 if value is None else Distribution.from_dict(value).n_parameters()
        elif kind == "parts":
            children = value.values() if isinstance(value, dict) else value
            out += sum(Distribution.from_dict(c).n_parameters() for c in children)
        elif kind == "simplex":
            v = np.asarray(value, dtype=float)
            out += v.size - (v.size // v.shape[-1] if v.size else 0)
        elif kind == "covariance":
            v = np.asarray(value, dtype=float)
            d = v.shape[-1]
            out += (v.size // (d * d)) * d * (d + 1) // 2
        elif kind != "fixed":
            out += int(np.size(value))
    return out
