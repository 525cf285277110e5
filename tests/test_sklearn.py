"""The scikit-learn wrappers: scikit-learn's estimator checks, and fits compared with
scikit-learn's GaussianMixture and hmmlearn on real data."""

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from mixfold.sklearn import GaussianHMM, GaussianMixture, MixedTypeClustering  # noqa: E402

# Checks that assume rows are independent, which the rows of one HMM sequence are not: the
# Viterbi path and posteriors of a row depend on its neighbours, so a subset or a reordering
# of the rows legitimately changes them.
HMM_NOT_APPLICABLE = {
    "check_methods_subset_invariance": "HMM rows are not independent: outputs depend on the "
                                       "whole sequence",
    "check_methods_sample_order_invariance": "HMM rows are not independent: reordering them "
                                             "changes the sequence",
}


def _expected_failed(estimator):
    if isinstance(estimator, GaussianHMM):
        return HMM_NOT_APPLICABLE
    return {}


# few iterations: the checks test the API, not the optimum
@parametrize_with_checks([GaussianMixture(max_iter=10),
                          GaussianMixture(2, covariance_type="diag", max_iter=10),
                          GaussianHMM(2, max_iter=10), MixedTypeClustering(2, max_iter=10)],
                         expected_failed_checks=_expected_failed)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_gaussian_mixture_on_iris_matches_scikit_learn():
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    X, y = load_iris(return_X_y=True)
    ours = GaussianMixture(3, tol=1e-10, max_iter=500, random_state=1).fit(X)
    theirs = SklearnGaussianMixture(3, tol=1e-10, max_iter=500, random_state=1).fit(X)
    assert ours.converged_
    assert ours.score(X) == pytest.approx(theirs.score(X), abs=1e-6)
    assert adjusted_rand_score(y, ours.predict(X)) == pytest.approx(
        adjusted_rand_score(y, theirs.predict(X)))
    assert adjusted_rand_score(y, ours.predict(X)) > 0.85


def test_gaussian_mixture_densities_equal_scipy():
    from scipy.stats import multivariate_normal

    X, _ = load_iris(return_X_y=True)
    gm = GaussianMixture(2, random_state=0).fit(X)
    dens = sum(w * multivariate_normal(m, c).pdf(X)
               for w, m, c in zip(gm.weights_, gm.means_, gm.covariances_))
    np.testing.assert_allclose(gm.score_samples(X), np.log(dens), rtol=1e-10)
    resp = np.column_stack([w * multivariate_normal(m, c).pdf(X)
                            for w, m, c in zip(gm.weights_, gm.means_, gm.covariances_)])
    np.testing.assert_allclose(gm.predict_proba(X), resp / resp.sum(axis=1, keepdims=True),
                               atol=1e-10)


def test_n_init_keeps_the_best_start():
    X, _ = load_iris(return_X_y=True)
    singles = [GaussianMixture(3, random_state=s).fit(X).lower_bound_ for s in range(3)]
    best = GaussianMixture(3, n_init=3, random_state=0).fit(X).lower_bound_
    assert best == max(singles)


def test_gaussian_mixture_sample_follows_the_fit():
    X, _ = load_iris(return_X_y=True)
    gm = GaussianMixture(3, covariance_type="diag", random_state=1).fit(X)
    draws, labels = gm.sample(30_000)
    assert draws.shape == (30_000, 4) and labels.shape == (30_000,)
    np.testing.assert_allclose(np.bincount(labels) / 30_000, gm.weights_, atol=0.01)
    np.testing.assert_allclose(draws.mean(axis=0), gm.weights_ @ gm.means_, atol=0.03)


def test_params_round_trip_and_clone():
    gm = GaussianMixture(4, covariance_type="diag", backend="mp", n_workers=2)
    params = gm.get_params()
    assert params["n_components"] == 4 and params["backend"] == "mp"
    twin = clone(gm).set_params(n_components=2, precision="float32")
    assert (twin.n_components, twin.precision, twin.covariance_type) == (2, "float32", "diag")


def test_bad_hyper_parameter_names_the_expected_value():
    X, _ = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="covariance_type must be one of"):
        GaussianMixture(2, covariance_type="tied").fit(X)
    with pytest.raises(ValueError, match="n_components must be an integer >= 1, got 0"):
        GaussianHMM(0).fit(X)


def test_gaussian_hmm_scores_equal_hmmlearn():
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (60, 2)), rng.normal(4, 1, (40, 2)),
                        rng.normal(0, 1, (50, 2))])
    ours = GaussianHMM(2, random_state=0).fit(X, lengths=[100, 50])
    ref = hmmlearn.GaussianHMM(2, covariance_type="diag", init_params="", params="")
    ref.startprob_, ref.transmat_ = ours.startprob_, ours.transmat_
    ref.means_, ref.covars_ = ours.means_, ours.covars_
    assert ours.score(X, lengths=[100, 50]) == pytest.approx(ref.score(X, lengths=[100, 50]),
                                                             rel=1e-10)
    np.testing.assert_array_equal(ours.predict(X, lengths=[100, 50]),
                                  ref.predict(X, lengths=[100, 50]))
    total, post = ours.score_samples(X, lengths=[100, 50])
    ref_total, ref_post = ref.score_samples(X, lengths=[100, 50])
    assert total == pytest.approx(ref_total, rel=1e-10)
    np.testing.assert_allclose(post, ref_post, atol=1e-8)
    # the regimes are found: rows 60..99 in one state, the rest in the other
    states = ours.predict(X, lengths=[100, 50])
    assert len(set(states[60:100])) == 1 and set(states[:55]) == set(states[105:]) != \
        set(states[60:100])


def test_gaussian_hmm_sample_and_bad_lengths():
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(-3, 1, (200, 1)), rng.normal(3, 1, (200, 1))])
    hmm = GaussianHMM(2, random_state=0).fit(X)
    draws, states = hmm.sample(500, random_state=0)
    assert draws.shape == (500, 1) and set(np.unique(states)) <= {0, 1}
    np.testing.assert_allclose(draws[states == 0].mean(), hmm.means_[0, 0], atol=0.3)
    with pytest.raises(ValueError, match="lengths must be integers >= 1 summing to"):
        hmm.predict(X, lengths=[100, 100])


def test_mixed_type_clustering_recovers_segments():
    pd = pytest.importorskip("pandas")
    from mixfold.examples.customers import load_customers

    frame = pd.DataFrame(load_customers())
    mtc = MixedTypeClustering(3, families={"spend": {"optional": "log_gaussian"}},
                              random_state=0).fit(frame)
    assert mtc.spec_["mixture"]["record"] == {"age": "gaussian", "plan": "categorical",
                                              "visits": "poisson",
                                              "spend": {"optional": "log_gaussian"}}
    proba = mtc.predict_proba(frame)
    assert proba.shape == (len(frame), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(mtc.score_samples(frame),
                               mtc.model_.seq_log_density(mtc.model_.encoder().encode(frame)))
    # the three segments are well separated by age: each cluster is one band of ages
    ages = frame["age"].to_numpy()
    labels = mtc.predict(frame)
    means = sorted(ages[labels == k].mean() for k in range(3))
    assert means[0] + 8 < means[1] and means[1] + 8 < means[2]
    draws, drawn_labels = mtc.sample(200)
    assert list(draws.columns) == ["age", "plan", "visits", "spend"] and len(draws) == 200
    with pytest.raises(ValueError, match="Feature names seen at fit time, yet now missing"):
        mtc.predict(frame.drop(columns="plan"))
