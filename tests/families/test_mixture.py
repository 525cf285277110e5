import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, GaussianDistribution,
                     GaussianEstimator, MixtureDistribution, MixtureEstimator)


def two_gaussians():
    return MixtureDistribution([GaussianDistribution(-2.0, 0.5), GaussianDistribution(3.0, 2.0)],
                               [0.3, 0.7])


def test_log_density_matches_brute_force(rng):
    m = two_gaussians()
    x = rng.normal(0, 4, size=300)
    ref = logsumexp(np.stack([np.log(0.3) + stats.norm(-2, np.sqrt(0.5)).logpdf(x),
                              np.log(0.7) + stats.norm(3, np.sqrt(2.0)).logpdf(x)]), axis=0)
    np.testing.assert_allclose(m.seq_log_density(m.encoder().encode(x)), ref, rtol=1e-12)


def test_far_tail_is_finite_and_posteriors_sum_to_one():
    m = two_gaussians()
    enc = m.encoder().encode(np.array([-1e4, 0.0, 1e4]))
    ll = m.seq_log_density(enc)
    assert np.isfinite(ll).all()
    np.testing.assert_allclose(m.seq_posterior(enc).sum(axis=1), 1.0)


def test_stacked_path_equals_per_component_path(rng):
    m = two_gaussians()
    enc = m.encoder().encode(rng.normal(size=100))
    per_component = np.stack([np.log(w) + c.seq_log_density(enc)
                              for w, c in zip(m.weights, m.components)], axis=1)
    np.testing.assert_allclose(m.component_log_densities(enc), per_component, rtol=1e-13)
    assert m.units.stack is not None


def test_fit_recovers_gaussian_mixture():
    x = two_gaussians().sampler(0).sample(20_000)
    fit = mixfold.optimize(x, MixtureEstimator([GaussianEstimator()] * 2), seed=3, progress=False)
    order = np.argsort([c.mu for c in fit.components])
    comps = [fit.components[i] for i in order]
    np.testing.assert_allclose(fit.weights[order], [0.3, 0.7], atol=0.015)
    assert comps[0].mu == pytest.approx(-2.0, abs=0.05)
    assert comps[1].mu == pytest.approx(3.0, abs=0.05)
    assert comps[0].sigma2 == pytest.approx(0.5, abs=0.05)
    assert comps[1].sigma2 == pytest.approx(2.0, abs=0.1)
    ll = fit.fit_result.log_likelihood
    assert all(b >= a - 1e-12 for a, b in zip(ll, ll[1:]))  # EM never goes down


def test_em_step_matches_hand_computed_update(rng):
    m = two_gaussians()
    x = rng.normal(0, 3, size=500)
    r = m.seq_posterior(m.encoder().encode(x))
    nk = r.sum(0)
    mu = r.T @ x / nk
    var = (r * (x[:, None] - mu) ** 2).sum(0) / nk + 1e-6
    fit = mixfold.optimize(x, MixtureEstimator([GaussianEstimator()] * 2), init=m, max_iter=1,
                           progress=False)
    np.testing.assert_allclose(fit.weights, nk / 500, rtol=1e-12)
    np.testing.assert_allclose([c.mu for c in fit.components], mu, rtol=1e-10)
    np.testing.assert_allclose([c.sigma2 for c in fit.components], var, rtol=1e-9)


def test_mixture_of_categoricals_shares_one_encoding():
    truth = MixtureDistribution([CategoricalDistribution({"a": 0.9, "b": 0.05, "c": 0.05}),
                                 CategoricalDistribution({"a": 0.05, "b": 0.05, "c": 0.9})],
                                [0.5, 0.5])
    x = truth.sampler(2).sample(5000)
    est = MixtureEstimator([CategoricalEstimator()] * 2, pseudo_count=1.0)
    fit = mixfold.optimize(x, est, progress=False, seed=1)
    assert fit.log_density("a") == pytest.approx(truth.log_density("a"), abs=0.05)


def test_components_reading_data_differently_get_separate_encodings(rng):
    # Gaussian reads any real, Categorical over floats reads levels: two encodings of one column.
    x = rng.choice([0.0, 1.0, 2.0], size=400)
    est = MixtureEstimator([GaussianEstimator(), CategoricalEstimator()])
    fit = mixfold.optimize(x, est, progress=False, max_iter=5)
    assert np.isfinite(fit.fit_result.log_likelihood).all()
    assert mixfold.Distribution.from_dict(fit.to_dict()) == fit


def test_pseudo_count_keeps_empty_component_weight_positive():
    est = MixtureEstimator([GaussianEstimator()] * 2, pseudo_count=1.0)
    stats_value = ((np.array([10.0, 0.0]),),
                   ((tuple(np.array([v]) for v in (10.0, 5.0, 10.0, 0.0)), ()),
                    (tuple(np.zeros(1) for _ in range(4)), ())))
    m = est.estimate(10.0, stats_value)
    assert m.weights[1] == pytest.approx(1 / 12)
    assert m.components[1] == GaussianDistribution(0.0, 1.0)


def test_sampling_proportions_follow_weights():
    m = MixtureDistribution([CategoricalDistribution({"x": 1.0}),
                             CategoricalDistribution({"y": 1.0})], [0.25, 0.75])
    s = m.sampler(5).sample(20_000)
    assert np.mean(s == "x") == pytest.approx(0.25, abs=0.01)


def test_mixture_of_records_is_scored_and_updated_stacked_like_component_by_component(rng):
    from mixfold import PoissonDistribution, PoissonEstimator, RecordDistribution, RecordEstimator

    comps = [RecordDistribution({"x": GaussianDistribution(m, 1.0 + m * m),
                                 "c": CategoricalDistribution(rng.dirichlet(np.ones(4)),
                                                              levels=list("abcd")),
                                 "n": PoissonDistribution(lam)})
             for m, lam in [(-1.0, 0.0), (0.5, 3.0), (2.0, 9.0)]]  # lam = 0: a point mass
    model = MixtureDistribution(comps, [0.2, 0.5, 0.3])
    rows = model.sampler(4).sample(2000)
    est = MixtureEstimator([RecordEstimator({"x": GaussianEstimator(), "c": CategoricalEstimator(),
                                             "n": PoissonEstimator()})] * 3)
    est = est.bind(est.encoder().fit(rows))
    enc = model.encoder().encode(rows)
    assert model.units.stack is not None
    w = rng.uniform(0.5, 1.5, size=2000)
    stacked = est.accumulator_factory().make()
    ll_stacked = stacked.seq_update(enc, w, model)
    model.units.stack = None  # force the component-by-component path
    looped = est.accumulator_factory().make()
    ll_looped = looped.seq_update(enc, w, model)
    np.testing.assert_allclose(ll_stacked, ll_looped, rtol=1e-12)
    # the stacked update sums the Gaussian field about the stack's centre, the loop about each
    # component's own mean: moved to one point, they hold the same sums
    looped.align_references(stacked)
    np.testing.assert_allclose(stacked.to_array(), looped.to_array(), rtol=1e-12, atol=1e-9)


# --- the seeded start: as good as scikit-learn's k-means start

def test_default_seed_finds_iris_full_covariance_optimum():
    from sklearn.datasets import load_iris
    from sklearn.mixture import GaussianMixture

    X = load_iris().data
    est = MixtureEstimator([mixfold.MultivariateGaussianEstimator(reg_covar=1e-6)] * 3)
    ours = mixfold.optimize(X, est, tol=1e-10, max_iter=1000, progress=False)  # seed 0
    ref = GaussianMixture(3, reg_covar=1e-6, tol=1e-9, max_iter=1000, random_state=0).fit(X)
    assert ours.fit_result.final_log_likelihood == pytest.approx(ref.score(X), abs=1e-6)


def test_seeded_fit_separates_eight_clusters_in_ten_dimensions():
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 8, size=(8, 10))
    X = np.vstack([rng.normal(c, 1.0, size=(150, 10)) for c in centres])
    est = MixtureEstimator([mixfold.MultivariateGaussianEstimator()] * 8)
    for seed in range(5):
        model = mixfold.optimize(X, est, seed=seed, progress=False)
        labels = model.seq_posterior(model.encoder().encode(X)).argmax(axis=1)
        # every true cluster is one component and every component one cluster
        assert len({(t, c) for t, c in zip(np.repeat(np.arange(8), 150), labels)}) == 8
