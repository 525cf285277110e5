import warnings

import numpy as np
import pytest
from scipy import optimize, stats

import mixfold
from mixfold import (DataError, MissingEntriesWarning, MixtureDistribution, MixtureEstimator,
                     MultivariateGaussianEstimator, MultivariateStudentTDistribution,
                     MultivariateStudentTEstimator, ParameterError)
from mixfold.precision import BandSupportError
from tests.families.family_checks import (check_decomposition, check_model_file,
                                          check_monotone_mixture, check_payload_halves,
                                          check_weights_are_repeats)

T = MultivariateStudentTDistribution

SCALE = np.array([[1.0, 0.6, 0.2], [0.6, 2.0, -0.3], [0.2, -0.3, 0.5]])


def _fit(x, **options):
    return mixfold.fit(x, MultivariateStudentTEstimator(**options), max_iter=5000, tol=1e-15,
                       progress=False)


def _increasing(res):
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-12 * np.abs(ll[1:])).all(), ll  # exact EM: never decreases


@pytest.mark.parametrize("mu, scale, nu", [
    ([0.0], [[1.0]], 1.0), ([3.0, -1.0], [[0.01, 0.0], [0.0, 4.0]], 0.3),
    ([1e6, 0.0, 2.0], SCALE, 5.0), ([0.0, 0.0, 0.0], SCALE * 1e4, 1e5)])
def test_log_density_matches_scipy(mu, scale, nu, rng):
    ref = stats.multivariate_t(mu, scale, df=nu)
    x = np.vstack([np.asarray(mu)[None], np.asarray(mu)[None] + 1e8,
                   ref.rvs(size=200, random_state=rng).reshape(200, -1)])
    d = T(mu, scale, nu)
    np.testing.assert_allclose(d.seq_log_density(x), ref.logpdf(x), rtol=1e-12, atol=1e-12)


def test_missing_entries_are_scored_by_the_marginal_t(rng):
    d = T([1.0, -1.0, 0.5], SCALE, 3.0, missing=True)
    x = d.sampler(1).sample(300)
    x[rng.random(x.shape) < 0.3] = np.nan
    x[0] = np.nan
    want = []
    for row in x:
        seen = ~np.isnan(row)
        want.append(stats.multivariate_t(d.mu[seen], SCALE[np.ix_(seen, seen)], df=3.0)
                    .logpdf(row[seen]) if seen.any() else 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        got = d.seq_log_density(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_parameters_options_and_rows_are_checked():
    for args in [([0.0], [[1.0]], 0.0), ([0.0], [[1.0]], np.inf), ([0.0], [[-1.0]], 1.0),
                 ([0.0, 0.0], [[1.0]], 1.0), ([0.0, 0.0], [[1.0, 1.0], [0.0, 1.0]], 2.0),
                 ([np.nan], [[1.0]], 1.0), ([0.0], [[1.0]], "3")]:
        with pytest.raises(ParameterError):
            T(*args)
    with pytest.raises(ParameterError, match="scale must be positive definite"):
        T([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]], 3.0)
    with pytest.raises(ParameterError, match="nu"):
        MultivariateStudentTEstimator(nu=-1.0)
    with pytest.raises(ParameterError, match="reg_covar_mode"):
        MultivariateStudentTEstimator(reg_covar_mode="huge")
    with pytest.raises(DataError, match="row 1"):
        MultivariateStudentTEstimator(dim=2).encoder().encode([[1.0, 2.0], [np.nan, 1.0]])
    with pytest.raises(BandSupportError):
        mixfold.fit(np.ones((10, 2)) + np.arange(10)[:, None] * [1, -1],
                    MultivariateStudentTEstimator(), precision="dd", progress=False)


def test_samples_have_the_scale_and_tails_of_the_law():
    d = T([1.0, -2.0, 0.0], SCALE, 5.0)
    x = d.sampler(0).sample(200_000)
    np.testing.assert_allclose(np.cov(x.T), SCALE * 5.0 / 3.0, atol=0.05)
    # Mahalanobis distances / D follow F(D, nu)
    y = (x - d.mu) @ d.gaussian.precision_cholesky
    f = np.einsum("ij,ij->i", y, y) / 3.0
    assert stats.kstest(f, stats.f(3, 5.0).cdf).pvalue > 1e-3


def test_known_parameters_are_recovered():
    truth = T([1.0, -2.0, 0.0], SCALE, 4.0)
    res = _fit(truth.sampler(2).sample(50_000))
    _increasing(res)
    d = res.model
    np.testing.assert_allclose(d.mu, truth.mu, atol=0.02)
    np.testing.assert_allclose(d.scale, SCALE, atol=0.03)
    assert d.nu == pytest.approx(4.0, rel=0.05)


def _negative_log_likelihood(x, fixed_nu=None):
    d = x.shape[1]
    low = np.tril_indices(d)

    def nll(theta):
        chol = np.zeros((d, d))
        chol[low] = theta[d:d + len(low[0])]
        chol[np.diag_indices(d)] = np.exp(np.diag(chol))
        nu = fixed_nu if fixed_nu is not None else np.exp(theta[-1])
        return -stats.multivariate_t(theta[:d], chol @ chol.T, df=nu).logpdf(x).sum()

    def start(model):
        chol = np.linalg.cholesky(model.scale)
        chol[np.diag_indices(d)] = np.log(np.diag(chol))
        theta = np.concatenate([model.mu, chol[low]])
        return theta if fixed_nu is not None else np.append(theta, np.log(model.nu))

    return nll, start


@pytest.mark.parametrize("fixed_nu", [1.5, None])
def test_fit_is_the_maximum_of_the_likelihood(fixed_nu):
    x = T([0.5, -1.0], [[2.0, 0.8], [0.8, 1.0]], 3.0).sampler(4).sample(2000)
    res = _fit(x, nu=fixed_nu)
    _increasing(res)
    nll, start = _negative_log_likelihood(x, fixed_nu)
    theta = start(res.model)
    # the fit is a stationary point: no direction improves it
    grad = optimize.approx_fprime(theta, nll, 1e-6)
    assert np.abs(grad).max() < 1e-2
    # a direct maximisation from a rough start reaches the same parameters
    rough = start(T(x.mean(axis=0), np.cov(x.T), 10.0 if fixed_nu is None else fixed_nu))
    ref = optimize.minimize(nll, rough, method="BFGS", options={"gtol": 1e-8})
    assert -ref.fun <= -nll(theta) + 1e-7 * abs(ref.fun)
    np.testing.assert_allclose(theta, ref.x, atol=1e-4)
    if fixed_nu is not None:
        assert res.model.nu == fixed_nu


def test_outliers_move_the_location_less_than_a_gaussian():
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(0.0, 1.0, (950, 2)), np.full((50, 2), 40.0)])
    t = _fit(x).model
    g = mixfold.optimize(x, MultivariateGaussianEstimator(), progress=False)
    assert np.abs(t.mu).max() < 0.1 < np.abs(g.mu).min()


def test_gaussian_rows_push_nu_up_and_far_locations_keep_precision():
    x = np.random.default_rng(1).normal(0.0, 1.0, (4000, 2)) * [1.0, 3.0] + 1e9
    d = mixfold.optimize(x, MultivariateStudentTEstimator(max_nu=1e4), max_iter=300,
                         progress=False)
    assert d.nu > 30
    np.testing.assert_allclose(d.mu, x.mean(axis=0), atol=0.1)
    np.testing.assert_allclose(np.diag(d.scale), x.var(axis=0), rtol=0.1)


def test_missing_entries_fit_by_exact_em(rng):
    truth = T([1.0, -2.0, 0.0], SCALE, 4.0, missing=True)
    x = truth.sampler(5).sample(20_000)
    x[rng.random(x.shape) < 0.2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingEntriesWarning)
        res = _fit(x, missing=True)
    _increasing(res)
    d = res.model
    assert d.missing
    np.testing.assert_allclose(d.mu, truth.mu, atol=0.05)
    np.testing.assert_allclose(d.scale, SCALE, atol=0.06)
    assert d.nu == pytest.approx(4.0, rel=0.1)


def test_contract(rng, tmp_path):
    d = T([1.0, -1.0], [[2.0, 0.3], [0.3, 1.0]], 3.0)
    x = d.sampler(1).sample(400)
    check_model_file(d, tmp_path)
    check_model_file(T([1.0], [[2.0]], 3.0, missing=True), tmp_path)
    assert d.to_dict() == {"family": "MultivariateStudentT", "mu": [1.0, -1.0],
                           "scale": [[2.0, 0.3], [0.3, 1.0]], "nu": 3.0}
    assert d.n_parameters() == 2 + 3 + 1
    check_decomposition(d)
    check_payload_halves(MultivariateStudentTEstimator(), x, d, rng)
    check_weights_are_repeats(MultivariateStudentTEstimator, x[:60], rng, max_iter=30)
    empty = MultivariateStudentTEstimator(dim=2, nu=2.5)
    assert empty.estimate(0.0, empty.accumulator_factory().make().value()) == \
        T([0.0, 0.0], np.eye(2), 2.5)


def test_payload_from_shards_about_other_points_adds_up(rng):
    """Shards summed about different reference points combine to the statistics of one."""
    est = MultivariateStudentTEstimator(dim=2)
    x = T([5.0, 5.0], np.eye(2), 3.0).sampler(3).sample(200)
    w = rng.uniform(0.5, 1.5, 200)
    whole, a, b = (est.accumulator_factory().make() for _ in range(3))
    enc = est.encoder().encode(x)
    whole.seq_update(enc, w, T([5.0, 5.0], np.eye(2), 3.0))
    a.seq_update(enc.rows(0, 100), w[:100], T([5.0, 5.0], np.eye(2), 3.0))
    b.seq_update(enc.rows(100, 200), w[100:], T([5.0, 5.0], np.eye(2), 3.0))
    b.recentre(np.array([-3.0, 2.0]))
    got = est.estimate(0.0, a.combine(b).value())
    want = est.estimate(0.0, whole.value())
    np.testing.assert_allclose(got.mu, want.mu, rtol=1e-12)
    np.testing.assert_allclose(got.scale, want.scale, rtol=1e-10)
    assert got.nu == pytest.approx(want.nu, rel=1e-12)


def _heavy_clusters(n=4000, seed=0):
    truth = MixtureDistribution([T([-4.0, 0.0], [[1.0, 0.3], [0.3, 0.5]], 1.5),
                                 T([4.0, 1.0], [[0.5, -0.2], [-0.2, 1.0]], 1.5)], [0.4, 0.6])
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.6
    x = np.where(labels[:, None], truth.components[1].sampler(rng).sample(n),
                 truth.components[0].sampler(rng).sample(n))
    return truth, x, labels


def _accuracy(model, x, labels):
    found = model.seq_posterior(x).argmax(axis=1).astype(bool)
    return max(np.mean(found == labels), np.mean(found != labels))


def test_mixture_recovers_heavy_tailed_clusters_where_a_gaussian_mixture_fails():
    truth, x, labels = _heavy_clusters()
    res = check_monotone_mixture(lambda: MultivariateStudentTEstimator(), x, iters=200)
    fit = res.model
    order = np.argsort([c.mu[0] for c in fit.components])
    for i, comp in zip(order, truth.components):
        np.testing.assert_allclose(fit.components[i].mu, comp.mu, atol=0.1)
        np.testing.assert_allclose(fit.components[i].scale, comp.scale, atol=0.15)
        assert fit.components[i].nu == pytest.approx(1.5, rel=0.15)
    np.testing.assert_allclose(fit.weights[order], truth.weights, atol=0.02)
    bayes = _accuracy(truth, x, labels)  # heavy tails cross over: the truth misses some too
    assert _accuracy(fit, x, labels) >= bayes - 0.005
    gaussian = mixfold.fit(x, MixtureEstimator([MultivariateGaussianEstimator()] * 2),
                           max_iter=200, seed=3, progress=False).model
    assert _accuracy(gaussian, x, labels) < bayes - 0.2  # a component spent on the far rows


@pytest.mark.slow
def test_mp_backend_fits_the_same_mixture():
    _, x, _ = _heavy_clusters(n=3000, seed=1)
    x[::7, 1] = np.nan
    est = MixtureEstimator([MultivariateStudentTEstimator(missing=True)] * 2)
    local = mixfold.fit(x, est, max_iter=15, tol=0.0, seed=2, progress=False)
    mp = mixfold.fit(x, est, max_iter=15, tol=0.0, seed=2, backend="mp", num_workers=2,
                     progress=False)
    np.testing.assert_allclose(mp.log_likelihood, local.log_likelihood, rtol=1e-11)
    for a, b in zip(mp.model.components, local.model.components):
        np.testing.assert_allclose(a.mu, b.mu, rtol=1e-9)
        np.testing.assert_allclose(a.scale, b.scale, rtol=1e-9, atol=1e-12)
        assert a.nu == pytest.approx(b.nu, rel=1e-9)
