"""The scikit-learn wrappers: scikit-learn's estimator checks, and fits compared with
scikit-learn's GaussianMixture and hmmlearn on real data."""

import warnings

import numpy as np
import pandas as pd
import pytest

import mixfold
from mixfold.errors import DegenerateFitWarning

pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from mixfold.sklearn import (  # noqa: E402
    GMMHMM,
    CategoricalHMM,
    GaussianHMM,
    MultinomialHMM,
    PoissonHMM,
    GaussianMixture,
    MixedTypeClustering,
    select_n_components,
)

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


class SklearnSignatureHMM(GaussianHMM):
    """GaussianHMM as scikit-learn's checks call it: they pass ``y`` second, where hmmlearn's
    signature (ours) takes ``lengths``; everything else is GaussianHMM's own."""

    def fit(self, X, y=None, lengths=None):
        return super().fit(X, lengths)

    def score(self, X, y=None, lengths=None):
        return super().score(X, lengths)


# few iterations: the checks test the API, not the optimum
@parametrize_with_checks([GaussianMixture(max_iter=10),
                          GaussianMixture(2, covariance_type="diag", max_iter=10),
                          GaussianMixture(2, covariance_type="tied", max_iter=10),
                          GaussianMixture(2, covariance_type="spherical", max_iter=10),
                          SklearnSignatureHMM(2, n_iter=10), MixedTypeClustering(2, max_iter=10)],
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
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    X, _ = load_iris(return_X_y=True)
    best = GaussianMixture(3, n_init=4, random_state=2, tol=1e-10, max_iter=500).fit(X)
    starts = best.model_.fit_result.start_log_likelihoods
    assert len(starts) == 4 and best.lower_bound_ == max(starts)
    theirs = SklearnGaussianMixture(3, n_init=4, random_state=2, tol=1e-10, max_iter=500).fit(X)
    assert best.score(X) == pytest.approx(theirs.score(X), abs=1e-6)


def test_gaussian_mixture_sample_follows_the_fit():
    X, _ = load_iris(return_X_y=True)
    gm = GaussianMixture(3, covariance_type="diag", random_state=1).fit(X)
    draws, labels = gm.sample(30_000)
    assert draws.shape == (30_000, 4) and labels.shape == (30_000,)
    np.testing.assert_allclose(np.bincount(labels) / 30_000, gm.weights_, atol=0.01)
    np.testing.assert_allclose(draws.mean(axis=0), gm.weights_ @ gm.means_, atol=0.03)


def test_params_round_trip_and_clone():
    gm = GaussianMixture(4, covariance_type="diag", backend="mp", num_workers=2)
    params = gm.get_params()
    assert params["n_components"] == 4 and params["backend"] == "mp"
    twin = clone(gm).set_params(n_components=2, precision="float32")
    assert (twin.n_components, twin.precision, twin.covariance_type) == (2, "float32", "diag")


def test_bad_hyper_parameter_names_the_expected_value():
    X, _ = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="covariance_type must be one of"):
        GaussianMixture(2, covariance_type="banded").fit(X)
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
    ref.means_, ref.covars_ = ours.means_, ours._covars_  # hmmlearn's setter: the stored form
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


# --- hmmlearn's signatures (positional lengths), its fit, decode, bic, params / init_params

def _two_regimes():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (60, 2)), rng.normal(4, 1, (40, 2)),
                        rng.normal(0, 1, (50, 2))])
    return X, [100, 50]


def test_gaussian_hmm_takes_lengths_positionally_as_hmmlearn():
    X, lengths = _two_regimes()
    by_position = GaussianHMM(2, random_state=0).fit(X, lengths)
    by_name = GaussianHMM(2, random_state=0).fit(X, lengths=lengths)
    np.testing.assert_array_equal(by_position.transmat_, by_name.transmat_)
    assert by_position.score(X, lengths) == by_name.score(X, lengths=lengths)
    assert by_position.score(X, lengths) != by_position.score(X)  # one sequence is another fit
    np.testing.assert_array_equal(by_position.predict(X, lengths),
                                  by_position.decode(X, lengths)[1])


@pytest.mark.parametrize("params", ["stmc", "st", "mc", "smc"])
def test_gaussian_hmm_fit_equals_hmmlearn_for_given_params(params):
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    X, lengths = _two_regimes()
    start = {"startprob_": np.array([0.6, 0.4]), "transmat_": np.array([[0.9, 0.1], [0.2, 0.8]]),
             "means_": np.array([[0.5, 0.5], [3.0, 3.0]]), "covars_": np.array([[1.0, 1.0],
                                                                                [2.0, 2.0]])}
    ours = GaussianHMM(2, reg_covar=0.0, init_params="", params=params, n_iter=7, tol=0.0)
    # both with hmmlearn's default priors (covars_prior=1e-2: a MAP M-step)
    ref = hmmlearn.GaussianHMM(2, init_params="", params=params, n_iter=7, tol=-1e300)
    for name, value in start.items():
        setattr(ours, name, value.copy())
        setattr(ref, name, value.copy())
    ours.fit(X, lengths)
    ref.fit(X, lengths)
    # ours stops early only at an exact fixed point (an iteration that changed no bit of the
    # log-likelihood: tol=0), where hmmlearn's further iterations change nothing either
    assert ref.monitor_.iter == 7 and (ours.monitor_.iter == 7 or (
        ours.monitor_.iter < 7 and ours.model_.fit_result.stop_reason == "converged"))
    for name in ("startprob_", "transmat_", "means_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), atol=1e-12)
    np.testing.assert_allclose(ours.covars_, ref.covars_, atol=1e-12)  # both (n, d, d)
    np.testing.assert_allclose(ours._covars_, ref._covars_, atol=1e-12)
    assert ours.score(X, lengths) == pytest.approx(ref.score(X, lengths), rel=1e-12)
    for algorithm in ("viterbi", "map"):
        log_prob, states = ours.decode(X, lengths, algorithm=algorithm)
        ref_log_prob, ref_states = ref.decode(X, lengths, algorithm=algorithm)
        assert log_prob == pytest.approx(ref_log_prob, rel=1e-12)
        np.testing.assert_array_equal(states, ref_states)
    assert ours.bic(X, lengths) == pytest.approx(ref.bic(X, lengths), rel=1e-12)
    assert ours.aic(X, lengths) == pytest.approx(ref.aic(X, lengths), rel=1e-12)


def test_gaussian_hmm_stops_on_hmmlearns_tol_and_keeps_its_monitor():
    X, lengths = _two_regimes()
    hmm = GaussianHMM(2, random_state=0, tol=1e-3, n_iter=500).fit(X, lengths)
    history = list(hmm.monitor_.history)
    assert hmm.converged_ and hmm.monitor_.iter == hmm.n_iter_ == len(history) < 500
    assert history[-1] - history[-2] < 1e-3 <= history[-2] - history[-3]
    # hmmlearn's scale: the total log-likelihood of the sequences, what score() returns
    assert history[-1] == pytest.approx(hmm.lower_bound_ * len(lengths))
    assert history[-1] == pytest.approx(hmm.score(X, lengths), rel=1e-6)


def test_gaussian_hmm_n_init_keeps_the_best_seed():
    X, lengths = _two_regimes()
    singles = [GaussianHMM(3, random_state=s).fit(X, lengths).lower_bound_ for s in (0, 1, 2)]
    best = GaussianHMM(3, random_state=0, n_init=3).fit(X, lengths)
    assert best.lower_bound_ == max(singles)


def test_gaussian_hmm_part_left_out_of_init_params_and_not_set_is_initialised():
    # hmmlearn's _init: a part init_params does not name is initialised when it is not set
    X, lengths = _two_regimes()
    without_m = GaussianHMM(2, init_params="stc", random_state=0).fit(X, lengths)
    seeded = GaussianHMM(2, random_state=0).fit(X, lengths)
    np.testing.assert_array_equal(without_m.means_, seeded.means_)
    given = GaussianHMM(2, init_params="stc", random_state=0, n_iter=0)
    given.means_ = np.array([[0.5, 0.5], [3.0, 3.0]])
    np.testing.assert_array_equal(given.fit(X, lengths).means_, [[0.5, 0.5], [3.0, 3.0]])


# --- GaussianMixture: sample, BIC/AIC, covariance types, initialisations, warm start

def test_gaussian_mixture_sample_of_few_rows():
    X, _ = load_iris(return_X_y=True)
    for kind in ("full", "diag", "tied", "spherical"):
        gm = GaussianMixture(3, covariance_type=kind, random_state=1).fit(X)
        for n in (1, 2):
            draws, labels = gm.sample(n)
            assert draws.shape == (n, 4) and labels.shape == (n,)


@pytest.mark.parametrize("kind", ["full", "diag", "tied", "spherical"])
def test_gaussian_mixture_equals_scikit_learn_per_covariance_type(kind):
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    X, y = load_iris(return_X_y=True)
    ours = GaussianMixture(3, covariance_type=kind, tol=1e-12, max_iter=1000,
                           random_state=0).fit(X)
    theirs = SklearnGaussianMixture(3, covariance_type=kind, tol=1e-12, max_iter=1000,
                                    random_state=0).fit(X)
    assert ours.score(X) == pytest.approx(theirs.score(X), abs=1e-8)
    np.testing.assert_allclose(ours.covariances_, theirs.covariances_, atol=1e-6)
    np.testing.assert_allclose(ours.precisions_, theirs.precisions_, rtol=1e-5, atol=1e-5)
    assert ours.bic(X) == pytest.approx(theirs.bic(X), rel=1e-9)
    assert ours.aic(X) == pytest.approx(theirs.aic(X), rel=1e-9)
    assert ours.model_.fit_result.n_parameters == theirs._n_parameters()
    assert adjusted_rand_score(y, ours.predict(X)) == pytest.approx(
        adjusted_rand_score(y, theirs.predict(X)))
    ours_draws, ours_labels = ours.sample(7)
    theirs.weights_, theirs.means_ = ours.weights_, ours.means_
    theirs.covariances_ = ours.covariances_
    theirs_draws, theirs_labels = theirs.sample(7)  # scikit-learn's draws, from our parameters
    np.testing.assert_allclose(ours_draws, theirs_draws, rtol=1e-12)
    np.testing.assert_array_equal(ours_labels, theirs_labels)


@pytest.mark.parametrize("init_params", ["k-means++", "random", "random_from_data"])
def test_gaussian_mixture_initialisations_equal_scikit_learns(init_params):
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    X, _ = load_iris(return_X_y=True)
    ours = GaussianMixture(3, init_params=init_params, max_iter=3, tol=0, random_state=5).fit(X)
    theirs = SklearnGaussianMixture(3, init_params=init_params, max_iter=3, tol=0,
                                    random_state=5).fit(X)
    np.testing.assert_allclose(ours.means_, theirs.means_, rtol=1e-8)


def test_gaussian_mixture_given_start_and_warm_start():
    X, _ = load_iris(return_X_y=True)
    first = GaussianMixture(3, random_state=0, max_iter=2, tol=0).fit(X)
    given = GaussianMixture(3, max_iter=3, tol=0, weights_init=first.weights_,
                            means_init=first.means_,
                            precisions_init=first.precisions_).fit(X)
    warm = GaussianMixture(3, random_state=0, max_iter=2, tol=0, warm_start=True).fit(X)
    warm.set_params(max_iter=3).fit(X)  # continues from the first fit
    np.testing.assert_allclose(warm.means_, given.means_, rtol=1e-10)
    with pytest.raises(ValueError, match=r"The parameter 'means' should have the shape of "
                                         r"\(3, 4\), but got \(2, 4\)"):  # scikit-learn's words
        GaussianMixture(3, means_init=np.zeros((2, 4))).fit(X)


def test_gaussian_mixture_verbose_prints_iterations(capsys):
    X, _ = load_iris(return_X_y=True)
    GaussianMixture(2, verbose=2, verbose_interval=1, max_iter=3, tol=0).fit(X)
    out = capsys.readouterr().out
    assert "  Iteration 3\t time lapse" in out and "Initialization did not converge." in out


def test_select_n_components_reports_bic_as_scikit_learn():
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    X, _ = load_iris(return_X_y=True)
    selection = select_n_components(X, [1, 2, 3], GaussianMixture(random_state=0, tol=1e-10,
                                                                  max_iter=500))
    theirs = [SklearnGaussianMixture(k, random_state=0, tol=1e-10, max_iter=500).fit(X).bic(X)
              for k in (1, 2, 3)]
    np.testing.assert_allclose(selection.bic, theirs, rtol=1e-8)
    assert selection.best_n_components == 1 + int(np.argmin(theirs))


def test_mixed_type_clustering_sample_keeps_the_column_types():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 120
    frame = pd.DataFrame({
        "plan": pd.Categorical(rng.choice(["free", "pro"], n)),
        "member": rng.random(n) < 0.3,
        "visits": pd.array(rng.poisson(3, n), dtype="Int64"),
        "height": rng.normal(170, 10, n).astype(np.float32),
        "spend": np.where(rng.random(n) < 0.2, np.nan, rng.normal(50, 5, n)),
    })
    mtc = MixedTypeClustering(2, random_state=0).fit(frame)
    draws, _ = mtc.sample(50)
    assert dict(draws.dtypes) == dict(frame.dtypes)
    assert set(draws["plan"].cat.categories) == {"free", "pro"}


def test_mixed_type_clustering_leaves_out_an_identifier_column():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"customer_id": rng.permutation(200) + 1000,
                          "age": np.r_[rng.normal(25, 2, 100), rng.normal(60, 2, 100)]})
    truth = np.repeat([0, 1], 100)
    with pytest.warns(UserWarning, match=r"\['customer_id'\] look like identifiers"):
        mtc = MixedTypeClustering(2, random_state=0).fit(frame)
    assert mtc.left_out_ == ["customer_id"] and list(mtc.spec_["mixture"]["record"]) == ["age"]
    assert adjusted_rand_score(truth, mtc.predict(frame)) == 1.0
    named = MixedTypeClustering(2, families={"customer_id": "gaussian"}, random_state=0)
    assert "customer_id" in named.fit(frame).spec_["mixture"]["record"]


def test_mixed_type_clustering_n_components_and_its_old_name():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": np.r_[np.zeros(20), np.ones(20) * 5] + np.arange(40) * 0.01})
    assert MixedTypeClustering(n_components=2).fit(frame).weights_.size == 2
    assert MixedTypeClustering(n_clusters=3).fit(frame).weights_.size == 3


def test_mixed_type_clustering_unknown_values_as_missing():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"age": np.r_[rng.normal(25, 2, 60), rng.normal(60, 2, 60)],
                          "city": ["Oslo"] * 60 + ["Rome"] * 60})
    strict = MixedTypeClustering(2, random_state=0).fit(frame)
    new = pd.DataFrame({"age": [24.0, 61.0, np.nan], "city": ["Paris", "Rome", "Oslo"]})
    with pytest.raises(mixfold.DataError, match=r"row 2, field \['age'\]"):
        strict.predict(new)
    lenient = clone(strict).set_params(unknown="missing").fit(frame)
    proba = lenient.predict_proba(new)
    # each row scored on the fields the model can score: the same as a model of those alone
    age = np.array([[lenient.model_.weights[k] * np.exp(
        c.fields["age"].log_density(v)) for k, c in enumerate(lenient.model_.components)]
        for v in (24.0, 61.0)])
    np.testing.assert_allclose(proba[0], age[0] / age[0].sum(), rtol=1e-10)
    row1 = age[1] * [np.exp(c.fields["city"].log_density("Rome"))
                     for c in lenient.model_.components]
    np.testing.assert_allclose(proba[1], row1 / row1.sum(), rtol=1e-10)
    city = np.array([w * np.exp(c.fields["city"].log_density("Oslo"))
                     for w, c in zip(lenient.model_.weights, lenient.model_.components)])
    np.testing.assert_allclose(proba[2], city / city.sum(), rtol=1e-10)
    np.testing.assert_allclose(lenient.score_samples(frame), strict.score_samples(frame),
                               rtol=1e-12)


def test_workers_by_either_name():
    X, _ = load_iris(return_X_y=True)
    a = GaussianMixture(2, backend="mp", num_workers=2, random_state=0).fit(X)
    b = GaussianMixture(2, backend="mp", n_workers=2, random_state=0).fit(X)
    np.testing.assert_array_equal(a.means_, b.means_)


# --- what a new user passes: a DataFrame of integer labels, the wrapper to save

def test_frames_with_integer_column_labels_fit():
    X, _ = load_iris(return_X_y=True)
    frame = pd.DataFrame(X)
    mtc = MixedTypeClustering(3, random_state=0).fit(frame)
    named = MixedTypeClustering(3, random_state=0).fit(frame.rename(columns=str))
    np.testing.assert_array_equal(mtc.predict(frame), named.predict(frame.rename(columns=str)))
    gm = GaussianMixture(3, random_state=0).fit(frame)
    assert gm.score(frame) == pytest.approx(GaussianMixture(3, random_state=0).fit(X).score(X),
                                            rel=1e-12)  # a frame's columns: other round-off


def test_save_takes_a_fitted_wrapper(tmp_path):
    X, _ = load_iris(return_X_y=True)
    gm = GaussianMixture(3, random_state=0).fit(X)
    path = mixfold.save(gm, tmp_path / "gm.json")
    assert mixfold.load(path) == gm.model_
    with pytest.raises(TypeError, match="a mixfold Distribution or a fitted mixfold.sklearn "
                                        "estimator, got GaussianMixture"):
        mixfold.save(GaussianMixture(3), tmp_path / "unfitted.json")
    with pytest.raises(FileNotFoundError, match=r"cannot save to '.*nowhere/gm.json': the folder "
                                                r"'.*nowhere' does not exist"):
        mixfold.save(gm, tmp_path / "nowhere" / "gm.json")


# --- scikit-learn's GaussianMixture contract: tol, max_iter=0, warnings, dtypes, attributes

def test_gaussian_mixture_stops_on_scikit_learns_tol():
    X, _ = load_iris(return_X_y=True)
    from sklearn.mixture import GaussianMixture as Reference

    for tol in (1e-1, 1e-3):
        ours = GaussianMixture(3, tol=tol, random_state=0).fit(X)
        ref = Reference(3, tol=tol, random_state=0).fit(X)
        assert ours.converged_ and ours.n_iter_ == ref.n_iter_
        assert abs(ours.lower_bounds_[-1] - ours.lower_bounds_[-2]) < tol
        assert ours.lower_bound_ == pytest.approx(ref.lower_bound_, rel=1e-10)
        np.testing.assert_allclose(ours.precisions_cholesky_, ref.precisions_cholesky_,
                                   rtol=1e-6)


def test_gaussian_mixture_max_iter_zero_is_the_start_and_running_out_warns():
    from sklearn.exceptions import ConvergenceWarning

    X, _ = load_iris(return_X_y=True)
    start = GaussianMixture(3, max_iter=0, random_state=0).fit(X)
    assert start.n_iter_ == 0 and not start.converged_ and start.lower_bound_ == -np.inf
    one = GaussianMixture(3, max_iter=1, random_state=0)
    with pytest.warns(ConvergenceWarning, match="Best performing initialization did not"):
        one.fit(X)
    assert one.n_iter_ == 1 and not one.converged_


def test_gaussian_mixture_keeps_float32():
    X = load_iris().data.astype(np.float32)
    gm = GaussianMixture(3, random_state=0).fit(X)
    for name in ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_"):
        assert getattr(gm, name).dtype == np.float32, name
    assert gm.predict_proba(X).dtype == gm.score_samples(X).dtype == np.float32
    wide = GaussianMixture(3, random_state=0).fit(X.astype(np.float64))
    np.testing.assert_allclose(gm.means_, wide.means_, rtol=1e-5)


def test_gaussian_mixture_warm_start_carries_convergence():
    X, _ = load_iris(return_X_y=True)
    gm = GaussianMixture(3, warm_start=True, max_iter=1, tol=1e-4, random_state=0)
    with pytest.warns(Warning):
        gm.fit(X)
    fits = 1
    while not gm.converged_ and fits < 500:
        gm.fit(X)
        fits += 1
    assert gm.converged_ and fits < 500  # one iteration per call, compared with the last call's


def test_gaussian_mixture_refuses_weights_init_out_of_range():
    X, _ = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match=r"The parameter 'weights' should be in the range "):
        GaussianMixture(2, weights_init=[1.5, 1.7]).fit(X)
    with pytest.raises(ValueError, match=r"should be normalized, but got sum\(weights\) = "
                                         r"0.50000"):
        GaussianMixture(2, weights_init=[0.25, 0.25]).fit(X)


# --- hmmlearn's models: hand-set parameters, covariance types, categorical emissions

@pytest.mark.parametrize("kind", ["spherical", "diag", "full", "tied"])
def test_gaussian_hmm_covariance_types_equal_hmmlearn(kind):
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    X, lengths = _two_regimes()
    ours = GaussianHMM(2, kind, random_state=0, n_iter=0).fit(X, lengths)  # a seeded start
    start = {"startprob_": ours.startprob_, "transmat_": ours.transmat_,
             "means_": ours.means_, "covars_": ours._covars_}
    ours.set_params(n_iter=6, tol=0.0, reg_covar=0.0, init_params="")
    ref = hmmlearn.GaussianHMM(2, kind, init_params="", n_iter=6, tol=-1e300, min_covar=0.0)
    for name, value in start.items():
        setattr(ref, name, np.array(value))
    ours.fit(X, lengths)
    ref.fit(X, lengths)
    np.testing.assert_allclose(ours.means_, ref.means_, rtol=1e-8)
    if kind == "spherical":  # hmmlearn's spherical fit stores (n, d) equal columns
        np.testing.assert_allclose(ours._covars_, ref._covars_[:, 0], rtol=1e-8)
    else:
        np.testing.assert_allclose(ours.covars_, ref.covars_, rtol=1e-8)  # both (n, d, d)
    np.testing.assert_allclose(ours.transmat_, ref.transmat_, rtol=1e-8, atol=1e-15)
    assert ours.score(X, lengths) == pytest.approx(ref.score(X, lengths), rel=1e-10)


def test_hand_set_parameters_are_the_model_without_a_fit():
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    X, lengths = _two_regimes()
    ours, ref = GaussianHMM(2, "full"), hmmlearn.GaussianHMM(2, "full")
    for model in (ours, ref):
        model.startprob_ = np.array([0.5, 0.5])
        model.transmat_ = np.array([[0.9, 0.1], [0.2, 0.8]])
        model.means_ = np.array([[0.0, 0.0], [4.0, 4.0]])
        model.covars_ = np.array([np.eye(2), 2 * np.eye(2)])
    assert ours.score(X, lengths) == pytest.approx(ref.score(X, lengths), rel=1e-12)
    np.testing.assert_array_equal(ours.predict(X, lengths), ref.predict(X, lengths))
    drawn, states = ours.sample(50, random_state=0)
    assert drawn.shape == (50, 2) and set(states) <= {0, 1}


def test_categorical_hmm_equals_hmmlearn():
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    truth = CategoricalHMM(2)
    truth.startprob_, truth.transmat_ = np.array([0.6, 0.4]), np.array([[0.9, 0.1], [0.3, 0.7]])
    truth.emissionprob_ = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    X, _ = truth.sample(400, random_state=0)
    ours = CategoricalHMM(2, n_iter=0, random_state=0).fit(X)
    ref = hmmlearn.CategoricalHMM(2, init_params="", n_iter=8, tol=-1e300,
                                  startprob_prior=1.0, transmat_prior=1.0,
                                  emissionprob_prior=1.0)
    ref.startprob_, ref.transmat_ = ours.startprob_.copy(), ours.transmat_.copy()
    ref.emissionprob_ = ours.emissionprob_.copy()
    ours.set_params(n_iter=8, tol=0.0, init_params="").fit(X)
    ref.fit(X)
    np.testing.assert_allclose(ours.emissionprob_, ref.emissionprob_, rtol=1e-8, atol=1e-15)
    np.testing.assert_allclose(ours.transmat_, ref.transmat_, rtol=1e-8, atol=1e-15)
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-10)
    assert ours.n_features == 3 and ours.predict(X).shape == (400,)


def test_gaussian_hmm_logs_what_init_params_overwrites(caplog):
    X, lengths = _two_regimes()
    hmm = GaussianHMM(2, random_state=0, n_iter=2)
    hmm.startprob_ = np.array([0.5, 0.5])
    with caplog.at_level("WARNING", logger="mixfold.sklearn.hmm"):
        hmm.fit(X, lengths)
    assert any("'startprob_' attribute is set, it will be overwritten" in r.getMessage()
               for r in caplog.records)


def test_gaussian_hmm_verbose_reports_on_stderr(capsys):
    X, lengths = _two_regimes()
    hmm = GaussianHMM(2, random_state=0, verbose=True, n_iter=3, tol=0.0).fit(X, lengths)
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == hmm.monitor_.iter == 3


def test_multinomial_hmm_equals_hmmlearn():
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    truth = MultinomialHMM(2, n_trials=5)
    truth.startprob_, truth.transmat_ = np.array([0.6, 0.4]), np.array([[0.8, 0.2], [0.2, 0.8]])
    truth.emissionprob_ = np.array([[0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.4, 0.4]])
    X, _ = truth.sample(300, random_state=0)
    assert (X.sum(axis=1) == 5).all()
    ours = MultinomialHMM(2, n_iter=0, random_state=0).fit(X)
    ref = hmmlearn.MultinomialHMM(2, n_trials=5, init_params="", n_iter=8, tol=-1e300,
                                  startprob_prior=1.0, transmat_prior=1.0)
    ref.startprob_, ref.transmat_ = ours.startprob_.copy(), ours.transmat_.copy()
    ref.emissionprob_ = ours.emissionprob_.copy()
    ours.set_params(n_iter=8, tol=0.0, init_params="").fit(X)
    ref.fit(X)
    np.testing.assert_allclose(ours.emissionprob_, ref.emissionprob_, rtol=1e-8, atol=1e-15)
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-10)


def test_poisson_hmm_equals_hmmlearn():
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    truth = PoissonHMM(2)
    truth.startprob_, truth.transmat_ = np.array([0.6, 0.4]), np.array([[0.7, 0.3], [0.4, 0.6]])
    truth.lambdas_ = np.array([[3.1, 1.4, 4.5], [1.6, 5.3, 0.1]])
    X, _ = truth.sample(400, random_state=0)
    ours = PoissonHMM(2, n_iter=0, random_state=0).fit(X)
    ref = hmmlearn.PoissonHMM(2, init_params="", n_iter=8, tol=-1e300, startprob_prior=1.0,
                              transmat_prior=1.0, lambdas_prior=0.0, lambdas_weight=0.0)
    ref.startprob_, ref.transmat_ = ours.startprob_.copy(), ours.transmat_.copy()
    ref.lambdas_ = ours.lambdas_.copy()
    ours.set_params(n_iter=8, tol=0.0, init_params="").fit(X)
    ref.fit(X)
    np.testing.assert_allclose(ours.lambdas_, ref.lambdas_, rtol=1e-8)
    assert ours.score(X) == pytest.approx(ref.score(X), rel=1e-10)


@pytest.mark.parametrize("kind", ["diag", "full", "spherical", "tied"])
def test_gmm_hmm_scores_as_hmmlearn_and_fits_monotonically(kind):
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-3, 1, (200, 2)), rng.normal(3, 1.5, (200, 2)),
                        rng.normal(0, 0.5, (200, 2))])
    lengths = [150] * 4
    ours = GMMHMM(2, 2, covariance_type=kind, random_state=0, n_iter=0).fit(X, lengths)
    ref = hmmlearn.GMMHMM(2, 2, covariance_type=kind, init_params="", params="")
    ref.startprob_, ref.transmat_ = ours.startprob_.copy(), ours.transmat_.copy()
    ref.weights_, ref.means_, ref.covars_ = (ours.weights_.copy(), ours.means_.copy(),
                                             ours.covars_.copy())
    assert ours.score(X, lengths) == pytest.approx(ref.score(X, lengths), rel=1e-12)
    np.testing.assert_array_equal(ours.predict(X, lengths), ref.predict(X, lengths))
    fitted = GMMHMM(2, 2, covariance_type=kind, random_state=0, n_iter=30, tol=0.0).fit(
        X, lengths)
    history = np.array(fitted.monitor_.history)
    assert (np.diff(history) > -1e-8 * np.abs(history[1:])).all()
    assert fitted.score(X, lengths) > ours.score(X, lengths)
    assert fitted.weights_.shape == (2, 2) and fitted.means_.shape == (2, 2, 2)


# --- hmmlearn's priors (a MAP M-step in the core estimators) and its start recipe

def _same(ours, ref, names, rtol=1e-10):
    for name in names:
        np.testing.assert_allclose(getattr(ours, name), getattr(ref, name), rtol=rtol,
                                   atol=1e-13, err_msg=name)


def _stored_covars(model):
    """hmmlearn's stored covariances (its spherical fit keeps (n, d) equal columns)."""
    stored = np.asarray(model._covars_)
    return stored[:, 0] if model.covariance_type == "spherical" and stored.ndim == 2 else stored


@pytest.mark.parametrize("kind", ["spherical", "diag", "full", "tied"])
def test_gaussian_hmm_with_defaults_equals_hmmlearn_from_its_own_start(kind):
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    X, lengths = _two_regimes()
    start = GaussianHMM(2, kind, random_state=3, n_iter=0).fit(X, lengths)
    ref_start = hmmlearn.GaussianHMM(2, kind, random_state=3)
    ref_start._init(X, lengths)  # hmmlearn's recipe, compared with ours
    _same(start, ref_start, ["startprob_", "transmat_", "means_"], rtol=0)
    np.testing.assert_array_equal(_stored_covars(start), _stored_covars(ref_start))
    # its default priors (covars_prior=1e-2, ...) on both sides; reg_covar=0: its M-step exactly
    ours = GaussianHMM(2, kind, random_state=3, n_iter=10, tol=0.0, reg_covar=0.0)
    ref = hmmlearn.GaussianHMM(2, kind, random_state=3, n_iter=10, tol=-1e300)
    ours.fit(X, lengths)
    ref.fit(X, lengths)
    _same(ours, ref, ["startprob_", "transmat_", "means_"])
    np.testing.assert_allclose(_stored_covars(ours), _stored_covars(ref), rtol=1e-10)
    assert ours.score(X, lengths) == pytest.approx(ref.score(X, lengths), rel=1e-12)


GAUSSIAN_PRIORS = {
    "spherical": 0.7,
    "diag": np.array([[0.5, 1.0], [2.0, 0.3]]),
    "full": np.array([[[1.0, 0.2], [0.2, 0.5]], [[2.0, -0.3], [-0.3, 1.0]]]),
    "tied": np.array([[1.5, 0.4], [0.4, 0.8]]),
}


@pytest.mark.parametrize("kind", ["spherical", "diag", "full", "tied"])
def test_gaussian_hmm_priors_equal_hmmlearns_map(kind):
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    X, lengths = _two_regimes()
    priors = dict(startprob_prior=np.array([3.0, 1.5]),
                  transmat_prior=np.array([[4.0, 2.0], [1.5, 3.0]]),
                  means_prior=np.array([[0.0, 0.5], [3.0, 3.0]]), means_weight=2.0,
                  covars_prior=GAUSSIAN_PRIORS[kind], covars_weight=3.5)
    # (one means_weight: hmmlearn's arithmetic broadcasts an (n_components,) array along the
    # features; ours, as its documentation says, along the states)
    ours = GaussianHMM(2, kind, random_state=1, n_iter=5, tol=0.0, reg_covar=0.0, **priors)
    ref = hmmlearn.GaussianHMM(2, kind, random_state=1, n_iter=5, tol=-1e300, **priors)
    ours.fit(X, lengths)
    ref.fit(X, lengths)
    assert ours.monitor_.iter == 5
    _same(ours, ref, ["startprob_", "transmat_", "means_"])
    np.testing.assert_allclose(_stored_covars(ours), _stored_covars(ref), rtol=1e-10)
    # the priors moved the fit: it is not the maximum likelihood's
    plain = GaussianHMM(2, kind, random_state=1, n_iter=5, tol=0.0, reg_covar=0.0,
                        covars_prior=0.0).fit(X, lengths)
    assert np.abs(plain.means_ - ours.means_).max() > 1e-3


def test_categorical_and_multinomial_hmm_priors_equal_hmmlearns_map():
    hmmlearn = pytest.importorskip("hmmlearn.hmm")
    start = dict(startprob_=np.array([0.6, 0.4]), transmat_=np.array([[0.7, 0.3], [0.4, 0.6]]),
                 emissionprob_=np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]]))
    chain = dict(startprob_prior=np.array([2.0, 4.0]),
                 transmat_prior=np.array([[3.0, 1.0], [0.5, 2.0]]))
    truth = CategoricalHMM(2)
    for name, value in start.items():
        setattr(truth, name, value)
    X, _ = truth.sample(300, random_state=2)
    ours = CategoricalHMM(2, init_params="", n_iter=6, tol=0.0, **chain,
                          emissionprob_prior=np.array([[2.0, 1.0, 5.0], [1.0, 3.0, 0.5]]))
    ref = hmmlearn.CategoricalHMM(2, init_params="", n_iter=6, tol=-1e300, **chain,
                                  emissionprob_prior=np.array([[2.0, 1.0, 5.0],
                                                               [1.0, 3.0, 0.5]]))
    for model in (ours, ref):
        for name, value in start.items():
            setattr(model, name, value.copy())
        model.fit(X)
    _same(ours, ref, ["startprob_", "transmat_", "emissionprob_"])
    counts = np.eye(3, dtype=np.int64)[X[:, 0]] * 2 + np.eye(3, dtype=np.int64)[X[::-1, 0]]
    ours = MultinomialHMM(2, init_params="", n_iter=6, tol=0.0, **chain)
    ref = hmmlearn.MultinomialHMM(2, n_trials=3, init_params="", n_iter=6, tol=-1e300, **chain)
    for model in (ours, ref):
        for name, value in start.items():
            setattr(model, name, value.copy())
        model.fit(counts)
    _same(ours, ref, ["startprob_", "transmat_", "emissionprob_"])


def test_poisson_hmm_gamma_prior_is_the_closed_form():
    # hmmlearn's convention, (lambdas_prior + sum post * x) / (lambdas_weight + n), with n the
    # state's own posterior mass (hmmlearn's code takes every state's: documented difference)
    truth = PoissonHMM(2)
    truth.startprob_, truth.transmat_ = np.array([0.6, 0.4]), np.array([[0.7, 0.3], [0.4, 0.6]])
    truth.lambdas_ = np.array([[3.1, 1.4], [1.6, 5.3]])
    X, _ = truth.sample(300, random_state=0)
    alpha, beta = np.array([[2.0, 0.5], [1.0, 4.0]]), np.array([[1.0, 3.0], [0.5, 2.0]])
    fit = PoissonHMM(2, init_params="", n_iter=1, lambdas_prior=alpha, lambdas_weight=beta)
    fit.startprob_, fit.transmat_, fit.lambdas_ = truth.startprob_, truth.transmat_, \
        truth.lambdas_
    gamma = truth.predict_proba(X)
    fit.fit(X)
    want = (alpha + gamma.T @ X) / (beta + gamma.sum(axis=0)[:, None])
    np.testing.assert_allclose(fit.lambdas_, want, rtol=1e-10)


@pytest.mark.parametrize("kind", ["diag", "full", "spherical", "tied"])
def test_gmm_hmm_priors_are_hmmlearns_formulas(kind):
    # one state: the chain is trivial and the state's mixture is fitted by one M-step in
    # hmmlearn's written formulas (with the new means, the exact EM step)
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(-2, 1, (80, 2)), rng.normal(2, 0.5, (60, 2))])
    m, d = 2, 2
    start = dict(startprob_=np.array([1.0]), transmat_=np.array([[1.0]]),
                 weights_=np.array([[0.4, 0.6]]), means_=np.array([[[-1.0, -1.0], [1.0, 1.0]]]))
    own_cov = {"diag": np.array([[[1.0, 2.0], [0.5, 0.5]]]), "spherical": np.array([[1.0, 0.7]]),
               "full": np.array([[[[1.0, 0.2], [0.2, 1.0]], [[0.5, 0.0], [0.0, 0.8]]]]),
               "tied": np.array([[[1.0, 0.1], [0.1, 0.6]]])}[kind]
    alpha = {"diag": np.array([[[0.5, 1.0], [2.0, 0.3]]]), "spherical": np.array([[0.5, 2.0]]),
             "full": np.array([[[[1.0, 0.3], [0.3, 0.5]], [[2.0, 0.0], [0.0, 1.0]]]]),
             "tied": np.array([[[1.0, 0.2], [0.2, 0.7]]])}[kind]
    beta = {"diag": np.array([[[1.0, 0.2], [0.5, 3.0]]]), "spherical": np.array([[1.5, 0.5]]),
            "full": np.array([[1.0, 2.0]]), "tied": np.array([3.0])}[kind]
    priors = dict(weights_prior=np.array([[3.0, 2.0]]),
                  means_weight=np.array([[2.0, 0.5]]), covars_prior=alpha, covars_weight=beta)
    gmm = GMMHMM(1, m, covariance_type=kind, init_params="", n_iter=1, reg_covar=0.0, **priors)
    for name, value in {**start, "covars_": own_cov}.items():
        setattr(gmm, name, value)
    chain = gmm._chain()
    mixture = chain.emissions[0]
    resp = mixture.seq_posterior(mixture.encoder().encode(X))
    gmm.fit(X)
    nk = resp.sum(axis=0)
    lam = priors["means_weight"][0]
    w = (nk + priors["weights_prior"][0] - 1) / (nk.sum() + (priors["weights_prior"][0] - 1).sum())
    mu = (resp.T @ X) / (nk + lam)[:, None]
    scatter = [(resp[:, j, None] * (X - mu[j])).T @ (X - mu[j]) for j in range(m)]
    if kind == "full":
        want = [(alpha[0, j].T + lam[j] * np.outer(mu[j], mu[j]) + scatter[j])
                / (nk[j] + 1 + beta[0, j] + d + 1) for j in range(m)]
    elif kind == "tied":
        want = (alpha[0].T + sum(lam[j] * np.outer(mu[j], mu[j]) for j in range(m))
                + sum(scatter)) / (nk.sum() + m + beta[0] + d + 1)
    elif kind == "diag":
        want = [(lam[j] * mu[j] ** 2 + 2 * beta[0, j] + np.diag(scatter[j]))
                / (nk[j] + 1 + 2 * (alpha[0, j] + 1)) for j in range(m)]
    else:
        want = [(lam[j] * mu[j] @ mu[j] + 2 * beta[0, j] + np.trace(scatter[j]))
                / (d * (nk[j] + 1) + 2 * (alpha[0, j] + 1)) for j in range(m)]
    np.testing.assert_allclose(gmm.weights_[0], w, rtol=1e-10)
    np.testing.assert_allclose(gmm.means_[0], mu, rtol=1e-10)
    np.testing.assert_allclose(gmm.covars_[0], np.asarray(want), rtol=1e-10)


def test_gaussian_hmm_mixfold_start_and_a_bad_init_named():
    X, lengths = _two_regimes()
    seeded = GaussianHMM(2, "full", init="mixfold", random_state=0).fit(X, lengths)
    recipe = GaussianHMM(2, "full", random_state=0).fit(X, lengths)
    # two starts, one optimum of this well-separated data
    order = np.argsort(seeded.means_[:, 0]), np.argsort(recipe.means_[:, 0])
    np.testing.assert_allclose(seeded.means_[order[0]], recipe.means_[order[1]], rtol=1e-6)
    with pytest.raises(ValueError, match="init must be one of \\['hmmlearn', 'mixfold'\\]"):
        GaussianHMM(2, init="kmeans").fit(X, lengths)
    with pytest.raises(ValueError, match="means_weight must broadcast to shape \\(2,\\)"):
        GaussianHMM(2, means_weight=[1.0, 2.0, 3.0]).fit(X, lengths)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["full", "diag", "tied", "spherical"])
def test_gaussian_mixture_from_a_given_start_equals_scikit_learns_iterations(kind):
    from sklearn.datasets import load_wine
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    X, _ = load_wine(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    start = SklearnGaussianMixture(3, covariance_type=kind, random_state=0)
    start._initialize_parameters(X, np.random.RandomState(0))
    cov = start.covariances_
    given = dict(covariance_type=kind, tol=0.0, max_iter=20, weights_init=start.weights_,
                 means_init=start.means_,
                 precisions_init=np.linalg.inv(cov) if kind in ("full", "tied") else 1 / cov)
    ours = GaussianMixture(3, **given).fit(X)
    theirs = SklearnGaussianMixture(3, **given).fit(X)
    np.testing.assert_allclose(ours.weights_, theirs.weights_, rtol=1e-9)
    np.testing.assert_allclose(ours.means_, theirs.means_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.covariances_, theirs.covariances_, rtol=1e-9, atol=1e-12)
    assert ours.lower_bound_ == pytest.approx(theirs.lower_bound_, rel=1e-12)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_gaussian_mixture_given_start_runs_no_k_means():
    # two distinct rows, three components: a k-means of the rows would warn (scikit-learn
    # runs none when weights, means and precisions are all given, nor do we)
    X = np.repeat([[0.0, 0.0], [1.0, 1.0]], 6, axis=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GaussianMixture(3, weights_init=[0.4, 0.3, 0.3], means_init=[[0, 0], [1, 1], [0.5, 0.5]],
                        precisions_init=np.stack([np.eye(2)] * 3), max_iter=1).fit(X)
    assert not [w for w in caught if "distinct clusters" in str(w.message)]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_tied_gaussian_mixture_pools_a_component_of_few_rows_without_a_warning():
    from sklearn.mixture import GaussianMixture as SklearnGaussianMixture

    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(size=(200, 4)), rng.normal(size=(200, 4)) + 6,
                   [[20.0, 20, 20, 20], [20.5, 20, 20, 20]]])  # a component on two rows
    given = dict(covariance_type="tied", tol=0.0, max_iter=10,
                 weights_init=[0.495, 0.495, 0.01],
                 means_init=[np.zeros(4), np.full(4, 6.0), np.full(4, 20.0)],
                 precisions_init=np.eye(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateFitWarning)  # its own covariance collapses;
        ours = GaussianMixture(3, **given).fit(X)             # the pooled one does not
    theirs = SklearnGaussianMixture(3, **given).fit(X)
    np.testing.assert_allclose(ours.covariances_, theirs.covariances_, rtol=1e-9)
    np.testing.assert_allclose(ours.means_, theirs.means_, rtol=1e-9)
