"""Independent factors: Composite (tuple rows) and Record (named fields: dict rows, DataFrames).

The two differ only in how a row's parts are named: a composite's by position, a record's by
field name. Everything else (the sum of the factors' log-densities, the factors' folds and
M-steps, the dict form) is written once, in :class:`_FactorDistribution` and
:class:`_FactorEstimator`. How rows are read is :mod:`mixfold.families._record_encoding`; a
mixture of K of them at once is :mod:`mixfold.families._stacked_factors`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     ScoreChildren, ScoresChildren, fold_serially,
                                     score_serially)
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, family)
from mixfold.families._record_encoding import CompositeEncoder, FactorEncoded, RecordEncoder
from mixfold.families._record_scoring import records_log_densities
from mixfold.families._stacked_factors import StackedFactorFolds, StackedFactorScoring
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["CompositeDistribution", "CompositeEstimator", "RecordDistribution", "RecordEstimator",
           "FactorAccumulator", "FactorEncoded", "CompositeEncoder", "RecordEncoder",
           "records_log_densities"]


class _Factors:
    """What a composite and a record share, distribution and estimator alike: the factors in
    order, named by position (a composite: tuple rows) or by field (a record: dict rows)."""

    #: a record's parts are named by ``fields``; a composite's by their position
    named: ClassVar[bool] = False
    #: reads this node's rows into one column per factor
    encoder_class: ClassVar[type[CompositeEncoder] | type[RecordEncoder]]
    factors: tuple[Any, ...]
    fields: dict[str, Any]

    def _named(self, values: Iterable[Any]) -> list[Any] | dict[str, Any]:
        """``values``, one per factor, in this node's form: a list, or a dict by field."""
        values = list(values)
        return dict(zip(self.fields, values)) if self.named else values

    def parts(self) -> tuple[Any, ...]:
        return self.factors

    def encoder(self) -> CompositeEncoder | RecordEncoder:
        return self.encoder_class(self._named(f.encoder() for f in self.factors))


class _FactorDistribution(_Factors, ScoresChildren, Distribution, StackedFactorScoring):
    """Shared body of Composite and Record: the log-density is the sum over factors."""

    #: the ``to_dict`` key that holds the parts
    parts_key: ClassVar[str]
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

    def n_parameters(self) -> int:
        return sum(d.n_parameters() for d in self.factors)

    def estimator(self, **options: Any) -> _FactorEstimator:
        return self.estimator_class(self._named(f.estimator() for f in self.factors), **options)

    def _sample(self, n: int, rng: np.random.Generator) -> list[tuple] | list[dict]:
        cols = [d._sample(n, rng) for d in self.factors]
        # rows of Python scalars, as a user would write them
        rows = zip(*[c.tolist() if isinstance(c, np.ndarray) and c.ndim == 1 else c
                     for c in cols])
        return [self._named(r) for r in rows] if self.named else list(rows)

    def _params(self) -> dict[str, Any]:
        return {self.parts_key: self._named(f.to_dict() for f in self.factors)}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> _FactorDistribution:
        parts = p[cls.parts_key]
        if cls.named:
            return cls({n: Distribution.from_dict(f) for n, f in parts.items()})
        return cls([Distribution.from_dict(f) for f in parts])

    def decomposition(self) -> Decomposition:
        """The factors are the units, named by position (a composite) or by field name (a
        record); their log-densities add."""
        roles = tuple(self.fields) if self.named else \
            tuple(str(i) for i in range(len(self.factors)))
        return Decomposition(DecompAxis.FACTOR, ReductionOp.SUM, units=self.factors,
                             child_roles=roles, row_work=float(len(self.factors)))


@family("Composite")
class CompositeDistribution(_FactorDistribution):
    """Independent factors of a tuple row: p(x) = prod_i p_i(x[i]).

    >>> from mixfold import GaussianDistribution, PoissonDistribution
    >>> d = CompositeDistribution([GaussianDistribution(0, 1), PoissonDistribution(2.0)])
    >>> round(d.log_density((0.0, 1)), 6)
    -2.225791
    """

    parts_key = "factors"
    parameter_coordinates = {parts_key: "parts"}
    encoder_class = CompositeEncoder

    def __init__(self, factors: Sequence[Distribution]):
        self.factors = tuple(factors)
        if not self.factors:
            raise ValueError("a composite needs at least one factor")


@family("Record")
class RecordDistribution(_FactorDistribution):
    """Independent named fields: p(row) = prod_name p_name(row[name]).

    >>> from mixfold import GaussianDistribution, CategoricalDistribution
    >>> d = RecordDistribution({"age": GaussianDistribution(40, 100),
    ...                         "plan": CategoricalDistribution({"free": 0.8, "pro": 0.2})})
    >>> round(d.log_density({"age": 40.0, "plan": "pro"}), 6)
    -4.830962
    """

    parts_key = "fields"
    parameter_coordinates = {parts_key: "parts"}
    encoder_class = RecordEncoder
    named = True

    def __init__(self, fields: Mapping[str, Distribution]):
        self.fields = dict(fields)
        if not self.fields:
            raise ValueError("a record needs at least one field")
        self.factors = tuple(self.fields.values())


class FactorAccumulator(FoldsChildren, Accumulator, StackedFactorFolds):
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


class _FactorEstimator(_Factors, Estimator):
    """Shared body of the Composite and Record estimators: each factor is estimated alone."""

    #: the distribution this estimator makes (not ``distribution_class``, which names a leaf)
    model_class: ClassVar[type[_FactorDistribution]]
    factors: tuple[Estimator, ...]

    @abstractmethod
    def __init__(self, parts: Any, keys: str | None = None):
        """Each public estimator takes its parts as its rows name them (a list, a dict)."""

    def accumulator_factory(self) -> AccumulatorFactory:
        factories = [f.accumulator_factory() for f in self.factors]
        keys = self.keys
        return AccumulatorFactory(lambda: FactorAccumulator([f.make() for f in factories], keys))

    def bind(self, encoder: Encoder) -> _FactorEstimator:
        parts = [encoder.encoders[n] for n in self.fields] if self.named else encoder.encoders
        return type(self)(self._named(f.bind(e) for f, e in zip(self.factors, parts)), self.keys)

    def estimate(self, nobs: float, stats: Any) -> _FactorDistribution:
        _, factor_stats = stats
        return self.model_class(self._named(est.estimate(nobs, s)
                                            for est, s in zip(self.factors, factor_stats)))

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> _FactorDistribution:
        return self.model_class(self._named(
            est.initial_guess(part, weights, rng.child(i))
            for i, (est, part) in enumerate(zip(self.factors, sample.children))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._named(self.factors)!r})"


class CompositeEstimator(_FactorEstimator):
    """Estimator of independent factors of tuple rows (or columns of a 2-D array)."""

    model_class = CompositeDistribution
    encoder_class = CompositeEncoder

    def __init__(self, factors: Sequence[Estimator], keys: str | None = None):
        self.factors = tuple(factors)
        if not self.factors:
            raise ValueError("a composite needs at least one factor estimator")
        self.keys = keys


class RecordEstimator(_FactorEstimator):
    """Estimator of a record of named fields.

    ``RecordEstimator({"age": GaussianEstimator(), "plan": CategoricalEstimator()})``
    """

    model_class = RecordDistribution
    encoder_class = RecordEncoder
    named = True

    def __init__(self, fields: Mapping[str, Estimator], keys: str | None = None):
        self.fields = dict(fields)
        if not self.fields:
            raise ValueError("a record needs at least one field estimator")
        bad = [n for n in self.fields if not isinstance(n, str)]
        if bad:
            raise TypeError(f"record field names must be strings, got {bad[0]!r}")
        self.factors = tuple(self.fields.values())
        self.keys = keys


CompositeDistribution.estimator_class = CompositeEstimator
RecordDistribution.estimator_class = RecordEstimator
