"""mixfold.sklearn.BayesianGaussianMixture: scikit-learn's estimator checks, and fits compared
with scikit-learn's BayesianGaussianMixture from the same seed."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.mixture import BayesianGaussianMixture as SklearnBayesianGaussianMixture  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from mixfold import VariationalMixtureDistribution  # noqa: E402
from mixfold.sklearn import BayesianGaussianMixture  # noqa: E402


# few iterations: the checks test the API, not the optimum
@parametrize_with_checks([BayesianGaussianMixture(n_components=2, max_iter=10),
                          BayesianGaussianMixture(n_components=2, covariance_type="tied",
                                                  max_iter=10,
                                                  weight_concentration_prior_type=
                                                  "dirichlet_distribution")])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def fit_both(X, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (BayesianGaussianMixture(**options).fit(X),
                SklearnBayesianGaussianMixture(**options).fit(X))


@pytest.mark.parametrize("weight_prior", ["dirichlet_process", "dirichlet_distribution"])
@pytest.mark.parametrize("kind", ["full", "tied", "diag", "spherical"])
def test_iris_matches_scikit_learn(kind, weight_prior):
    X = load_iris().data
    ours, theirs = fit_both(X, n_components=6, covariance_type=kind, tol=0, max_iter=60,
                            weight_concentration_prior_type=weight_prior, random_state=0)
    assert ours.n_iter_ == theirs.n_iter_ == 60
    assert ((ours.weights_ > 0.01).sum() == (theirs.weights_ > 0.01).sum())
    np.testing.assert_allclose(ours.weights_, theirs.weights_, atol=1e-6)
    np.testing.assert_allclose(ours.means_, theirs.means_, atol=1e-5)
    np.testing.assert_allclose(ours.covariances_, theirs.covariances_, atol=1e-5)
    np.testing.assert_allclose(ours.mean_precision_, theirs.mean_precision_, rtol=1e-6)
    np.testing.assert_allclose(ours.degrees_of_freedom_, theirs.degrees_of_freedom_, rtol=1e-6)
    for a, b in zip(np.atleast_2d(ours.weight_concentration_),
                    np.atleast_2d(theirs.weight_concentration_)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(ours.score_samples(X), theirs.score_samples(X), rtol=1e-6)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    assert np.all(np.diff(ours.lower_bounds_) >= -1e-12 * abs(ours.lower_bound_))
    assert isinstance(ours.model_, VariationalMixtureDistribution)


@pytest.mark.parametrize("kind", ["full", "diag"])
def test_the_stopping_rule_is_scikit_learns(kind):
    """The rule sees the bound of the model entering an iteration (scikit-learn's: the one
    after it), so the two may stop one iteration apart, with the same components."""
    X = load_iris().data
    ours, theirs = fit_both(X, n_components=6, covariance_type=kind, random_state=0, tol=1e-8,
                            max_iter=500)
    assert ours.converged_ and theirs.converged_
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, rel=1e-6)
    assert abs(ours.n_iter_ - theirs.n_iter_) <= 1
    assert (ours.weights_ > 0.01).sum() == (theirs.weights_ > 0.01).sum()
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_a_multiprocess_fit_is_the_local_fit():
    X = load_iris().data
    local = BayesianGaussianMixture(n_components=4, covariance_type="diag", random_state=0,
                                    max_iter=30).fit(X)
    mp = BayesianGaussianMixture(n_components=4, covariance_type="diag", random_state=0,
                                 max_iter=30, backend="mp", num_workers=2).fit(X)
    np.testing.assert_allclose(mp.lower_bounds_, local.lower_bounds_, rtol=1e-10)


@pytest.mark.parametrize("kind", ["full", "tied", "diag", "spherical"])
def test_the_estimator_alone_takes_scikit_learns_priors_from_the_data(kind):
    from mixfold.sklearn._common import _gaussian
    from mixfold.sklearn.bayesian_mixture import BayesianGaussians, GaussianPriors

    X = load_iris().data
    bgm = BayesianGaussianMixture(n_components=3, covariance_type=kind, random_state=0).fit(X)
    resp = bgm.predict_proba(X)
    leaves = [_gaussian(kind, 1e-6)] * 3
    given = GaussianPriors(bgm.mean_prior_, 1.0, 4.0, bgm.covariance_prior_, 1e-6)
    ours = BayesianGaussians(leaves, kind, gaussian_priors=given).from_responsibilities(X, resp)
    alone = BayesianGaussians(leaves, kind).from_responsibilities(X, resp)
    assert alone.kl == pytest.approx(ours.kl, rel=1e-9)
    np.testing.assert_allclose(alone.log_weights, ours.log_weights, rtol=1e-9)
