"""Dirichlet distribution over compositions: vectors of D > 1 positive parts that sum to 1."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import LinearInFeatures, StackedScoring, StackedUpdate
from mixfold.compute.linear import LinearTerms
from mixfold.decomposition import Decomposition
from mixfold.errors import DataError, DegenerateFitWarning, ParameterError
from mixfold.families._encoders import VectorEncoder, _VectorEncoder
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._protocol import ArrayEncoded, Distribution, Encoded, Encoder, family
from mixfold.families._scipy import digamma, gammaln, polygamma
from mixfold.options import integer, none_or, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["DirichletDistribution", "DirichletEstimator", "DirichletAccumulator",
           "SimplexEncoder", "dirichlet_mle", "moment_start", "transposed_features",
           "SUM_TOLERANCE"]

#: A composition's parts may sum to 1 within this (rounded shares); they are rescaled to 1.
SUM_TOLERANCE = 1e-6


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


class SimplexEncoder(Encoder):
    """Encodes compositions: vectors of ``dim`` parts > 0 summing to 1 within
    :data:`SUM_TOLERANCE` (rescaled to sum to 1), as an array (n_rows, dim); ``dim=None``
    learns the length from the first row.

    >>> SimplexEncoder(3).encode([[0.2, 0.3, 0.5]]).values.tolist()
    [[0.2, 0.3, 0.5]]
    >>> SimplexEncoder(2).encode([[0.5, 0.5], [0.5, 0.6]])
    Traceback (most recent call last):
    ...
    mixfold.errors.DataError: row 1: expected parts that sum to 1, got a sum of 1.1
    """

    def __init__(self, dim: int | None = None):
        self.dim = None if dim is None else int(dim)

    def fit(self, values: Any) -> SimplexEncoder:
        if self.dim is not None:
            return self
        fitted = _VectorEncoder().fit(values)
        return self if fitted.dim is None else SimplexEncoder(fitted.dim)

    def merge(self, other: Encoder) -> SimplexEncoder:
        if isinstance(other, SimplexEncoder) and (self.dim is None or other.dim is None):
            return self if other.dim is None else other
        return super().merge(other)

    def encode(self, values: Any) -> ArrayEncoded:
        if self.dim is None:
            raise ValueError("this SimplexEncoder has no length yet: call fit(values) first")
        x = VectorEncoder(self.dim).encode(values).values
        if self.dim < 2:
            raise DataError(f"a composition needs at least 2 parts, got {self.dim}")
        bad = x <= 0
        if bad.any():
            row, col = map(int, np.argwhere(bad)[0])
            raise DataError(f"expected a part > 0, got {float(x[row, col])!r}", row=row,
                            path=(col,))
        total = x.sum(axis=1)
        off = np.abs(total - 1.0) > SUM_TOLERANCE
        if off.any():
            row = int(np.flatnonzero(off)[0])
            raise DataError(f"expected parts that sum to 1, got a sum of {total[row]:.6g}",
                            row=row)
        return ArrayEncoded(np.ascontiguousarray(x / total[:, None]))

    def __repr__(self) -> str:
        return f"SimplexEncoder({self.dim!r})"


@family("Dirichlet", kind="dirichlet")
class DirichletDistribution(Distribution, StackedScoring):
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

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return np.log(enc.values) @ (self.alpha - 1.0) + self.log_norm

    @classmethod
    def stack_log_density(cls, components: Sequence[DirichletDistribution], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-densities of all K components at once, (n_rows, K)."""
        coef = np.stack([c.alpha - 1.0 for c in components], axis=1)  # (D, K)
        return np.log(enc.values) @ coef + np.array([c.log_norm for c in components])

    @classmethod
    def can_stack(cls, components: Sequence[DirichletDistribution]) -> bool:
        return len({c.dim for c in components}) == 1

    def encoder(self) -> Encoder:
        return SimplexEncoder(self.dim)

    def estimator(self, **options: Any) -> DirichletEstimator:
        options.setdefault("dim", self.dim)
        return DirichletEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        x = rng.dirichlet(self.alpha, size=n)
        # small concentrations put parts below the smallest float: keep them inside the support
        x = np.maximum(x, np.finfo(np.float64).tiny)
        return x / x.sum(axis=1, keepdims=True)

    def n_parameters(self) -> int:
        return self.dim

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha.tolist()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> DirichletDistribution:
        return cls(p["alpha"])

    def decomposition(self) -> Decomposition:
        """Atomic: a log and a multiply-add per part, D scalar leaves' work."""
        return Decomposition.atomic(row_work=float(self.dim), param_bytes=8 * (self.dim + 1))


def transposed_features(phi: np.ndarray, out: np.ndarray) -> None:
    """``out[i, :, j] = phi[i * w + j]`` for ``out`` of shape (s, F, w) (the fused E-step's
    layout of per-row features ``phi`` of shape (s * w, F))."""
    s, f, w = out.shape
    np.copyto(out, phi.reshape(s, w, f).transpose(0, 2, 1), casting="same_kind")


class DirichletAccumulator(LeafAccumulator, StackedUpdate, LinearInFeatures):
    """Statistics: the weight, then per part the weighted sums of ``log x``, ``x`` and ``x^2``
    (the logs are sufficient; the moments give Newton its start)."""

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(keys)
        self.weight = np.zeros(1)
        self.sums = np.zeros(3 * dim)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.weight, self.sums]

    @staticmethod
    def _features(x: np.ndarray) -> np.ndarray:
        return np.concatenate([np.log(x), x, x * x], axis=1)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        self.weight += w.sum()
        self.sums += w @ self._features(x)

    @staticmethod
    def stack_update(accs: Sequence[DirichletAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators; ``resp`` (n_rows, K) already includes row weights."""
        phi = DirichletAccumulator._features(enc.values)
        for k, acc in enumerate(accs):
            acc.weight += resp[:, k].sum()
            acc.sums += resp[:, k] @ phi

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
            transposed_features(DirichletAccumulator._features(x[lo:hi]), out)

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, m, s in zip(accs, mass, sums):
                acc.weight += m
                acc.sums += s

        peak = None
        if (alpha >= 1.0).all():  # the log-density at the mode, (alpha - 1) / (a0 - D)
            excess = alpha - 1.0
            with np.errstate(divide="ignore", invalid="ignore"):
                mode = excess / excess.sum(axis=1, keepdims=True)
                peak_at = np.where(excess > 0, excess * np.log(mode), 0.0).sum(axis=1)
            peak = np.where(excess.sum(axis=1) > 0, peak_at, 0.0) + const
        return LinearTerms(coef, const, features, add_sums, peak=peak, source=x,
                           key=("dirichlet", d))


class DirichletEstimator(LeafEstimator):
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

    def encoder(self) -> SimplexEncoder:
        return SimplexEncoder(self.dim)

    def bind(self, encoder: Encoder) -> DirichletEstimator:
        if not isinstance(encoder, SimplexEncoder) or encoder.dim is None:
            raise ValueError(f"a Dirichlet estimator needs a fitted SimplexEncoder, got "
                             f"{encoder!r}")
        return DirichletEstimator(encoder.dim, self.max_concentration, self.keys)

    def _new_accumulator(self) -> DirichletAccumulator:
        if self.dim is None:
            raise ValueError("DirichletEstimator has no dim: give dim= or let optimize learn it "
                             "when it encodes the data")
        return DirichletAccumulator(self.dim, self.keys)

    def estimate(self, nobs: float, stats: Any) -> DirichletDistribution:
        (weight, sums), _ = stats
        d = sums.size // 3
        w = float(weight[0])
        if w <= 0:
            return DirichletDistribution(np.ones(d))
        mean_log, mean, mean_sq = sums[:d] / w, sums[d:2 * d] / w, sums[2 * d:] / w
        alpha, capped = dirichlet_mle(mean_log, moment_start(mean, mean_sq),
                                      self.max_concentration)
        if capped:
            warnings.warn(f"a Dirichlet's concentration reached its cap max_concentration="
                          f"{self.max_concentration:g}; rows of total weight {w:.6g} sit on "
                          f"(nearly) one composition", DegenerateFitWarning, stacklevel=2)
        return DirichletDistribution(alpha)
