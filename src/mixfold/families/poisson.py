"""Poisson distribution over counts 0, 1, 2, ... with rate ``lam``."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import LinearInFeatures, StackedScoring, StackedUpdate
from mixfold.compute.feature_cache import cache_for
from mixfold.errors import ParameterError
from mixfold.families._leaf import (LeafEstimator, NumericEncoder, WeightedSumAccumulator)
from mixfold.compute.linear import LinearTerms
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.families._scipy import gammaln, xlogy
from mixfold.precision import native_dtype
from mixfold.options import number

__all__ = ["PoissonDistribution", "PoissonEstimator", "PoissonAccumulator"]

#: log(x!) for counts below this come from a table (a gather) rather than gammaln (~25 ns each)
LOG_FACTORIAL_TABLE_SIZE = 4096


@functools.cache
def _log_factorials() -> np.ndarray:
    """The table, made on first use (not at import: scipy is imported when first needed)."""
    return gammaln(np.arange(LOG_FACTORIAL_TABLE_SIZE) + 1.0)


def log_factorial(counts: np.ndarray) -> np.ndarray:
    """``log(x!)`` of integer-valued counts (float64 array).

    >>> log_factorial(np.array([0.0, 3.0, 5000.0])).round(4).tolist()
    [0.0, 1.7918, 37591.1435]
    """
    if counts.size and counts.max() < LOG_FACTORIAL_TABLE_SIZE:
        return _log_factorials()[counts.astype(np.intp)]
    return gammaln(counts + 1.0)


def _minus_log_factorials(x: np.ndarray) -> np.ndarray:
    """``-log(x!)`` of the counts ``x``, kept with the fused E-step's features where the rows
    stay resident (:mod:`mixfold.compute.feature_cache`): it depends on the rows only, so it is
    computed once per fit, not once per fold."""
    store = cache_for(("poisson -log x!",), [x], x.nbytes, x.nbytes)
    base = None if store is None else store.get("base")
    if base is None:
        base = -log_factorial(x)
        if store is not None:
            store["base"] = base
    return base


@family("Poisson")
class PoissonDistribution(Distribution, StackedScoring):
    """Poisson with rate ``lam`` >= 0 (``lam = 0`` is the point mass at 0).

    >>> d = PoissonDistribution(3.0)
    >>> round(d.log_density(2), 6)
    -1.495923
    >>> d.sampler(0).sample(3).dtype
    dtype('int64')
    """

    parameter_coordinates = {"lam": "positive"}

    def __init__(self, lam: float):
        self.lam = float(lam)
        if not (np.isfinite(self.lam) and self.lam >= 0):
            raise ParameterError(f"lam must be finite and >= 0, got {lam!r}")

    def seq_log_density(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        lam = dt.type(self.lam)
        # xlogy gives 0 * log(0) = 0, so lam = 0 scores 0 at x = 0 and -inf elsewhere, never NaN
        out = xlogy(x, lam) - lam - log_factorial(enc.values).astype(dt, copy=False)
        return out.astype(np.float64, copy=False)

    @classmethod
    def stack_log_density(cls, components: Sequence[PoissonDistribution], enc: Encoded,
                          precision: str = "float64") -> np.ndarray:
        """Log-densities of all K components at once, (n_rows, K) in Fortran order."""
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        lam = np.array([c.lam for c in components], dtype=dt)
        with np.errstate(divide="ignore"):
            log_lam = np.log(lam)
        out = np.multiply.outer(np.where(lam > 0, log_lam, 0), x)  # (K, n)
        out -= lam[:, None]
        out -= log_factorial(enc.values).astype(dt, copy=False)
        for k in np.flatnonzero(lam == 0):  # the point mass at 0: xlogy's 0 * log(0) = 0
            out[k] = np.where(x == 0, 0.0, -np.inf)
        return out.T

    def encoder(self) -> Encoder:
        return NumericEncoder("count")

    def estimator(self, **options: Any) -> PoissonEstimator:
        return PoissonEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.poisson(self.lam, size=n).astype(np.int64)

    def n_parameters(self) -> int:
        return 1

    def _params(self) -> dict[str, Any]:
        return {"lam": self.lam}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> PoissonDistribution:
        return cls(p["lam"])


class PoissonAccumulator(WeightedSumAccumulator, StackedUpdate, LinearInFeatures):
    """Statistics: sum of weights and of weighted counts."""

    @staticmethod
    def linear_terms(accs: Sequence[PoissonAccumulator], components: Sequence[PoissonDistribution],
                     enc: Encoded) -> LinearTerms | None:
        """``log p_k(x) = x log lam_k - lam_k - log x!`` as
        :class:`~mixfold.compute.linear.LinearTerms` on the feature ``x`` with coefficient
        ``log lam_k``, the constant ``-lam_k`` and the base ``-log x!`` (the same for every
        component, added in float64: as a feature it would be rounded to the band, and it is
        thousands of nats for large counts). ``None`` when a rate is 0: its ``0 * log 0`` is
        not a product a GEMM can form."""
        lam = np.array([c.lam for c in components])
        if not (lam > 0).all():
            return None
        x = enc.values

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            out[:, 0] = x[lo:hi].reshape(out.shape[0], -1)

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, m, s in zip(accs, mass, sums[:, 0]):
                acc.sums += (m, s)

        return LinearTerms(np.log(lam)[:, None], -lam, features, add_sums,
                           base=_minus_log_factorials(x), source=x, key=("poisson",))

    @staticmethod
    def stack_update(accs: Sequence[PoissonAccumulator], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights.

        Column by column, so any range of components can be added apart with the same bits;
        the dot products are ``einsum`` loops, not BLAS calls (no thread wake-ups per column).
        """
        for k, acc in enumerate(accs):
            acc.sums += (resp[:, k].sum(), np.einsum("i,i->", enc.values, resp[:, k]))


class PoissonEstimator(LeafEstimator):
    """M-step for :class:`PoissonDistribution`: ``lam`` is the weighted mean count.

    ``min_lam`` (> 0) floors the rate, so a component that only sees zeros keeps a positive rate
    and still scores other counts finitely. With no weight at all the estimate is
    ``PoissonDistribution(1.0)``. ``prior_shape`` and ``prior_rate``, a Gamma(shape, rate)
    prior on the rate in hmmlearn's convention (its ``lambdas_prior`` and ``lambdas_weight``):
    ``lam = (prior_shape + sum w x) / (prior_rate + sum w)``, the posterior mean (with no weight
    and a prior, ``prior_shape / prior_rate``).

    >>> import mixfold
    >>> x = PoissonDistribution(4.0).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, PoissonEstimator(), progress=False)
    >>> round(d.lam, 1)
    4.0
    >>> mixfold.optimize([2, 4], PoissonEstimator(prior_shape=3.0, prior_rate=1.0),
    ...                  progress=False).lam    # (3 + 6) / (1 + 2)
    3.0
    """

    accumulator_class = PoissonAccumulator
    distribution_class = PoissonDistribution

    option_rules = {"min_lam": number(0, above=True), "prior_shape": number(0),
                    "prior_rate": number(0)}

    def __init__(self, min_lam: float = 1e-10, keys: str | None = None, *,
                 prior_shape: float = 0.0, prior_rate: float = 0.0):
        super().__init__(keys)
        self.check_options(min_lam=min_lam, prior_shape=prior_shape, prior_rate=prior_rate)
        self.min_lam = float(min_lam)
        self.prior_shape = float(prior_shape)
        self.prior_rate = float(prior_rate)

    def encoder(self) -> Encoder:
        return NumericEncoder("count")

    def estimate(self, nobs: float, stats: Any) -> PoissonDistribution:
        (sums,), _ = stats
        s0, s1 = sums + (self.prior_rate, self.prior_shape)
        if s0 <= 0:
            return PoissonDistribution(1.0)
        return PoissonDistribution(max(s1 / s0, self.min_lam))
