"""The family contract in one file: what a family writes, and what the package derives from it.

Read it top to bottom; a family imports everything it needs from here.

**1. The roles.** A model is a tree of distributions. Four roles make a family (their classes
are defined in :mod:`mixfold.families._protocol` and exported here):

- :class:`~mixfold.Distribution`: parameters; scores a batch of encoded rows
  (``seq_log_density``), samples, goes to and from a dict (model files).
- :class:`~mixfold.Encoder`: raw rows -> ``Encoded`` arrays, once per fit; a bad value raises
  :class:`~mixfold.DataError` naming its row.
- :class:`~mixfold.Accumulator`: the weighted sufficient statistics of a batch, in float64
  arrays of a fixed size, so that shards' payloads add up element by element; its ``value()``
  is a ``NodeStatistics`` (its own arrays, its children's).
- :class:`~mixfold.Estimator`: statistics -> a new distribution (the M-step), with its options
  declared once in ``option_rules``; every estimator takes ``keys=`` (tied parameters) and
  ``frozen=`` (parameters held at the start's value).

**2. Registration, once.** ``@family("Name")`` on the distribution registers the name its model
files carry and, for a leaf, its kind in specs (``"name"`` in snake case); the estimator that
declares the distribution its ``distribution_class`` is the family's estimator. Nothing else
names a family (the package's built-in families are also exported from ``mixfold``).

**3. A leaf in six methods** (eight with linear terms). A leaf (one value per row, no latent
variable) subclasses :class:`LeafDistribution` and :class:`LeafEstimator` and writes:

======================  ========================================================================
``__init__``            its parameters, checked (a bad one raises ``ParameterError``)
``log_densities``       the log-density of a batch of values
``features``            its statistics: the weights' sum, then the weighted sum of each feature
                        (named by a ``Statistics`` NamedTuple)
``_sample``             ``n`` values drawn with a generator
estimator ``__init__``  its options (checked by ``self.check_options``)
``from_statistics``     the M-step: a ``Statistics`` record -> a distribution
======================  ========================================================================

and declares ``domain`` (the values its encoder accepts: ``DOMAINS``),
``parameter_coordinates`` (its parameters in its constructor's order, and how accelerated EM
moves each: :mod:`mixfold.families._flat`) and ``Statistics``. The encoder, the estimator's
accumulator (with the seeded start and the ``dd`` refusal), the dict form, ``n_parameters``,
``repr``, ``keys=`` and ``frozen=`` follow, and so do the planner's cost (``row_work``,
``param_bytes``: declared where a row costs more than a few flops) and, for a family declaring
``SeedsFromValues`` or ``SeedsFromLogs``, the points a mixture seeds from.

A leaf whose statistics are not plain feature sums (summed about a reference point, or
depending on the current parameters: an iterative M-step) names an ``accumulator_class`` of its
own, a :class:`RecordSums` (its ``Statistics`` in one float64 array; a :class:`FieldSums`: one
array a field) that names its ``family`` and writes how a batch adds to them, ``_add(values,
weights)``; a :class:`ModelStatsAccumulator` also writes ``_add_model(values, weights, model)``,
what the E-step adds under the current parameters (``_add`` is then the seeded start's). Its
estimator's ``from_statistics`` still reads a ``Statistics`` record. A family whose held
location re-centres its estimated spread (``frozen=``) names the two in ``location_spread``.

A leaf on vectors of length D subclasses :class:`VectorLeafDistribution` and
:class:`VectorLeafEstimator`: it writes ``log_densities`` of complete rows (n_rows, D),
``observed_log_density`` of rows that miss entries (``missing=True``), its ``Statistics`` and
an ``accumulator_class`` made with D (``missing_accumulator_class`` for rows that may miss
entries); its encoder, estimator, ``bind``, dict form, ``n_parameters`` and cost follow, and
what it does for K components at once is a mixin of its own module.

**4. Linear terms, once.** A leaf whose log-density is ``coef . phi(x) + const + base(x)``
subclasses :class:`LinearLeafDistribution` and adds ``natural`` (the :class:`LinearForm` of its
parameters on its ``features``) and, where a per-row term is the same for every component,
``base``. From that one declaration follow the stacked scoring of K components, the stacked
update, and the fused linear E-step in every precision band (:mod:`mixfold.compute.linear`).

**5. Capabilities.** Anything more a family can do it declares by inheriting a mixin of
:mod:`mixfold.capabilities` (exported here; they live below the compute layer, which asks for
them): ``StackedScoring``, ``StackedUpdate``, ``LinearInFeatures``, ``LinearInFeaturesInBands``,
``FusedFold``, ``RunsInBands``, ``CompensatedAccumulation``, ``CentredStatistics``,
``RelativeScoring``, ``SeedsFromPoints``, ``SharesCovariance``, ``FoldsOnTorch``,
``VariationalBound``.

**6. Combinators.** A family with children (a mixture, a record) also says how its children
are folded, through the hooks of :mod:`mixfold.families._hooks` (exported here), which the
model-parallel executor drives: ``FoldsChildren`` / ``ScoresChildren`` (each child once),
``ScoresColumns`` / ``FoldsColumns`` (K units into the columns of one matrix),
``ScoresRanges`` / ``FoldsRanges`` (ranges of units between central steps).

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonDistribution, PoissonEstimator
>>> acc = PoissonEstimator().accumulator_factory().make()
>>> acc.seq_update(ArrayEncoded(np.array([1.0, 3.0])), np.ones(2), None)
>>> stats = PoissonDistribution.Statistics(*acc.value().own[0])
>>> stats._fields, float(stats.weight), float(stats.total)
(('weight', 'total'), 2.0, 4.0)
>>> PoissonEstimator().estimate(2.0, acc.value())
PoissonDistribution(lam=2.0)
"""

from __future__ import annotations

import copy
import functools
import inspect
import operator
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from mixfold.capabilities import (
    CentredStatistics,
    CompensatedAccumulation,
    FoldsOnTorch,
    FusedFold,
    LinearInFeatures,
    LinearInFeaturesInBands,
    RelativeScoring,
    RunsInBands,
    SeedsFromPoints,
    SharesCovariance,
    StackedScoring,
    StackedUpdate,
    VariationalBound,
)
from mixfold.compute.feature_cache import cache_for
from mixfold.compute.linear import LinearTerms, box_peak, feature_ranges
from mixfold.decomposition import Decomposition, declared_param_bytes
from mixfold.families._encoders import (DOMAINS, NumericEncoder, VectorEncoder, bound_vector,
                                        vector_encoder)
from mixfold.families._frozen import recentred_spread
from mixfold.families._levels import level_from_json, level_to_json
from mixfold.families._missing import (MissingPatterns, fill_for_points, has_missing,
                                       require_native)
from mixfold.families._hooks import (
    FoldsChildren,
    FoldsColumns,
    FoldsRanges,
    ScoresChildren,
    ScoresColumns,
    ScoresRanges,
)
from mixfold.families._protocol import (
    Accumulator,
    AccumulatorFactory,
    ArrayEncoded,
    Distribution,
    Encoded,
    Encoder,
    Estimator,
    InitRandom,
    NodeStatistics,
    Sampler,
    family,
)
from mixfold.precision import BandSupportError, log_density_in_band, native_dtype
from mixfold.precision.bands import FLOAT64, Precision

__all__ = [
    # 1. the roles
    "Distribution", "Encoder", "Accumulator", "AccumulatorFactory", "Estimator", "Sampler",
    "Encoded", "ArrayEncoded", "InitRandom", "NodeStatistics",
    # 2. registration
    "family",
    # 3. a leaf
    "LeafDistribution", "LeafEstimator", "LeafAccumulator", "RecordSums", "FieldSums",
    "ModelStatsAccumulator",
    "FeatureSums", "accumulator_for", "NumericEncoder", "VectorEncoder", "DOMAINS",
    "SeedsFromValues", "SeedsFromLogs", "SeedsFromVectors",
    "ShapedLeafDistribution", "ShapedLeafEstimator", "LevelSums", "ColumnwiseUpdate",
    "StacksOneShape", "transposed_features", "VectorLeafDistribution", "VectorLeafEstimator",
    # 4. linear terms
    "LinearLeafDistribution", "LinearForm", "LinearFeatureSums",
    # 5. capabilities
    "StackedScoring", "StackedUpdate", "LinearInFeatures", "LinearInFeaturesInBands",
    "FusedFold", "RunsInBands", "CompensatedAccumulation", "CentredStatistics",
    "RelativeScoring", "SeedsFromPoints", "SharesCovariance", "FoldsOnTorch", "VariationalBound",
    # 6. combinators' hooks
    "FoldsChildren", "ScoresChildren", "ScoresColumns", "FoldsColumns", "ScoresRanges",
    "FoldsRanges",
]


# ---------------------------------------------------------------------------------------------
# 3. A leaf: the distribution


class LeafDistribution(Distribution):
    """A family of one value per row with no latent variable (the table in the module's
    docstring says what it writes). Its parameters are attributes named as in
    ``parameter_coordinates``, whose order is its constructor's."""

    #: "": ``@family`` names its spec kind after it.
    spec_kind: ClassVar[str | None] = ""
    #: The values its encoder accepts (a key of ``DOMAINS``: ``"count"``, ``"real"``, ...).
    domain: ClassVar[str]
    #: A NamedTuple naming its statistics, in payload order.
    Statistics: ClassVar[type[tuple[Any, ...]]]
    #: The planner's work to score and add a row, in scalar leaves (a few flops each).
    row_work: ClassVar[float] = 1.0
    #: The bytes its parameters hold; None: 8 a parameter (more where it caches a normaliser).
    param_bytes: ClassVar[int | None] = None
    #: Its (location, spread) parameters where a held location re-centres the estimated spread
    #: on it (``frozen=``: the spread about the held location, not about the estimated one).
    location_spread: ClassVar[tuple[str, str] | None] = None

    @abstractmethod
    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        """The log-density of each value of ``x`` (float64, as encoded), computed in ``dt``
        (float64, or float32 in that band)."""

    @staticmethod
    def features(x: np.ndarray) -> tuple[np.ndarray, ...]:
        """The features ``phi_j(x)`` (float64, one array per feature) whose weighted sums
        follow the weights' sum in ``Statistics``."""
        raise NotImplementedError("a leaf without features names its own accumulator_class")

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.log_densities(enc.values, native_dtype(precision)).astype(np.float64,
                                                                               copy=False)

    def encoder(self) -> Encoder:
        return NumericEncoder(self.domain)

    def estimator(self, **options: Any) -> Estimator:
        return self.estimator_class(**options)

    def n_parameters(self) -> int:
        return sum(c != "fixed" for c in self.parameter_coordinates.values())

    def _params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.parameter_coordinates}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> Distribution:
        return cls(*(p[name] for name in cls.parameter_coordinates))

    @classmethod
    def hold_parameters(cls, estimated: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
        if cls.location_spread is None:
            return super().hold_parameters(estimated, held)
        return recentred_spread(estimated, held, *cls.location_spread)

    def decomposition(self) -> Decomposition:
        """Atomic: one unit of per-row work, replicated whole."""
        param_bytes = declared_param_bytes(self) if self.param_bytes is None else self.param_bytes
        return Decomposition.atomic(row_work=self.row_work, param_bytes=param_bytes)


class SeedsFromValues(SeedsFromPoints):
    """A leaf whose values are points k-means++ can seed a mixture from, as they are."""

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, 1)."""
        return enc.values[:, None]


class SeedsFromVectors(SeedsFromPoints):
    """A vector leaf whose rows are points k-means++ can seed a mixture from, as they are."""

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows as points (n_rows, D) (a missing entry: its column's mean)."""
        return fill_for_points(enc)


class SeedsFromLogs(SeedsFromPoints):
    """A leaf of positive values spread over orders of magnitude: seeded on their logs
    (without, k-means++ on the values leaves the small ones' components too alike to part)."""

    @staticmethod
    def stack_points(enc: Encoded) -> np.ndarray:
        """The rows' logs as points (n_rows, 1)."""
        return np.log(enc.values)[:, None]


# ---------------------------------------------------------------------------------------------
# 3. A leaf: its statistics


class LeafAccumulator(Accumulator):
    """A leaf's statistics are weighted sums of functions of its values; no latent variables.

    Subclasses implement ``_add(values, weights)``; updating and initialising are the same sum.
    """

    def __init__(self, keys: str | None = None):
        self.keys = keys

    @abstractmethod
    def _add(self, values: np.ndarray, weights: np.ndarray) -> None:
        """Add weighted statistics of the encoded values (array with rows on axis 0)."""

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Any,
                   precision: Precision = FLOAT64) -> None:
        if precision.compensated:
            self.seq_update_dd(enc, weights, np.zeros_like(weights), model)
            return None
        if isinstance(self, CentredStatistics) and model is not None and not self.has_point():
            self.set_reference(self.stack_reference([model])[0])
        self._add(enc.values, weights)
        return None

    def seq_update_dd(self, enc: Encoded, w_hi: np.ndarray, w_lo: np.ndarray, model: Any,
                      ops: Any = None) -> None:
        """The ``dd`` band: add the rows with double-double weights ``w_hi + w_lo`` into
        double-double statistics (a :class:`CompensatedAccumulation`'s ``_add_dd``)."""
        if not isinstance(self, CompensatedAccumulation):
            raise BandSupportError(f"precision 'dd' cannot run {type(self).__name__}: it has no "
                                   f"double-double accumulation of its statistics")
        if isinstance(self, CentredStatistics) and model is not None and not self.has_point():
            self.set_reference(self.stack_reference([model])[0])
        self._add_dd(enc.values, w_hi, w_lo)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        self._add(enc.values, weights)


class ModelStatsAccumulator(LeafAccumulator):
    """A leaf whose E-step statistics depend on the current parameters (the posterior of a
    latent scale, derivatives around the current shape): the E-step adds rows through
    ``_add_model(values, weights, model)``; initialisation, which has no model yet, through
    ``_add`` (moments the estimator starts from)."""

    @abstractmethod
    def _add_model(self, values: np.ndarray, weights: np.ndarray, model: Any) -> None:
        """Add weighted statistics of the encoded values under ``model``."""

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Any,
                   precision: Precision = FLOAT64) -> None:
        if precision.compensated:
            self.seq_update_dd(enc, weights, np.zeros_like(weights), model)  # raises: no dd sums
        self._add_model(enc.values, weights, model)
        return None


class RecordSums(LeafAccumulator):
    """A leaf's statistics as one float64 array ``sums``, entry by entry the fields of its
    ``family``'s ``Statistics`` (the payload shards add up); a subclass writes ``_add``."""

    family: ClassVar[type[LeafDistribution]]

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(len(self.family.Statistics._fields))

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]


class FieldSums(LeafAccumulator):
    """A leaf's statistics as one float64 array (1,) a field of its ``family``'s
    ``Statistics``, held as attributes named as the fields (what
    :class:`~mixfold.families._centred.CentredMoments` reads); a subclass writes ``_add``."""

    family: ClassVar[type[LeafDistribution]]
    _fields: ClassVar[Any]  # its arrays as a tuple, read at the speed of a written list

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if hasattr(cls, "family"):
            names = cls.family.Statistics._fields
            cls._fields = operator.attrgetter(*names) if len(names) > 1 else \
                staticmethod(lambda acc: (getattr(acc, names[0]),))

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        for name in self.family.Statistics._fields:
            setattr(self, name, np.zeros(1))

    def own_arrays(self) -> list[np.ndarray]:
        return list(self._fields(self))


class FeatureSums(RecordSums):
    """The statistics of a leaf that declares ``features``: the weights' sum and the weighted
    sum of each feature, one float64 array in the order of the family's ``Statistics``. One
    class per family (:func:`accumulator_for`), so a mixture stacks only its own kind."""

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        self.sums += (w.sum(), *(w @ f for f in self.family.features(x)))

    def __reduce__(self) -> tuple[Any, ...]:  # made per family: pickled as its family's
        return _empty_accumulator, (self.family,), self.__dict__


class LinearFeatureSums(FeatureSums, StackedUpdate, LinearInFeatures):
    """The statistics of a :class:`LinearLeafDistribution`: feature sums, added for K
    components at once and by the fused linear E-step."""

    family: ClassVar[type[LinearLeafDistribution]]

    @staticmethod
    def stack_update(accs: Sequence[FeatureSums], enc: Encoded, resp: np.ndarray) -> None:
        """Column by column, so any range of components added apart gets the same bits; the
        dot products are ``einsum`` loops, not BLAS calls (no thread wake-ups per column)."""
        features = accs[0].family.features(enc.values)
        for k, acc in enumerate(accs):
            acc.sums += (resp[:, k].sum(), *(np.einsum("i,i->", f, resp[:, k]) for f in features))

    @staticmethod
    def linear_terms(accs: Sequence[FeatureSums], components: Sequence[LinearLeafDistribution],
                     enc: Encoded) -> LinearTerms | None:
        """The :class:`~mixfold.compute.linear.LinearTerms` of the components' natural
        parameters on the family's features, the base added in float64; ``None`` when one
        falls outside the form."""
        forms = [c.natural() for c in components]
        if any(f is None for f in forms):
            return None
        cls, x = type(components[0]), enc.values
        features = cls.features(x)

        def write(lo: int, hi: int, out: np.ndarray) -> None:
            for j, f in enumerate(features):
                out[:, j] = f[lo:hi].reshape(out.shape[0], -1)

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, m, s in zip(accs, mass, sums):
                acc.sums += (m, *s)

        coef, const = np.array([f.coef for f in forms]), np.array([f.const for f in forms])
        return LinearTerms(coef, const, write, add_sums, base=cls.base(x),
                           peak=box_peak(coef, const, _feature_ranges(cls, x, features)),
                           source=x,
                           key=(cls.family_name,))


def _feature_ranges(family: type[LeafDistribution], x: np.ndarray,
                    features: Sequence[np.ndarray]) -> np.ndarray:
    """The features' ranges over the rows (:func:`~mixfold.compute.linear.feature_ranges`), kept
    with the fit's resident features: they depend on the rows only, not on the model."""
    store = cache_for((family.family_name, "feature ranges"), [x], 16 * len(features), x.nbytes)
    ranges = None if store is None else store.get("ranges")
    if ranges is None:
        ranges = feature_ranges(features)
        if store is not None:
            store["ranges"] = ranges
    return ranges


@functools.cache
def accumulator_for(family: type[LeafDistribution]) -> type[FeatureSums]:
    """The accumulator class of a leaf that declares ``features`` (one per family: a mixture
    stacks its components only when their accumulators are of one class).

    >>> from mixfold.families.bernoulli import BernoulliDistribution
    >>> accumulator_for(BernoulliDistribution).__name__
    'BernoulliAccumulator'
    """
    base = LinearFeatureSums if issubclass(family, LinearLeafDistribution) else FeatureSums
    name = family.__name__.removesuffix("Distribution") + "Accumulator"
    return type(base)(name, (base,), {"family": family, "__module__": family.__module__,
                                      "__doc__": f"The statistics of {family.__name__}."})


def _empty_accumulator(family: type[LeafDistribution]) -> FeatureSums:
    cls = accumulator_for(family)
    return cls.__new__(cls)


# ---------------------------------------------------------------------------------------------
# 3. A leaf: the estimator


class LeafEstimator(Estimator):
    """Base of leaf estimators: the M-step reads the statistics as the family's named
    ``Statistics`` (:meth:`from_statistics`); the accumulator is the family's
    (:func:`accumulator_for`) unless ``accumulator_class`` names another."""

    accumulator_class: ClassVar[type[LeafAccumulator] | None] = None
    #: The parameters of the estimate when no row carries weight, given before the statistics
    #: are read; None: ``from_statistics`` answers for itself (as a prior does).
    empty_parameters: ClassVar[tuple[Any, ...] | None] = None

    def __init__(self, keys: str | None = None):
        self.keys = keys

    def _new_accumulator(self) -> LeafAccumulator:
        cls = self.accumulator_class or accumulator_for(self.distribution_class)
        return cls(keys=self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        return AccumulatorFactory(self._new_accumulator)

    def encoder(self) -> Encoder:
        return NumericEncoder(self.distribution_class.domain)

    def estimate(self, nobs: float, stats: Any) -> Distribution:
        own, _ = stats  # one array of the fields (RecordSums), or one array a field (FieldSums)
        if self.empty_parameters is not None and not np.ravel(own[0])[0] > 0:  # the weight
            return self.distribution_class(*self.empty_parameters)
        return self.from_statistics(self.distribution_class.Statistics(*(
            own[0] if len(own) == 1 else own)))

    def from_statistics(self, stats: Any) -> Distribution:
        """The M-step of a leaf: its distribution's ``Statistics`` -> a distribution,
        with a sensible answer when no row carries weight."""
        raise NotImplementedError(f"{type(self).__name__} estimates from its own statistics")

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v is not None)
        return f"{type(self).__name__}({opts})"


# ---------------------------------------------------------------------------------------------
# 4. Linear terms


class LinearForm(NamedTuple):
    """One component's ``log p(x) = coef . phi(x) + const + base(x)``: its natural parameters
    ``coef`` (one per feature) and the rest of its log-normaliser ``const``."""

    coef: tuple[float, ...]
    const: float


class LinearLeafDistribution(LeafDistribution, StackedScoring):
    """A leaf whose log-density is linear in its features: it declares :meth:`natural` (and
    :meth:`base` where it has one), and scores K components in one call from them."""

    @abstractmethod
    def natural(self) -> LinearForm | None:
        """Its :class:`LinearForm` on ``features``, or ``None`` where its parameters fall
        outside the form (a Poisson of rate 0: ``0 * log 0`` is no product a GEMM forms)."""

    @staticmethod
    def base(x: np.ndarray) -> np.ndarray | None:
        """A per-row term the same for every component (float64), or ``None``: added in
        float64 by the fused E-step, never rounded to a band as a feature would be."""
        return None

    @classmethod
    def stack_log_density(cls, components: Sequence[LinearLeafDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-densities of all K components at once, (n_rows, K) in Fortran order; a
        component outside the form is scored by its own ``seq_log_density``."""
        dt = native_dtype(precision)
        forms = [c.natural() for c in components]
        features = [f.astype(dt, copy=False) for f in cls.features(enc.values)]
        coef = np.array([f.coef if f else (0.0,) * len(features) for f in forms], dtype=dt)
        const = np.array([f.const if f else 0.0 for f in forms], dtype=dt)
        out = np.multiply.outer(coef[:, 0], features[0])  # (K, n)
        for j in range(1, len(features)):
            out += np.multiply.outer(coef[:, j], features[j])
        out += const[:, None]
        base = cls.base(enc.values)
        if base is not None:
            out += base.astype(dt, copy=False)
        for k, f in enumerate(forms):
            if f is None:
                out[k] = components[k].seq_log_density(enc, precision)
        return out.T


# --- a leaf whose encoder carries its shape (a vocabulary: Categorical, Multinomial; a length:
# Dirichlet): it declares `encoder_class` and `carried`, and derives its encoder, its estimator of
# the same shape, the dict form (levels as JSON levels, arrays as lists), `n_parameters` (a simplex
# counts one less than its size), `bind` and the accumulator of that shape ---

class ShapedLeafDistribution(LeafDistribution):
    """A leaf whose encoder carries its shape (a vocabulary, a length). It declares
    ``encoder_class`` and ``carried`` (the options its encoder fixes and its estimator takes back:
    ``("levels",)``, ``("dim",)``; the first sizes the encoder and the statistics) and derives its
    encoder, its estimator of the same shape, the dict form (levels saved as JSON levels, arrays as
    lists, an ``optional_params`` entry left out at its default) and ``n_parameters`` (a simplex
    counts one less than its size)."""

    #: The encoder class; made with the first of ``carried``.
    encoder_class: ClassVar[type[Encoder]]
    #: The options its estimator takes from it (a refit keeps them).
    carried: ClassVar[tuple[str, ...]]
    #: Parameters model files may leave out (``to_dict`` does at the constructor's default).
    optional_params: ClassVar[tuple[str, ...]] = ()

    def encoder(self) -> Encoder:
        return self.encoder_class(getattr(self, self.carried[0]))

    def estimator(self, **options: Any) -> LeafEstimator:
        for name in self.carried:
            options.setdefault(name, getattr(self, name))
        return self.estimator_class(**options)

    def n_parameters(self) -> int:
        sizes = {"fixed": 0, "simplex": -1}
        return sum(0 if kind == "fixed" else np.size(getattr(self, name)) + sizes.get(kind, 0)
                   for name, kind in self.parameter_coordinates.items())

    def _params(self) -> dict[str, Any]:
        params = {}
        for name in self.parameter_coordinates:
            v = getattr(self, name)
            if name in self.optional_params and v == _default(type(self), name):
                continue
            params[name] = [level_to_json(x) for x in v] if name == "levels" else \
                v.tolist() if isinstance(v, np.ndarray) else v
        return params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> Distribution:
        return cls(**{name: [level_from_json(x) for x in p[name]] if name == "levels" else p[name]
                      for name in cls.parameter_coordinates
                      if name in p or name not in cls.optional_params})


@functools.cache
def _default(cls: type, name: str) -> Any:
    """The default of the constructor's parameter ``name``."""
    return inspect.signature(cls).parameters[name].default


@functools.cache
def _constructor_names(cls: type) -> tuple[str, ...]:
    """The names the constructor of ``cls`` takes (its signature read once per class)."""
    return tuple(p for p in inspect.signature(cls.__init__).parameters if p != "self")


class LevelSums(LeafAccumulator):
    """Statistics held as one float64 array per field of the family's ``Statistics`` (in its
    order; so is the payload): ``weight`` the weights' sum (one number), every other field one
    number per level or part. ``value().own`` is then ``Statistics(*own)``."""

    family: ClassVar[type[LeafDistribution]]

    def __init__(self, size: int, keys: str | None = None):
        super().__init__(keys)
        for name in self.family.Statistics._fields:
            setattr(self, name, np.zeros(1 if name == "weight" else size))

    def own_arrays(self) -> list[np.ndarray]:
        return [getattr(self, name) for name in self.family.Statistics._fields]


class ColumnwiseUpdate(StackedUpdate):
    """K components' statistics added column by column through ``_add`` (so any range of
    components added apart gets the same bits)."""

    @staticmethod
    def stack_update(accs: Sequence[LeafAccumulator], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights."""
        for k, acc in enumerate(accs):
            acc._add(enc.values, resp[:, k])


class StacksOneShape(StackedScoring):
    """Components are scored together only when they have one shape (the first of
    ``carried``)."""

    @classmethod
    def can_stack(cls, components: Sequence[Any]) -> bool:
        return len({getattr(c, cls.carried[0]) for c in components}) == 1


class ShapedLeafEstimator(LeafEstimator):
    """The estimator of a :class:`ShapedLeafDistribution`: its shape from the fitted encoder."""

    def _shape(self) -> Any:
        return getattr(self, self.distribution_class.carried[0])

    def encoder(self) -> Encoder:
        return self.distribution_class.encoder_class(self._shape())

    def bind(self, encoder: Encoder) -> LeafEstimator:
        name, cls = self.distribution_class.carried[0], self.distribution_class.encoder_class
        if not isinstance(encoder, cls) or getattr(encoder, name) is None:
            raise ValueError(f"{type(self).__name__} needs a fitted {cls.__name__}, got "
                             f"{encoder!r}")
        bound = copy.copy(self)
        setattr(bound, name, getattr(encoder, name))
        return bound

    def _new_accumulator(self) -> LeafAccumulator:
        shape, name = self._shape(), self.distribution_class.carried[0]
        if shape is None:
            raise ValueError(f"{type(self).__name__} has no {name}: give {name}= or let optimize "
                             f"learn {'them' if name == 'levels' else 'it'} when it encodes the "
                             f"data")
        return self.accumulator_class(shape if isinstance(shape, int) else len(shape), self.keys)

    def estimate(self, nobs: float, stats: Any) -> Distribution:
        own, _ = stats
        return self.from_statistics(self.distribution_class.Statistics(*own))


def transposed_features(phi: np.ndarray, out: np.ndarray) -> None:
    """``out[i, :, j] = phi[i * w + j]`` for ``out`` of shape (s, F, w) (the fused E-step's
    layout of per-row features ``phi`` of shape (s * w, F))."""
    s, f, w = out.shape
    np.copyto(out, phi.reshape(s, w, f).transpose(0, 2, 1), casting="same_kind")


# --- a leaf on vectors of length D (DiagonalGaussian, MultivariateGaussian, MultivariateStudentT):
# a shaped leaf whose encoder carries D and whether entries may be missing; it derives its
# encoder, estimator, dict form, `n_parameters` (a covariance counts its upper triangle), the
# planner's cost, and its scoring's dispatch (rows that miss entries, a band's own operations,
# float64 / float32) ---

class VectorLeafDistribution(ShapedLeafDistribution):
    """A leaf on vectors of length ``dim`` whose entries may be missing (``missing=True``). It
    writes ``log_densities(x, dt)`` for complete rows (n_rows, D), ``observed_log_density``
    for rows that miss entries (their observed coordinates' density), and, running in bands,
    ``band_log_density``; ``row_work`` (per row, in scalar leaves) where D^2 work is its cost.
    Its first parameter is a vector of length D."""

    encoder_class = VectorEncoder
    carried = ("dim", "missing")
    optional_params = ("missing",)

    @property
    def dim(self) -> int:
        """The length D of the vectors."""
        return len(getattr(self, next(iter(self.parameter_coordinates))))

    @property
    def row_work(self) -> float:  # type: ignore[override]
        """D values to score and accumulate per row."""
        return float(self.dim)

    @property
    def param_bytes(self) -> int:  # type: ignore[override]
        """The bytes of the arrays it holds (its parameters and their factors)."""
        return sum(a.nbytes for a in vars(self).values() if isinstance(a, np.ndarray))

    def encoder(self) -> Encoder:
        return VectorEncoder(self.dim, self.missing)

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        """The log-density of complete rows ``x`` (n_rows, D) computed in ``dt`` (a family that
        scores in float64 in every band writes its own ``seq_log_density`` instead)."""
        raise NotImplementedError(f"{type(self).__name__} scores in its seq_log_density")

    def observed_log_density(self, patterns: MissingPatterns) -> np.ndarray:
        """The log-density of each row's observed coordinates (rows that miss entries)."""
        raise NotImplementedError(f"{type(self).__name__} scores no rows with missing entries")

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if has_missing(enc):
            require_native(precision, self.family_name)
            return self.observed_log_density(enc.patterns)
        if not precision.native:
            return log_density_in_band(self, enc, precision)
        return self.log_densities(enc.values, native_dtype(precision)).astype(np.float64,
                                                                               copy=False)

    def n_parameters(self) -> int:
        d = self.dim
        sizes = {"fixed": 0, "covariance": d * (d + 1) // 2}
        return sum(sizes.get(kind, np.size(getattr(self, name)))
                   for name, kind in self.parameter_coordinates.items())


class VectorLeafEstimator(ShapedLeafEstimator):
    """The estimator of a :class:`VectorLeafDistribution`: ``dim`` (``None``: learnt when the
    data are encoded) and ``missing`` among its constructor's options, each held as the
    attribute of its name; rows that may miss entries add to ``missing_accumulator_class``."""

    dim: int | None
    missing: bool
    #: The accumulator of rows that may miss entries (``missing=True``).
    missing_accumulator_class: ClassVar[type[LeafAccumulator] | None] = None

    def encoder(self) -> Encoder:
        return vector_encoder(self.dim, self.missing)

    def bind(self, encoder: Encoder) -> LeafEstimator:
        """A new estimator of the fitted length (its options checked again: rows that miss
        entries may rule some out)."""
        dim, missing = bound_vector(self, encoder)
        options = {name: getattr(self, name) for name in _constructor_names(type(self))
                   if name != "frozen"}
        return type(self)(**{**options, "dim": dim, "missing": missing})

    def _new_accumulator(self) -> LeafAccumulator:
        cls = self.missing_accumulator_class if self.missing else self.accumulator_class
        if self.dim is None:
            raise ValueError(f"{type(self).__name__} has no dim: give dim= or let optimize "
                             f"learn it when it encodes the data")
        return cls(self.dim, self.keys)
