"""Multinomial distribution over bags of levels (bag-of-words rows): each row is a list of
tokens or a ``{level: count}`` mapping; the levels are fixed at encode time."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import LinearInFeatures, StackedScoring, StackedUpdate
from mixfold.compute.linear import LinearTerms
from mixfold.decomposition import Decomposition
from mixfold.errors import DataError, DataTypeError, ParameterError
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._protocol import (ArrayEncoded, Distribution, Encoded, Encoder,
                                        InitRandom, family)
from mixfold.families._scipy import csr_matrix, xlogy
from mixfold.families._sparse import (is_count_matrix, sparse_counts, spark_rows_as_mappings,
                                      spark_vector_width)
from mixfold.families.categorical import (CategoricalDistribution, CategoricalEncoder,
                                          level_from_json, level_to_json)
from mixfold.families.dirichlet import transposed_features
from mixfold.families.lda import BagOfWordsEncoded
from mixfold.families.poisson import log_factorial
from mixfold.options import integer, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["MultinomialDistribution", "MultinomialEstimator", "MultinomialAccumulator",
           "MultinomialEncoder"]


def _bag(row: Any, i: int) -> tuple[list, list]:
    """(levels, counts) of one row: a mapping level -> count, or a list of tokens."""
    if isinstance(row, Mapping):
        levels, counts = list(row.keys()), list(row.values())
        for level, c in zip(levels, counts):
            ok = isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, bool)
            if not (ok and np.isfinite(c) and c >= 0 and c == int(c)):
                raise DataError(f"expected a count (an integer >= 0) for level {level!r}, got "
                                f"{c!r}", row=i)
        return levels, counts
    if isinstance(row, (str, bytes)) or not isinstance(row, (Sequence, np.ndarray)):
        raise DataTypeError(f"expected a list of tokens or a {{level: count}} mapping, got "
                            f"{row!r:.60} ({type(row).__name__})", row=i)
    return list(row), [1] * len(row)


def _flatten(values: Any) -> tuple[list, np.ndarray, np.ndarray]:
    """Every row's levels in one list, their counts, and each entry's row."""
    levels: list = []
    counts: list = []
    rows: list = []
    for i, row in enumerate(values):
        lv, ct = _bag(row, i)
        levels += lv
        counts += ct
        rows += [i] * len(lv)
    return levels, np.asarray(counts, dtype=np.float64), np.asarray(rows, dtype=np.int64)


def _in_row(err: DataError, rows: np.ndarray) -> DataError:
    """A token's error, with the row the token came from."""
    return err if err.row is None else err.within(row=int(rows[err.row]))


class MultinomialEncoder(Encoder):
    """Encodes bags of levels into counts of shape (n_rows, V) for a fixed tuple of levels
    (learnt by ``fit`` as a categorical's are). A ``scipy.sparse`` matrix of counts (n_rows, V)
    is read as CSR rows (``BagOfWordsEncoded``), never densified: its columns are the levels
    (``levels`` of length V, else ``0 .. V-1``); so are a 2-D numeric NumPy array's (counts,
    not tokens) and Spark ML vectors (a DataFrame's vector column), row by row.

    >>> enc = MultinomialEncoder().fit([["b", "a", "b"], {"c": 2}])
    >>> enc.levels
    ('a', 'b', 'c')
    >>> enc.encode([["b", "a", "b"], {"c": 2}]).values.tolist()
    [[1.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
    """

    def __init__(self, levels: Sequence[Hashable] | None = None):
        self.levels = CategoricalEncoder(levels).levels

    def fit(self, values: Any) -> MultinomialEncoder:
        if self.levels is not None:
            return self
        if is_count_matrix(values):  # a matrix of counts: the levels are its columns
            return MultinomialEncoder(range(values.shape[1]))
        width = spark_vector_width(values)
        if width is not None:  # Spark vectors of counts: the levels are their columns
            return MultinomialEncoder(range(width))
        levels, _, rows = _flatten(values)
        try:
            fitted = CategoricalEncoder().fit(levels)
        except DataError as err:
            raise _in_row(err, rows) from None
        return self if fitted.levels is None else MultinomialEncoder(fitted.levels)

    def merge(self, other: Encoder) -> MultinomialEncoder:
        if not isinstance(other, MultinomialEncoder):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        merged = CategoricalEncoder(self.levels).merge(CategoricalEncoder(other.levels))
        return MultinomialEncoder(merged.levels)

    def encode(self, values: Any) -> ArrayEncoded | BagOfWordsEncoded:
        if self.levels is None:
            raise DataError("no tokens to learn the multinomial levels from: give the levels "
                            "(MultinomialEstimator(levels=...)) or data with tokens")
        if is_count_matrix(values):
            csr = sparse_counts(values, len(self.levels), True, "level")
            return BagOfWordsEncoded(csr.offsets, csr.columns, csr.counts)
        values = spark_rows_as_mappings(values, self.levels)
        levels, counts, rows = _flatten(values)
        out = np.zeros((len(values), len(self.levels)))
        if levels:
            try:
                codes = CategoricalEncoder(self.levels).encode(levels).values
            except DataError as err:
                raise _in_row(err, rows) from None
            np.add.at(out, (rows, codes), counts)
        return ArrayEncoded(out)

    def __repr__(self) -> str:
        return f"MultinomialEncoder({self.levels!r})"


@family("Multinomial", kind="multinomial")
class MultinomialDistribution(Distribution, StackedScoring):
    """Multinomial with probabilities ``probs`` over ``levels``: a row of counts ``x`` with
    total ``n`` has probability ``n! / prod x_j! * prod probs_j**x_j`` (scipy's
    ``multinomial(n, probs)``); ``n`` is the row's own total. ``trials`` is the total of the
    rows the sampler draws (it is not fitted).

    >>> d = MultinomialDistribution([0.2, 0.3, 0.5], levels=["a", "b", "c"])
    >>> round(d.log_density(["a", "c", "c"]), 6)  # scipy: multinomial(3, p).logpmf([1, 0, 2])
    -1.89712
    >>> round(d.log_density({"a": 1, "c": 2}), 6)
    -1.89712
    """

    #: model files may leave this out (``to_dict`` does when it is 1)
    optional_params = ("trials",)

    parameter_coordinates = {"levels": "fixed", "probs": "simplex", "trials": "fixed"}

    def __init__(self, probs: Mapping[Hashable, float] | Sequence[float],
                 levels: Sequence[Hashable] | None = None, *, trials: int = 1):
        self.categorical = CategoricalDistribution(probs, levels)
        self.trials = int(trials)
        if self.trials != trials or self.trials < 0:
            raise ParameterError(f"trials must be an integer >= 0, got {trials!r}")

    @property
    def levels(self) -> tuple:
        return self.categorical.levels

    @property
    def probs(self) -> np.ndarray:
        return self.categorical.probs

    @property
    def log_probs(self) -> np.ndarray:
        return self.categorical.log_probs

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if isinstance(enc, BagOfWordsEncoded):
            return self.stack_log_density([self], enc, precision)[:, 0]
        x = enc.values
        return _log_coefficients(x) + xlogy(x, self.probs).sum(axis=1)

    @classmethod
    def stack_log_density(cls, components: Sequence[MultinomialDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-probabilities of all K components at once, (n_rows, K); sparse rows by one
        sparse product with the log-probabilities (V, K)."""
        if isinstance(enc, BagOfWordsEncoded):
            with np.errstate(divide="ignore"):  # a count of a level of probability 0: -inf
                log_probs = np.log(np.stack([c.probs for c in components], axis=1))
            out = _csr(enc, len(components[0].probs)) @ log_probs
            return out + _sparse_log_coefficients(enc)[:, None]
        x = enc.values
        out = np.stack([xlogy(x, c.probs).sum(axis=1) for c in components], axis=1)
        return out + _log_coefficients(x)[:, None]

    @classmethod
    def can_stack(cls, components: Sequence[MultinomialDistribution]) -> bool:
        return len({c.levels for c in components}) == 1

    def encoder(self) -> Encoder:
        return MultinomialEncoder(self.levels)

    def estimator(self, **options: Any) -> MultinomialEstimator:
        options.setdefault("levels", self.levels)
        options.setdefault("trials", self.trials)
        return MultinomialEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> list[dict]:
        counts = rng.multinomial(self.trials, self.probs, size=n)
        return [{self.levels[j]: int(row[j]) for j in np.flatnonzero(row)} for row in counts]

    def n_parameters(self) -> int:
        return len(self.probs) - 1

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"levels": [level_to_json(v) for v in self.levels],
                                  "probs": self.probs.tolist()}
        if self.trials != 1:
            params["trials"] = self.trials
        return params

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> MultinomialDistribution:
        return cls(p["probs"], levels=[level_from_json(v) for v in p["levels"]],
                   trials=p.get("trials", 1))

    def decomposition(self) -> Decomposition:
        """Atomic: a multiply-add per level per row (the rows are dense counts)."""
        return Decomposition.atomic(row_work=float(len(self.probs)),
                                    param_bytes=2 * self.probs.nbytes)


def _csr(enc: BagOfWordsEncoded, n_levels: int) -> Any:
    """The rows as a scipy CSR matrix over the same arrays (nothing copied)."""
    return csr_matrix((enc.counts, enc.words, enc.offsets), shape=(enc.n_rows, n_levels))


def _sparse_log_coefficients(enc: BagOfWordsEncoded) -> np.ndarray:
    """``log(n! / prod x_j!)`` of each sparse row."""
    per_count = np.bincount(enc.doc_of_nonzero(), weights=log_factorial(enc.counts),
                            minlength=enc.n_rows)
    return log_factorial(enc.lengths()) - per_count


def _log_coefficients(x: np.ndarray) -> np.ndarray:
    """``log(n! / prod x_j!)`` of each row of counts (n_rows, V)."""
    return log_factorial(x.sum(axis=1)) - log_factorial(x.ravel()).reshape(x.shape).sum(axis=1)


class MultinomialAccumulator(LeafAccumulator, StackedUpdate, LinearInFeatures):
    """Statistics: the weighted count of each level."""

    def __init__(self, n_levels: int, keys: str | None = None):
        super().__init__(keys)
        self.counts = np.zeros(n_levels)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.counts]

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        self.counts += w @ x

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Any,
                   precision: Precision = FLOAT64) -> None:
        if not isinstance(enc, BagOfWordsEncoded):
            return super().seq_update(enc, weights, model, precision)
        self.counts += np.bincount(enc.words, weights=enc.counts * weights[enc.doc_of_nonzero()],
                                   minlength=self.counts.size)
        return None

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        self.seq_update(enc, weights, None)

    @staticmethod
    def stack_update(accs: Sequence[MultinomialAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights
        (sparse rows: one sparse product, levels by components)."""
        if isinstance(enc, BagOfWordsEncoded):
            sums = _csr(enc, accs[0].counts.size).T @ resp
            for k, acc in enumerate(accs):
                acc.counts += sums[:, k]
            return
        for k, acc in enumerate(accs):
            acc.counts += resp[:, k] @ enc.values

    @staticmethod
    def linear_terms(accs: Sequence[MultinomialAccumulator],
                     components: Sequence[MultinomialDistribution],
                     enc: Encoded) -> LinearTerms | None:
        """``log p_k(x) = log_probs_k . x + log(n! / prod x_j!)``: the counts are the features,
        the coefficient is the row's, in ``base``. The first part is a log-probability, so its
        peak is 0. ``None`` when a probability is 0 (``0 * log 0`` is not a GEMM product), the
        components' levels differ or the rows are sparse (their stacked product is cheaper
        than dense features)."""
        if len({c.levels for c in components}) != 1 or isinstance(enc, BagOfWordsEncoded):
            return None
        probs = np.stack([c.probs for c in components])
        if not (probs > 0).all():
            return None
        x = enc.values

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            transposed_features(x[lo:hi], out)

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, s in zip(accs, sums):
                acc.counts += s

        k = len(components)
        return LinearTerms(np.log(probs), np.zeros(k), features, add_sums,
                           base=_log_coefficients(x), peak=np.zeros(k), source=x,
                           key=("multinomial", x.shape[1]))


class MultinomialEstimator(LeafEstimator):
    """M-step for :class:`MultinomialDistribution`: each level's share of the weighted counts.

    ``levels=None`` learns the levels from the data when it is encoded (sorted when they
    order); ``pseudo_count`` is added to every level's count, so a level a component never saw
    keeps a positive probability (``prior``, a number or one per level: a Dirichlet
    concentration instead, the estimate its maximum a posteriori ``max(counts + prior - 1, 0)``
    normalised); ``trials`` passes to the fitted distribution's sampler. With no count at all
    the estimate is uniform.

    >>> import mixfold
    >>> rows = [["a", "b", "b"], {"b": 3, "c": 1}, ["c"]]
    >>> d = mixfold.optimize(rows, MultinomialEstimator(), progress=False)
    >>> d.levels, d.probs.round(3).tolist()
    (('a', 'b', 'c'), [0.125, 0.625, 0.25])
    """

    accumulator_class = MultinomialAccumulator
    distribution_class = MultinomialDistribution

    option_rules = {"pseudo_count": number(0), "trials": integer(0), "prior": CONCENTRATION}

    def __init__(self, levels: Sequence[Hashable] | None = None, pseudo_count: float = 0.0,
                 trials: int = 1, keys: str | None = None, *, prior: Any = None):
        super().__init__(keys)
        self.check_options(pseudo_count=pseudo_count, trials=trials, prior=prior)
        self.levels = None if levels is None else tuple(levels)
        self.pseudo_count = float(pseudo_count)
        self.trials = int(trials)
        self.prior = None if prior is None else np.asarray(prior, dtype=np.float64).tolist()

    def encoder(self) -> MultinomialEncoder:
        return MultinomialEncoder(self.levels)

    def bind(self, encoder: Encoder) -> MultinomialEstimator:
        if not isinstance(encoder, MultinomialEncoder) or encoder.levels is None:
            raise ValueError(f"a multinomial estimator needs a fitted MultinomialEncoder, got "
                             f"{encoder!r}")
        return MultinomialEstimator(encoder.levels, self.pseudo_count, self.trials, self.keys,
                                    prior=self.prior)

    def _new_accumulator(self) -> MultinomialAccumulator:
        if self.levels is None:
            raise ValueError("MultinomialEstimator has no levels: give levels= or let optimize "
                             "learn them when it encodes the data")
        return MultinomialAccumulator(len(self.levels), self.keys)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> MultinomialDistribution:
        # smoothed, so a level the sample lacks does not start at probability zero
        acc = self._new_accumulator()
        acc.seq_initialize(sample, weights, rng)
        c = acc.counts + 0.01 * max(float(acc.counts.sum()), 1.0) / len(acc.counts)
        return MultinomialDistribution(c / c.sum(), self.levels, trials=self.trials)

    def estimate(self, nobs: float, stats: Any) -> MultinomialDistribution:
        (counts,), _ = stats
        c = dirichlet_mode(counts, self.prior, self.pseudo_count)
        total = c.sum()
        if total <= 0:
            return MultinomialDistribution(np.full(len(c), 1.0 / len(c)), self.levels,
                                           trials=self.trials)
        return MultinomialDistribution(c / total, self.levels, trials=self.trials)
