"""Multinomial distribution over bags of levels (bag-of-words rows): each row is a list of
tokens or a ``{level: count}`` mapping, or a row of a count matrix; the levels are fixed at
encode time (:class:`~mixfold.families._bags.MultinomialEncoder`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.compute.linear import LinearTerms
from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._bags import MultinomialEncoder
from mixfold.families._count_rows import as_csr, log_coefficients, sparse_log_coefficients
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families._scipy import xlogy
from mixfold.families.contract import (Encoded, InitRandom, LevelSums, LinearInFeatures,
                                       ShapedLeafDistribution, ShapedLeafEstimator, StackedUpdate,
                                       StacksOneShape, family, transposed_features)
from mixfold.families.categorical import CategoricalDistribution
from mixfold.families.lda import BagOfWordsEncoded
from mixfold.options import integer, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["MultinomialDistribution", "MultinomialEstimator", "MultinomialAccumulator",
           "MultinomialEncoder", "MultinomialStatistics"]


class MultinomialStatistics(NamedTuple):
    """A multinomial's statistics of weighted rows."""

    counts: np.ndarray  #: the weighted count of each level


@family("Multinomial")
class MultinomialDistribution(ShapedLeafDistribution, StacksOneShape):
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
    Statistics = MultinomialStatistics
    encoder_class = MultinomialEncoder
    carried = ("levels", "trials")

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
    def probs(self) -> np.ndarray:  # (a property: ExpectedMultinomial scores other weights)
        return self.categorical.probs

    @property
    def log_probs(self) -> np.ndarray:
        return self.categorical.log_probs

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        return log_coefficients(x) + xlogy(x, self.probs).sum(axis=1)  # float64 in any band

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if isinstance(enc, BagOfWordsEncoded):
            return self.stack_log_density([self], enc, precision)[:, 0]
        return super().seq_log_density(enc, precision)

    @classmethod
    def stack_log_density(cls, components: Sequence[MultinomialDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-probabilities of all K components at once, (n_rows, K); sparse rows by one
        sparse product with the log-probabilities (V, K)."""
        if isinstance(enc, BagOfWordsEncoded):
            with np.errstate(divide="ignore"):  # a count of a level of probability 0: -inf
                log_probs = np.log(np.stack([c.probs for c in components], axis=1))
            out = as_csr(enc, len(components[0].probs)) @ log_probs
            return out + sparse_log_coefficients(enc)[:, None]
        x = enc.values
        out = np.stack([xlogy(x, c.probs).sum(axis=1) for c in components], axis=1)
        return out + log_coefficients(x)[:, None]

    def _sample(self, n: int, rng: np.random.Generator) -> list[dict]:
        counts = rng.multinomial(self.trials, self.probs, size=n)
        return [{self.levels[j]: int(row[j]) for j in np.flatnonzero(row)} for row in counts]

    def decomposition(self) -> Decomposition:
        """Atomic: a multiply-add per level per row (the rows are dense counts)."""
        return Decomposition.atomic(row_work=float(len(self.probs)),
                                    param_bytes=2 * self.probs.nbytes)


class MultinomialAccumulator(LevelSums, StackedUpdate, LinearInFeatures):
    """Statistics: the weighted count of each level (sparse rows: through their nonzeros)."""

    family = MultinomialDistribution

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
            sums = as_csr(enc, accs[0].counts.size).T @ resp
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
                           base=log_coefficients(x), peak=np.zeros(k), source=x,
                           key=("multinomial", x.shape[1]))


class MultinomialEstimator(ShapedLeafEstimator):
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

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> MultinomialDistribution:
        # smoothed, so a level the sample lacks does not start at probability zero
        acc = self._new_accumulator()
        acc.seq_initialize(sample, weights, rng)
        c = acc.counts + 0.01 * max(float(acc.counts.sum()), 1.0) / len(acc.counts)
        return MultinomialDistribution(c / c.sum(), self.levels, trials=self.trials)

    def from_statistics(self, stats: MultinomialStatistics) -> MultinomialDistribution:
        c = dirichlet_mode(stats.counts, self.prior, self.pseudo_count)
        total = c.sum()
        if total <= 0:
            return MultinomialDistribution(np.full(len(c), 1.0 / len(c)), self.levels,
                                           trials=self.trials)
        return MultinomialDistribution(c / total, self.levels, trials=self.trials)
