"""VariationalMixtureEstimator against scikit-learn's BayesianGaussianMixture from the same start
and priors, and on mixed-type records with missing values (no peer fits those)."""

import warnings

import numpy as np
import pytest
from scipy.special import gammaln, multigammaln
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import BayesianGaussianMixture

import mixfold
from mixfold import (CategoricalEstimator, DiagonalGaussianEstimator, Distribution,
                     GaussianEstimator, MultivariateGaussianEstimator, OptionalEstimator,
                     PoissonEstimator, RecordEstimator, VariationalMixtureDistribution,
                     VariationalMixtureEstimator, WeibullEstimator)
from mixfold.errors import ParameterError

K = 6
SKLEARN_PRIOR = {"dirichlet_process": "dirichlet_process", "dirichlet": "dirichlet_distribution"}


def blobs(rng, d):
    return np.vstack([rng.normal(m, 1 + 0.3 * (m > 0), size=(150, d)) for m in (-4, 0, 5)])


def sklearn_from(X, resp, covariance_type, weight_prior):
    """scikit-learn's fit from the start ``resp`` (its own _initialize) to convergence."""
    bgm = BayesianGaussianMixture(n_components=K, covariance_type=covariance_type,
                                  weight_concentration_prior_type=SKLEARN_PRIOR[weight_prior],
                                  tol=1e-9, max_iter=1000, reg_covar=0, warm_start=True)
    bgm._check_parameters(X)
    bgm._initialize(X, resp)
    bgm.converged_, bgm.lower_bound_ = False, -np.inf  # warm_start: go on from this start
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bgm.fit(X)


def dropped_constant(X, covariance_type, weight_prior):
    """What scikit-learn's lower bound leaves out ("we removed all the constant terms"): the
    exact bound minus scikit-learn's, for its default priors."""
    n, d = X.shape
    nu0, a0 = float(d), 1.0 / K
    if covariance_type == "full":
        wishart = multigammaln(nu0 / 2, d) - d * (d - 1) / 4 * np.log(np.pi)
        logdet = np.linalg.slogdet(np.atleast_2d(np.cov(X.T)))[1]
    else:
        wishart = d * gammaln(nu0 / 2)
        logdet = np.log(np.var(X, axis=0, ddof=1)).sum()
    c = -n * d / 2 * np.log(2 * np.pi) + K * (-wishart + nu0 / 2 * logdet - nu0 * d / 2 * np.log(2))
    return c + (K * np.log(a0) if weight_prior == "dirichlet_process"
                else gammaln(K * a0) - K * gammaln(a0))


@pytest.mark.parametrize("weight_prior", ["dirichlet_process", "dirichlet"])
@pytest.mark.parametrize("covariance_type,d", [("full", 3), ("full", 1), ("diag", 1)])
def test_matches_bayesian_gaussian_mixture(rng, weight_prior, covariance_type, d):
    X = blobs(rng, d)
    resp = np.eye(K)[KMeans(K, n_init=1, random_state=0).fit(X).labels_]
    bgm = sklearn_from(X, resp, covariance_type, weight_prior)
    leaf = MultivariateGaussianEstimator(reg_covar=0) if covariance_type == "full" \
        else DiagonalGaussianEstimator(reg_covar=0)
    est = VariationalMixtureEstimator([leaf] * K, weight_prior=weight_prior)
    result = mixfold.fit(X, est, init=est.from_responsibilities(X, resp), tol=1e-13,
                         max_iter=1000, progress=False)
    assert result.converged and bgm.converged_
    bound = result.lower_bound[-1]
    assert bound == pytest.approx(bgm.lower_bound_ + dropped_constant(X, covariance_type,
                                                                      weight_prior), rel=1e-6)
    model = result.model
    assert (model.weights > 0.01).sum() == (bgm.weights_ > 0.01).sum() == 3
    np.testing.assert_allclose(model.weights, bgm.weights_, atol=1e-6)
    np.testing.assert_allclose([c.mu for c in model.components], bgm.means_, atol=1e-5)
    np.testing.assert_allclose(model.predict(X), bgm.predict(X))
    # the bound never falls
    assert np.all(np.diff(result.lower_bound) >= -1e-9 * abs(bound))


def test_diagonal_gaussians_in_several_dimensions_find_the_same_components(rng):
    """scikit-learn's "diag" scores E log|Lambda| of a full Wishart (digamma((nu - i) / 2),
    i < D) but E Lambda of its diagonal, no posterior of one model; mixfold's coordinates are
    independent Normal-Gammas. The two agree on the components found."""
    X = blobs(rng, 3)
    resp = np.eye(K)[KMeans(K, n_init=1, random_state=0).fit(X).labels_]
    bgm = sklearn_from(X, resp, "diag", "dirichlet_process")
    est = VariationalMixtureEstimator([DiagonalGaussianEstimator(reg_covar=0)] * K)
    model = mixfold.optimize(X, est, init=est.from_responsibilities(X, resp), tol=1e-10,
                             max_iter=300, progress=False)
    assert (model.weights > 0.01).sum() == (bgm.weights_ > 0.01).sum() == 3
    assert adjusted_rand_score(model.predict(X), bgm.predict(X)) == 1.0
    big = model.weights > 0.01
    np.testing.assert_allclose(np.array([c.mu for c in model.components])[big],
                               bgm.means_[bgm.weights_ > 0.01], atol=0.05)


def mixed_records(rng, n=600):
    """Two clusters of records: a Gaussian, a categorical missing at random, a count and a
    Weibull duration (no conjugate prior: its own M-step)."""
    z = rng.random(n) < 0.4
    x = np.where(z, rng.normal(-3, 1, n), rng.normal(3, 1.5, n))
    cat = np.where(z, rng.choice(["a", "b", "c"], n, p=[0.7, 0.2, 0.1]),
                   rng.choice(["a", "b", "c"], n, p=[0.1, 0.2, 0.7]))
    count = np.where(z, rng.poisson(2, n), rng.poisson(9, n))
    dur = np.where(z, rng.weibull(1.5, n) * 2, rng.weibull(3.0, n) * 5)
    rows = [{"x": float(x[i]), "cat": None if rng.random() < 0.2 else str(cat[i]),
             "count": int(count[i]), "dur": float(dur[i])} for i in range(n)]
    return rows, z.astype(int)


def record_estimator():
    return RecordEstimator({"x": GaussianEstimator(), "cat": OptionalEstimator(
        CategoricalEstimator()), "count": PoissonEstimator(), "dur": WeibullEstimator()})


@pytest.mark.parametrize("weight_prior", ["dirichlet_process", "dirichlet"])
def test_mixed_records_with_missing_values(rng, weight_prior):
    rows, truth = mixed_records(rng)
    est = VariationalMixtureEstimator([record_estimator()] * 5, weight_prior=weight_prior,
                                      weight_concentration=0.01)
    result = mixfold.fit(rows, est, tol=1e-10, max_iter=500, seed=2, progress=False)
    model = result.model
    assert result.converged
    assert np.all(np.diff(result.lower_bound) >= -1e-9 * abs(result.lower_bound[-1]))
    assert (model.weights > 0.02).sum() == 2
    assert adjusted_rand_score(truth, model.predict(rows)) > 0.95
    # every conjugate leaf has its posterior; the Weibull field its point estimate
    nodes = {p["node"] for p in model.posteriors[0]}
    assert nodes == {"x", "cat/inner", "cat/missing", "count"}
    big = int(np.argmax(model.weights))
    assert model.components[big].fields["dur"].family_name == "Weibull"
    # the missing share is the data's (about 0.2) in both clusters
    for k in np.flatnonzero(model.weights > 0.02):
        assert model.components[k].fields["cat"].p_missing == pytest.approx(0.2, abs=0.06)


def test_the_model_file_round_trips(rng):
    rows, _ = mixed_records(rng, 200)
    est = VariationalMixtureEstimator([record_estimator()] * 3)
    model = mixfold.optimize(rows, est, max_iter=20, progress=False)
    again = Distribution.from_dict(model.to_dict())
    assert isinstance(again, VariationalMixtureDistribution)
    assert again.kl_to_prior() == model.kl_to_prior()
    np.testing.assert_array_equal(again.seq_log_density(rows), model.seq_log_density(rows))
    assert again.posteriors == model.posteriors


def test_backends_give_the_local_bound(rng):
    X = blobs(rng, 2)
    est = VariationalMixtureEstimator([DiagonalGaussianEstimator()] * 4)
    local = mixfold.fit(X, est, max_iter=15, tol=0, progress=False)
    mp = mixfold.fit(X, est, max_iter=15, tol=0, backend="mp", num_workers=2, progress=False)
    np.testing.assert_allclose(mp.lower_bound, local.lower_bound, rtol=1e-10)


def test_a_resumed_checkpoint_keeps_the_bound_history_and_climbs_on(rng, tmp_path):
    """Stopped after 6 iterations and resumed, the fit is the uninterrupted one: its bound
    history is in the checkpoint, and the resume watches the bound, not the likelihood."""
    X = blobs(rng, 2)
    est = VariationalMixtureEstimator([DiagonalGaussianEstimator()] * 4)
    whole = mixfold.fit(X, est, max_iter=15, tol=0, progress=False)
    path = tmp_path / "fit.json"
    first = mixfold.fit(X, est, max_iter=6, tol=0, progress=False, checkpoint=path)
    assert first.lower_bound == whole.lower_bound[:6]
    resumed = mixfold.fit(X, est, max_iter=15, tol=0, progress=False, checkpoint=path)
    np.testing.assert_allclose(resumed.lower_bound, whole.lower_bound, rtol=1e-12)
    np.testing.assert_allclose(resumed.log_likelihood, whole.log_likelihood, rtol=1e-12)
    plain = mixfold.fit(X, mixfold.MixtureEstimator([DiagonalGaussianEstimator()] * 2),
                        max_iter=3, progress=False, checkpoint=tmp_path / "em.json")
    assert plain.lower_bound == [] and "lower_bound" not in (tmp_path / "em.json").read_text()


@pytest.mark.slow
def test_dask_gives_the_local_bound(rng):
    rows, _ = mixed_records(rng, 300)
    est = VariationalMixtureEstimator([record_estimator()] * 3)
    local = mixfold.fit(rows, est, max_iter=10, tol=0, progress=False)
    dask = mixfold.fit(rows, est, max_iter=10, tol=0, backend="dask", num_workers=2,
                       progress=False)
    np.testing.assert_allclose(dask.lower_bound, local.lower_bound, rtol=1e-10)


def test_n_init_keeps_the_highest_bound(rng):
    X = blobs(rng, 2)
    est = VariationalMixtureEstimator([DiagonalGaussianEstimator()] * 4)
    result = mixfold.fit(X, est, n_init=3, max_iter=10, progress=False)
    bounds = [mixfold.fit(X, est, seed=s, max_iter=10, progress=False).lower_bound[-1]
              for s in range(3)]
    assert result.lower_bound[-1] == max(bounds)


def test_bad_options_are_refused_by_name():
    with pytest.raises(ParameterError, match="weight_prior"):
        VariationalMixtureEstimator([GaussianEstimator()] * 2, weight_prior="stick")
    with pytest.raises(ParameterError, match="weight_concentration"):
        VariationalMixtureEstimator([GaussianEstimator()] * 2, weight_concentration=0.0)
    est = VariationalMixtureEstimator([GaussianEstimator()] * 2)
    with pytest.raises(ParameterError, match=r"responsibilities must have shape \(3, 2\)"):
        est.from_responsibilities(np.arange(3.0), np.ones((3, 3)))


class FallingBound(VariationalMixtureEstimator):
    """Adds to the KL of every model after the third: a bound that falls, which the fit loop
    must catch as EM's loop catches a falling log-likelihood."""

    made = 0

    def estimate(self, nobs, stats):
        model = super().estimate(nobs, stats)
        FallingBound.made += 1
        if FallingBound.made > 3:
            model.kl += 1e3 * FallingBound.made
        return model


def test_a_falling_bound_warns_and_keeps_the_model_before(rng):
    from mixfold.errors import EMDecreaseWarning

    X = blobs(rng, 2)
    FallingBound.made = 0
    est = FallingBound([DiagonalGaussianEstimator()] * 3)
    with pytest.warns(EMDecreaseWarning, match="evidence lower bound fell"):
        result = mixfold.fit(X, est, max_iter=20, tol=0, progress=False)
    assert result.stop_reason == "decrease"
    assert np.all(np.diff(result.lower_bound) >= 0)


def test_vectors_with_missing_entries_keep_their_own_m_step(rng):
    """A coordinate's offset would apply only to the rows that have it: such a leaf is a
    point estimate, and the weights alone are variational."""
    X = blobs(rng, 2)
    X[::7, 0] = np.nan
    est = VariationalMixtureEstimator([MultivariateGaussianEstimator(missing=True)] * 3)
    result = mixfold.fit(X, est, max_iter=30, progress=False)
    assert result.model.posteriors == [[], [], []]
    assert np.all(np.diff(result.lower_bound) >= -1e-9 * abs(result.lower_bound[-1]))
    assert (result.model.weights > 0.05).sum() == 3
