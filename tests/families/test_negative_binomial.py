import numpy as np
import pytest
from scipy import optimize, special, stats

import mixfold
from mixfold import (DataError, DegenerateFitWarning, MixtureDistribution,
                     NegativeBinomialDistribution, NegativeBinomialEstimator, ParameterError)
from tests.families.family_checks import (check_decomposition, check_model_file,
                                          check_monotone_mixture, check_payload_halves,
                                          check_weights_are_repeats)


@pytest.mark.parametrize("r, p", [(0.05, 0.3), (1.0, 0.5), (3.0, 0.4), (250.0, 0.9), (2.0, 1.0),
                                  (1e4, 1e-3)])
def test_log_density_matches_scipy(r, p, rng):
    ref = stats.nbinom(r, p)
    x = np.concatenate([[0, 1, 2, 5000], ref.rvs(size=200, random_state=rng)])
    d = NegativeBinomialDistribution(r, p)
    enc = d.encoder().encode(x)
    got = d.seq_log_density(enc)
    # log-gammas of size gammaln(r) cancel: allow round-off relative to that size
    atol = 1e-12 * max(1.0, special.gammaln(r) + abs(r * np.log(p)))
    np.testing.assert_allclose(got, ref.logpmf(x), rtol=1e-10, atol=atol)
    assert not np.isnan(got).any()


def test_parameters_are_checked_and_counts_are_required():
    for r, p in [(0.0, 0.5), (-1.0, 0.5), (np.inf, 0.5), (1.0, 0.0), (1.0, 1.5)]:
        with pytest.raises(ParameterError):
            NegativeBinomialDistribution(r, p)
    with pytest.raises(DataError, match="row 1"):
        NegativeBinomialEstimator().encoder().encode([1, 2.5])


@pytest.mark.parametrize("r, p", [(3.0, 0.4), (0.5, 0.1), (30.0, 0.5)])
def test_mle_matches_scipy_likelihood_maximum(r, p):
    x = NegativeBinomialDistribution(r, p).sampler(3).sample(5000)
    res = mixfold.fit(x, NegativeBinomialEstimator(), max_iter=2000, tol=1e-13, progress=False)
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-12 * np.abs(ll[1:])).all()  # ECME: never decreases

    def nll(t):
        return -stats.nbinom.logpmf(x, np.exp(t[0]), 1 / (1 + np.exp(-t[1]))).sum()

    ref = optimize.minimize(nll, [0.0, 0.0], method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 4000})
    d = res.model
    assert d.r == pytest.approx(np.exp(ref.x[0]), rel=1e-4)
    assert d.p == pytest.approx(1 / (1 + np.exp(-ref.x[1])), rel=1e-4)
    assert -stats.nbinom.logpmf(x, d.r, d.p).sum() <= ref.fun + 1e-6
    assert d.mean == pytest.approx(x.mean(), rel=1e-12)  # p is exact given r: the mean is kept


def test_sampler_follows_scipy_moments():
    x = NegativeBinomialDistribution(2.0, 0.25).sampler(0).sample(200_000)
    ref = stats.nbinom(2.0, 0.25)
    assert x.mean() == pytest.approx(ref.mean(), rel=0.01)
    assert x.var() == pytest.approx(ref.var(), rel=0.03)


def test_poisson_like_counts_cap_r_with_a_warning():
    x = np.random.default_rng(0).poisson(4.0, size=3000)
    x[:] = np.round(x.mean())  # no spread at all
    with pytest.warns(DegenerateFitWarning, match="max_r"):
        d = mixfold.optimize(x, NegativeBinomialEstimator(max_r=1e4), progress=False)
    assert d.r == 1e4
    assert d.mean == pytest.approx(x.mean(), rel=1e-12)
    zeros = mixfold.optimize(np.zeros(10, dtype=int), NegativeBinomialEstimator(),
                             progress=False)
    assert np.isfinite(zeros.log_density(3))


def test_contract(rng, tmp_path):
    d = NegativeBinomialDistribution(3.0, 0.4)
    x = d.sampler(1).sample(400)
    check_model_file(d, tmp_path)
    assert d.to_dict() == {"family": "NegativeBinomial", "r": 3.0, "p": 0.4}
    assert d.n_parameters() == 2
    check_decomposition(d)
    check_payload_halves(NegativeBinomialEstimator(), x, d, rng)
    check_weights_are_repeats(NegativeBinomialEstimator, x[:60], rng, max_iter=20)


def test_mixture_of_two_is_recovered():
    truth = MixtureDistribution([NegativeBinomialDistribution(5.0, 0.7),
                                 NegativeBinomialDistribution(3.0, 0.1)], [0.5, 0.5])
    x = truth.sampler(0).sample(20_000)
    res = check_monotone_mixture(NegativeBinomialEstimator, x, iters=60)
    fit = res.model
    order = np.argsort([c.mean for c in fit.components])
    np.testing.assert_allclose([fit.components[i].mean for i in order],
                               [5 * 0.3 / 0.7, 3 * 0.9 / 0.1], rtol=0.08)
    np.testing.assert_allclose(fit.weights[order], [0.5, 0.5], atol=0.03)
