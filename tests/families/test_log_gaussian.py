import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold.precision import resolve_precision
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.log_gaussian import (LogGaussianAccumulator, LogGaussianDistribution,
                                           LogGaussianEstimator)


def lognorm(mu, s2):
    return stats.lognorm(s=np.sqrt(s2), scale=np.exp(mu))


@pytest.mark.parametrize("mu,s2", [(0.0, 1.0), (-3.5, 0.01), (4.0, 2.5), (30.0, 0.3)])
def test_log_density_matches_scipy(mu, s2, rng):
    x = np.exp(rng.normal(mu, 3 * np.sqrt(s2), size=200))
    d = LogGaussianDistribution(mu, s2)
    got = d.seq_log_density(d.encoder().encode(x))
    np.testing.assert_allclose(got, lognorm(mu, s2).logpdf(x), rtol=1e-12, atol=1e-12)
    assert d.log_density(x[0]) == pytest.approx(lognorm(mu, s2).logpdf(x[0]), rel=1e-12)


def test_float32_band_is_close_to_float64(rng):
    d = LogGaussianDistribution(0.5, 2.0)
    enc = d.encoder().encode(rng.lognormal(0.5, 1.4, size=1000))
    np.testing.assert_allclose(d.seq_log_density(
        enc, resolve_precision("float32")), d.seq_log_density(enc),
                               rtol=1e-5, atol=1e-5)


def test_mle_recovers_parameters():
    x = LogGaussianDistribution(1.5, 0.8).sampler(3).sample(20_000)
    d = mixfold.optimize(x, LogGaussianEstimator(reg_covar=0.0), progress=False)
    # standard errors: sqrt(0.8/n) ~ 0.006 for mu, 0.8*sqrt(2/n) ~ 0.008 for sigma2
    assert d.mu == pytest.approx(1.5, abs=0.025)
    assert d.sigma2 == pytest.approx(0.8, abs=0.03)
    assert d.mu == pytest.approx(np.log(x).mean(), rel=1e-12)
    assert d.sigma2 == pytest.approx(np.log(x).var(), rel=1e-9)
    s, _, scale = stats.lognorm.fit(x, floc=0)
    assert d.sigma2 == pytest.approx(s * s, rel=1e-6) and d.mu == pytest.approx(np.log(scale))


def test_sample_is_positive_with_the_right_log_moments():
    x = LogGaussianDistribution(-1.0, 0.25).sampler(0).sample(20_000)
    assert (x > 0).all()
    assert np.log(x).mean() == pytest.approx(-1.0, abs=0.015)
    assert np.log(x).var() == pytest.approx(0.25, abs=0.01)


def test_weights_equal_repeated_rows(rng):
    x = rng.lognormal(size=50)
    w = rng.integers(0, 4, size=50)
    a = mixfold.optimize(x, LogGaussianEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), LogGaussianEstimator(), progress=False)
    assert a.mu == pytest.approx(b.mu, rel=1e-12)
    assert a.sigma2 == pytest.approx(b.sigma2, rel=1e-12)


def test_variance_floor_on_identical_values_and_default_without_weight():
    est = LogGaussianEstimator(reg_covar=0.0, min_variance=1e-8)
    d = mixfold.optimize(np.full(10, 3.0), est, progress=False)
    assert d.mu == pytest.approx(np.log(3.0), rel=1e-15) and d.sigma2 == 1e-8
    assert est.estimate(0.0, LogGaussianAccumulator().value()) == LogGaussianDistribution(0.0, 1.0)


@pytest.mark.parametrize("bad,row", [([1.0, np.nan, 2.0], 1), ([1.0, 2.0, np.inf], 2),
                                     ([1.0, 0.0], 1), ([0.5, 2.0, -1.0], 2)])
def test_bad_values_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, LogGaussianEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        LogGaussianEstimator().encoder().encode([1.0, "x"])
    assert err.value.row == 1 and isinstance(err.value, TypeError)


def test_parameters_are_validated():
    for mu, s2 in [(0.0, -1.0), (0.0, 0.0), (np.nan, 1.0), (0.0, np.inf)]:
        with pytest.raises(ParameterError):
            LogGaussianDistribution(mu, s2)


def test_dict_round_trip_is_exact():
    d = LogGaussianDistribution(0.1 + 0.2, 1 / 3)
    back = mixfold.Distribution.from_dict(d.to_dict())
    assert back == d and back.mu == d.mu and back.sigma2 == d.sigma2
    assert d.to_dict()["family"] == "LogGaussian"


def test_payload_round_trip_and_combine_of_halves(rng):
    x = rng.lognormal(size=101)
    w = rng.uniform(size=101)
    enc = LogGaussianEstimator().encoder().encode(x)
    model = LogGaussianDistribution(0.0, 1.0)
    whole = LogGaussianAccumulator()
    whole.seq_update(enc, w, model)
    a, b = LogGaussianAccumulator(), LogGaussianAccumulator()
    a.seq_update(enc.rows(0, 40), w[:40], model)
    b.seq_update(enc.rows(40, 101), w[40:], model)
    np.testing.assert_allclose(a.combine(b).to_array(), whole.to_array(), rtol=1e-13)
    copy = LogGaussianAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())
    # about the model's mean, 0: the raw sums
    np.testing.assert_allclose([whole.weight, whole.sum_x, whole.sum_xx, whole.ref_mass],
                               [[w.sum()], [w @ np.log(x)], [w @ np.log(x) ** 2], [0.0]])


def test_stacked_mixture_paths_equal_per_component_paths(rng):
    m = MixtureDistribution([LogGaussianDistribution(-1.0, 0.3), LogGaussianDistribution(2.0, 1.5)],
                            [0.4, 0.6])
    assert m.units.stack is LogGaussianDistribution
    enc = m.encoder().encode(rng.lognormal(0.5, 2.0, size=300))
    per_component = np.stack([np.log(w) + c.seq_log_density(enc)
                              for w, c in zip(m.weights, m.components)], axis=1)
    np.testing.assert_allclose(m.component_log_densities(enc), per_component, rtol=1e-12)
    resp = m.seq_posterior(enc) * rng.uniform(size=(300, 1))
    stacked = [LogGaussianAccumulator() for _ in range(2)]
    for acc, point in zip(stacked, LogGaussianAccumulator.stack_reference(m.components)):
        acc.set_reference(point)  # a stacked update sums about the point the stack shares
    LogGaussianAccumulator.stack_update(stacked, enc, resp)
    for k, acc in enumerate(stacked):
        ref = LogGaussianAccumulator()
        ref.seq_update(enc, np.ascontiguousarray(resp[:, k]), m.components[k])
        ref.align_references(acc)  # (summed about the component's own mean)
        np.testing.assert_allclose(acc.to_array(), ref.to_array(), rtol=1e-12, atol=1e-9)


def test_seeded_mixture_fit_recovers_components():
    truth = MixtureDistribution([LogGaussianDistribution(-2.0, 0.2),
                                 LogGaussianDistribution(2.0, 0.5)], [0.35, 0.65])
    x = truth.sampler(1).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([LogGaussianEstimator()] * 2), seed=2,
                           progress=False)
    order = np.argsort([c.mu for c in fit.components])
    np.testing.assert_allclose(fit.weights[order], [0.35, 0.65], atol=0.015)
    np.testing.assert_allclose([fit.components[i].mu for i in order], [-2.0, 2.0], atol=0.03)
    np.testing.assert_allclose([fit.components[i].sigma2 for i in order], [0.2, 0.5], atol=0.03)
