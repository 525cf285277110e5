import numpy as np
import pytest
from scipy import optimize, stats

import mixfold
from mixfold import (BinomialDistribution, GaussianEstimator, MixtureDistribution,
                     NegativeBinomialDistribution, NegativeBinomialEstimator, ParameterError,
                     PoissonDistribution, PoissonEstimator, ZeroInflatedDistribution,
                     ZeroInflatedEstimator)
from mixfold.decomposition import decomposition_for
from mixfold.spec import SpecError, estimator_from_spec, spec_from_estimator
from tests.families.family_checks import (check_model_file, check_monotone_mixture,
                                          check_payload_halves, check_weights_are_repeats)

INNERS = [(PoissonDistribution(3.0), stats.poisson(3.0)),
          (NegativeBinomialDistribution(2.0, 0.3), stats.nbinom(2.0, 0.3)),
          (BinomialDistribution(10, 0.4), stats.binom(10, 0.4))]


@pytest.mark.parametrize("inner, ref", INNERS, ids=["poisson", "nbinom", "binom"])
@pytest.mark.parametrize("p_zero", [0.0, 0.25, 1.0])
def test_log_density_is_the_scipy_mixture_with_a_point_mass(inner, ref, p_zero):
    x = np.arange(0, 11)
    d = ZeroInflatedDistribution(inner, p_zero)
    enc = d.encoder().encode(x)
    with np.errstate(divide="ignore"):
        want = np.log(p_zero * (x == 0) + (1 - p_zero) * ref.pmf(x))
    np.testing.assert_allclose(d.seq_log_density(enc), want, rtol=1e-12, atol=1e-12)


def test_inner_must_be_a_count_family():
    with pytest.raises(ParameterError, match="counts"):
        ZeroInflatedDistribution(mixfold.GaussianDistribution(0, 1), 0.1)
    with pytest.raises(ParameterError, match="counts"):
        ZeroInflatedEstimator(GaussianEstimator())
    with pytest.raises(ParameterError):
        ZeroInflatedDistribution(PoissonDistribution(1.0), 1.5)


def test_mle_matches_scipy_likelihood_maximum():
    x = ZeroInflatedDistribution(NegativeBinomialDistribution(3.0, 0.4), 0.3).sampler(1).sample(
        5000)
    res = mixfold.fit(x, ZeroInflatedEstimator(NegativeBinomialEstimator()), max_iter=5000,
                      tol=1e-13, progress=False)
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-12 * np.abs(ll[1:])).all()
    d = res.model
    values, counts = np.unique(x, return_counts=True)

    def nll(t):
        pi, r, p = 1 / (1 + np.exp(-t[0])), np.exp(t[1]), 1 / (1 + np.exp(-t[2]))
        return -counts @ np.log(pi * (values == 0) + (1 - pi) * stats.nbinom.pmf(values, r, p))

    ref = optimize.minimize(nll, [0.0, 0.0, 0.0], method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 10000})
    assert d.p_zero == pytest.approx(1 / (1 + np.exp(-ref.x[0])), rel=1e-4)
    assert d.inner.r == pytest.approx(np.exp(ref.x[1]), rel=1e-4)
    assert nll([np.log(d.p_zero / (1 - d.p_zero)), np.log(d.inner.r),
                np.log(d.inner.p / (1 - d.inner.p))]) <= ref.fun + 1e-6


def test_contract_and_spec(rng, tmp_path):
    d = ZeroInflatedDistribution(PoissonDistribution(3.0), 0.2)
    x = d.sampler(1).sample(400)
    assert x.dtype == np.int64
    check_model_file(d, tmp_path)
    assert d.to_dict() == {"family": "ZeroInflated", "p_zero": 0.2,
                           "inner": {"family": "Poisson", "lam": 3.0}}
    assert d.n_parameters() == 2
    dc = decomposition_for(d)
    assert dc.shared_children == (d.inner,) and not dc.is_shardable
    check_payload_halves(ZeroInflatedEstimator(PoissonEstimator()), x, d, rng)
    check_weights_are_repeats(lambda: ZeroInflatedEstimator(PoissonEstimator()), x[:60], rng,
                              max_iter=50)
    est = estimator_from_spec({"zero_inflated": "negative_binomial", "pseudo_count": 0.5})
    assert isinstance(est.inner, NegativeBinomialEstimator) and est.pseudo_count == 0.5
    assert spec_from_estimator(est) == {"zero_inflated": "negative_binomial",
                                        "pseudo_count": 0.5}
    with pytest.raises(SpecError, match=r"\$.zero_inflated: zero inflation needs"):
        estimator_from_spec({"zero_inflated": "gaussian"})


def test_mixture_of_zero_inflated_poissons():
    truth = MixtureDistribution([ZeroInflatedDistribution(PoissonDistribution(2.0), 0.5),
                                 ZeroInflatedDistribution(PoissonDistribution(15.0), 0.1)],
                                [0.5, 0.5])
    x = truth.sampler(0).sample(20_000)
    fit = check_monotone_mixture(lambda: ZeroInflatedEstimator(PoissonEstimator()), x,
                                 iters=100).model
    order = np.argsort([c.inner.lam for c in fit.components])
    np.testing.assert_allclose([fit.components[i].inner.lam for i in order], [2.0, 15.0],
                               rtol=0.05)
    # only the total of the structural zeros is identified (which component a structural zero
    # belongs to is not): compare the probability of 0 and each Poisson's share of the rows
    zero = fit.log_density(0)
    assert np.exp(zero) == pytest.approx(np.mean(x == 0), abs=0.01)
    shares = [fit.weights[i] * (1 - fit.components[i].p_zero) for i in order]
    np.testing.assert_allclose(shares, [0.25, 0.45], atol=0.02)
