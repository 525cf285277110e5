import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold.precision import resolve_precision
from mixfold import (DataError, DataTypeError, GaussianDistribution, GaussianEstimator,
                     ParameterError)


@pytest.mark.parametrize("mu,s2", [(0.0, 1.0), (-3.5, 0.01), (1e3, 250.0)])
def test_log_density_matches_scipy(mu, s2, rng):
    x = rng.normal(mu, 3 * np.sqrt(s2), size=200)
    d = GaussianDistribution(mu, s2)
    got = d.seq_log_density(d.encoder().encode(x))
    np.testing.assert_allclose(got, stats.norm(mu, np.sqrt(s2)).logpdf(x), rtol=1e-12, atol=1e-12)
    assert d.log_density(x[0]) == pytest.approx(stats.norm(mu, np.sqrt(s2)).logpdf(x[0]), rel=1e-12)


def test_float32_band_is_close_to_float64(rng):
    d = GaussianDistribution(0.5, 2.0)
    enc = d.encoder().encode(rng.normal(size=1000))
    np.testing.assert_allclose(d.seq_log_density(
        enc, resolve_precision("float32")), d.seq_log_density(enc),
                               rtol=1e-5)


def test_mle_recovers_parameters():
    x = GaussianDistribution(2.5, 4.0).sampler(3).sample(50_000)
    d = mixfold.optimize(x, GaussianEstimator(reg_covar=0.0), progress=False)
    # standard errors: 2/sqrt(n) ~ 0.009 for mu, 4*sqrt(2/n) ~ 0.025 for sigma2
    assert d.mu == pytest.approx(2.5, abs=0.04)
    assert d.sigma2 == pytest.approx(4.0, abs=0.1)
    assert d.mu == pytest.approx(x.mean(), rel=1e-12)
    assert d.sigma2 == pytest.approx(x.var(), rel=1e-9)


def test_weights_equal_repeated_rows(rng):
    x = rng.normal(size=50)
    w = rng.integers(0, 4, size=50)
    a = mixfold.optimize(x, GaussianEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), GaussianEstimator(), progress=False)
    assert a.mu == pytest.approx(b.mu, rel=1e-12)
    assert a.sigma2 == pytest.approx(b.sigma2, rel=1e-12)


def test_variance_floor_on_identical_values():
    d = mixfold.optimize(np.full(10, 3.0), GaussianEstimator(reg_covar=0.0, min_variance=1e-8),
                         progress=False)
    assert d.mu == 3.0 and d.sigma2 == 1e-8


@pytest.mark.parametrize("bad,row", [([1.0, np.nan, 2.0], 1), ([0.0, 1.0, np.inf], 2)])
def test_non_finite_values_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, GaussianEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        GaussianEstimator().encoder().encode([1.0, "x"])
    assert err.value.row == 1 and isinstance(err.value, TypeError)


def test_parameters_are_validated():
    with pytest.raises(ParameterError):
        GaussianDistribution(0.0, -1.0)
    with pytest.raises(ParameterError):
        GaussianDistribution(np.nan, 1.0)


def test_dict_round_trip_is_exact():
    d = GaussianDistribution(0.1 + 0.2, 1 / 3)
    assert mixfold.GaussianDistribution.from_dict(d.to_dict()) == d
