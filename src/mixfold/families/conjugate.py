"""Conjugate priors of the leaf families and their variational updates from EM's statistics.

A family with a conjugate prior turns the sufficient statistics EM folds into a posterior over
its parameters. The variational E-step needs ``E_q[log p(x | theta)]`` of every row; for an
exponential family that is the family's own log-density at the expected natural parameters
(the *point*) plus a constant, ``A(E eta) - E A(eta)`` (the *offset*, <= 0). So a posterior is
scored by the family's own code, stacked, fused and in every band, and the offset joins the
component's log-weight. Each update also gives ``KL(q || prior)`` for the evidence lower bound.

====================  ===========================================  ==============================
family                prior (its ``priors=`` key is the family)    point
====================  ===========================================  ==============================
Gaussian              Normal-Gamma (:class:`NormalWishartPrior`)   (m, S / nu)
DiagonalGaussian      Normal-Gamma per coordinate (same prior)     (m, S / nu)
MultivariateGaussian  Normal-Wishart (same prior)                  (m, S / nu)
Categorical           Dirichlet (:class:`DirichletPrior`)          exp E log p, normalised
Multinomial           Dirichlet (same prior)                       exp E log p (sum below 1)
Bernoulli, Binomial   Beta (:class:`BetaPrior`)                    logit E log p - E log(1-p)
Poisson               Gamma on the rate (:class:`GammaPrior`)      exp E log lambda
Exponential           Gamma on the rate (same prior)               E lambda
====================  ===========================================  ==============================

A prior field left ``None`` is set from the data: the statistics of every component pooled
(what the whole data gives, as scikit-learn's ``BayesianGaussianMixture`` sets its priors).

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonEstimator
>>> own = [(np.array([4.0, 8.0]),)]              # 4 rows summing to 8
>>> up = conjugate_updates(PoissonEstimator(), own, GammaPrior(shape=1.0, rate=1.0))[0]
>>> up.posterior["shape"], up.posterior["rate"]   # Gamma(1 + 8, 1 + 4)
(9.0, 5.0)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._centred import central_moments
from mixfold.families._scipy import betaln, digamma, gammaln, logsumexp, multigammaln
from mixfold.families._protocol import Distribution, Estimator, family
from mixfold.families.bernoulli import BernoulliDistribution, BernoulliEstimator
from mixfold.families.binomial import BinomialDistribution, BinomialEstimator
from mixfold.families.categorical import CategoricalDistribution, CategoricalEstimator
from mixfold.families.diagonal_gaussian import (DiagonalGaussianDistribution,
                                                DiagonalGaussianEstimator)
from mixfold.families.exponential import ExponentialDistribution, ExponentialEstimator
from mixfold.families.gaussian import GaussianDistribution, GaussianEstimator
from mixfold.families.multinomial import MultinomialDistribution, MultinomialEstimator
from mixfold.families.multivariate_gaussian import (MultivariateGaussianDistribution,
                                                    MultivariateGaussianEstimator)
from mixfold.families.poisson import PoissonDistribution, PoissonEstimator

__all__ = ["NormalWishartPrior", "DirichletPrior", "BetaPrior", "GammaPrior", "Update",
           "conjugate_updates", "prior_key", "kl_dirichlet", "kl_beta", "beta_point",
           "ExpectedMultinomial"]


class Update(NamedTuple):
    """One component's posterior of one leaf."""

    point: Distribution
    #: ``E_q[log p(x | theta)] - log point(x)``, the same for every ``x``
    offset: float
    #: ``KL(q || prior)``
    kl: float
    #: the posterior's hyperparameters, JSON-ready
    posterior: dict[str, Any]


@dataclass(frozen=True)
class NormalWishartPrior:
    """Prior of a Gaussian leaf's mean and precision (scikit-learn's names and defaults).

    ``mean`` (D,), ``mean_precision`` (beta0, the pseudo-rows behind the mean),
    ``degrees_of_freedom`` (nu0), ``scale`` (the Wishart's inverse scale: (D, D) for the full
    Gaussian, (D,) per coordinate, scikit-learn's ``covariance_prior``). ``None``: the data's
    mean, 1, the dimension (1 per coordinate), the data's covariance (``ddof=1``).
    """

    mean: Any = None
    mean_precision: float = 1.0
    degrees_of_freedom: float | None = None
    scale: Any = None


@dataclass(frozen=True)
class DirichletPrior:
    """Prior of categorical or multinomial probabilities: a concentration per level (or one
    for all)."""

    concentration: Any = 1.0


@dataclass(frozen=True)
class BetaPrior:
    """Prior of a Bernoulli or binomial success probability (also of a value being missing)."""

    a: float = 1.0
    b: float = 1.0


@dataclass(frozen=True)
class GammaPrior:
    """Prior of a rate (shape-rate). ``None``: a prior worth one row at the data's mean (for
    the Poisson ``shape=1, rate=1/mean``, for the Exponential's rate ``shape=1, rate=mean``)."""

    shape: float | None = None
    rate: float | None = None


# ---------------------------------------------------------------------------------------------
# KL divergences between members of a conjugate family


def kl_dirichlet(alpha: np.ndarray, alpha0: np.ndarray) -> float:
    """``KL(Dir(alpha) || Dir(alpha0))``."""
    total = alpha.sum()
    e_log = digamma(alpha) - digamma(total)
    return float(gammaln(total) - gammaln(alpha).sum() - gammaln(alpha0.sum())
                 + gammaln(alpha0).sum() + ((alpha - alpha0) * e_log).sum())


def kl_beta(a: Any, b: Any, a0: Any, b0: Any) -> np.ndarray:
    """``KL(Beta(a, b) || Beta(a0, b0))``, elementwise."""
    return (betaln(a0, b0) - betaln(a, b) + (a - a0) * digamma(a) + (b - b0) * digamma(b)
            + (a0 - a + b0 - b) * digamma(a + b))


def _kl_gamma(a: Any, b: Any, a0: Any, b0: Any) -> np.ndarray:
    """``KL(Gamma(a, b) || Gamma(a0, b0))`` (shape, rate), elementwise."""
    return ((a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (np.log(b) - np.log(b0))
            + a * (b0 - b) / b)


# ---------------------------------------------------------------------------------------------
# Gaussian leaves: moments, pooled moments, the Normal-Wishart and per-coordinate Normal-Gamma


def _moments(own: tuple[np.ndarray, ...]) -> tuple[float, np.ndarray, np.ndarray]:
    """(weight, mean, central second moment) of a Gaussian leaf's statistics (zeros: none)."""
    if not own[0][0] > 0:
        d = own[1].size
        return 0.0, np.zeros(d), np.zeros(own[2].shape)
    return central_moments(*own)


def _pooled(moments: Sequence[tuple[float, np.ndarray, np.ndarray]]
            ) -> tuple[float, np.ndarray, np.ndarray]:
    """The moments of the components' rows together (what the data gives: responsibilities
    add to one per row)."""
    n = np.array([m[0] for m in moments])
    total = float(n.sum())
    if not total > 0:
        return 0.0, np.zeros_like(moments[0][1]), np.ones_like(moments[0][2])
    mean = sum(w * m for w, m, _ in moments) / total
    second = np.zeros_like(moments[0][2])
    for w, m, c in moments:
        d = m - mean
        second = second + w * (c + (np.outer(d, d) if c.ndim == 2 else d * d))
    return total, mean, second / total


def _gaussian_prior(prior: NormalWishartPrior, pooled: tuple[float, np.ndarray, np.ndarray],
                    full: bool) -> tuple[np.ndarray, float, float, np.ndarray]:
    """(m0, beta0, nu0, S0) with the fields left ``None`` set from the pooled moments."""
    n, mean, second = pooled
    d = mean.size
    m0 = mean if prior.mean is None else np.asarray(prior.mean, dtype=np.float64).reshape(d)
    nu0 = (float(d) if full else 1.0) if prior.degrees_of_freedom is None \
        else float(prior.degrees_of_freedom)
    if prior.scale is None:
        s0 = second * (n / (n - 1.0) if n > 1 else 1.0)
    else:
        s0 = np.asarray(prior.scale, dtype=np.float64).reshape(second.shape)
    if not (prior.mean_precision > 0 and nu0 > (d - 1 if full else 0)):
        raise ParameterError(f"a Gaussian prior needs mean_precision > 0 and degrees_of_freedom "
                             f"> {d - 1 if full else 0}, got {prior.mean_precision} and {nu0}")
    return m0, float(prior.mean_precision), nu0, s0


def _normal_wishart(est: MultivariateGaussianEstimator, own: Sequence[tuple[np.ndarray, ...]],
                    prior: NormalWishartPrior) -> list[Update]:
    moments = [_moments(o) for o in own]
    m0, beta0, nu0, s0 = _gaussian_prior(prior, _pooled(moments), full=True)
    d = m0.size
    _, logdet0 = np.linalg.slogdet(s0)
    out = []
    for n, xbar, cov in moments:
        beta, nu = beta0 + n, nu0 + n
        m = (beta0 * m0 + n * xbar) / beta
        diff = xbar - m0
        scale = s0 + n * (cov + est.reg_covar * np.eye(d)) + beta0 * n / beta * np.outer(diff, diff)
        scale = 0.5 * (scale + scale.T)
        _, logdet = np.linalg.slogdet(scale)
        e_logdet = float(digamma(0.5 * (nu - np.arange(d))).sum()) + d * np.log(2.0) - logdet
        offset = 0.5 * (e_logdet + logdet - d * np.log(nu)) - 0.5 * d / beta
        dm = m - m0
        kl_normal = 0.5 * (d * (beta0 / beta - 1.0 - np.log(beta0 / beta))
                           + beta0 * nu * dm @ np.linalg.solve(scale, dm))
        kl_wishart = (0.5 * nu * logdet - multigammaln(0.5 * nu, d)
                      - 0.5 * nu0 * logdet0 + multigammaln(0.5 * nu0, d)
                      + 0.5 * (nu - nu0) * (e_logdet - d * np.log(2.0))
                      - 0.5 * nu * d + 0.5 * nu * np.trace(np.linalg.solve(scale, s0)))
        point = MultivariateGaussianDistribution(m, scale / nu)
        out.append(Update(point, float(offset), float(kl_normal + kl_wishart),
                          {"mean": m.tolist(), "mean_precision": float(beta),
                           "degrees_of_freedom": float(nu), "scale": scale.tolist()}))
    return out


def _normal_gamma(est: GaussianEstimator | DiagonalGaussianEstimator,
                  own: Sequence[tuple[np.ndarray, ...]], prior: NormalWishartPrior,
                  make: Callable[[np.ndarray, np.ndarray], Distribution]) -> list[Update]:
    """Independent coordinates: precision lambda_i ~ Gamma(nu/2, S_i/2), the mean given it
    N(m_i, 1/(beta lambda_i)); beta and nu shared by the coordinates (the rows hold them all)."""
    moments = [_moments(o) for o in own]
    m0, beta0, nu0, s0 = _gaussian_prior(prior, _pooled(moments), full=False)
    d = m0.size
    out = []
    for n, xbar, var in moments:
        beta, nu = beta0 + n, nu0 + n
        m = (beta0 * m0 + n * xbar) / beta
        diff = xbar - m0
        scale = s0 + n * (var + est.reg_covar) + beta0 * n / beta * diff * diff
        offset = d * (0.5 * (digamma(0.5 * nu) + np.log(2.0) - np.log(nu)) - 0.5 / beta)
        dm = m - m0
        kl_normal = 0.5 * (beta0 / beta - 1.0 - np.log(beta0 / beta) + beta0 * nu * dm * dm / scale)
        kl = kl_normal + _kl_gamma(0.5 * nu, 0.5 * scale, 0.5 * nu0, 0.5 * s0)
        out.append(Update(make(m, scale / nu), float(offset), float(kl.sum()),
                          {"mean": m.tolist(), "mean_precision": float(beta),
                           "degrees_of_freedom": float(nu), "scale": scale.tolist()}))
    return out


def _gaussian(est: GaussianEstimator, own: Sequence[tuple[np.ndarray, ...]],
              prior: NormalWishartPrior) -> list[Update]:
    return _normal_gamma(est, own, prior,
                         lambda m, v: GaussianDistribution(float(m[0]), float(v[0])))


def _diagonal_gaussian(est: DiagonalGaussianEstimator, own: Sequence[tuple[np.ndarray, ...]],
                       prior: NormalWishartPrior) -> list[Update]:
    return _normal_gamma(est, own, prior, DiagonalGaussianDistribution)


# ---------------------------------------------------------------------------------------------
# Discrete leaves


def _dirichlet_counts(own: Sequence[tuple[np.ndarray, ...]], prior: DirichletPrior
                      ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(alpha0, alpha, E log p) of each component."""
    out = []
    for (counts,) in own:
        alpha0 = np.broadcast_to(np.asarray(prior.concentration, dtype=np.float64),
                                 counts.shape).copy()
        if not (alpha0 > 0).all():
            raise ParameterError(f"a Dirichlet prior needs concentrations > 0, got "
                                 f"{np.asarray(prior.concentration).tolist()}")
        alpha = alpha0 + counts
        out.append((alpha0, alpha, digamma(alpha) - digamma(alpha.sum())))
    return out


def _categorical(est: CategoricalEstimator, own: Sequence[tuple[np.ndarray, ...]],
                 prior: DirichletPrior) -> list[Update]:
    out = []
    for alpha0, alpha, e_log in _dirichlet_counts(own, prior):
        offset = float(logsumexp(e_log))
        out.append(Update(CategoricalDistribution(np.exp(e_log - offset), est.levels), offset,
                          kl_dirichlet(alpha, alpha0), {"concentration": alpha.tolist()}))
    return out


@family("ExpectedMultinomial")
class ExpectedMultinomial(MultinomialDistribution):
    """A multinomial scored at ``E_q[log p]`` (probabilities that sum to less than one): its
    log-density is ``E_q[log p(x)]`` whatever the row's total, which no constant offset of a
    normalised multinomial gives. Samples from the normalised probabilities."""

    def __init__(self, expected_log_probs: Sequence[float], levels: Sequence[Any],
                 trials: int = 1):
        e_log = np.asarray(expected_log_probs, dtype=np.float64)
        super().__init__(np.exp(e_log - logsumexp(e_log)), levels, trials=trials)
        self.expected_log_probs = e_log

    @property
    def probs(self) -> np.ndarray:
        return np.exp(self.expected_log_probs)

    def _sample(self, n: int, rng: np.random.Generator) -> list[dict]:
        return MultinomialDistribution(self.categorical.probs, self.levels,
                                       trials=self.trials)._sample(n, rng)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "expected_log_probs": self.expected_log_probs.tolist()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> ExpectedMultinomial:
        levels = MultinomialDistribution._from_params(p).levels
        return cls(p["expected_log_probs"], levels, trials=p.get("trials", 1))


def _multinomial(est: MultinomialEstimator, own: Sequence[tuple[np.ndarray, ...]],
                 prior: DirichletPrior) -> list[Update]:
    return [Update(ExpectedMultinomial(e_log, est.levels, est.trials), 0.0,
                   kl_dirichlet(alpha, alpha0), {"concentration": alpha.tolist()})
            for alpha0, alpha, e_log in _dirichlet_counts(own, prior)]


def beta_point(a: float, b: float) -> tuple[float, float]:
    """(point probability, offset per trial) of a Beta(a, b) posterior."""
    e_one, e_zero = digamma(a) - digamma(a + b), digamma(b) - digamma(a + b)
    offset = float(np.logaddexp(e_one, e_zero))
    return float(np.exp(e_one - offset)), offset


def _bernoulli(est: BernoulliEstimator | BinomialEstimator,
               own: Sequence[tuple[np.ndarray, ...]], prior: BetaPrior) -> list[Update]:
    trials = est.n if isinstance(est, BinomialEstimator) else 1
    out = []
    for ((rows, ones),) in own:
        a, b = prior.a + ones, prior.b + trials * rows - ones
        p, offset = beta_point(a, b)
        point = BernoulliDistribution(p) if isinstance(est, BernoulliEstimator) \
            else BinomialDistribution(trials, p)
        out.append(Update(point, trials * offset, float(kl_beta(a, b, prior.a, prior.b)),
                          {"a": float(a), "b": float(b)}))
    return out


def _gamma_prior(prior: GammaPrior, mean: float, poisson: bool) -> tuple[float, float]:
    mean = max(mean, 1e-300)
    shape = 1.0 if prior.shape is None else float(prior.shape)
    rate = (1.0 / mean if poisson else mean) if prior.rate is None else float(prior.rate)
    if not (shape > 0 and rate > 0):
        raise ParameterError(f"a Gamma prior needs shape > 0 and rate > 0, got {shape} and {rate}")
    return shape, rate


def _poisson(est: PoissonEstimator, own: Sequence[tuple[np.ndarray, ...]],
             prior: GammaPrior) -> list[Update]:
    rows, total = sum(o[0][0] for o in own), sum(o[0][1] for o in own)
    a0, b0 = _gamma_prior(prior, total / rows if rows > 0 else 1.0, poisson=True)
    out = []
    for ((n, s),) in own:
        a, b = a0 + s, b0 + n
        lam = float(np.exp(digamma(a)) / b)  # exp E log lambda
        out.append(Update(PoissonDistribution(lam), lam - a / b,
                          float(_kl_gamma(a, b, a0, b0)), {"shape": float(a), "rate": float(b)}))
    return out


def _exponential(est: ExponentialEstimator, own: Sequence[tuple[np.ndarray, ...]],
                 prior: GammaPrior) -> list[Update]:
    # the sums hold (w, w x / c, w log c) about a reference scale c
    sums = [(float(s0), float(ratio * np.exp(ref / s0)) if s0 > 0 else 0.0)
            for ((s0, ratio, ref),) in own]
    rows, total = sum(n for n, _ in sums), sum(s for _, s in sums)
    a0, b0 = _gamma_prior(prior, total / rows if rows > 0 else 1.0, poisson=False)
    out = []
    for n, s in sums:
        a, b = a0 + n, b0 + s
        out.append(Update(ExponentialDistribution(a / b), float(digamma(a) - np.log(a)),
                          float(_kl_gamma(a, b, a0, b0)), {"shape": float(a), "rate": float(b)}))
    return out


# ---------------------------------------------------------------------------------------------
# The table: estimator class -> (prior key, prior class, update)

_CONJUGATE: dict[type, tuple[str, type, Callable[..., list[Update]]]] = {
    GaussianEstimator: ("Gaussian", NormalWishartPrior, _gaussian),
    DiagonalGaussianEstimator: ("DiagonalGaussian", NormalWishartPrior, _diagonal_gaussian),
    MultivariateGaussianEstimator: ("MultivariateGaussian", NormalWishartPrior, _normal_wishart),
    CategoricalEstimator: ("Categorical", DirichletPrior, _categorical),
    MultinomialEstimator: ("Multinomial", DirichletPrior, _multinomial),
    BernoulliEstimator: ("Bernoulli", BetaPrior, _bernoulli),
    BinomialEstimator: ("Binomial", BetaPrior, _bernoulli),
    PoissonEstimator: ("Poisson", GammaPrior, _poisson),
    ExponentialEstimator: ("Exponential", GammaPrior, _exponential),
}


def prior_key(est: Estimator) -> str | None:
    """The ``priors=`` key of a leaf with a conjugate update (its family's name), or ``None``:
    another family, tied parameters (``keys``) or missing entries inside a vector (a
    coordinate's offset would apply to the rows that have it only), estimated by its own
    M-step (a point estimate)."""
    entry = _CONJUGATE.get(type(est))
    if entry is None or est.keys is not None or getattr(est, "missing", False):
        return None
    return entry[0]


def conjugate_updates(est: Estimator, own: Sequence[tuple[np.ndarray, ...]],
                      prior: Any = None) -> list[Update]:
    """The posterior of each component's leaf ``est`` from its statistics ``own`` (one
    ``Accumulator.value()[0]`` per component), under ``prior`` (``None``: the family's default).
    """
    key, prior_class, update = _CONJUGATE[type(est)]
    prior = prior_class() if prior is None else prior
    if not isinstance(prior, prior_class):
        raise ParameterError(f"the prior of a {key} leaf must be a {prior_class.__name__}, got "
                             f"{type(prior).__name__}")
    return update(est, own, prior)
