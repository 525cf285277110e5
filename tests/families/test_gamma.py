import numpy as np
import pytest
from scipy import optimize, special, stats

import mixfold
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.gamma import (GammaAccumulator, GammaDistribution, GammaEstimator,
                                    gamma_shape_mle)


@pytest.mark.parametrize("shape", [0.05, 0.5, 1.0, 2.5, 1e4])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 50.0])
def test_log_density_matches_scipy(shape, scale, rng):
    ref = stats.gamma(shape, scale=scale)
    x = np.concatenate([[1e-300, shape * scale], ref.rvs(size=200, random_state=rng)])
    x = x[x > 0]
    d = GammaDistribution(shape, scale)
    # terms of size gammaln(shape) cancel, so allow round-off relative to that size
    atol = 1e-12 * max(1.0, abs(special.gammaln(shape)))
    np.testing.assert_allclose(d.seq_log_density(d.encoder().encode(x)), ref.logpdf(x),
                               rtol=1e-12, atol=atol)
    assert d.log_density(x[1]) == pytest.approx(ref.logpdf(x[1]), rel=1e-12, abs=atol)


def test_float32_band_is_close_to_float64(rng):
    d = GammaDistribution(3.0, 2.0)
    enc = d.encoder().encode(rng.gamma(3.0, 2.0, size=1000))
    np.testing.assert_allclose(d.seq_log_density(enc, "float32"), d.seq_log_density(enc),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gap", [1e-7, 1e-3, 0.1, 1.0, 5.0, 30.0])
def test_shape_solves_the_likelihood_equation(gap):
    k = gamma_shape_mle(gap)
    assert np.log(k) - special.digamma(k) == pytest.approx(gap, rel=1e-10)
    ref = optimize.brentq(lambda a: np.log(a) - special.digamma(a) - gap, 1e-20, 1e12, xtol=1e-300,
                          rtol=1e-15)
    # the gap fixes k only to about eps * log(k) / gap relative (3e-8 at the smallest gap)
    assert k == pytest.approx(ref, rel=max(1e-12, 4 * np.finfo(float).eps * np.log(k) / gap))


def test_shape_is_capped_when_the_gap_vanishes():
    assert gamma_shape_mle(0.0, max_shape=1e6) == 1e6
    assert gamma_shape_mle(-1e-17, max_shape=1e6) == 1e6  # round-off can make the gap negative
    assert gamma_shape_mle(1e-9, max_shape=1e6) == 1e6


def test_mle_recovers_parameters_and_matches_scipy_fit():
    x = GammaDistribution(2.5, 1.5).sampler(3).sample(20_000)
    d = mixfold.optimize(x, GammaEstimator(), progress=False)
    # asymptotic standard errors at n = 20000: shape 0.023, scale 0.016; allow about 4 of them
    assert d.shape == pytest.approx(2.5, abs=0.1)
    assert d.scale == pytest.approx(1.5, abs=0.065)
    shape, _, scale = stats.gamma.fit(x, floc=0)
    assert d.shape == pytest.approx(shape, rel=1e-6)
    assert d.scale == pytest.approx(scale, rel=1e-6)
    assert d.shape * d.scale == pytest.approx(x.mean(), rel=1e-12)


def test_weights_equal_repeated_rows(rng):
    x = rng.gamma(2.0, 3.0, size=60)
    w = rng.integers(0, 4, size=60)
    a = mixfold.optimize(x, GammaEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), GammaEstimator(), progress=False)
    assert a.shape == pytest.approx(b.shape, rel=1e-10)
    assert a.scale == pytest.approx(b.scale, rel=1e-10)


def test_equal_values_fall_back_to_max_shape_and_no_weight_gives_the_default():
    d = mixfold.optimize(np.full(10, 3.0), GammaEstimator(max_shape=1e6), progress=False)
    assert d.shape == 1e6
    assert d.shape * d.scale == pytest.approx(3.0, rel=1e-15)
    empty = GammaEstimator().accumulator_factory().make()
    assert GammaEstimator().estimate(0.0, empty.value()) == GammaDistribution(1.0, 1.0)


def test_small_shapes_sample_inside_the_support():
    x = GammaDistribution(0.01, 1.0).sampler(0).sample(2000)
    assert (x > 0).all()
    GammaEstimator().encoder().encode(x)


@pytest.mark.parametrize("bad,row", [([1.0, np.nan, 2.0], 1), ([0.5, 1.0, np.inf], 2),
                                     ([0.5, 0.0], 1), ([2.0, 3.0, -1.0], 2)])
def test_invalid_values_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, GammaEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        GammaEstimator().encoder().encode([1.0, None])
    assert err.value.row == 1 and isinstance(err.value, TypeError)
    with pytest.raises(DataTypeError) as err:
        GammaEstimator().encoder().encode(["1.0"])
    assert err.value.row == 0


@pytest.mark.parametrize("shape,scale", [(0.0, 1.0), (-1.0, 1.0), (np.nan, 1.0), (np.inf, 1.0),
                                         (1.0, 0.0), (1.0, -2.0), (1.0, np.nan), (1.0, np.inf)])
def test_parameters_are_validated(shape, scale):
    with pytest.raises(ParameterError):
        GammaDistribution(shape, scale)


@pytest.mark.parametrize("max_shape", [0.0, -1.0, np.nan, np.inf])
def test_estimator_options_are_validated(max_shape):
    with pytest.raises(ValueError, match="max_shape"):
        GammaEstimator(max_shape=max_shape)


def test_dict_round_trip_is_exact():
    d = GammaDistribution(0.1 + 0.2, 1 / 3)
    assert GammaDistribution.from_dict(d.to_dict()) == d
    assert mixfold.Distribution.from_dict(d.to_dict()) == d
    assert d.to_dict() == {"family": "Gamma", "shape": 0.1 + 0.2, "scale": 1 / 3}


def test_payload_round_trips_and_halves_combine_to_the_whole(rng):
    x = rng.gamma(2.0, 1.0, size=501)
    w = rng.uniform(0, 2, size=501)
    enc = GammaEstimator().encoder().encode(x)
    unit = GammaDistribution(1.0, 1.0)  # sums about its mean, 1: the raw sums
    whole, first, second = (GammaAccumulator() for _ in range(3))
    whole.seq_update(enc, w, unit)
    first.seq_update(enc.rows(0, 250), w[:250], unit)
    second.seq_update(enc.rows(250, 501), w[250:], unit)
    np.testing.assert_allclose(first.combine(second).to_array(), whole.to_array(), rtol=1e-12)
    np.testing.assert_allclose(whole.to_array(), [w.sum(), w @ x, w @ np.log(x), 0.0], rtol=1e-12)
    copy = GammaAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())


def test_mixture_of_two_gammas_is_recovered_up_to_label_order():
    truth = MixtureDistribution([GammaDistribution(2.0, 1.0), GammaDistribution(10.0, 2.0)],
                                [0.5, 0.5])
    x = truth.sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([GammaEstimator()] * 2), seed=1, progress=False)
    order = np.argsort([c.shape for c in fit.components])
    got = np.array([(fit.components[i].shape, fit.components[i].scale) for i in order])
    # spread over 12 data sets: sd (0.027, 0.013) and (0.2, 0.04), weights 0.003; ~4 sd
    error = np.abs(got - [(2.0, 1.0), (10.0, 2.0)])
    assert (error <= [(0.12, 0.06), (0.8, 0.17)]).all(), got
    np.testing.assert_allclose(fit.weights[order], [0.5, 0.5], atol=0.015)
