import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.binomial import BinomialAccumulator, BinomialDistribution, BinomialEstimator


@pytest.mark.parametrize("n,p", [(1, 0.5), (10, 0.0), (10, 1.0), (10, 0.3), (1000, 1e-4),
                                 (5000, 0.6), (0, 0.7)])
def test_log_density_matches_scipy(n, p, rng):
    x = np.concatenate([[0, n, n // 2], rng.integers(0, n + 1, size=200)])
    d = BinomialDistribution(n, p)
    got = d.seq_log_density(d.encoder().encode(x))
    # log-binomial coefficients of size n log 2 cancel; allow round-off relative to that size
    atol = 1e-13 * max(1.0, n)
    np.testing.assert_allclose(got, stats.binom(n, p).logpmf(x), rtol=1e-12, atol=atol)
    assert not np.isnan(got).any()
    for v in {0, n // 3, n}:
        assert d.log_density(v) == pytest.approx(stats.binom(n, p).logpmf(v), rel=1e-12, abs=atol)


def test_sure_outcomes_are_point_masses():
    assert BinomialDistribution(4, 0.0).log_density(0) == 0.0
    assert BinomialDistribution(4, 0.0).log_density(1) == -np.inf
    assert BinomialDistribution(4, 1.0).log_density(4) == 0.0
    assert BinomialDistribution(4, 1.0).log_density(3) == -np.inf


def test_float32_band_is_close_to_float64(rng):
    d = BinomialDistribution(30, 0.4)
    enc = d.encoder().encode(rng.binomial(30, 0.4, size=1000))
    np.testing.assert_allclose(d.seq_log_density(enc, "float32"), d.seq_log_density(enc),
                               rtol=1e-5, atol=1e-5)


def test_mle_recovers_p_with_n_fixed():
    x = BinomialDistribution(12, 0.4).sampler(3).sample(20_000)
    assert x.dtype == np.int64
    d = mixfold.optimize(x, BinomialEstimator(12), progress=False)
    # standard error sqrt(p (1 - p) / (n N)) ~ 0.001; allow 4 of them
    assert d.n == 12
    assert d.p == pytest.approx(0.4, abs=0.004)
    assert d.p == pytest.approx(x.mean() / 12, rel=1e-12)


def test_weights_equal_repeated_rows(rng):
    x = rng.binomial(8, 0.3, size=60)
    w = rng.integers(0, 4, size=60)
    a = mixfold.optimize(x, BinomialEstimator(8), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), BinomialEstimator(8), progress=False)
    assert a.p == pytest.approx(b.p, rel=1e-12)


def test_pseudo_count_keeps_p_inside_and_no_weight_gives_the_default():
    full = np.full(10, 5)
    assert mixfold.optimize(full, BinomialEstimator(5), progress=False).p == 1.0
    smoothed = mixfold.optimize(full, BinomialEstimator(5, pseudo_count=1.0), progress=False)
    assert smoothed.p == pytest.approx(51 / 52, rel=1e-15)
    empty = BinomialEstimator(5).accumulator_factory().make()
    assert BinomialEstimator(5).estimate(0.0, empty.value()) == BinomialDistribution(5, 0.5)
    zero_trials = mixfold.optimize(np.zeros(3, dtype=int), BinomialEstimator(0), progress=False)
    assert zero_trials == BinomialDistribution(0, 0.5)


def test_estimator_of_a_distribution_keeps_n():
    est = BinomialDistribution(7, 0.2).estimator(pseudo_count=0.5)
    assert est.n == 7 and est.pseudo_count == 0.5
    assert est.encoder() == BinomialDistribution(7, 0.2).encoder()


@pytest.mark.parametrize("bad,row", [([1, np.nan, 2], 1), ([0, 1, np.inf], 2), ([3, -1], 1),
                                     ([0, 1, 2, 1.5], 3), ([0, 5, 6], 2)])
def test_invalid_counts_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, BinomialEstimator(5), progress=False)
    assert err.value.row == row


def test_counts_above_n_name_the_bound():
    with pytest.raises(DataError, match="<= 5") as err:
        BinomialEstimator(5).encoder().encode([2, 9])
    assert err.value.row == 1


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        BinomialEstimator(5).encoder().encode([1, "2"])
    assert err.value.row == 1 and isinstance(err.value, TypeError)


@pytest.mark.parametrize("n,p", [(-1, 0.5), (2.5, 0.5), (True, 0.5), ("3", 0.5), (3, -0.1),
                                 (3, 1.1), (3, np.nan)])
def test_parameters_are_validated(n, p):
    with pytest.raises(ParameterError):
        BinomialDistribution(n, p)


def test_numpy_integer_n_is_accepted_as_int():
    d = BinomialDistribution(np.int64(6), 0.5)
    assert type(d.n) is int and d.n == 6


@pytest.mark.parametrize("options,name", [({"n": -2}, "n"), ({"n": 3.0}, "n"),
                                          ({"n": 3, "pseudo_count": -1.0}, "pseudo_count"),
                                          ({"n": 3, "pseudo_count": np.nan}, "pseudo_count")])
def test_estimator_options_are_validated(options, name):
    with pytest.raises(ValueError, match=name):
        BinomialEstimator(**options)


def test_dict_round_trip_is_exact():
    d = BinomialDistribution(9, 1 / 3)
    assert BinomialDistribution.from_dict(d.to_dict()) == d
    assert mixfold.Distribution.from_dict(d.to_dict()) == d
    assert d.to_dict() == {"family": "Binomial", "n": 9, "p": 1 / 3}


def test_payload_round_trips_and_halves_combine_to_the_whole(rng):
    x = rng.binomial(9, 0.3, size=501)
    w = rng.uniform(0, 2, size=501)
    enc = BinomialEstimator(9).encoder().encode(x)
    whole, first, second = (BinomialAccumulator() for _ in range(3))
    whole.seq_update(enc, w, None)
    first.seq_update(enc.rows(0, 250), w[:250], None)
    second.seq_update(enc.rows(250, 501), w[250:], None)
    np.testing.assert_allclose(first.combine(second).to_array(), whole.to_array(), rtol=1e-12)
    np.testing.assert_allclose(whole.to_array(), [w.sum(), w @ x], rtol=1e-12)
    copy = BinomialAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())


def test_mixture_of_two_binomials_is_recovered_up_to_label_order():
    truth = MixtureDistribution([BinomialDistribution(20, 0.2), BinomialDistribution(20, 0.7)],
                                [0.3, 0.7])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([BinomialEstimator(20)] * 2), seed=1,
                           progress=False)
    order = np.argsort([c.p for c in fit.components])
    # spread over 12 data sets: sd 0.0014 (p 0.2), 0.0009 (p 0.7), 0.004 (weights); ~4 sd
    np.testing.assert_allclose([fit.components[i].p for i in order], [0.2, 0.7], atol=0.006)
    np.testing.assert_allclose(fit.weights[order], [0.3, 0.7], atol=0.015)
