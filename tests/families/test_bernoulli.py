import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.bernoulli import (BernoulliAccumulator, BernoulliDistribution,
                                        BernoulliEstimator)


@pytest.mark.parametrize("p", [0.0, 1e-12, 0.3, 1 - 1e-12, 1.0])
def test_log_density_matches_scipy(p, rng):
    x = np.concatenate([[0, 1], rng.integers(0, 2, size=100)])
    d = BernoulliDistribution(p)
    got = d.seq_log_density(d.encoder().encode(x))
    np.testing.assert_allclose(got, stats.bernoulli(p).logpmf(x), rtol=1e-12, atol=1e-15)
    assert not np.isnan(got).any()
    for v in (0, 1, True, False):
        assert d.log_density(v) == pytest.approx(stats.bernoulli(p).logpmf(int(v)), rel=1e-12,
                                                 abs=1e-15)


def test_sure_outcomes_are_point_masses():
    assert BernoulliDistribution(0.0).log_density(0) == 0.0
    assert BernoulliDistribution(0.0).log_density(1) == -np.inf
    assert BernoulliDistribution(1.0).log_density(True) == 0.0
    assert BernoulliDistribution(1.0).log_density(False) == -np.inf


def test_bools_and_ints_encode_alike():
    enc = BernoulliEstimator().encoder()
    np.testing.assert_array_equal(enc.encode([True, False, True]).values, [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(enc.encode(np.array([True, False])).values,
                                  enc.encode([1, 0]).values)


def test_float32_band_is_close_to_float64(rng):
    d = BernoulliDistribution(0.35)
    enc = d.encoder().encode(rng.integers(0, 2, size=1000))
    np.testing.assert_allclose(d.seq_log_density(enc, "float32"), d.seq_log_density(enc),
                               rtol=1e-6)


def test_mle_recovers_p():
    x = BernoulliDistribution(0.3).sampler(3).sample(20_000)
    assert x.dtype == np.int64 and set(np.unique(x)) == {0, 1}
    d = mixfold.optimize(x, BernoulliEstimator(), progress=False)
    # standard error sqrt(p (1 - p) / n) ~ 0.0032; allow 4 of them
    assert d.p == pytest.approx(0.3, abs=0.013)
    assert d.p == pytest.approx(x.mean(), rel=1e-12)
    booleans = mixfold.optimize(x.astype(bool), BernoulliEstimator(), progress=False)
    assert booleans == d


def test_weights_equal_repeated_rows(rng):
    x = rng.integers(0, 2, size=60)
    w = rng.integers(0, 4, size=60)
    a = mixfold.optimize(x, BernoulliEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), BernoulliEstimator(), progress=False)
    assert a.p == pytest.approx(b.p, rel=1e-12)


def test_pseudo_count_keeps_p_inside_and_no_weight_gives_the_default():
    ones = np.ones(10, dtype=int)
    assert mixfold.optimize(ones, BernoulliEstimator(), progress=False).p == 1.0
    assert mixfold.optimize(ones, BernoulliEstimator(pseudo_count=1.0),
                            progress=False).p == pytest.approx(11 / 12, rel=1e-15)
    zeros = mixfold.optimize(np.zeros(10), BernoulliEstimator(pseudo_count=1.0), progress=False)
    assert zeros.p == pytest.approx(1 / 12, rel=1e-15)
    empty = BernoulliEstimator().accumulator_factory().make()
    assert BernoulliEstimator().estimate(0.0, empty.value()) == BernoulliDistribution(0.5)


@pytest.mark.parametrize("bad,row", [([1, np.nan, 0], 1), ([0, 1, np.inf], 2), ([0, -1], 1),
                                     ([1, 0, 0.5], 2), ([0, 2], 1)])
def test_invalid_values_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, BernoulliEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        BernoulliEstimator().encoder().encode([True, "yes"])
    assert err.value.row == 1 and isinstance(err.value, TypeError)


@pytest.mark.parametrize("p", [-0.1, 1.1, np.nan, np.inf])
def test_parameters_are_validated(p):
    with pytest.raises(ParameterError):
        BernoulliDistribution(p)


@pytest.mark.parametrize("pseudo_count", [-1.0, np.nan, np.inf])
def test_estimator_options_are_validated(pseudo_count):
    with pytest.raises(ValueError, match="pseudo_count"):
        BernoulliEstimator(pseudo_count=pseudo_count)


def test_dict_round_trip_is_exact():
    d = BernoulliDistribution(0.1 + 0.2)
    assert BernoulliDistribution.from_dict(d.to_dict()) == d
    assert mixfold.Distribution.from_dict(d.to_dict()) == d
    assert d.to_dict() == {"family": "Bernoulli", "p": 0.1 + 0.2}


def test_payload_round_trips_and_halves_combine_to_the_whole(rng):
    x = rng.integers(0, 2, size=501)
    w = rng.uniform(0, 2, size=501)
    enc = BernoulliEstimator().encoder().encode(x)
    whole, first, second = (BernoulliAccumulator() for _ in range(3))
    whole.seq_update(enc, w, None)
    first.seq_update(enc.rows(0, 250), w[:250], None)
    second.seq_update(enc.rows(250, 501), w[250:], None)
    np.testing.assert_allclose(first.combine(second).to_array(), whole.to_array(), rtol=1e-12)
    np.testing.assert_allclose(whole.to_array(), [w.sum(), w @ x], rtol=1e-12)
    copy = BernoulliAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())


def test_mixture_of_bernoullis_fits_the_marginal():
    # A mixture of Bernoullis is itself a Bernoulli: only P(1) is identifiable, so check that.
    truth = MixtureDistribution([BernoulliDistribution(0.1), BernoulliDistribution(0.8)],
                                [0.5, 0.5])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([BernoulliEstimator()] * 2), seed=1,
                           progress=False)
    assert np.exp(fit.log_density(1)) == pytest.approx(x.mean(), rel=1e-9)
    assert np.exp(fit.log_density(1)) == pytest.approx(0.45, abs=0.015)  # se 0.0035
