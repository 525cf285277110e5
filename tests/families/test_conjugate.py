"""Each conjugate leaf against the closed-form evidence: with one component the variational
posterior is the exact posterior, so the evidence lower bound equals log p(data), computed
here from the textbook marginal likelihoods (Murphy 2007, Bishop 2006)."""

import numpy as np
import pytest
from scipy.special import betaln, gammaln, multigammaln

import mixfold
from mixfold import (BernoulliEstimator, BinomialEstimator, CategoricalEstimator,
                     DiagonalGaussianEstimator, ExponentialEstimator, GaussianEstimator,
                     MultinomialEstimator, MultivariateGaussianEstimator, OptionalEstimator,
                     PoissonEstimator, RecordEstimator, VariationalMixtureEstimator)
from mixfold.errors import ParameterError
from mixfold.families.conjugate import (BetaPrior, DirichletPrior, GammaPrior,
                                        NormalWishartPrior, conjugate_updates)


def bound_of_one_component(rows, leaf, priors):
    est = VariationalMixtureEstimator([leaf], weight_prior="dirichlet", priors=priors)
    result = mixfold.fit(rows, est, max_iter=3, tol=0, progress=False)
    assert len(result.lower_bound) >= 2
    np.testing.assert_allclose(result.lower_bound, result.lower_bound[0], rtol=1e-12)
    return result.lower_bound[-1]


def normal_wishart_evidence(x, m0, beta0, nu0, s0):
    """log p(X) of rows x (n, D) under a Normal-Wishart prior (S0: the inverse scale)."""
    n, d = x.shape
    xbar = x.mean(axis=0)
    scatter = (x - xbar).T @ (x - xbar)
    beta, nu = beta0 + n, nu0 + n
    s = s0 + scatter + beta0 * n / beta * np.outer(xbar - m0, xbar - m0)
    return (-n * d / 2 * np.log(np.pi) + d / 2 * np.log(beta0 / beta)
            + multigammaln(nu / 2, d) - multigammaln(nu0 / 2, d)
            + nu0 / 2 * np.linalg.slogdet(s0)[1] - nu / 2 * np.linalg.slogdet(s)[1])


def dirichlet_evidence(counts, alpha0):
    alpha0 = np.broadcast_to(alpha0, counts.shape)
    log_b = lambda a: gammaln(a).sum() - gammaln(a.sum())  # noqa: E731
    return log_b(alpha0 + counts) - log_b(alpha0)


def test_univariate_gaussian_normal_gamma(rng):
    x = rng.normal(2.0, 3.0, size=200)
    prior = NormalWishartPrior(mean=[0.5], mean_precision=2.0, degrees_of_freedom=3.0,
                               scale=[1.5])
    got = bound_of_one_component(x, GaussianEstimator(reg_covar=0), {"Gaussian": prior})
    ref = normal_wishart_evidence(x[:, None], np.array([0.5]), 2.0, 3.0, np.array([[1.5]]))
    assert got == pytest.approx(ref, rel=1e-10)


def test_full_gaussian_normal_wishart(rng):
    x = rng.multivariate_normal([1.0, -2.0, 0.5], [[2, 0.5, 0], [0.5, 1, 0.3], [0, 0.3, 3]],
                                size=300)
    s0 = np.array([[1.0, 0.2, 0.0], [0.2, 2.0, 0.1], [0.0, 0.1, 0.5]])
    prior = NormalWishartPrior(mean=[0.0, 0.0, 1.0], mean_precision=0.5, degrees_of_freedom=4.5,
                               scale=s0)
    got = bound_of_one_component(x, MultivariateGaussianEstimator(reg_covar=0),
                                 {"MultivariateGaussian": prior})
    assert got == pytest.approx(normal_wishart_evidence(x, np.array([0.0, 0.0, 1.0]), 0.5, 4.5,
                                                        s0), rel=1e-10)


def test_diagonal_gaussian_is_independent_normal_gammas(rng):
    x = rng.normal([0.0, 5.0], [1.0, 2.0], size=(250, 2))
    prior = NormalWishartPrior(mean=[0.2, 4.0], mean_precision=1.5, degrees_of_freedom=2.0,
                               scale=[0.7, 3.0])
    got = bound_of_one_component(x, DiagonalGaussianEstimator(reg_covar=0),
                                 {"DiagonalGaussian": prior})
    ref = sum(normal_wishart_evidence(x[:, [i]], np.array([m]), 1.5, 2.0, np.array([[s]]))
              for i, (m, s) in enumerate([(0.2, 0.7), (4.0, 3.0)]))
    assert got == pytest.approx(ref, rel=1e-10)


def test_categorical_dirichlet(rng):
    x = rng.choice(["a", "b", "c"], p=[0.2, 0.5, 0.3], size=150).tolist()
    concentration = np.array([0.5, 2.0, 1.0])
    got = bound_of_one_component(x, CategoricalEstimator(levels=["a", "b", "c"]),
                                 {"Categorical": DirichletPrior(concentration)})
    counts = np.array([x.count(v) for v in "abc"], dtype=float)
    assert got == pytest.approx(dirichlet_evidence(counts, concentration), rel=1e-10)


def test_multinomial_dirichlet_with_varying_totals(rng):
    levels = ["u", "v", "w", "z"]
    counts = rng.multinomial(1, [0.1, 0.4, 0.3, 0.2], size=(120,)) * rng.integers(1, 7, (120, 1))
    counts += rng.multinomial(3, [0.25] * 4, size=120)
    rows = [{lv: int(c) for lv, c in zip(levels, row) if c} for row in counts]
    got = bound_of_one_component(rows, MultinomialEstimator(levels=levels),
                                 {"Multinomial": DirichletPrior(0.7)})
    coefficients = (gammaln(counts.sum(axis=1) + 1) - gammaln(counts + 1).sum(axis=1)).sum()
    ref = coefficients + dirichlet_evidence(counts.sum(axis=0).astype(float), np.full(4, 0.7))
    assert got == pytest.approx(ref, rel=1e-10)


def test_bernoulli_and_binomial_beta(rng):
    x = (rng.random(300) < 0.3).astype(float)
    got = bound_of_one_component(x, BernoulliEstimator(), {"Bernoulli": BetaPrior(2.0, 3.0)})
    s = x.sum()
    assert got == pytest.approx(betaln(2 + s, 3 + 300 - s) - betaln(2, 3), rel=1e-10)
    y = rng.binomial(6, 0.7, size=200)
    got = bound_of_one_component(y, BinomialEstimator(n=6), {"Binomial": BetaPrior(1.5, 0.5)})
    log_choose = (gammaln(7) - gammaln(y + 1) - gammaln(7 - y)).sum()
    ref = log_choose + betaln(1.5 + y.sum(), 0.5 + 6 * 200 - y.sum()) - betaln(1.5, 0.5)
    assert got == pytest.approx(ref, rel=1e-10)


def test_poisson_and_exponential_gamma(rng):
    x = rng.poisson(4.0, size=200)
    a0, b0 = 2.0, 0.5
    got = bound_of_one_component(x, PoissonEstimator(), {"Poisson": GammaPrior(a0, b0)})
    ref = (-gammaln(x + 1).sum() + a0 * np.log(b0) - gammaln(a0) + gammaln(a0 + x.sum())
           - (a0 + x.sum()) * np.log(b0 + len(x)))
    assert got == pytest.approx(ref, rel=1e-10)
    t = rng.exponential(2.0, size=150)
    got = bound_of_one_component(t, ExponentialEstimator(), {"Exponential": GammaPrior(a0, b0)})
    ref = a0 * np.log(b0) - gammaln(a0) + gammaln(a0 + len(t)) - (a0 + len(t)) * np.log(
        b0 + t.sum())
    assert got == pytest.approx(ref, rel=1e-10)


def test_record_with_a_missing_field_adds_the_evidences(rng):
    n = 200
    x = rng.normal(1.0, 2.0, size=n)
    c = rng.choice(["p", "q"], size=n).tolist()
    missing = rng.random(n) < 0.25
    rows = [{"x": xi, "c": None if m else ci} for xi, ci, m in zip(x, c, missing)]
    gauss = NormalWishartPrior(mean=[0.0], mean_precision=1.0, degrees_of_freedom=2.0,
                               scale=[1.0])
    leaf = RecordEstimator({"x": GaussianEstimator(reg_covar=0),
                            "c": OptionalEstimator(CategoricalEstimator(levels=["p", "q"]))})
    got = bound_of_one_component(rows, leaf, {"Gaussian": gauss, "Optional": BetaPrior(1, 1)})
    present = [ci for ci, m in zip(c, missing) if not m]
    counts = np.array([present.count("p"), present.count("q")], dtype=float)
    ref = (normal_wishart_evidence(x[:, None], np.zeros(1), 1.0, 2.0, np.ones((1, 1)))
           + betaln(1 + missing.sum(), 1 + n - missing.sum()) - betaln(1, 1)
           + dirichlet_evidence(counts, np.ones(2)))
    assert got == pytest.approx(ref, rel=1e-10)


def test_a_prior_of_the_wrong_kind_is_refused():
    own = [(np.array([4.0, 8.0]),)]
    with pytest.raises(ParameterError, match="Poisson leaf must be a GammaPrior, got BetaPrior"):
        conjugate_updates(PoissonEstimator(), own, BetaPrior())
    with pytest.raises(ParameterError, match="shape > 0 and rate > 0"):
        conjugate_updates(PoissonEstimator(), own, GammaPrior(shape=-1.0, rate=1.0))
