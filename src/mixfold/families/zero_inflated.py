"""Zero inflation: extra zeros on top of a count family (a structural zero with probability
``p_zero``, else a draw from the inner family, which may be zero too). What it writes like the
other wrappers of one child (missing values, censoring) is :mod:`mixfold.families._wrapper`."""

from __future__ import annotations

import numpy as np

from mixfold.decomposition import Decomposition
from mixfold.errors import ParameterError
from mixfold.families._encoders import NumericEncoder
from mixfold.families._protocol import Distribution, Encoded, Encoder, Estimator, InitRandom, family
from mixfold.families._wrapper import (WrapperAccumulator, WrapperDistribution,
                                       WrapperEstimator, smoothed_share)
from mixfold.options import number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["ZeroInflatedDistribution", "ZeroInflatedEstimator", "ZeroInflatedAccumulator"]


def _check_counts(encoder: Encoder, what: str) -> None:
    """Zero inflation needs an inner family over counts 0, 1, 2, ...: its rows are the inner's
    (one count per row), and a zero row is one whose count is 0."""
    if not (isinstance(encoder, NumericEncoder) and encoder.domain == "count"):
        raise ParameterError(f"zero inflation needs an inner family over counts 0, 1, 2, ... "
                             f"(Poisson, NegativeBinomial, Binomial), got {what}")


@family("ZeroInflated")
class ZeroInflatedDistribution(WrapperDistribution):
    """A count that is a structural zero with probability ``p_zero``, else drawn from
    ``inner`` (a count family): ``p(0) = p_zero + (1 - p_zero) inner(0)``,
    ``p(x) = (1 - p_zero) inner(x)`` for x > 0.

    >>> from mixfold import PoissonDistribution
    >>> d = ZeroInflatedDistribution(PoissonDistribution(3.0), 0.2)
    >>> round(d.log_density(0), 6), round(d.log_density(2), 6)
    (-1.427826, -1.719066)
    """

    parameter_coordinates = {"inner": "part", "p_zero": "unit"}

    def __init__(self, inner: Distribution, p_zero: float):
        if not isinstance(inner, Distribution):
            raise ParameterError(f"inner must be a Distribution, got {type(inner).__name__}")
        _check_counts(inner.encoder(), f"a {type(inner).__name__}")
        p = float(p_zero)
        if not (0.0 <= p <= 1.0):
            raise ParameterError(f"p_zero must be in [0, 1], got {p_zero!r}")
        self.inner = inner
        self.p_zero = p
        with np.errstate(divide="ignore"):
            self.log_p_zero = float(np.log(p))
            self.log_p_inner = float(np.log1p(-p))

    def log_density_from_inner(self, enc: Encoded, inner_ll: np.ndarray) -> np.ndarray:
        """The log-density of every row given the inner family's."""
        out = self.log_p_inner + inner_ll
        zero = enc.values == 0
        out[zero] = np.logaddexp(self.log_p_zero, out[zero])
        return out

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        return self.log_density_from_inner(enc, self.inner.seq_log_density(enc, precision))

    def encoder(self) -> Encoder:
        return self.inner.encoder()

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(self.inner._sample(n, rng))
        return np.where(rng.random(n) < self.p_zero, 0, x).astype(x.dtype)

    def decomposition(self) -> Decomposition:
        """Atomic: the zero rows' posteriors need the inner family's scores of the same rows,
        so the inner family (costed as a shared child) is never split from this node."""
        return Decomposition.atomic(row_work=1.0, param_bytes=24, shared_children=(self.inner,),
                                    child_roles=("inner",))


class ZeroInflatedAccumulator(WrapperAccumulator):
    """Statistics: the weighted structural zeros and inner draws, by their posteriors
    (:class:`~mixfold.families._wrapper.WrapperCounts`: ``own``, ``child``), then the inner
    accumulator's, which sees every row weighted by its posterior of being an inner draw."""

    def _inner_weights(self, enc: Encoded, weights: np.ndarray,
                       structural: np.ndarray) -> np.ndarray:
        """Add the zero rows' posterior mass ``structural`` (of being structural zeros) to the
        counts; the weights the inner family gets."""
        zero = enc.values == 0
        inner_w = weights.copy()
        inner_w[zero] *= 1.0 - structural
        total = weights.sum()
        structural_mass = weights[zero] @ structural
        self.counts += (structural_mass, total - structural_mass)
        return inner_w

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: ZeroInflatedDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray:
        inner_ll = model.inner.seq_log_density(enc, precision)
        ll = model.log_density_from_inner(enc, inner_ll)
        zero = enc.values == 0
        with np.errstate(invalid="ignore"):  # a zero impossible under the model: no weight
            structural = np.nan_to_num(np.exp(model.log_p_zero - ll[zero]), nan=0.0)
        self.child.seq_update(enc, self._inner_weights(enc, weights, np.minimum(structural, 1.0)),
                              model.inner, precision)
        return ll

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        # no model yet: every zero row is half structural, half an inner draw
        zero = enc.values == 0
        inner_w = self._inner_weights(enc, weights, np.full(int(zero.sum()), 0.5))
        self.child.seq_initialize(enc, inner_w, rng.child("inner"))


class ZeroInflatedEstimator(WrapperEstimator):
    """Estimator of zero inflation over the count family ``inner`` (its estimator): EM over
    which zero rows are structural.

    p_zero = (structural + pseudo_count) / (total + 2 pseudo_count), with the posterior counts;
    a node with no weight at all gets p_zero = 0.5.

    >>> import mixfold
    >>> from mixfold import PoissonDistribution, PoissonEstimator
    >>> x = ZeroInflatedDistribution(PoissonDistribution(4.0), 0.3).sampler(0).sample(20000)
    >>> fit = mixfold.optimize(x, ZeroInflatedEstimator(PoissonEstimator()), progress=False)
    >>> round(fit.p_zero, 2), round(fit.inner.lam, 1)
    (0.3, 4.0)
    """

    option_rules = {"pseudo_count": number(0)}
    model_class = ZeroInflatedDistribution
    accumulator_class = ZeroInflatedAccumulator

    def __init__(self, inner: Estimator, pseudo_count: float = 0.0, keys: str | None = None):
        if not isinstance(inner, Estimator):
            raise TypeError(f"inner must be an Estimator, got {type(inner).__name__}")
        _check_counts(inner.encoder(), f"an estimator of {type(inner).__name__}")
        self.check_options(pseudo_count=pseudo_count)
        self.inner = inner
        self.pseudo_count = float(pseudo_count)
        self.keys = keys

    def encoder(self) -> Encoder:
        return self.inner.encoder()

    def bind(self, encoder: Encoder) -> ZeroInflatedEstimator:
        return ZeroInflatedEstimator(self.inner.bind(encoder), self.pseudo_count, self.keys)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> ZeroInflatedDistribution:
        acc = self.accumulator_factory().make()
        zero = sample.values == 0
        inner_w = acc._inner_weights(sample, weights, np.full(int(zero.sum()), 0.5))
        inner = self.inner.initial_guess(sample, inner_w, rng.child("inner"))
        structural, drawn = acc.counts
        # smoothed, so a sample without zeros does not start at p_zero = 0
        smoothing = 0.005 * max(structural + drawn, 1.0)
        return ZeroInflatedDistribution(inner, smoothed_share(structural, drawn, smoothing))

    def __repr__(self) -> str:
        return f"ZeroInflatedEstimator({self.inner!r}, pseudo_count={self.pseudo_count!r})"
