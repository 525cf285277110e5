import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.geometric import (GeometricAccumulator, GeometricDistribution,
                                        GeometricEstimator)


@pytest.mark.parametrize("p", [1e-6, 0.1, 0.5, 0.999, 1.0])
def test_log_density_matches_scipy(p, rng):
    x = np.concatenate([[1, 2, 3], rng.geometric(max(p, 0.01) / 2, size=200)])
    d = GeometricDistribution(p)
    got = d.seq_log_density(d.encoder().encode(x))
    np.testing.assert_allclose(got, stats.geom(p).logpmf(x), rtol=1e-12, atol=1e-12)
    assert not np.isnan(got).any()
    for v in (1, 2, 40):
        assert d.log_density(v) == pytest.approx(stats.geom(p).logpmf(v), rel=1e-12, abs=1e-12)


def test_sure_success_is_a_point_mass_at_one():
    d = GeometricDistribution(1.0)
    assert d.log_density(1) == 0.0
    assert d.log_density(2) == -np.inf


def test_support_starts_at_one_like_scipy():
    x = GeometricDistribution(0.4).sampler(0).sample(5000)
    assert x.dtype == np.int64 and x.min() == 1
    assert x.mean() == pytest.approx(stats.geom(0.4).mean(), rel=0.05)  # se ~ 0.3%


def test_float32_band_is_close_to_float64(rng):
    d = GeometricDistribution(0.2)
    enc = d.encoder().encode(rng.geometric(0.2, size=1000))
    np.testing.assert_allclose(d.seq_log_density(enc, "float32"), d.seq_log_density(enc),
                               rtol=1e-5)


def test_mle_recovers_p():
    x = GeometricDistribution(0.3).sampler(3).sample(20_000)
    d = mixfold.optimize(x, GeometricEstimator(), progress=False)
    # standard error p * sqrt((1 - p) / n) ~ 0.0018; allow 4 of them
    assert d.p == pytest.approx(0.3, abs=0.007)
    assert d.p == pytest.approx(1.0 / x.mean(), rel=1e-12)


def test_weights_equal_repeated_rows(rng):
    x = rng.geometric(0.4, size=60)
    w = rng.integers(0, 4, size=60)
    a = mixfold.optimize(x, GeometricEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), GeometricEstimator(), progress=False)
    assert a.p == pytest.approx(b.p, rel=1e-12)


def test_pseudo_count_keeps_p_below_one_and_no_weight_gives_the_default():
    ones = np.ones(10, dtype=int)
    assert mixfold.optimize(ones, GeometricEstimator(), progress=False).p == 1.0
    smoothed = mixfold.optimize(ones, GeometricEstimator(pseudo_count=1.0), progress=False)
    assert smoothed.p == pytest.approx(11 / 12, rel=1e-15)
    empty = GeometricEstimator().accumulator_factory().make()
    assert GeometricEstimator().estimate(0.0, empty.value()) == GeometricDistribution(0.5)
    assert GeometricEstimator(2.0).estimate(0.0, empty.value()) == GeometricDistribution(0.5)


@pytest.mark.parametrize("bad,row", [([1, np.nan, 2], 1), ([1, 2, np.inf], 2), ([3, 0], 1),
                                     ([1, -2], 1), ([1, 2, 1.5], 2)])
def test_invalid_values_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, GeometricEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        GeometricEstimator().encoder().encode([1, 2, "3"])
    assert err.value.row == 2 and isinstance(err.value, TypeError)


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5, np.nan, np.inf])
def test_parameters_are_validated(p):
    with pytest.raises(ParameterError):
        GeometricDistribution(p)


@pytest.mark.parametrize("pseudo_count", [-1.0, np.nan, np.inf])
def test_estimator_options_are_validated(pseudo_count):
    with pytest.raises(ValueError, match="pseudo_count"):
        GeometricEstimator(pseudo_count=pseudo_count)


def test_dict_round_trip_is_exact():
    d = GeometricDistribution(1 / 3)
    assert GeometricDistribution.from_dict(d.to_dict()) == d
    assert mixfold.Distribution.from_dict(d.to_dict()) == d
    assert d.to_dict() == {"family": "Geometric", "p": 1 / 3}


def test_payload_round_trips_and_halves_combine_to_the_whole(rng):
    x = rng.geometric(0.3, size=501)
    w = rng.uniform(0, 2, size=501)
    enc = GeometricEstimator().encoder().encode(x)
    whole, first, second = (GeometricAccumulator() for _ in range(3))
    whole.seq_update(enc, w, None)
    first.seq_update(enc.rows(0, 250), w[:250], None)
    second.seq_update(enc.rows(250, 501), w[250:], None)
    np.testing.assert_allclose(first.combine(second).to_array(), whole.to_array(), rtol=1e-12)
    np.testing.assert_allclose(whole.to_array(), [w.sum(), w @ x], rtol=1e-12)
    copy = GeometricAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())


def test_mixture_of_two_geometrics_is_recovered_up_to_label_order():
    truth = MixtureDistribution([GeometricDistribution(0.1), GeometricDistribution(0.7)],
                                [0.5, 0.5])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([GeometricEstimator()] * 2), seed=1,
                           progress=False)
    order = np.argsort([c.p for c in fit.components])
    # spread over 12 data sets: sd 0.0007 (p 0.1), 0.005 (p 0.7), 0.006 (weights); ~4 sd
    np.testing.assert_allclose(fit.components[order[0]].p, 0.1, atol=0.003)
    np.testing.assert_allclose(fit.components[order[1]].p, 0.7, atol=0.02)
    np.testing.assert_allclose(fit.weights[order], [0.5, 0.5], atol=0.025)
