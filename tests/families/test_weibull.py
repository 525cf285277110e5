import warnings

import numpy as np
import pytest
from scipy import optimize, stats

import mixfold
from mixfold import (DataError, MixtureDistribution, ParameterError, WeibullDistribution,
                     WeibullEstimator)
from tests.families.family_checks import (check_decomposition, check_model_file,
                                          check_monotone_mixture, check_payload_halves,
                                          check_weights_are_repeats)


@pytest.mark.parametrize("shape, scale", [(0.3, 1.0), (1.0, 5.0), (1.5, 2.0), (40.0, 1e-3),
                                          (2.0, 1e6)])
def test_log_density_matches_scipy(shape, scale, rng):
    ref = stats.weibull_min(shape, scale=scale)
    x = np.concatenate([[scale, 1e-300 * scale], ref.rvs(size=200, random_state=rng)])
    x = x[x > 0]
    d = WeibullDistribution(shape, scale)
    enc = d.encoder().encode(x)
    np.testing.assert_allclose(d.seq_log_density(enc), ref.logpdf(x), rtol=1e-11, atol=1e-11)


def test_parameters_and_rows_are_checked():
    for args in [(0, 1), (1, 0), (np.inf, 1), (1, np.nan)]:
        with pytest.raises(ParameterError):
            WeibullDistribution(*args)
    with pytest.raises(DataError, match="row 1: expected a finite number > 0"):
        WeibullEstimator().encoder().encode([1.0, 0.0])


@pytest.mark.parametrize("shape, scale", [(1.5, 2.0), (0.4, 100.0), (12.0, 3e-4)])
def test_mle_matches_scipy_fit(shape, scale):
    x = WeibullDistribution(shape, scale).sampler(3).sample(5000)
    res = mixfold.fit(x, WeibullEstimator(), max_iter=200, tol=1e-14, progress=False)
    d = res.model
    assert len(res.log_likelihood) < 40  # Newton: a few steps from the Gumbel start
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-12 * np.abs(ll[1:])).all()
    # scipy's weibull_min.fit stops ~1e-5 short; its likelihood equation, solved to the end:
    log_x = np.log(x)

    def slope(k):
        z = np.exp(k * (log_x - log_x.max()))
        return 1 / k + log_x.mean() - (z * log_x).sum() / z.sum()

    ref_shape = optimize.brentq(slope, 0.01, 100, xtol=1e-15, rtol=1e-15)
    ref_scale = np.mean(x ** ref_shape) ** (1 / ref_shape)
    assert d.shape == pytest.approx(ref_shape, rel=1e-10)
    assert d.scale == pytest.approx(ref_scale, rel=1e-10)
    fit_shape, _, fit_scale = stats.weibull_min.fit(x, floc=0)
    assert stats.weibull_min.logpdf(x, d.shape, scale=d.scale).sum() >= \
        stats.weibull_min.logpdf(x, fit_shape, scale=fit_scale).sum()


def test_one_value_caps_the_shape():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = mixfold.optimize(np.full(10, 3.0), WeibullEstimator(max_shape=1e4), progress=False)
    assert d.shape == 1e4
    assert d.scale == pytest.approx(3.0, rel=1e-3)


def test_contract(rng, tmp_path):
    d = WeibullDistribution(1.5, 2.0)
    x = d.sampler(1).sample(400)
    check_model_file(d, tmp_path)
    assert d.to_dict() == {"family": "Weibull", "shape": 1.5, "scale": 2.0}
    assert d.n_parameters() == 2
    check_decomposition(d)
    check_payload_halves(WeibullEstimator(), x, d, rng)
    check_weights_are_repeats(WeibullEstimator, x[:60], rng, max_iter=50)
    empty = WeibullEstimator().accumulator_factory().make()
    assert WeibullEstimator().estimate(0.0, empty.value()) == WeibullDistribution(1.0, 1.0)


def test_mixture_of_two_is_recovered():
    truth = MixtureDistribution([WeibullDistribution(4.0, 1.0), WeibullDistribution(3.0, 10.0)],
                                [0.4, 0.6])
    x = truth.sampler(0).sample(10_000)
    fit = check_monotone_mixture(WeibullEstimator, x, iters=60).model
    order = np.argsort([c.scale for c in fit.components])
    np.testing.assert_allclose([(fit.components[i].shape, fit.components[i].scale)
                                for i in order], [(4.0, 1.0), (3.0, 10.0)], rtol=0.06)
    np.testing.assert_allclose(fit.weights[order], [0.4, 0.6], atol=0.02)
