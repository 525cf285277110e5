import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.exponential import (ExponentialAccumulator, ExponentialDistribution,
                                          ExponentialEstimator)


@pytest.mark.parametrize("rate", [1e-6, 0.5, 1.0, 2.0, 1e4])
def test_log_density_matches_scipy(rate, rng):
    x = np.concatenate([[0.0, 1e-300], rng.exponential(3.0 / rate, size=200)])
    d = ExponentialDistribution(rate)
    ref = stats.expon(scale=1.0 / rate)
    np.testing.assert_allclose(d.seq_log_density(d.encoder().encode(x)), ref.logpdf(x),
                               rtol=1e-12, atol=1e-12)
    for v in (0.0, 0.25, 10.0):
        assert d.log_density(v) == pytest.approx(ref.logpdf(v), rel=1e-12, abs=1e-12)


def test_float32_band_is_close_to_float64(rng):
    d = ExponentialDistribution(1.5)
    enc = d.encoder().encode(rng.exponential(1 / 1.5, size=1000))
    np.testing.assert_allclose(d.seq_log_density(enc, "float32"), d.seq_log_density(enc),
                               rtol=1e-5, atol=1e-6)


def test_mle_recovers_rate():
    x = ExponentialDistribution(0.5).sampler(3).sample(20_000)
    d = mixfold.optimize(x, ExponentialEstimator(), progress=False)
    # standard error of 1 / mean is about rate / sqrt(n) ~ 0.0035; allow 4 of them
    assert d.rate == pytest.approx(0.5, abs=0.015)
    assert d.rate == pytest.approx(1.0 / x.mean(), rel=1e-12)


def test_weights_equal_repeated_rows(rng):
    x = rng.exponential(2.0, size=60)
    w = rng.integers(0, 4, size=60)
    a = mixfold.optimize(x, ExponentialEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), ExponentialEstimator(), progress=False)
    assert a.rate == pytest.approx(b.rate, rel=1e-12)


def test_all_zero_values_cap_the_rate_and_no_weight_gives_the_default():
    d = mixfold.optimize(np.zeros(10), ExponentialEstimator(max_rate=1e6), progress=False)
    assert d.rate == 1e6
    tiny = mixfold.optimize(np.full(4, 1e-9), ExponentialEstimator(max_rate=1e6), progress=False)
    assert tiny.rate == 1e6
    empty = ExponentialEstimator().accumulator_factory().make()
    assert ExponentialEstimator().estimate(0.0, empty.value()) == ExponentialDistribution(1.0)


@pytest.mark.parametrize("bad,row", [([1.0, np.nan, 2.0], 1), ([0.0, 1.0, np.inf], 2),
                                     ([0.5, 2.0, -0.1], 2)])
def test_invalid_values_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, ExponentialEstimator(), progress=False)
    assert err.value.row == row


def test_non_integer_values_are_accepted():
    enc = ExponentialEstimator().encoder().encode([0.5, 2.25])
    np.testing.assert_array_equal(enc.values, [0.5, 2.25])


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        ExponentialEstimator().encoder().encode([1.0, "x"])
    assert err.value.row == 1 and isinstance(err.value, TypeError)


@pytest.mark.parametrize("rate", [0.0, -1.0, np.nan, np.inf])
def test_parameters_are_validated(rate):
    with pytest.raises(ParameterError):
        ExponentialDistribution(rate)


@pytest.mark.parametrize("max_rate", [0.0, -1.0, np.nan, np.inf])
def test_estimator_options_are_validated(max_rate):
    with pytest.raises(ValueError, match="max_rate"):
        ExponentialEstimator(max_rate=max_rate)


def test_dict_round_trip_is_exact():
    d = ExponentialDistribution(1 / 3)
    assert ExponentialDistribution.from_dict(d.to_dict()) == d
    assert mixfold.Distribution.from_dict(d.to_dict()) == d
    assert d.to_dict() == {"family": "Exponential", "rate": 1 / 3}


def test_payload_round_trips_and_halves_combine_to_the_whole(rng):
    x = rng.exponential(2.0, size=501)
    w = rng.uniform(0, 2, size=501)
    enc = ExponentialEstimator().encoder().encode(x)
    unit = ExponentialDistribution(1.0)  # sums about its mean, 1: the raw sums
    whole, first, second = (ExponentialAccumulator() for _ in range(3))
    whole.seq_update(enc, w, unit)
    first.seq_update(enc.rows(0, 250), w[:250], unit)
    second.seq_update(enc.rows(250, 501), w[250:], unit)
    np.testing.assert_allclose(first.combine(second).to_array(), whole.to_array(), rtol=1e-12)
    np.testing.assert_allclose(whole.to_array(), [w.sum(), w @ x, 0.0], rtol=1e-12)
    copy = ExponentialAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())


def test_mixture_of_two_rates_is_recovered_up_to_label_order():
    truth = MixtureDistribution([ExponentialDistribution(0.2), ExponentialDistribution(5.0)],
                                [0.5, 0.5])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([ExponentialEstimator()] * 2), seed=1,
                           progress=False)
    order = np.argsort([c.rate for c in fit.components])
    # spread over 12 data sets: sd 0.002 (rate 0.2), 0.06 (rate 5), 0.005 (weights); ~4 sd
    np.testing.assert_allclose([fit.components[i].rate for i in order], [0.2, 5.0], rtol=0.05)
    np.testing.assert_allclose(fit.weights[order], [0.5, 0.5], atol=0.02)
