import numpy as np
import pytest
from scipy import optimize, special, stats

import mixfold
from mixfold import (BetaDistribution, BetaEstimator, DataError, DegenerateFitWarning,
                     MixtureDistribution, ParameterError)
from mixfold.families.beta import BetaAccumulator
from tests.families.family_checks import (check_decomposition, check_mixture_step,
                                          check_model_file, check_monotone_mixture,
                                          check_payload_halves, check_weights_are_repeats)


@pytest.mark.parametrize("a, b", [(0.05, 0.5), (0.5, 0.5), (1.0, 1.0), (2.0, 5.0), (300.0, 7.0)])
def test_log_density_matches_scipy(a, b, rng):
    ref = stats.beta(a, b)
    x = np.concatenate([[1e-300, 0.5, 1 - 1e-16], np.clip(ref.rvs(size=200, random_state=rng),
                                                          1e-300, 1 - 1e-16)])
    d = BetaDistribution(a, b)
    enc = d.encoder().encode(x)
    atol = 1e-12 * max(1.0, abs(special.betaln(a, b)))
    np.testing.assert_allclose(d.seq_log_density(enc), ref.logpdf(x), rtol=1e-11, atol=atol)
    stacked = BetaDistribution.stack_log_density([d, BetaDistribution(3.0, 1.5)], enc)
    np.testing.assert_allclose(stacked[:, 0], ref.logpdf(x), rtol=1e-11, atol=atol)
    np.testing.assert_allclose(stacked[:, 1], stats.beta(3.0, 1.5).logpdf(x), rtol=1e-11)


def test_values_outside_the_open_interval_are_refused():
    for bad in ([0.5, 0.0], [0.5, 1.0], [0.5, -0.1], [0.5, float("nan")]):
        with pytest.raises(DataError, match="row 1.*in \\(0, 1\\)"):
            BetaEstimator().encoder().encode(bad)
    for a, b in [(0.0, 1.0), (1.0, -1.0), (np.inf, 1.0)]:
        with pytest.raises(ParameterError):
            BetaDistribution(a, b)


@pytest.mark.parametrize("a, b", [(2.0, 5.0), (0.3, 0.7), (50.0, 20.0)])
def test_mle_matches_scipy_fit(a, b):
    x = BetaDistribution(a, b).sampler(3).sample(5000)
    d = mixfold.optimize(x, BetaEstimator(), progress=False)
    ra, rb, _, _ = stats.beta.fit(x, floc=0, fscale=1)
    nll = lambda t: -stats.beta.logpdf(x, *np.exp(t)).sum()  # noqa: E731
    ref = optimize.minimize(nll, np.log([ra, rb]), method="Nelder-Mead",
                            options={"xatol": 1e-12, "fatol": 1e-12})
    assert d.a == pytest.approx(np.exp(ref.x[0]), rel=1e-5)
    assert d.b == pytest.approx(np.exp(ref.x[1]), rel=1e-5)
    assert -stats.beta.logpdf(x, d.a, d.b).sum() <= ref.fun + 1e-7


def test_one_value_caps_the_concentration_with_a_warning():
    with pytest.warns(DegenerateFitWarning, match="max_concentration"):
        d = mixfold.optimize(np.full(20, 0.3), BetaEstimator(max_concentration=1e6),
                             progress=False)
    assert d.a + d.b == pytest.approx(1e6)
    assert d.mean == pytest.approx(0.3, rel=1e-3)
    empty = BetaEstimator().accumulator_factory().make()
    assert BetaEstimator().estimate(0.0, empty.value()) == BetaDistribution(1.0, 1.0)


def test_contract(rng, tmp_path):
    d = BetaDistribution(2.0, 5.0)
    x = d.sampler(1).sample(400)
    check_model_file(d, tmp_path)
    assert d.to_dict() == {"family": "Beta", "a": 2.0, "b": 5.0}
    assert d.n_parameters() == 2
    check_decomposition(d)
    check_payload_halves(BetaEstimator(), x, d, rng)
    check_weights_are_repeats(BetaEstimator, x[:60], rng)
    assert isinstance(BetaAccumulator(), mixfold.capabilities.LinearInFeatures)


@pytest.mark.parametrize("shapes", [[(2.0, 5.0), (6.0, 1.5)], [(0.5, 3.0), (4.0, 0.8)]])
def test_fused_mixture_step_matches_scipy(shapes, rng):
    comps = [BetaDistribution(a, b) for a, b in shapes]
    x = rng.beta(2.0, 2.0, size=3000)
    check_mixture_step(BetaEstimator(), comps, x, lambda c, v: stats.beta(c.a, c.b).logpdf(v),
                       rng)


def test_mixture_of_two_is_recovered():
    truth = MixtureDistribution([BetaDistribution(2.0, 8.0), BetaDistribution(9.0, 2.0)],
                                [0.4, 0.6])
    x = truth.sampler(0).sample(20_000)
    fit = check_monotone_mixture(BetaEstimator, x, iters=80).model
    order = np.argsort([c.mean for c in fit.components])
    got = [(fit.components[i].a, fit.components[i].b) for i in order]
    np.testing.assert_allclose(got, [(2.0, 8.0), (9.0, 2.0)], rtol=0.08)
    np.testing.assert_allclose(fit.weights[order], [0.4, 0.6], atol=0.02)
