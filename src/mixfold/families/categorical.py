"""Categorical distribution over strings, finite numbers, bools and tuples of them (what a model
file can hold); the levels are fixed at encode time."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import LinearInFeatures, StackedScoring, StackedUpdate
from mixfold.decomposition import Decomposition
from mixfold.errors import DataError, DataTypeError, ParameterError
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.compute.linear import LinearTerms
from mixfold.families._protocol import (
    ArrayEncoded,
    Distribution,
    Encoded,
    Encoder,
    InitRandom,
    family,
    is_na,
)
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["CategoricalDistribution", "CategoricalEstimator", "CategoricalAccumulator",
           "CategoricalEncoder", "level_to_json", "level_from_json"]


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _savable_level(v: Any) -> bool:
    if isinstance(v, tuple):
        return all(_savable_level(_plain(x)) for x in v)
    if isinstance(v, float):
        return v - v == 0.0  # finite
    return isinstance(v, (str, int, bool))


def _check_level(v: Any, row: int | None = None) -> Hashable:
    v = _plain(v)
    if v is None or (isinstance(v, float) and v != v) or is_na(v):
        raise DataError("missing value in a categorical field; wrap the field in "
                        "OptionalEstimator to model missing values", row=row)
    if not _savable_level(v):  # a model whose levels cannot be saved would be lost at save
        raise DataTypeError(f"a categorical level must be a string, a finite number, a bool or "
                            f"a tuple of them (what a model file holds), got {v!r:.60} "
                            f"({type(v).__name__})", row=row)
    try:
        hash(v)
    except TypeError:
        raise DataTypeError(f"categorical levels must be hashable, got {type(v).__name__}",
                            row=row) from None
    return v


def _checked_levels(levels: Sequence[Any]) -> tuple:
    """``levels`` as a tuple of checked levels (strings and ints, the common case, need no
    per-level check: a model's levels are re-read every M-step)."""
    if all(type(v) is str or type(v) is int for v in levels):
        return tuple(levels)
    return tuple(_check_level(v) for v in levels)


def _first_repeat(levels: Sequence[Hashable]) -> Hashable:
    seen: dict[Hashable, Hashable] = {}
    for v in levels:
        if v in seen:
            return (seen[v], v) if repr(seen[v]) != repr(v) else v
        seen[v] = v
    return None


def _ordered_levels(found: Sequence[Hashable]) -> tuple:
    try:
        return tuple(sorted(found))
    except TypeError:  # mixed types that do not order: keep first-seen order
        return tuple(found)


def _as_array(values: Any) -> np.ndarray | None:
    """``values`` as a NumPy array when that keeps every value as it is (one int or str type)."""
    if isinstance(values, np.ndarray):
        return values
    kinds = set(map(type, values))
    if len(kinds) == 1 and (kinds <= {int, str} or issubclass(kinds.pop(), (np.integer, np.str_))):
        return np.asarray(values)
    return None


class CategoricalEncoder(Encoder):
    """Maps values to integer codes 0..L-1 for a fixed tuple of levels.

    >>> enc = CategoricalEncoder().fit(["b", "a", "b"])
    >>> enc.levels
    ('a', 'b')
    >>> enc.encode(["b", "a"]).values
    array([1, 0])
    """

    def __init__(self, levels: Sequence[Hashable] | None = None):
        self.levels = None if levels is None else _checked_levels(levels)
        if self.levels is not None and len(set(self.levels)) != len(self.levels):
            raise ValueError(f"categorical levels must be distinct, got {self.levels!r}")

    def fit(self, values: Any) -> CategoricalEncoder:
        if self.levels is not None:
            return self
        arr = _as_array(values)
        if arr is not None and arr.dtype.kind in "iuUS" and arr.ndim == 1:
            found = [_plain(v) for v in np.unique(arr)]
        else:
            found = list(dict.fromkeys(_check_level(v, i) for i, v in enumerate(values)))
        if not found:  # nothing to learn here; merging with other shards' fits supplies levels
            return self
        return CategoricalEncoder(_ordered_levels(found))

    def merge(self, other: Encoder) -> CategoricalEncoder:
        """The union of both level sets (re-ordered as ``fit`` orders them)."""
        if not isinstance(other, CategoricalEncoder):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        if self.levels is None or other.levels is None:
            return self if other.levels is None else other
        if self.levels == other.levels:
            return self
        return CategoricalEncoder(_ordered_levels(list(dict.fromkeys(self.levels + other.levels))))

    def encode(self, values: Any) -> ArrayEncoded:
        if self.levels is None:  # fitted on no values at all (all missing, empty sequences)
            raise DataError("no values to learn the categorical levels from: give the levels "
                            "(CategoricalEstimator(levels=...)) or data with values")
        codes = self._fast_codes(_as_array(values))
        if codes is None:
            index = {v: i for i, v in enumerate(self.levels)}
            codes = np.empty(len(values), dtype=np.int64)
            for i, v in enumerate(values):
                v = _check_level(v, i)
                try:
                    codes[i] = index[v]
                except KeyError:
                    raise self._unseen(v, i) from None
        return ArrayEncoded(codes)

    def _fast_codes(self, arr: np.ndarray | None) -> np.ndarray | None:
        if arr is None or arr.ndim != 1 or arr.dtype.kind not in "iuUS":
            return None
        kinds = {type(v) for v in self.levels}
        if arr.dtype.kind in "iu" and kinds != {int}:
            return None
        if arr.dtype.kind in "US" and kinds != {str}:
            return None
        levels = np.asarray(self.levels)
        order = np.argsort(levels)
        pos = np.searchsorted(levels[order], arr)
        pos = np.minimum(pos, len(levels) - 1)
        hit = levels[order][pos] == arr
        if not hit.all():
            row = int(np.flatnonzero(~hit)[0])
            raise self._unseen(_plain(arr[row]), row)
        return order[pos].astype(np.int64)

    def _unseen(self, v: Any, row: int) -> DataError:
        shown = list(self.levels[:10]) + (["..."] if len(self.levels) > 10 else [])
        kinds = {type(level).__name__ for level in self.levels}
        note = ""
        if type(v).__name__ not in kinds:  # 3.5 against '3.5': say the types differ
            note = (f"; the value is a {type(v).__name__}, the levels are "
                    f"{' / '.join(sorted(kinds))}")
        return DataError(f"level {v!r} is not among the {len(self.levels)} levels fixed at "
                         f"encode time {shown}{note}", row=row)

    def __repr__(self) -> str:
        return f"CategoricalEncoder({self.levels!r})"


def level_to_json(v: Any) -> Any:
    """A level as a JSON value; tuples are tagged so they load back as tuples."""
    v = _plain(v)
    if isinstance(v, tuple):
        return {"tuple": [level_to_json(x) for x in v]}
    if isinstance(v, (str, int, float, bool)):
        return v
    raise TypeError(f"a categorical level of type {type(v).__name__} cannot be saved as JSON")


def level_from_json(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) != {"tuple"} or not isinstance(v["tuple"], list):
            raise ValueError(f"bad categorical level {v!r}")
        return tuple(level_from_json(x) for x in v["tuple"])
    if isinstance(v, list):
        raise ValueError(f"bad categorical level {v!r}")
    return v


@family("Categorical", kind="categorical")
class CategoricalDistribution(Distribution, StackedScoring):
    """Probabilities over a fixed tuple of levels.

    ``CategoricalDistribution({"a": 0.25, "b": 0.75})`` or
    ``CategoricalDistribution([0.25, 0.75], levels=["a", "b"])``.

    >>> d = CategoricalDistribution({"a": 0.25, "b": 0.75})
    >>> round(d.log_density("b"), 6)
    -0.287682
    """

    parameter_coordinates = {"levels": "fixed", "probs": "simplex"}

    def __init__(self, probs: Mapping[Hashable, float] | Sequence[float],
                 levels: Sequence[Hashable] | None = None):
        if isinstance(probs, Mapping):
            if levels is not None:
                raise ValueError("give levels either as the keys of probs or as levels=, not both")
            levels, probs = list(probs.keys()), list(probs.values())
        p = np.asarray(probs, dtype=np.float64)
        if levels is None:
            levels = list(range(len(p)))
        self.levels = _checked_levels(levels)
        if len(set(self.levels)) != len(self.levels):  # 1 == True == 1.0 in Python: one level
            raise ParameterError(f"categorical levels must be distinct (1, 1.0 and True are "
                                 f"one level), got {_first_repeat(self.levels)!r} twice")
        if p.ndim != 1 or len(p) != len(self.levels) or len(p) == 0:
            raise ParameterError(f"need one probability per level, got {len(p)} for "
                             f"{len(self.levels)} levels")
        if not (np.isfinite(p).all() and (p >= 0).all() and abs(p.sum() - 1.0) < 1e-9):
            raise ParameterError(f"probabilities must be >= 0 and sum to 1, got {p.tolist()}")
        self.probs = p  # kept as given (sums to 1 within 1e-9), so JSON round trips are exact
        with np.errstate(divide="ignore"):
            self.log_probs = np.log(self.probs)

    def prob(self, level: Hashable) -> float:
        return float(self.probs[self.levels.index(level)])

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.log_probs[enc.values]

    @classmethod
    def stack_log_density(cls, components: Sequence[CategoricalDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-probabilities of all K components at once: one gather, (n_rows, K) in F order."""
        table = np.stack([c.log_probs for c in components])  # (K, L)
        # np.take lays the gather out (K, n); table[:, codes] would lay it out (n, K), and its
        # transpose then adds to the other fields' F-order scores through strided memory
        return np.take(table, enc.values, axis=1).T

    def encoder(self) -> Encoder:
        return CategoricalEncoder(self.levels)

    def estimator(self, **options: Any) -> CategoricalEstimator:
        options.setdefault("levels", self.levels)
        return CategoricalEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> list:
        codes = rng.choice(len(self.levels), size=n, p=self.probs)
        kinds = {type(v) for v in self.levels}
        if len(kinds) == 1 and kinds <= {int, float, str, bool}:
            return np.asarray(self.levels)[codes]
        return [self.levels[c] for c in codes]

    def n_parameters(self) -> int:
        return len(self.probs) - 1

    def _params(self) -> dict[str, Any]:
        return {"levels": [level_to_json(v) for v in self.levels], "probs": self.probs.tolist()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> CategoricalDistribution:
        return cls(p["probs"], levels=[level_from_json(v) for v in p["levels"]])

    def decomposition(self) -> Decomposition:
        """Atomic: one table lookup and one count per row, whatever the vocabulary size V (which
        shows in the bytes: probabilities and their logs)."""
        return Decomposition.atomic(row_work=1.0,
                                    param_bytes=self.probs.nbytes + self.log_probs.nbytes)


class CategoricalAccumulator(LeafAccumulator, StackedUpdate, LinearInFeatures):
    """Statistics: weighted count of each level."""

    def __init__(self, n_levels: int, keys: str | None = None):
        super().__init__(keys)
        self.counts = np.zeros(n_levels)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.counts]

    def _add(self, codes: np.ndarray, w: np.ndarray) -> None:
        self.counts += np.bincount(codes, weights=w, minlength=len(self.counts))

    @staticmethod
    def linear_terms(accs: Sequence[CategoricalAccumulator],
                     components: Sequence[CategoricalDistribution],
                     enc: Encoded) -> LinearTerms:
        """The log-probabilities as the table of :class:`~mixfold.compute.linear.LinearTerms`
        (no features): a gather to score, a weighted count per level to accumulate."""
        def add_sums(_: np.ndarray, __: np.ndarray, counts: np.ndarray) -> None:
            for acc, c in zip(accs, counts):
                acc.counts += c

        k = len(components)
        table = np.stack([c.log_probs for c in components])
        return LinearTerms(np.zeros((k, 0)), np.zeros(k), None, add_sums, codes=enc.values,
                           table=table, peak=table.max(axis=1), source=enc.values,
                           key=("categorical", table.shape[1]))

    @staticmethod
    def stack_update(accs: Sequence[CategoricalAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights."""
        for k, acc in enumerate(accs):
            acc._add(enc.values, resp[:, k])


class CategoricalEstimator(LeafEstimator):
    """M-step for :class:`CategoricalDistribution`.

    ``levels=None`` learns the levels from the data when it is encoded (sorted when they order);
    ``pseudo_count`` is added to every level's count, so unseen-in-a-component levels keep a
    positive probability. ``prior`` (a number or one per level): a Dirichlet concentration
    instead, the probabilities its maximum a posteriori ``max(counts + prior - 1, 0)``
    normalised (hmmlearn's ``emissionprob_prior``).

    >>> import mixfold
    >>> d = mixfold.optimize(["a", "a", "b"], CategoricalEstimator(prior=[1.0, 3.0]),
    ...                      progress=False)
    >>> d.probs.tolist()                             # (2 + 0, 1 + 2) / 5
    [0.4, 0.6]
    """

    accumulator_class = CategoricalAccumulator
    distribution_class = CategoricalDistribution

    option_rules = {"pseudo_count": number(0), "prior": CONCENTRATION}

    def __init__(self, levels: Sequence[Hashable] | None = None, pseudo_count: float = 0.0,
                 keys: str | None = None, *, prior: Any = None):
        super().__init__(keys)
        self.check_options(pseudo_count=pseudo_count, prior=prior)
        self.levels = None if levels is None else tuple(levels)
        self.pseudo_count = float(pseudo_count)
        self.prior = None if prior is None else np.asarray(prior, dtype=np.float64).tolist()

    def encoder(self) -> CategoricalEncoder:
        return CategoricalEncoder(self.levels)

    def bind(self, encoder: Encoder) -> CategoricalEstimator:
        if not isinstance(encoder, CategoricalEncoder) or encoder.levels is None:
            raise ValueError(f"a categorical estimator needs a fitted CategoricalEncoder, "
                             f"got {encoder!r}")
        return CategoricalEstimator(encoder.levels, self.pseudo_count, self.keys,
                                    prior=self.prior)

    def _new_accumulator(self) -> CategoricalAccumulator:
        if self.levels is None:
            raise ValueError("CategoricalEstimator has no levels: give levels= or let optimize "
                             "learn them when it encodes the data")
        return CategoricalAccumulator(len(self.levels), self.keys)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> CategoricalDistribution:
        # Smoothed, so a level the sample lacks does not start at probability zero.
        acc = self._new_accumulator()
        acc._add(sample.values, weights)
        c = acc.counts + 0.01 * max(float(weights.sum()), 1.0) / len(acc.counts)
        return CategoricalDistribution(c / c.sum(), self.levels)

    def estimate(self, nobs: float, stats: Any) -> CategoricalDistribution:
        (counts,), _ = stats
        c = dirichlet_mode(counts, self.prior, self.pseudo_count)
        total = c.sum()
        if total <= 0:
            return CategoricalDistribution(np.full(len(c), 1.0 / len(c)), self.levels)
        return CategoricalDistribution(c / total, self.levels)
