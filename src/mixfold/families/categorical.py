"""Categorical distribution over strings, finite numbers, bools and tuples of them (what a model
file can hold); the levels are fixed at encode time (:mod:`mixfold.families._levels`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.capabilities import LinearInFeatures
from mixfold.compute.linear import LinearTerms
from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families._levels import (CategoricalEncoder, checked_levels, first_repeat,
                                      level_from_json, level_to_json)
from mixfold.families.contract import (ColumnwiseUpdate, Encoded, InitRandom, LevelSums,
                                       ShapedLeafDistribution, ShapedLeafEstimator, StackedScoring,
                                       family)
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["CategoricalDistribution", "CategoricalEstimator", "CategoricalAccumulator",
           "CategoricalEncoder", "CategoricalStatistics", "level_to_json", "level_from_json"]


class CategoricalStatistics(NamedTuple):
    """A categorical's statistics of weighted rows."""

    counts: np.ndarray  #: the weighted count of each level


@family("Categorical")
class CategoricalDistribution(ShapedLeafDistribution, StackedScoring):
    """Probabilities over a fixed tuple of levels.

    ``CategoricalDistribution({"a": 0.25, "b": 0.75})`` or
    ``CategoricalDistribution([0.25, 0.75], levels=["a", "b"])``.

    >>> d = CategoricalDistribution({"a": 0.25, "b": 0.75})
    >>> round(d.log_density("b"), 6)
    -0.287682
    """

    parameter_coordinates = {"levels": "fixed", "probs": "simplex"}
    Statistics = CategoricalStatistics
    encoder_class = CategoricalEncoder
    carried = ("levels",)

    def __init__(self, probs: Mapping[Hashable, float] | Sequence[float],
                 levels: Sequence[Hashable] | None = None):
        if isinstance(probs, Mapping):
            if levels is not None:
                raise ValueError("give levels either as the keys of probs or as levels=, not both")
            levels, probs = list(probs.keys()), list(probs.values())
        p = np.asarray(probs, dtype=np.float64)
        if levels is None:
            levels = list(range(len(p)))
        self.levels = checked_levels(levels)
        if len(set(self.levels)) != len(self.levels):  # 1 == True == 1.0 in Python: one level
            raise ParameterError(f"categorical levels must be distinct (1, 1.0 and True are "
                                 f"one level), got {first_repeat(self.levels)!r} twice")
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

    def log_densities(self, codes: np.ndarray, dt: np.dtype) -> np.ndarray:
        return self.log_probs[codes]  # a gather of float64 log-probabilities in any band

    @classmethod
    def stack_log_density(cls, components: Sequence[CategoricalDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-probabilities of all K components at once: one gather, (n_rows, K) in F order."""
        table = np.stack([c.log_probs for c in components])  # (K, L)
        # np.take lays the gather out (K, n); table[:, codes] would lay it out (n, K), and its
        # transpose then adds to the other fields' F-order scores through strided memory
        return np.take(table, enc.values, axis=1).T

    def _sample(self, n: int, rng: np.random.Generator) -> list:
        codes = rng.choice(len(self.levels), size=n, p=self.probs)
        kinds = {type(v) for v in self.levels}
        if len(kinds) == 1 and kinds <= {int, float, str, bool}:
            return np.asarray(self.levels)[codes]
        return [self.levels[c] for c in codes]

    def decomposition(self) -> Decomposition:
        """Atomic: one table lookup and one count per row, whatever the vocabulary size V (which
        shows in the bytes: probabilities and their logs)."""
        return Decomposition.atomic(row_work=1.0,
                                    param_bytes=self.probs.nbytes + self.log_probs.nbytes)


class CategoricalAccumulator(LevelSums, ColumnwiseUpdate, LinearInFeatures):
    """Statistics: weighted count of each level."""

    family = CategoricalDistribution

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


class CategoricalEstimator(ShapedLeafEstimator):
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

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> CategoricalDistribution:
        # Smoothed, so a level the sample lacks does not start at probability zero.
        acc = self._new_accumulator()
        acc._add(sample.values, weights)
        c = acc.counts + 0.01 * max(float(weights.sum()), 1.0) / len(acc.counts)
        return CategoricalDistribution(c / c.sum(), self.levels)

    def from_statistics(self, stats: CategoricalStatistics) -> CategoricalDistribution:
        c = dirichlet_mode(stats.counts, self.prior, self.pseudo_count)
        total = c.sum()
        if total <= 0:
            return CategoricalDistribution(np.full(len(c), 1.0 / len(c)), self.levels)
        return CategoricalDistribution(c / total, self.levels)
