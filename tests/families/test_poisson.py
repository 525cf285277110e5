import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution, PoissonEstimator


@pytest.mark.parametrize("lam", [0.0, 1e-8, 0.5, 3.0, 250.0])
def test_log_density_matches_scipy(lam, rng):
    x = np.concatenate([[0, 1, 2], rng.poisson(max(lam, 1.0), size=200)])
    d = PoissonDistribution(lam)
    got = d.seq_log_density(d.encoder().encode(x))
    ref = stats.poisson(lam).logpmf(x)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    assert not np.isnan(got).any()
    for v in (0, 1, 7):
        assert d.log_density(v) == pytest.approx(stats.poisson(lam).logpmf(v), rel=1e-12, abs=1e-12)


def test_zero_rate_is_a_point_mass_at_zero():
    d = PoissonDistribution(0.0)
    assert d.log_density(0) == 0.0
    assert d.log_density(3) == -np.inf


def test_float32_band_is_close_to_float64(rng):
    d = PoissonDistribution(6.5)
    enc = d.encoder().encode(rng.poisson(6.5, size=1000))
    np.testing.assert_allclose(d.seq_log_density(enc, "float32"), d.seq_log_density(enc),
                               rtol=1e-5)


def test_mle_recovers_rate():
    x = PoissonDistribution(4.0).sampler(3).sample(20_000)
    assert x.dtype == np.int64
    d = mixfold.optimize(x, PoissonEstimator(), progress=False)
    # standard error sqrt(lam / n) ~ 0.014; allow 4 of them
    assert d.lam == pytest.approx(4.0, abs=0.06)
    assert d.lam == pytest.approx(x.mean(), rel=1e-12)


def test_weights_equal_repeated_rows(rng):
    x = rng.poisson(2.5, size=60)
    w = rng.integers(0, 4, size=60)
    a = mixfold.optimize(x, PoissonEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), PoissonEstimator(), progress=False)
    assert a.lam == pytest.approx(b.lam, rel=1e-12)


def test_all_zero_counts_floor_the_rate_and_no_weight_gives_the_default():
    d = mixfold.optimize(np.zeros(10, dtype=int), PoissonEstimator(min_lam=1e-6), progress=False)
    assert d.lam == 1e-6
    empty = PoissonEstimator().accumulator_factory().make()
    assert PoissonEstimator().estimate(0.0, empty.value()) == PoissonDistribution(1.0)


@pytest.mark.parametrize("bad,row", [([1, np.nan, 2], 1), ([0, 1, np.inf], 2), ([3, -1], 1),
                                     ([0, 1, 2, 1.5], 3)])
def test_invalid_counts_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, PoissonEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        PoissonEstimator().encoder().encode([1, "2"])
    assert err.value.row == 1 and isinstance(err.value, TypeError)


@pytest.mark.parametrize("lam", [-1.0, np.nan, np.inf])
def test_parameters_are_validated(lam):
    with pytest.raises(ParameterError):
        PoissonDistribution(lam)


@pytest.mark.parametrize("min_lam", [0.0, -1e-3, np.nan, np.inf])
def test_estimator_options_are_validated(min_lam):
    with pytest.raises(ValueError, match="min_lam"):
        PoissonEstimator(min_lam=min_lam)


def test_dict_round_trip_is_exact():
    d = PoissonDistribution(0.1 + 0.2)
    assert PoissonDistribution.from_dict(d.to_dict()) == d
    assert mixfold.Distribution.from_dict(d.to_dict()) == d
    assert d.to_dict() == {"family": "Poisson", "lam": 0.1 + 0.2}


def test_payload_round_trips_and_halves_combine_to_the_whole(rng):
    x = rng.poisson(3.0, size=501)
    w = rng.uniform(0, 2, size=501)
    enc = PoissonEstimator().encoder().encode(x)
    whole, first, second = (PoissonAccumulator() for _ in range(3))
    whole.seq_update(enc, w, None)
    first.seq_update(enc.rows(0, 250), w[:250], None)
    second.seq_update(enc.rows(250, 501), w[250:], None)
    np.testing.assert_allclose(first.combine(second).to_array(), whole.to_array(), rtol=1e-12)
    np.testing.assert_allclose(whole.to_array(), [w.sum(), w @ x], rtol=1e-12)
    copy = PoissonAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())


def test_mixture_of_two_rates_is_recovered_up_to_label_order():
    truth = MixtureDistribution([PoissonDistribution(2.0), PoissonDistribution(10.0)], [0.4, 0.6])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([PoissonEstimator()] * 2), seed=1, progress=False)
    order = np.argsort([c.lam for c in fit.components])
    # well separated rates: standard errors ~ 0.02 (lam 2) and ~ 0.03 (lam 10), 0.004 (weights)
    np.testing.assert_allclose([fit.components[i].lam for i in order], [2.0, 10.0], atol=0.12)
    np.testing.assert_allclose(fit.weights[order], [0.4, 0.6], atol=0.02)
