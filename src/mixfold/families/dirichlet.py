"""Dirichlet distribution over compositions: vectors of D > 1 positive parts that sum to 1
(read by :class:`~mixfold.families._encoders.SimplexEncoder`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from mixfold.compute.linear import LinearTerms
from mixfold.decomposition import Decomposition
from mixfold.errors import DegenerateFitWarning, ParameterError
from mixfold.families._encoders import SUM_TOLERANCE, SimplexEncoder
from mixfold.families.contract import (Encoded, LevelSums, LinearInFeatures, ShapedLeafDistribution,
                                       ShapedLeafEstimator, StackedUpdate, StacksOneShape, family,
                                       transposed_features)
from mixfold.families._scipy import digamma, gammaln, polygamma
from mixfold.options import integer, none_or, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["DirichletDistribution", "DirichletEstimator", "DirichletAccumulator",
           "DirichletStatistics", "SimplexEncoder", "dirichlet_mle", "moment_start",
           "transposed_features", "SUM_TOLERANCE"]

def dirichlet_mle(mean_log: np.ndarray, start: np.ndarray, max_concentration: float = 1e8,
                  max_iter: int = 200) -> tuple[np.ndarray, bool]:
    """The Dirichlet ``alpha`` maximising ``lgamma(sum a) - sum lgamma(a) + a . mean_log``
    (the log-likelihood per unit weight, up to a constant), and whether ``sum alpha`` reached
    ``max_concentration``.

    Newton's method from ``start`` with the Hessian's diagonal-plus-rank-one inverse (Minka,
    "Estimating a Dirichlet distribution", 2000) and step halving: the objective is concave, so
    each accepted step increases it and ``alpha`` stays positive. Rows that all sit on one point
    (no spread) have no finite maximum: ``alpha`` is then scaled to ``max_concentration``.

    >>> alpha, capped = dirichlet_mle(np.log([0.2, 0.3, 0.5]) - 0.1, np.ones(3))
    >>> a0 = alpha.sum()
    >>> np.allclose(digamma(alpha) - digamma(a0), np.log([0.2, 0.3, 0.5]) - 0.1), capped
    (True, False)
    """
    g = np.asarray(mean_log, dtype=np.float64)
    a = np.asarray(start, dtype=np.float64).copy()

    def objective(a: np.ndarray) -> float:
        return float(gammaln(a.sum()) - gammaln(a).sum() + a @ g)

    value = objective(a)
    for _ in range(max_iter):
        a0 = a.sum()
        grad = digamma(a0) - digamma(a) + g
        q = -polygamma(1, a)
        z = polygamma(1, a0)
        b = (grad / q).sum() / (1.0 / z + (1.0 / q).sum())
        step = (grad - b) / q
        t = 1.0
        while True:
            new = a - t * step
            if (new > 0).all() and np.isfinite(new).all():
                new_value = objective(new)
                if new_value >= value - 1e-15 * abs(value):
                    break
            t *= 0.5
            if t < 1e-12:
                new, new_value = a, value
                break
        converged = np.all(np.abs(new - a) <= 1e-13 * a)
        a, value = new, new_value
        if converged or a.sum() > max_concentration:
            break
    if a.sum() >= max_concentration:
        return a * (max_concentration / a.sum()), True
    return a, False


def moment_start(mean: np.ndarray, mean_sq: np.ndarray) -> np.ndarray:
    """A Dirichlet's ``alpha`` from the means and mean squares of its parts (the method of
    moments, ``var_k = m_k (1 - m_k) / (a0 + 1)``, pooled over parts), a start for Newton."""
    var = np.maximum(mean_sq - mean * mean, 0.0)
    spread = (mean * (1.0 - mean)).sum()
    a0 = spread / var.sum() - 1.0 if var.sum() > 0 else 1e6
    return np.maximum(mean, 1e-12) * min(max(a0, 1e-3), 1e6)


class DirichletStatistics(NamedTuple):
    """A Dirichlet's statistics of weighted rows (the logs are sufficient; the moments give
    Newton its start)."""

    weight: np.ndarray  #: the sum of the weights, (1,)
    log_sums: np.ndarray  #: the weighted sum of each part's log, (D,)
    sums: np.ndarray  #: the weighted sum of each part, (D,)
    squares: np.ndarray  #: the weighted sum of each part's square, (D,)


@family("Dirichlet")
class DirichletDistribution(ShapedLeafDistribution, StacksOneShape):
    """Dirichlet with concentrations ``alpha`` (D > 1 of them, each > 0): density
    ``Gamma(sum a) / prod Gamma(a_k) * prod x_k**(a_k - 1)`` on the simplex; scipy's
    ``dirichlet(alpha)``.

    >>> d = DirichletDistribution([2.0, 3.0, 4.0])
    >>> round(d.log_density([0.2, 0.3, 0.5]), 6)
    2.022871
    >>> d.sampler(0).sample(2).sum(axis=1).round(12).tolist()
    [1.0, 1.0]
    """

    parameter_coordinates = {"alpha": "positive"}
    Statistics = DirichletStatistics
    encoder_class = SimplexEncoder
    carried = ("dim",)

    def __init__(self, alpha: Sequence[float]):
        a = np.asarray(alpha, dtype=np.float64)
        if a.ndim != 1 or a.size < 2:
            raise ParameterError(f"alpha must be a list of at least 2 concentrations, got "
                                 f"{alpha!r:.80}")
        if not (np.isfinite(a).all() and (a > 0).all()):
            raise ParameterError(f"alpha must be finite and > 0, got {a.tolist()!r:.80}")
        self.alpha = a
        self.log_norm = float(gammaln(a.sum()) - gammaln(a).sum())

    @property
    def dim(self) -> int:
        return int(self.alpha.size)

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        return np.log(x) @ (self.alpha - 1.0) + self.log_norm  # float64 in every band

    @classmethod
    def stack_log_density(cls, components: Sequence[DirichletDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-densities of all K components at once, (n_rows, K)."""
        coef = np.stack([c.alpha - 1.0 for c in components], axis=1)  # (D, K)
        return np.log(enc.values) @ coef + np.array([c.log_norm for c in components])

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        x = rng.dirichlet(self.alpha, size=n)
        # small concentrations put parts below the smallest float: keep them inside the support
        x = np.maximum(x, np.finfo(np.float64).tiny)
        return x / x.sum(axis=1, keepdims=True)

    def decomposition(self) -> Decomposition:
        """Atomic: a log and a multiply-add per part, D scalar leaves' work."""
        return Decomposition.atomic(row_work=float(self.dim), param_bytes=8 * (self.dim + 1))


def _features(x: np.ndarray) -> np.ndarray:
    """Each row's ``[log x, x, x^2]`` (n_rows, 3 D)."""
    return np.concatenate([np.log(x), x, x * x], axis=1)


def _add_sums(acc: DirichletAccumulator, mass: float, sums: np.ndarray) -> None:
    """Add a weight and the matching sums of :func:`_features` into ``acc``."""
    d = acc.sums.size
    acc.weight += mass
    acc.log_sums += sums[:d]
    acc.sums += sums[d:2 * d]
    acc.squares += sums[2 * d:]


class DirichletAccumulator(LevelSums, StackedUpdate, LinearInFeatures):
    """Statistics: :class:`DirichletStatistics`."""

    family = DirichletDistribution

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        _add_sums(self, w.sum(), w @ _features(x))

    @staticmethod
    def stack_update(accs: Sequence[DirichletAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights."""
        phi = _features(enc.values)
        for k, acc in enumerate(accs):
            _add_sums(acc, resp[:, k].sum(), resp[:, k] @ phi)

    @staticmethod
    def linear_terms(accs: Sequence[DirichletAccumulator],
                     components: Sequence[DirichletDistribution],
                     enc: Encoded) -> LinearTerms | None:
        """``log p_k(x) = (alpha_k - 1) . log x + log_norm_k`` on the features
        ``[log x, x, x^2]`` (the moments with coefficient 0: they are summed for the start).
        A concentration below 1 makes the density unbounded at the simplex's faces: no peak."""
        if len({c.dim for c in components}) != 1:
            return None
        x = enc.values
        d = x.shape[1]
        alpha = np.stack([c.alpha for c in components])
        coef = np.concatenate([alpha - 1.0, np.zeros((len(components), 2 * d))], axis=1)
        const = np.array([c.log_norm for c in components])

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            transposed_features(_features(x[lo:hi]), out)

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, m, s in zip(accs, mass, sums):
                _add_sums(acc, m, s)

        peak = None
        if (alpha >= 1.0).all():  # the log-density at the mode, (alpha - 1) / (a0 - D)
            excess = alpha - 1.0
            with np.errstate(divide="ignore", invalid="ignore"):
                mode = excess / excess.sum(axis=1, keepdims=True)
                peak_at = np.where(excess > 0, excess * np.log(mode), 0.0).sum(axis=1)
            peak = np.where(excess.sum(axis=1) > 0, peak_at, 0.0) + const
        return LinearTerms(coef, const, features, add_sums, peak=peak, source=x,
                           key=("dirichlet", d))


class DirichletEstimator(ShapedLeafEstimator):
    """M-step for :class:`DirichletDistribution`: the maximum likelihood ``alpha``
    (:func:`dirichlet_mle`, Newton's method from the method of moments).

    ``dim`` is the number of parts D (``None`` learns it from the data). ``max_concentration``
    caps ``sum alpha``: rows that all sit on one composition have no finite maximum and get the
    cap, with a :class:`~mixfold.DegenerateFitWarning`. With no weight at all the estimate is
    the flat ``DirichletDistribution([1] * D)``.

    >>> import mixfold
    >>> x = DirichletDistribution([2.0, 5.0, 3.0]).sampler(1).sample(20000)
    >>> d = mixfold.optimize(x, DirichletEstimator(), progress=False)
    >>> d.alpha.round(1).tolist()
    [2.0, 5.0, 3.0]
    """

    accumulator_class = DirichletAccumulator
    distribution_class = DirichletDistribution

    option_rules = {"dim": none_or(integer(2)), "max_concentration": number(0, above=True)}

    def __init__(self, dim: int | None = None, max_concentration: float = 1e8,
                 keys: str | None = None):
        super().__init__(keys)
        self.check_options(dim=dim, max_concentration=max_concentration)
        self.dim = None if dim is None else int(dim)
        self.max_concentration = float(max_concentration)

    def from_statistics(self, stats: DirichletStatistics) -> DirichletDistribution:
        w = float(stats.weight[0])
        if w <= 0:
            return DirichletDistribution(np.ones(stats.sums.size))
        alpha, capped = dirichlet_mle(stats.log_sums / w,
                                      moment_start(stats.sums / w, stats.squares / w),
                                      self.max_concentration)
        if capped:  # (stacklevel: the caller of estimate)
            warnings.warn(f"a Dirichlet's concentration reached its cap max_concentration="
                          f"{self.max_concentration:g}; rows of total weight {w:.6g} sit on "
                          f"(nearly) one composition", DegenerateFitWarning, stacklevel=3)
        return DirichletDistribution(alpha)
