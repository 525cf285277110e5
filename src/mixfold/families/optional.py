"""Missing values: missing with probability p_missing, else drawn from an inner family."""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import DataError, ParameterError
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsChildren,
                                     ScoreChildren, ScoresChildren, fold_serially,
                                     score_serially)
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, family, is_na)
from mixfold.families.categorical import level_from_json, level_to_json
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["OptionalDistribution", "OptionalEstimator", "OptionalAccumulator", "OptionalEncoder",
           "OptionalEncoded", "MissingMarkers"]

DEFAULT_MISSING: tuple = (None, math.nan)


class MissingMarkers:
    """Which raw values mean "missing": ``None``, any float NaN, and/or other hashable values.
    pandas' ``NA`` and ``NaT`` (and NumPy's ``NaT``) are missing wherever ``None`` or NaN is.

    >>> m = MissingMarkers((None, float("nan"), "NA"))
    >>> m.mask([1.0, None, float("nan"), "NA", "x"]).tolist()
    [False, True, True, True, False]
    """

    __slots__ = ("none", "nan", "values")

    def __init__(self, missing: Sequence[Any] = DEFAULT_MISSING):
        if isinstance(missing, (str, bytes)) or not isinstance(missing, (tuple, list)):
            raise ValueError(f"missing must be a tuple of marker values, got {missing!r}")
        self.none = any(m is None for m in missing)
        self.nan = any(_is_nan(m) for m in missing)
        others = [m for m in missing if m is not None and not _is_nan(m)]
        for m in others:
            try:
                hash(m)
            except TypeError:
                raise ValueError(f"missing markers must be hashable, got {m!r}") from None
        self.values = frozenset(others)

    def is_missing(self, v: Any) -> bool:
        """Whether one raw value is missing."""
        if v is None:
            return self.none
        if _is_nan(v):
            return self.nan
        if is_na(v):  # pandas' NA and NaT: missing wherever None or NaN is
            return self.none or self.nan
        if not self.values:
            return False
        try:
            return v in self.values
        except TypeError:  # unhashable values (a list, an array) are never markers
            return False

    def mask(self, values: Any) -> np.ndarray:
        """Boolean array of shape (n_rows,), True where the row's value is missing."""
        if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "fiub":
            missing = np.isnan(values) if self.nan and values.dtype.kind == "f" else \
                np.zeros(values.shape[0], dtype=bool)
            for m in self.values:
                if isinstance(m, numbers.Real):
                    missing |= values == m
            return missing
        if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "mM":
            return np.isnat(values) if self.none or self.nan else \
                np.zeros(values.shape[0], dtype=bool)
        return np.fromiter((self.is_missing(v) for v in values), dtype=bool, count=len(values))

    def to_json(self) -> dict[str, Any]:
        return {"none": self.none, "nan": self.nan,
                "values": sorted((level_to_json(v) for v in self.values), key=repr)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MissingMarkers:
        markers = [level_from_json(v) for v in d["values"]]
        return cls(([None] if d["none"] else []) + ([math.nan] if d["nan"] else []) + markers)

    def sample_marker(self) -> Any:
        """The value written for a missing row by the sampler."""
        if self.none:
            return None
        if self.nan:
            return math.nan
        return sorted(self.values, key=repr)[0]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MissingMarkers) and (self.none, self.nan, self.values) == \
            (other.none, other.nan, other.values)

    def __hash__(self) -> int:
        return hash((self.none, self.nan, self.values))

    def __repr__(self) -> str:
        parts = (["None"] if self.none else []) + (["nan"] if self.nan else []) + \
            sorted(repr(v) for v in self.values)
        return f"MissingMarkers(({', '.join(parts)}{',' if len(parts) == 1 else ''}))"


def _is_nan(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) and v != v


# ---------------------------------------------------------------------------------------------
# Encoding: a presence mask, and the inner encoding of the present values only


class OptionalEncoded(Encoded):
    """A ``present`` mask of shape (n_rows,) and the inner encoding of the present rows, in order.

    ``before[i] - before[0]`` is the number of present rows among rows ``[0, i)``
    (shape (n_rows + 1,)); slices are views of it, so cutting rows copies nothing, and
    ``inner.start`` stays the global index among present values.
    """

    __slots__ = ("present", "inner", "before", "n_rows", "start")

    def __init__(self, present: np.ndarray, inner: Encoded, before: np.ndarray | None = None,
                 start: int = 0):
        self.present = present
        self.inner = inner
        if before is None:
            before = np.zeros(present.shape[0] + 1, dtype=np.int64)
            np.cumsum(present, out=before[1:])
        self.before = before
        self.n_rows = int(present.shape[0])
        self.start = int(start)

    def rows(self, begin: int, end: int) -> OptionalEncoded:
        end = min(end, self.n_rows)
        base = int(self.before[0])
        inner = self.inner.rows(int(self.before[begin]) - base, int(self.before[end]) - base)
        return OptionalEncoded(self.present[begin:end], inner, self.before[begin:end + 1],
                               self.start + begin)

    def take(self, indices: np.ndarray) -> OptionalEncoded:
        indices = np.asarray(indices, dtype=np.int64)
        present = self.present[indices]
        inner_index = self.before[indices[present]] - self.before[0]
        return OptionalEncoded(present, self.inner.take(inner_index))

    @property
    def nbytes(self) -> int:
        return int(self.present.nbytes + self.before.nbytes) + self.inner.nbytes

    def node_sizes(self) -> list[int]:
        return [self.n_rows] + self.inner.node_sizes()

    def with_starts(self, starts: Iterator[int]) -> OptionalEncoded:
        start = next(starts)
        return OptionalEncoded(self.present, self.inner.with_starts(starts), self.before, start)

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> OptionalEncoded:
        present = np.concatenate([p.present for p in parts])
        inner = type(parts[0].inner).concat([p.inner for p in parts])
        return OptionalEncoded(present, inner, start=parts[0].start)

    def __repr__(self) -> str:
        return f"OptionalEncoded(n_rows={self.n_rows}, present={self.inner.n_rows})"


class OptionalEncoder(Encoder):
    """Marks the missing rows and encodes the present values with the inner encoder.

    >>> from mixfold.families._encoders import NumericEncoder
    >>> e = OptionalEncoder(NumericEncoder("real")).encode([1.5, None, float("nan"), 2.0])
    >>> e.present.tolist(), e.inner.values.tolist()
    ([True, False, False, True], [1.5, 2.0])
    """

    def __init__(self, inner: Encoder, missing: MissingMarkers | Sequence[Any] = DEFAULT_MISSING):
        self.inner = inner
        self.missing = missing if isinstance(missing, MissingMarkers) else MissingMarkers(missing)

    def split(self, values: Any) -> tuple[np.ndarray, Any]:
        """(present mask, the present values in row order)."""
        if not hasattr(values, "__len__"):
            values = list(values)
        present = ~self.missing.mask(values)
        if isinstance(values, np.ndarray):
            return present, values[present]
        return present, [v for v, keep in zip(values, present) if keep]

    def fit(self, values: Any) -> OptionalEncoder:
        """Learn the inner vocabulary from the present values.

        With no value present the inner encoder stays unfitted, so that fits of shards
        :meth:`merge` into the fit of their union.
        """
        present, inner_values = self.split(values)
        if not present.any():
            return self
        try:
            return OptionalEncoder(self.inner.fit(inner_values), self.missing)
        except DataError as err:
            raise _inner_error(err, present) from None

    def merge(self, other: Encoder) -> OptionalEncoder:
        if not isinstance(other, OptionalEncoder) or other.missing != self.missing:
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return OptionalEncoder(self.inner.merge(other.inner), self.missing)

    def encode(self, values: Any) -> OptionalEncoded:
        present, inner_values = self.split(values)
        try:
            inner = self.inner.encode(inner_values)
        except DataError as err:
            raise _inner_error(err, present) from None
        return OptionalEncoded(present, inner)

    def __repr__(self) -> str:
        return f"OptionalEncoder({self.inner!r}, {self.missing!r})"


def _inner_error(err: DataError, present: np.ndarray) -> DataError:
    """An inner value's error, with the row index of the original data."""
    if err.row is None:
        return err
    return err.within(row=int(np.flatnonzero(present)[err.row]))


# ---------------------------------------------------------------------------------------------
# Distribution


@family("Optional")
class OptionalDistribution(ScoresChildren, Distribution):
    """A value that is missing with probability ``p_missing``, else drawn from ``inner``.

    log p(missing) = log p_missing; log p(x) = log(1 - p_missing) + log p_inner(x). ``missing``
    says which raw values are missing (default: ``None`` and float NaN). The sampler writes NaN
    for a missing value of a float inner family (an array), else ``None`` (or, when ``None`` is
    not a marker, NaN or the first other marker).

    >>> from mixfold import GaussianDistribution
    >>> d = OptionalDistribution(GaussianDistribution(0.0, 1.0), 0.25)
    >>> round(d.log_density(None), 6), round(d.log_density(0.0), 6)
    (-1.386294, -1.206621)
    >>> d.sampler(1).sample(4).round(3).tolist()
    [0.905, 0.446, nan, -0.537]
    """

    #: model files may leave this out (``to_dict`` does when it holds the default markers);
    #: given, it must have this shape
    optional_params = {"missing": {"none": True, "nan": True, "values": []}}

    parameter_coordinates = {"inner": "part", "p_missing": "unit", "missing": "fixed"}

    def __init__(self, inner: Distribution, p_missing: float, *,
                 missing: MissingMarkers | Sequence[Any] = DEFAULT_MISSING):
        if not isinstance(inner, Distribution):
            raise ParameterError(f"inner must be a Distribution, got {type(inner).__name__}")
        p = float(p_missing)
        if not (0.0 <= p <= 1.0):
            raise ParameterError(f"p_missing must be in [0, 1], got {p_missing!r}")
        self.inner = inner
        self.p_missing = p
        self.missing = missing if isinstance(missing, MissingMarkers) else MissingMarkers(missing)
        with np.errstate(divide="ignore"):
            self.log_p_missing = float(np.log(p))
            self.log_p_present = float(np.log1p(-p))

    def seq_log_density(self, enc: OptionalEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.score_children(enc, precision, score_serially)

    def score_children(self, enc: OptionalEncoded, precision: Precision,
                       score: ScoreChildren) -> np.ndarray:
        """The present values' log-densities (from ``score``) scattered among the missing."""
        return self._scatter(enc, score([ChildScore(0, self.inner, enc.inner)], precision)[0])

    def _scatter(self, enc: OptionalEncoded, inner_ll: np.ndarray) -> np.ndarray:
        out = np.full(enc.n_rows, self.log_p_missing)
        out[enc.present] = self.log_p_present + inner_ll
        return out

    def encoder(self) -> OptionalEncoder:
        return OptionalEncoder(self.inner.encoder(), self.missing)

    def estimator(self, **options: Any) -> OptionalEstimator:
        options.setdefault("missing", self.missing)
        return OptionalEstimator(self.inner.estimator(), **options)

    def _sample(self, n: int, rng: np.random.Generator) -> Any:
        present = rng.random(n) >= self.p_missing
        drawn = self.inner._sample(int(present.sum()), rng)
        if isinstance(drawn, np.ndarray) and drawn.ndim == 1 and drawn.dtype.kind == "f" \
                and self.missing.nan:
            out = np.full(n, np.nan)
            out[present] = drawn
            return out
        rows: list[Any] = [self.missing.sample_marker()] * n
        for i, v in zip(np.flatnonzero(present).tolist(), drawn):
            rows[i] = v.item() if isinstance(v, np.generic) else v
        return rows

    def parts(self) -> tuple[Distribution, ...]:
        return (self.inner,)

    def n_parameters(self) -> int:
        return 1 + sum(d.n_parameters() for d in self.parts())

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"inner": self.inner.to_dict(), "p_missing": self.p_missing}
        if self.missing != MissingMarkers():
            params["missing"] = self.missing.to_json()
        return params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> OptionalDistribution:
        missing = MissingMarkers.from_json(p["missing"]) if "missing" in p else MissingMarkers()
        return cls(Distribution.from_dict(p["inner"]), p["p_missing"], missing=missing)

    def decomposition(self) -> Decomposition:
        """SEQUENCE-like: the present values are rows of ``inner`` (a fraction ``1 - p_missing``
        of this node's rows), recursed into and never split here, as a sequence's items are."""
        return Decomposition(DecompAxis.SEQUENCE, ReductionOp.REPLICATE, units=(self.inner,),
                             child_roles=("inner",), unit_rows=1.0 - self.p_missing,
                             row_work=1.0, param_bytes=24)


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


class OptionalAccumulator(FoldsChildren, Accumulator):
    """Statistics: [weighted missing count, weighted present count], then the inner accumulator.

    The inner accumulator sees the present rows only, with their weights.
    """

    def __init__(self, inner: Accumulator, keys: str | None = None):
        self.inner = inner
        self.keys = keys
        self.counts = np.zeros(2)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.counts]

    def children(self) -> tuple[Accumulator, ...]:
        return (self.inner,)

    def _present_weights(self, enc: OptionalEncoded, weights: np.ndarray) -> np.ndarray:
        present_w = weights[enc.present]
        self.counts += (weights[~enc.present].sum(), present_w.sum())
        return present_w

    def seq_update(self, enc: OptionalEncoded, weights: np.ndarray, model: OptionalDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        return self.fold_children(enc, weights, model, precision, fold_serially)

    def fold_children(self, enc: OptionalEncoded, weights: np.ndarray,
                      model: OptionalDistribution, precision: Precision,
                      fold: FoldChildren) -> np.ndarray | None:
        """The present values folded by ``fold``; their log-densities scattered."""
        inner_ll = fold([ChildFold(0, self.inner, enc.inner, self._present_weights(enc, weights),
                                   model.inner)], precision)[0]
        return None if inner_ll is None else model._scatter(enc, inner_ll)

    def seq_initialize(self, enc: OptionalEncoded, weights: np.ndarray, rng: InitRandom) -> None:
        self.inner.seq_initialize(enc.inner, self._present_weights(enc, weights),
                                  rng.child("inner"))


class OptionalEstimator(Estimator):
    """Estimator of a value that may be missing: p_missing and the ``inner`` family.

    p_missing = (missing + pseudo_count) / (total + 2 pseudo_count), with the counts weighted;
    a node with no weight at all gets p_missing = 0.5. ``missing`` lists the raw values that mean
    "missing" (``None``, float NaN, or any hashable value such as ``"NA"``).

    >>> import mixfold
    >>> from mixfold import GaussianEstimator
    >>> rows = [1.0, None, 3.0, float("nan")]
    >>> fit = mixfold.optimize(rows, OptionalEstimator(GaussianEstimator()), progress=False)
    >>> fit.p_missing, fit.inner.mu
    (0.5, 2.0)
    """

    option_rules = {"pseudo_count": number(0)}

    def __init__(self, inner: Estimator, missing: MissingMarkers | Sequence[Hashable] =
                 DEFAULT_MISSING, pseudo_count: float = 0.0, keys: str | None = None):
        if not isinstance(inner, Estimator):
            raise TypeError(f"inner must be an Estimator, got {type(inner).__name__}")
        self.check_options(pseudo_count=pseudo_count)
        self.inner = inner
        self.missing = missing if isinstance(missing, MissingMarkers) else MissingMarkers(missing)
        self.pseudo_count = float(pseudo_count)
        self.keys = keys

    def parts(self) -> tuple[Estimator, ...]:
        return (self.inner,)

    def encoder(self) -> OptionalEncoder:
        return OptionalEncoder(self.inner.encoder(), self.missing)

    def bind(self, encoder: Encoder) -> OptionalEstimator:
        if not isinstance(encoder, OptionalEncoder):
            raise ValueError(f"an optional estimator needs an OptionalEncoder, got {encoder!r}")
        return OptionalEstimator(self.inner.bind(encoder.inner), encoder.missing,
                                 self.pseudo_count, self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        inner = self.inner.accumulator_factory()
        keys = self.keys
        return AccumulatorFactory(lambda: OptionalAccumulator(inner.make(), keys))

    def _p_missing(self, missing: float, present: float, smoothing: float) -> float:
        pc = self.pseudo_count + smoothing
        total = missing + present + 2.0 * pc
        return (missing + pc) / total if total > 0 else 0.5

    def estimate(self, nobs: float, stats: Any) -> OptionalDistribution:
        (counts,), (inner_stats,) = stats
        missing, present = (float(c) for c in counts)
        inner = self.inner.estimate(present, inner_stats)
        return OptionalDistribution(inner, self._p_missing(missing, present, 0.0),
                                    missing=self.missing)

    def initial_guess(self, sample: OptionalEncoded, weights: np.ndarray,
                      rng: InitRandom) -> OptionalDistribution:
        present_w = weights[sample.present]
        inner = self.inner.initial_guess(sample.inner, present_w, rng.child("inner"))
        missing, present = float(weights[~sample.present].sum()), float(present_w.sum())
        # smoothed, so a row kind the sample lacks does not start at probability zero
        smoothing = 0.005 * max(missing + present, 1.0)
        return OptionalDistribution(inner, self._p_missing(missing, present, smoothing),
                                    missing=self.missing)

    def __repr__(self) -> str:
        return f"OptionalEstimator({self.inner!r}, {self.missing!r})"
