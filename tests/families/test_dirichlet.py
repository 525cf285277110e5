import numpy as np
import pytest
from scipy import optimize, special, stats

import mixfold
from mixfold import (DataError, DataTypeError, DegenerateFitWarning, DirichletDistribution,
                     DirichletEstimator, MixtureDistribution, ParameterError)
from mixfold.families.dirichlet import dirichlet_mle
from tests.families.family_checks import (check_decomposition, check_mixture_step,
                                          check_model_file, check_monotone_mixture,
                                          check_payload_halves, check_weights_are_repeats)


@pytest.mark.parametrize("alpha", [[0.1, 0.5], [1.0, 1.0, 1.0], [2.0, 5.0, 3.0],
                                   [400.0, 30.0, 2.0, 0.7]])
def test_log_density_matches_scipy(alpha, rng):
    ref = stats.dirichlet(alpha)
    x = rng.dirichlet(np.ones(len(alpha)), size=100)
    d = DirichletDistribution(alpha)
    enc = d.encoder().encode(x)
    want = np.array([ref.logpdf(v) for v in x])
    atol = 1e-12 * max(1.0, abs(special.gammaln(sum(alpha))))
    np.testing.assert_allclose(d.seq_log_density(enc), want, rtol=1e-11, atol=atol)
    other = DirichletDistribution(np.arange(1.0, len(alpha) + 1))
    stacked = DirichletDistribution.stack_log_density([d, other], enc)
    np.testing.assert_allclose(stacked[:, 0], want, rtol=1e-11, atol=atol)
    np.testing.assert_allclose(stacked[:, 1], [stats.dirichlet(other.alpha).logpdf(v) for v in x],
                               rtol=1e-11)


def test_rows_must_be_compositions():
    enc = DirichletEstimator().encoder()
    with pytest.raises(DataError, match=r"row 1, field \[0\]: expected a part > 0, got 0.0"):
        enc.fit([[0.5, 0.5]]).encode([[0.5, 0.5], [0.0, 1.0]])
    with pytest.raises(DataError, match="row 0: expected parts that sum to 1, got a sum of 0.9"):
        enc.fit([[0.5, 0.4]]).encode([[0.5, 0.4]])
    with pytest.raises(DataTypeError, match="row 1"):
        enc.fit([[0.5, 0.5]]).encode([[0.5, 0.5], [1.0]])
    # shares rounded to 7 digits are rescaled onto the simplex
    x = enc.fit([[0.3333333, 0.3333333, 0.3333333]]).encode([[0.3333333] * 3]).values
    assert x.sum() == pytest.approx(1.0, abs=1e-15)
    for alpha in ([1.0], [1.0, 0.0], [1.0, np.inf], [[1.0, 2.0]]):
        with pytest.raises(ParameterError):
            DirichletDistribution(alpha)


@pytest.mark.parametrize("gap", [1e-4, 0.1, 3.0])
def test_solver_solves_the_likelihood_equations(gap):
    mean_log = np.log([0.1, 0.3, 0.6]) - gap
    alpha, capped = dirichlet_mle(mean_log, np.ones(3))
    assert not capped
    np.testing.assert_allclose(special.digamma(alpha) - special.digamma(alpha.sum()), mean_log,
                               rtol=1e-10, atol=1e-12)


def test_mle_matches_scipy_likelihood_maximum():
    x = DirichletDistribution([2.0, 5.0, 0.5]).sampler(3).sample(5000)
    d = mixfold.optimize(x, DirichletEstimator(), progress=False)

    def nll(t):
        return -stats.dirichlet(np.exp(t)).logpdf(x.T).sum()

    ref = optimize.minimize(nll, np.zeros(3), method="BFGS", options={"gtol": 1e-9})
    np.testing.assert_allclose(d.alpha, np.exp(ref.x), rtol=1e-5)
    assert nll(np.log(d.alpha)) <= ref.fun + 1e-7


def test_one_composition_caps_the_concentration_with_a_warning():
    with pytest.warns(DegenerateFitWarning, match="max_concentration"):
        d = mixfold.optimize(np.tile([0.2, 0.3, 0.5], (10, 1)),
                             DirichletEstimator(max_concentration=1e6), progress=False)
    assert d.alpha.sum() == pytest.approx(1e6)
    np.testing.assert_allclose(d.alpha / d.alpha.sum(), [0.2, 0.3, 0.5], rtol=1e-4)


def test_contract(rng, tmp_path):
    d = DirichletDistribution([2.0, 5.0, 3.0])
    x = d.sampler(1).sample(400)
    check_model_file(d, tmp_path)
    assert d.to_dict() == {"family": "Dirichlet", "alpha": [2.0, 5.0, 3.0]}
    assert d.n_parameters() == 3
    assert check_decomposition(d).row_work == 3.0
    check_payload_halves(DirichletEstimator(), x, d, rng)
    check_weights_are_repeats(DirichletEstimator, x[:60], rng)
    assert mixfold.optimize(x, DirichletEstimator(dim=3), progress=False).dim == 3


@pytest.mark.parametrize("alphas", [[[2.0, 5.0, 3.0], [6.0, 1.5, 1.0]],
                                    [[0.5, 3.0, 1.0], [4.0, 0.8, 2.0]]])
def test_fused_mixture_step_matches_scipy(alphas, rng):
    comps = [DirichletDistribution(a) for a in alphas]
    x = rng.dirichlet([2.0, 2.0, 2.0], size=2000)
    check_mixture_step(DirichletEstimator(), comps, x,
                       lambda c, v: stats.dirichlet(c.alpha).logpdf(v.T), rng)


def test_mixture_of_two_is_recovered():
    truth = MixtureDistribution([DirichletDistribution([8.0, 2.0, 2.0]),
                                 DirichletDistribution([1.0, 3.0, 9.0])], [0.4, 0.6])
    x = truth.sampler(0).sample(10_000)
    fit = check_monotone_mixture(DirichletEstimator, x, iters=80).model
    order = np.argsort([c.alpha[0] / c.alpha.sum() for c in fit.components])[::-1]
    np.testing.assert_allclose([fit.components[i].alpha for i in order],
                               [[8.0, 2.0, 2.0], [1.0, 3.0, 9.0]], rtol=0.1)
    np.testing.assert_allclose(fit.weights[order], [0.4, 0.6], atol=0.02)
