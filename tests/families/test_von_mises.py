import numpy as np
import pytest
from scipy import stats
from scipy.special import i0e, i1e

import mixfold
from mixfold import DataError, DataTypeError, MixtureDistribution, MixtureEstimator, ParameterError
from mixfold.families.von_mises import (VonMisesAccumulator, VonMisesDistribution,
                                        VonMisesEstimator, von_mises_kappa_mle)


def circular_distance(a, b):
    return np.abs(np.angle(np.exp(1j * (np.asarray(a) - np.asarray(b)))))


@pytest.mark.parametrize("mu,kappa", [(0.0, 1.0), (2.5, 0.05), (-3.0, 30.0), (1.0, 2000.0)])
def test_log_density_matches_scipy(mu, kappa, rng):
    x = rng.uniform(-np.pi, np.pi, size=200)
    d = VonMisesDistribution(mu, kappa)
    got = d.seq_log_density(d.encoder().encode(x))
    np.testing.assert_allclose(got, stats.vonmises(kappa, loc=mu).logpdf(x), rtol=1e-12,
                               atol=1e-12)


def test_angles_are_read_modulo_two_pi(rng):
    d = VonMisesDistribution(0.7, 3.0)
    x = rng.uniform(-np.pi, np.pi, size=100)
    shifted = x + 2 * np.pi * rng.integers(-5, 6, size=100)
    np.testing.assert_allclose(d.seq_log_density(d.encoder().encode(shifted)),
                               d.seq_log_density(d.encoder().encode(x)), rtol=1e-12, atol=1e-12)
    assert VonMisesDistribution(0.7 + 4 * np.pi, 3.0).log_density(1.0) == pytest.approx(
        d.log_density(1.0), rel=1e-12)


def test_zero_kappa_is_uniform_and_huge_kappa_is_finite():
    assert VonMisesDistribution(1.0, 0.0).log_density(-2.0) == pytest.approx(-np.log(2 * np.pi))
    peak = VonMisesDistribution(0.0, 1e8).log_density(0.0)
    assert peak == pytest.approx(0.5 * np.log(1e8 / (2 * np.pi)), rel=1e-6)  # ~ normal, var 1/k


def test_float32_band_is_close_to_float64(rng):
    d = VonMisesDistribution(0.5, 4.0)
    enc = d.encoder().encode(rng.uniform(-10, 10, size=1000))
    np.testing.assert_allclose(d.seq_log_density(enc, "float32"), d.seq_log_density(enc),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rbar", [1e-6, 0.01, 0.3, 0.7, 0.95, 0.999, 1 - 1e-7])
def test_kappa_solves_the_likelihood_equation(rbar):
    k = von_mises_kappa_mle(rbar)
    assert i1e(k) / i0e(k) == pytest.approx(rbar, rel=1e-12)


def test_kappa_is_capped():
    assert von_mises_kappa_mle(1.0, max_kappa=50.0) == 50.0
    assert von_mises_kappa_mle(0.999, max_kappa=50.0) == 50.0
    assert von_mises_kappa_mle(0.0) == 0.0


def test_mle_recovers_parameters_and_matches_scipy_fit():
    x = VonMisesDistribution(2.0, 4.0).sampler(2).sample(20_000)
    assert ((x >= -np.pi) & (x <= np.pi)).all()
    d = mixfold.optimize(x, VonMisesEstimator(), progress=False)
    # standard errors ~ 0.004 for mu, ~ 0.035 for kappa
    assert circular_distance(d.mu, 2.0) < 0.02
    assert d.kappa == pytest.approx(4.0, abs=0.12)
    kappa, loc, _ = stats.vonmises.fit(x, fscale=1)
    assert d.mu == pytest.approx(loc, abs=1e-9) and d.kappa == pytest.approx(kappa, rel=1e-9)


def test_mean_direction_across_the_branch_cut():
    x = VonMisesDistribution(np.pi - 0.05, 20.0).sampler(0).sample(5000)
    x = x + 2 * np.pi * np.random.default_rng(1).integers(-3, 4, size=x.size)
    d = mixfold.optimize(x, VonMisesEstimator(), progress=False)
    assert circular_distance(d.mu, np.pi - 0.05) < 0.01
    assert d.kappa == pytest.approx(20.0, rel=0.06)


def test_coincident_angles_give_max_kappa_and_a_finite_fit():
    x = np.full(20, 1.25) + 2 * np.pi * np.arange(20)
    d = mixfold.optimize(x, VonMisesEstimator(max_kappa=1e6), progress=False)
    assert d.kappa == 1e6 and d.mu == pytest.approx(1.25, abs=1e-9)
    assert np.isfinite(d.log_density(1.25))


def test_uniform_angles_give_small_kappa_and_no_weight_gives_uniform():
    x = np.random.default_rng(0).uniform(-np.pi, np.pi, size=20_000)
    assert mixfold.optimize(x, VonMisesEstimator(), progress=False).kappa < 0.05
    empty = VonMisesEstimator().estimate(0.0, VonMisesAccumulator().value())
    assert empty == VonMisesDistribution(0.0, 0.0)


def test_weights_equal_repeated_rows(rng):
    x = rng.vonmises(1.0, 2.0, size=50)
    w = rng.integers(0, 4, size=50)
    a = mixfold.optimize(x, VonMisesEstimator(), weights=w, progress=False)
    b = mixfold.optimize(np.repeat(x, w), VonMisesEstimator(), progress=False)
    assert a.mu == pytest.approx(b.mu, rel=1e-12)
    assert a.kappa == pytest.approx(b.kappa, rel=1e-10)


@pytest.mark.parametrize("bad,row", [([1.0, np.nan, 2.0], 1), ([0.0, 1.0, -np.inf], 2)])
def test_non_finite_values_are_rejected_with_the_row(bad, row):
    with pytest.raises(DataError) as err:
        mixfold.optimize(bad, VonMisesEstimator(), progress=False)
    assert err.value.row == row


def test_wrong_type_is_a_type_error():
    with pytest.raises(DataTypeError) as err:
        VonMisesEstimator().encoder().encode([1.0, 2.0, "north"])
    assert err.value.row == 2


def test_parameters_are_validated():
    for mu, kappa in [(0.0, -1.0), (np.nan, 1.0), (0.0, np.inf)]:
        with pytest.raises(ParameterError):
            VonMisesDistribution(mu, kappa)
    with pytest.raises(ValueError):
        VonMisesEstimator(max_kappa=0.0)


def test_dict_round_trip_is_exact():
    d = VonMisesDistribution(0.1 + 0.2, 1 / 3)
    back = mixfold.Distribution.from_dict(d.to_dict())
    assert back == d and back.mu == d.mu and back.kappa == d.kappa
    assert d.to_dict() == {"family": "VonMises", "mu": d.mu, "kappa": d.kappa}


def test_payload_round_trip_and_combine_of_halves(rng):
    x = rng.uniform(-7, 7, size=101)
    w = rng.uniform(size=101)
    enc = VonMisesEstimator().encoder().encode(x)
    model = VonMisesDistribution(0.0, 1.0)
    whole = VonMisesAccumulator()
    whole.seq_update(enc, w, model)
    a, b = VonMisesAccumulator(), VonMisesAccumulator()
    a.seq_update(enc.rows(0, 60), w[:60], model)
    b.seq_update(enc.rows(60, 101), w[60:], model)
    np.testing.assert_allclose(a.combine(b).to_array(), whole.to_array(), rtol=1e-13)
    copy = VonMisesAccumulator().from_array(whole.to_array())
    np.testing.assert_array_equal(copy.to_array(), whole.to_array())
    # about the model's direction, 0: sum w sin x, and sum w (1 - cos x) by half angles
    np.testing.assert_allclose(whole.sums, [w.sum(), w @ np.sin(x), w @ (1 - np.cos(x)), 0.0])


def test_stacked_mixture_paths_equal_per_component_paths(rng):
    m = MixtureDistribution([VonMisesDistribution(-1.0, 0.5), VonMisesDistribution(2.0, 8.0),
                             VonMisesDistribution(0.3, 0.0)], [0.3, 0.5, 0.2])
    assert m.units.stack is VonMisesDistribution
    enc = m.encoder().encode(rng.uniform(-4, 4, size=300))
    per_component = np.stack([np.log(w) + c.seq_log_density(enc)
                              for w, c in zip(m.weights, m.components)], axis=1)
    np.testing.assert_allclose(m.component_log_densities(enc), per_component, rtol=1e-12)
    resp = m.seq_posterior(enc) * rng.uniform(size=(300, 1))
    stacked = [VonMisesAccumulator() for _ in range(3)]
    for acc, point in zip(stacked, VonMisesAccumulator.stack_reference(m.components)):
        acc.set_reference(point)  # as a mixture sets them: each component's own direction
    VonMisesAccumulator.stack_update(stacked, enc, resp)
    for k, acc in enumerate(stacked):
        ref = VonMisesAccumulator()
        ref.seq_update(enc, np.ascontiguousarray(resp[:, k]), m.components[k])
        np.testing.assert_allclose(acc.to_array(), ref.to_array(), rtol=1e-12, atol=1e-12)


def test_seeded_mixture_fit_recovers_components():
    truth = MixtureDistribution([VonMisesDistribution(-2.0, 10.0),
                                 VonMisesDistribution(1.0, 5.0)], [0.4, 0.6])
    x = truth.sampler(4).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([VonMisesEstimator()] * 2), seed=1,
                           progress=False)
    order = np.argsort([c.mu for c in fit.components])
    comps = [fit.components[i] for i in order]
    np.testing.assert_allclose(fit.weights[order], [0.4, 0.6], atol=0.015)
    assert circular_distance(comps[0].mu, -2.0) < 0.02
    assert circular_distance(comps[1].mu, 1.0) < 0.02
    assert comps[0].kappa == pytest.approx(10.0, rel=0.08)
    assert comps[1].kappa == pytest.approx(5.0, rel=0.08)
