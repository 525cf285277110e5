"""Independent factors: Composite (tuple rows) and Record (named fields: dict rows, DataFrames)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import FusedFold, LinearInFeatures, StackedScoring, StackedUpdate
from mixfold.compute.row_blocks import run_each
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import DataError, DataTypeError
from mixfold.compute.band_engines import fused_linear_fold
from mixfold.families.units import stack_columns, stackable
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     ScoreChildren, ScoresChildren, fold_serially,
                                     score_serially)
from mixfold.families._protocol import (
    Accumulator,
    AccumulatorFactory,
    Distribution,
    Encoded,
    Encoder,
    Estimator,
    InitRandom,
    family,
)
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["CompositeDistribution", "CompositeEstimator", "RecordDistribution", "RecordEstimator",
           "FactorAccumulator", "FactorEncoded", "CompositeEncoder", "RecordEncoder",
           "records_log_densities"]


class FactorEncoded(Encoded):
    """One child encoding per factor, all with the same rows."""

    __slots__ = ("children", "n_rows", "start")

    def __init__(self, children: Sequence[Encoded], n_rows: int, start: int = 0):
        self.children = tuple(children)
        self.n_rows = int(n_rows)
        self.start = int(start)

    def rows(self, begin: int, end: int) -> FactorEncoded:
        end = min(end, self.n_rows)
        return FactorEncoded([c.rows(begin, end) for c in self.children], end - begin,
                             self.start + begin)

    def take(self, indices: np.ndarray) -> FactorEncoded:
        return FactorEncoded([c.take(indices) for c in self.children], len(indices))

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.children)

    def node_sizes(self) -> list[int]:
        return [self.n_rows] + [s for c in self.children for s in c.node_sizes()]

    def with_starts(self, starts: Iterator[int]) -> FactorEncoded:
        start = next(starts)
        return FactorEncoded([c.with_starts(starts) for c in self.children], self.n_rows, start)

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> FactorEncoded:
        children = [type(kids[0]).concat(kids) for kids in zip(*(p.children for p in parts))]
        return FactorEncoded(children, sum(p.n_rows for p in parts), parts[0].start)


def _encode_columns(encoders: Sequence[Encoder], columns: Sequence[Any], names: Sequence[Any],
                    n_rows: int) -> FactorEncoded:
    parts = []
    for enc, col, name in zip(encoders, columns, names):
        try:
            parts.append(enc.encode(col))
        except DataError as err:
            raise err.within(path_prefix=(name,)) from None
    return FactorEncoded(parts, n_rows)


def _fit_columns(encoders: Sequence[Encoder], columns: Sequence[Any],
                 names: Sequence[Any]) -> list[Encoder]:
    fitted = []
    for enc, col, name in zip(encoders, columns, names):
        try:
            fitted.append(enc.fit(col))
        except DataError as err:
            raise err.within(path_prefix=(name,)) from None
    return fitted


class CompositeEncoder(Encoder):
    """Splits tuple rows (or a 2-D array) into one column per factor."""

    def __init__(self, encoders: Sequence[Encoder]):
        self.encoders = tuple(encoders)

    def columns(self, values: Any) -> tuple[list[Any], int]:
        width = len(self.encoders)
        if isinstance(values, np.ndarray) and values.ndim == 2:
            if values.shape[1] != width:
                raise DataTypeError(f"expected rows of {width} fields, got an array of shape "
                                    f"{values.shape}")
            return [values[:, i] for i in range(width)], values.shape[0]
        rows = list(values)
        if not rows:
            return [[] for _ in range(width)], 0
        for i, r in enumerate(rows):
            if not isinstance(r, (tuple, list, np.ndarray)) or len(r) != width:
                got = f"{len(r)} fields" if isinstance(r, (tuple, list, np.ndarray)) else \
                    f"a {type(r).__name__}"
                raise DataTypeError(f"expected a tuple of {width} fields, got {got}", row=i)
        return [list(col) for col in zip(*rows)], len(rows)

    def fit(self, values: Any) -> CompositeEncoder:
        cols, _ = self.columns(values)
        return CompositeEncoder(_fit_columns(self.encoders, cols, range(len(self.encoders))))

    def encode(self, values: Any) -> FactorEncoded:
        cols, n = self.columns(values)
        return _encode_columns(self.encoders, cols, range(len(self.encoders)), n)

    def merge(self, other: Encoder) -> CompositeEncoder:
        if not isinstance(other, CompositeEncoder) or len(other.encoders) != len(self.encoders):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return CompositeEncoder([a.merge(b) for a, b in zip(self.encoders, other.encoders)])

    def __repr__(self) -> str:
        return f"CompositeEncoder({list(self.encoders)!r})"


class RecordEncoder(Encoder):
    """Reads named fields from dict rows, a mapping of columns, or a pandas DataFrame."""

    def __init__(self, encoders: Mapping[str, Encoder]):
        self.encoders = dict(encoders)

    def columns(self, values: Any) -> tuple[list[Any], int]:
        names = list(self.encoders)
        if hasattr(values, "columns") and hasattr(values, "__getitem__"):  # a DataFrame
            missing = [n for n in names if n not in values.columns]
            if missing:
                raise DataError(f"column missing from the DataFrame (has {list(values.columns)})",
                                path=(missing[0],))
            return [values[n].to_numpy() for n in names], len(values)
        if isinstance(values, Mapping):  # columnar: {name: array}
            missing = [n for n in names if n not in values]
            if missing:
                raise DataError(f"column missing (has {list(values)})", path=(missing[0],))
            cols = [values[n] for n in names]
            for name, col in zip(names, cols):
                if isinstance(col, (str, bytes, Mapping)) or not hasattr(col, "__len__") \
                        or getattr(col, "ndim", 1) == 0:
                    raise DataTypeError(
                        f"a mapping is read as columns {{field: values}}, but this field holds "
                        f"one {type(col).__name__} ({col!r:.40}), not a column; for one row "
                        f"pass a list of one dict: [{{...}}]", path=(name,))
            lengths = {len(c) for c in cols}
            if len(lengths) > 1:
                raise DataTypeError(f"columns have different lengths {sorted(lengths)}")
            return cols, lengths.pop() if lengths else 0
        rows = values if isinstance(values, list) else list(values)
        for i, r in enumerate(rows):
            if not isinstance(r, Mapping):
                raise DataTypeError(f"expected a dict with fields {names}, got a "
                                    f"{type(r).__name__}", row=i)
        cols = []
        for name in names:
            try:
                cols.append([r[name] for r in rows])
            except KeyError:
                row = next(i for i, r in enumerate(rows) if name not in r)
                raise DataError("field missing from the row", row=row, path=(name,)) from None
        return cols, len(rows)

    def fit(self, values: Any) -> RecordEncoder:
        cols, _ = self.columns(values)
        names = list(self.encoders)
        return RecordEncoder(dict(zip(names, _fit_columns(self.encoders.values(), cols, names))))

    def encode(self, values: Any) -> FactorEncoded:
        cols, n = self.columns(values)
        return _encode_columns(list(self.encoders.values()), cols, list(self.encoders), n)

    def merge(self, other: Encoder) -> RecordEncoder:
        if not isinstance(other, RecordEncoder) or list(other.encoders) != list(self.encoders):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return RecordEncoder({n: e.merge(other.encoders[n]) for n, e in self.encoders.items()})

    def __repr__(self) -> str:
        return f"RecordEncoder({self.encoders!r})"


class _FactorDistribution(ScoresChildren, Distribution, StackedScoring):
    """Shared body of Composite and Record: the log-density is the sum over factors."""

    factors: tuple[Distribution, ...]

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.score_children(enc, precision, score_serially)

    def score_children(self, enc: Encoded, precision: Precision,
                       score: ScoreChildren) -> np.ndarray:
        """The factors' log-densities (from ``score``) added in factor order."""
        out = np.zeros(enc.n_rows)
        for ll in score([ChildScore(i, dist, part)
                         for i, (dist, part) in enumerate(zip(self.factors, enc.children))],
                        precision):
            out += ll
        return out

    def parts(self) -> tuple[Distribution, ...]:
        return self.factors

    def n_parameters(self) -> int:
        return sum(d.n_parameters() for d in self.factors)

    @classmethod
    def can_stack(cls, components: Sequence[_FactorDistribution]) -> bool:
        """Whether every factor can be scored for all components at once (same stackable family)."""
        if any(len(c.factors) != len(components[0].factors) for c in components):
            return False
        return all(stackable([c.factors[i] for c in components]) is not None
                   for i in range(len(components[0].factors)))

    #: ``stack_log_density`` takes ``units=(start, stop)`` (passed on to every factor's stack)
    stack_units = True

    @classmethod
    def stack_log_density(cls, components: Sequence[_FactorDistribution], enc: Encoded,
                          precision: Precision = FLOAT64,
                          units: tuple[int, int] | None = None) -> np.ndarray:
        """Sum over factors of each factor family's stacked scores, (n_rows, K) in F order
        (only the columns ``units=(start, stop)`` when given, with the same bits)."""
        out = None
        for i, part in enumerate(enc.children):
            factors = [c.factors[i] for c in components]
            scores = stack_columns(type(factors[0]), factors, part, precision, units)
            if out is None:
                out = np.array(scores, dtype=np.float64, order="F")
            else:
                out += scores
        return out

    def _sample_columns(self, n: int, rng: np.random.Generator) -> list[Any]:
        cols = [d._sample(n, rng) for d in self.factors]
        # rows of Python scalars, as a user would write them
        return [c.tolist() if isinstance(c, np.ndarray) and c.ndim == 1 else c for c in cols]


@family("Composite")
class CompositeDistribution(_FactorDistribution):
    """Independent factors of a tuple row: p(x) = prod_i p_i(x[i]).

    >>> from mixfold import GaussianDistribution, PoissonDistribution
    >>> d = CompositeDistribution([GaussianDistribution(0, 1), PoissonDistribution(2.0)])
    >>> round(d.log_density((0.0, 1)), 6)
    -2.225791
    """

    parameter_coordinates = {"factors": "parts"}

    def __init__(self, factors: Sequence[Distribution]):
        self.factors = tuple(factors)
        if not self.factors:
            raise ValueError("a composite needs at least one factor")

    def encoder(self) -> Encoder:
        return CompositeEncoder([f.encoder() for f in self.factors])

    def estimator(self, **options: Any) -> CompositeEstimator:
        return CompositeEstimator([f.estimator() for f in self.factors], **options)

    def _sample(self, n: int, rng: np.random.Generator) -> list[tuple]:
        return list(zip(*self._sample_columns(n, rng)))

    def _params(self) -> dict[str, Any]:
        return {"factors": [f.to_dict() for f in self.factors]}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> CompositeDistribution:
        return cls([Distribution.from_dict(f) for f in p["factors"]])

    def decomposition(self) -> Decomposition:
        """Factors are the units, named by position; their log-densities add."""
        return Decomposition(DecompAxis.FACTOR, ReductionOp.SUM, units=self.factors,
                             child_roles=tuple(str(i) for i in range(len(self.factors))),
                             row_work=float(len(self.factors)))


@family("Record")
class RecordDistribution(_FactorDistribution):
    """Independent named fields: p(row) = prod_name p_name(row[name]).

    >>> from mixfold import GaussianDistribution, CategoricalDistribution
    >>> d = RecordDistribution({"age": GaussianDistribution(40, 100),
    ...                         "plan": CategoricalDistribution({"free": 0.8, "pro": 0.2})})
    >>> round(d.log_density({"age": 40.0, "plan": "pro"}), 6)
    -4.830962
    """

    parameter_coordinates = {"fields": "parts"}

    def __init__(self, fields: Mapping[str, Distribution]):
        self.fields = dict(fields)
        if not self.fields:
            raise ValueError("a record needs at least one field")
        self.factors = tuple(self.fields.values())

    def encoder(self) -> Encoder:
        return RecordEncoder({n: f.encoder() for n, f in self.fields.items()})

    def estimator(self, **options: Any) -> RecordEstimator:
        return RecordEstimator({n: f.estimator() for n, f in self.fields.items()}, **options)

    def _sample(self, n: int, rng: np.random.Generator) -> list[dict]:
        names = list(self.fields)
        cols = self._sample_columns(n, rng)
        return [dict(zip(names, vals)) for vals in zip(*cols)]

    def _params(self) -> dict[str, Any]:
        return {"fields": {n: f.to_dict() for n, f in self.fields.items()}}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> RecordDistribution:
        return cls({n: Distribution.from_dict(f) for n, f in p["fields"].items()})

    def decomposition(self) -> Decomposition:
        """Fields are the units, named by field name; their log-densities add."""
        return Decomposition(DecompAxis.FACTOR, ReductionOp.SUM, units=self.factors,
                             child_roles=tuple(self.fields), row_work=float(len(self.factors)))


class FactorAccumulator(FoldsChildren, Accumulator, StackedUpdate, FusedFold):
    """One accumulator per factor; every factor sees the same row weights."""

    def __init__(self, factors: Sequence[Accumulator], keys: str | None = None):
        self.factors = list(factors)
        self.keys = keys

    def children(self) -> Sequence[Accumulator]:
        return self.factors

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: _FactorDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        return self.fold_children(enc, weights, model, precision, fold_serially)

    def fold_children(self, enc: Encoded, weights: np.ndarray, model: _FactorDistribution,
                      precision: Precision, fold: FoldChildren) -> np.ndarray | None:
        """The factors folded by ``fold``, their log-densities added in factor order (``None``
        when a factor returns none)."""
        total: np.ndarray | None = np.zeros(enc.n_rows)
        for ll in fold([ChildFold(i, acc, part, weights, dist) for i, (acc, part, dist)
                        in enumerate(zip(self.factors, enc.children, model.factors))], precision):
            if ll is None or total is None:
                total = None
            else:
                total += ll
        return total

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        for i, (acc, part) in enumerate(zip(self.factors, enc.children)):
            acc.seq_initialize(part, weights, rng.child(i))

    @staticmethod
    def stack_fold(accs: Sequence[FactorAccumulator], components: Sequence[_FactorDistribution],
                   log_weights: np.ndarray, enc: Encoded, weights: np.ndarray,
                   precision: Precision = FLOAT64) -> tuple[np.ndarray, np.ndarray] | None:
        """The whole E-step of a mixture of K records (or composites) in one fused pass when
        every field's family is linear in its features (Gaussian, Poisson, categorical,
        diagonal Gaussian): :func:`~mixfold.compute.linear.linear_fold` on the fields'
        features side by side. ``None`` when a field is not (or its parameters fall outside
        the form): the mixture then scores, normalises and adds in three steps.

        Returns (posterior mass per component, per-row log-density)."""
        terms = []
        for i, part in enumerate(enc.children):
            field_accs = [a.factors[i] for a in accs]
            family = type(field_accs[0])
            if not issubclass(family, LinearInFeatures) or \
                    any(type(a) is not family for a in field_accs):
                return None
            field_terms = family.linear_terms(field_accs, [c.factors[i] for c in components], part)
            if field_terms is None:
                return None
            terms.append(field_terms)
        return fused_linear_fold(terms, log_weights, enc, weights, precision)

    @staticmethod
    def stack_update(accs: Sequence[FactorAccumulator], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K factor accumulators, each factor through its family's stacked update;
        the factors' updates run concurrently (each writes only its own accumulators)."""
        def update(i: int, part: Encoded) -> Callable[[], None]:
            factor_accs = [a.factors[i] for a in accs]
            return lambda: type(factor_accs[0]).stack_update(factor_accs, part, resp)

        run_each([update(i, part) for i, part in enumerate(enc.children)])


class _FactorEstimator(Estimator):
    factors: tuple[Estimator, ...]

    def parts(self) -> tuple[Estimator, ...]:
        return self.factors

    def accumulator_factory(self) -> AccumulatorFactory:
        factories = [f.accumulator_factory() for f in self.factors]
        keys = self.keys
        return AccumulatorFactory(lambda: FactorAccumulator([f.make() for f in factories], keys))

    def _estimate_factors(self, nobs: float, stats: Any) -> list[Distribution]:
        _, factor_stats = stats
        return [est.estimate(nobs, s) for est, s in zip(self.factors, factor_stats)]

    def _guess_factors(self, sample: Encoded, weights: np.ndarray,
                       rng: InitRandom) -> list[Distribution]:
        return [est.initial_guess(part, weights, rng.child(i))
                for i, (est, part) in enumerate(zip(self.factors, sample.children))]


class CompositeEstimator(_FactorEstimator):
    """Estimator of independent factors of tuple rows (or columns of a 2-D array)."""

    def __init__(self, factors: Sequence[Estimator], keys: str | None = None):
        self.factors = tuple(factors)
        if not self.factors:
            raise ValueError("a composite needs at least one factor estimator")
        self.keys = keys

    def encoder(self) -> CompositeEncoder:
        return CompositeEncoder([f.encoder() for f in self.factors])

    def bind(self, encoder: Encoder) -> CompositeEstimator:
        return CompositeEstimator([f.bind(e) for f, e in zip(self.factors, encoder.encoders)],
                                  self.keys)

    def estimate(self, nobs: float, stats: Any) -> CompositeDistribution:
        return CompositeDistribution(self._estimate_factors(nobs, stats))

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> CompositeDistribution:
        return CompositeDistribution(self._guess_factors(sample, weights, rng))

    def __repr__(self) -> str:
        return f"CompositeEstimator({list(self.factors)!r})"


class RecordEstimator(_FactorEstimator):
    """Estimator of a record of named fields.

    ``RecordEstimator({"age": GaussianEstimator(), "plan": CategoricalEstimator()})``
    """

    def __init__(self, fields: Mapping[str, Estimator], keys: str | None = None):
        self.fields = dict(fields)
        if not self.fields:
            raise ValueError("a record needs at least one field estimator")
        bad = [n for n in self.fields if not isinstance(n, str)]
        if bad:
            raise TypeError(f"record field names must be strings, got {bad[0]!r}")
        self.factors = tuple(self.fields.values())
        self.keys = keys

    def encoder(self) -> RecordEncoder:
        return RecordEncoder({n: f.encoder() for n, f in self.fields.items()})

    def bind(self, encoder: Encoder) -> RecordEstimator:
        return RecordEstimator({n: f.bind(encoder.encoders[n]) for n, f in self.fields.items()},
                               self.keys)

    def estimate(self, nobs: float, stats: Any) -> RecordDistribution:
        return RecordDistribution(dict(zip(self.fields, self._estimate_factors(nobs, stats))))

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> RecordDistribution:
        return RecordDistribution(dict(zip(self.fields, self._guess_factors(sample, weights, rng))))

    def __repr__(self) -> str:
        return f"RecordEstimator({self.fields!r})"


def _field_values(rows: Any, name: str) -> list[Any]:
    if hasattr(rows, "columns"):  # a DataFrame
        return list(rows[name])
    return [r.get(name) if isinstance(r, Mapping) else r[name] for r in rows]


def records_log_densities(records: Sequence[RecordDistribution], rows: Any) -> np.ndarray:
    """Log-density of every row under each of ``records`` (the same fields), array of shape
    (n_rows, len(records)), where a field value the records cannot score (a level never seen at
    fit, a NaN in a field without missing values) is left out of its row: that field is
    marginalised out there, as a missing value.

    >>> from mixfold import CategoricalDistribution, GaussianDistribution
    >>> r = RecordDistribution({"x": GaussianDistribution(0, 1),
    ...                         "city": CategoricalDistribution({"Oslo": 1.0})})
    >>> rows = [{"x": 0.0, "city": "Paris"}, {"x": float("nan"), "city": "Oslo"}]
    >>> records_log_densities([r], rows).round(4).tolist()
    [[-0.9189], [0.0]]
    """
    names = list(records[0].fields)
    n = len(rows)
    out = np.zeros((n, len(records)))
    for name in names:
        values = _field_values(rows, name)
        fields = [rec.fields[name] for rec in records]
        dropped = np.zeros(n, dtype=bool)
        stand_in = fields[0].sampler(0).sample(1)[0]  # a value every record scores
        while True:  # replace each value the field cannot encode, then encode again
            try:
                enc = fields[0].encoder().encode(values)
                break
            except DataError as err:
                if err.row is None or dropped[err.row]:
                    raise
                dropped[err.row], values[err.row] = True, stand_in
        for k, field in enumerate(fields):
            out[:, k] += np.where(dropped, 0.0, field.seq_log_density(enc))
    return out
