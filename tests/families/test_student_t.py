import numpy as np
import pytest
from scipy import optimize, stats

import mixfold
from mixfold import (DataError, GaussianEstimator, MixtureDistribution, ParameterError,
                     StudentTDistribution, StudentTEstimator)
from tests.families.family_checks import (check_decomposition, check_model_file,
                                          check_monotone_mixture, check_payload_halves,
                                          check_weights_are_repeats)


@pytest.mark.parametrize("mu, sigma2, nu", [(0.0, 1.0, 1.0), (3.0, 0.01, 0.3), (-1e6, 4.0, 5.0),
                                            (2.0, 1e4, 1e5)])
def test_log_density_matches_scipy(mu, sigma2, nu, rng):
    ref = stats.t(nu, loc=mu, scale=np.sqrt(sigma2))
    x = np.concatenate([[mu, mu + 1e8], ref.rvs(size=200, random_state=rng)])
    d = StudentTDistribution(mu, sigma2, nu)
    enc = d.encoder().encode(x)
    np.testing.assert_allclose(d.seq_log_density(enc), ref.logpdf(x), rtol=1e-10, atol=1e-10)


def test_parameters_and_rows_are_checked():
    for args in [(np.nan, 1, 1), (0, 0, 1), (0, 1, 0), (0, 1, np.inf)]:
        with pytest.raises(ParameterError):
            StudentTDistribution(*args)
    with pytest.raises(DataError, match="row 1"):
        StudentTEstimator().encoder().encode([1.0, np.inf])
    with pytest.raises(ValueError, match="nu must be"):
        StudentTEstimator(nu=-1.0)


def _fit(x, **options):
    return mixfold.fit(x, StudentTEstimator(**options), max_iter=5000, tol=1e-14, progress=False)


@pytest.mark.parametrize("nu", [1.0, 4.0])
def test_fixed_nu_matches_scipy_fit(nu):
    x = StudentTDistribution(5.0, 2.0, nu).sampler(2).sample(3000)
    res = _fit(x, nu=nu)
    d = res.model
    assert d.nu == nu
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-12 * np.abs(ll[1:])).all()
    _, loc, scale = stats.t.fit(x, f0=nu)
    nll = lambda t: -stats.t.logpdf(x, nu, t[0], np.exp(t[1])).sum()  # noqa: E731
    ref = optimize.minimize(nll, [loc, np.log(scale)], method="Nelder-Mead",
                            options={"xatol": 1e-12, "fatol": 1e-12})
    assert d.mu == pytest.approx(ref.x[0], abs=1e-6)
    assert np.sqrt(d.sigma2) == pytest.approx(np.exp(ref.x[1]), rel=1e-6)


def test_estimated_nu_matches_scipy_likelihood_maximum():
    x = StudentTDistribution(-2.0, 0.5, 3.0).sampler(4).sample(4000)
    res = _fit(x)
    d = res.model
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-12 * np.abs(ll[1:])).all()  # exact EM: never decreases
    nll = lambda t: -stats.t.logpdf(x, np.exp(t[0]), t[1], np.exp(t[2])).sum()  # noqa: E731
    nu0, loc0, scale0 = stats.t.fit(x)
    ref = optimize.minimize(nll, [np.log(nu0), loc0, np.log(scale0)], method="Nelder-Mead",
                            options={"xatol": 1e-11, "fatol": 1e-12, "maxiter": 10000})
    assert d.nu == pytest.approx(np.exp(ref.x[0]), rel=1e-4)
    assert d.mu == pytest.approx(ref.x[1], abs=1e-5)
    assert np.sqrt(d.sigma2) == pytest.approx(np.exp(ref.x[2]), rel=1e-5)
    assert -stats.t.logpdf(x, d.nu, d.mu, np.sqrt(d.sigma2)).sum() <= ref.fun + 1e-6


def test_outliers_move_the_location_less_than_a_gaussian():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0.0, 1.0, 950), np.full(50, 40.0)])
    t = _fit(x).model
    g = mixfold.optimize(x, GaussianEstimator(), progress=False)
    assert abs(t.mu) < 0.1 < abs(g.mu)


def test_gaussian_rows_push_nu_to_its_cap_and_far_locations_keep_precision():
    x = np.random.default_rng(1).normal(1e9, 1.0, 2000)
    d = mixfold.optimize(x, StudentTEstimator(max_nu=1e4), max_iter=200, progress=False)
    assert d.nu > 30  # nu creeps up slowly where the likelihood is flat in it
    assert d.mu == pytest.approx(x.mean(), abs=0.1)
    assert d.sigma2 == pytest.approx(x.var(), rel=0.1)


def test_contract(rng, tmp_path):
    d = StudentTDistribution(1.0, 4.0, 3.0)
    x = d.sampler(1).sample(400)
    check_model_file(d, tmp_path)
    assert d.to_dict() == {"family": "StudentT", "mu": 1.0, "sigma2": 4.0, "nu": 3.0}
    assert d.n_parameters() == 3
    check_decomposition(d)
    check_payload_halves(StudentTEstimator(), x, d, rng)
    check_weights_are_repeats(StudentTEstimator, x[:60], rng, max_iter=30)
    assert StudentTEstimator(nu=2.5).estimate(0.0, StudentTEstimator().accumulator_factory()
                                              .make().value()) == StudentTDistribution(0, 1, 2.5)


def test_mixture_of_two_is_recovered():
    truth = MixtureDistribution([StudentTDistribution(-5.0, 1.0, 3.0),
                                 StudentTDistribution(5.0, 2.0, 3.0)], [0.4, 0.6])
    x = truth.sampler(0).sample(10_000)
    fit = check_monotone_mixture(lambda: StudentTEstimator(nu=3.0), x, iters=60).model
    order = np.argsort([c.mu for c in fit.components])
    np.testing.assert_allclose([fit.components[i].mu for i in order], [-5.0, 5.0], atol=0.1)
    np.testing.assert_allclose([fit.components[i].sigma2 for i in order], [1.0, 2.0], rtol=0.1)
    np.testing.assert_allclose(fit.weights[order], [0.4, 0.6], atol=0.02)
