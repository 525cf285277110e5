"""Frozen parameters (``frozen=`` on every estimator): held at init's values, every other
parameter estimated as the closed-form EM with the held ones fixed would estimate it."""

from __future__ import annotations

import numpy as np
import pytest

import mixfold as mf
from mixfold.errors import ParameterError
from mixfold.sklearn.hmm import GaussianHMM


def two_clusters(n: int = 2000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-1.0, 1.0, n // 2), rng.normal(2.5, 0.7, n // 2)])


def em_with_fixed_weights(x: np.ndarray, weights: np.ndarray, mu: np.ndarray,
                          var: np.ndarray, iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form EM of a 1-D Gaussian mixture whose weights stay as given (NumPy alone)."""
    for _ in range(iterations):
        logp = np.log(weights) - 0.5 * (np.log(2 * np.pi * var) + (x[:, None] - mu) ** 2 / var)
        resp = np.exp(logp - logp.max(axis=1, keepdims=True))
        resp /= resp.sum(axis=1, keepdims=True)
        mass = resp.sum(axis=0)
        mu = resp.T @ x / mass
        var = (resp * (x[:, None] - mu) ** 2).sum(axis=0) / mass
    return mu, var


def test_frozen_mixture_weights_match_em_with_the_weights_fixed():
    x = two_clusters()
    init = mf.MixtureDistribution([mf.GaussianDistribution(-2.0, 1.0),
                                   mf.GaussianDistribution(3.0, 1.0)], [0.8, 0.2])
    est = mf.MixtureEstimator([mf.GaussianEstimator(reg_covar=0.0)] * 2, frozen=["weights"])
    model = mf.optimize(x, est, init=init, max_iter=300, tol=0.0, progress=False)
    mu, var = em_with_fixed_weights(x, np.array([0.8, 0.2]), np.array([-2.0, 3.0]),
                                    np.array([1.0, 1.0]), model.fit_result.iterations)
    assert model.weights.tolist() == [0.8, 0.2]
    np.testing.assert_allclose([c.mu for c in model.components], mu, rtol=1e-9)
    np.testing.assert_allclose([c.sigma2 for c in model.components], var, rtol=1e-9)


def test_a_frozen_mean_leaves_the_variance_about_it():
    x = np.random.default_rng(1).normal(2.0, 3.0, size=500)
    est = mf.GaussianEstimator(reg_covar=0.0, frozen=["mu"])
    model = mf.optimize(x, est, init=mf.GaussianDistribution(0.5, 1.0), progress=False)
    assert model.mu == 0.5
    assert model.sigma2 == pytest.approx(np.mean((x - 0.5) ** 2), rel=1e-12)


def test_a_frozen_mean_vector_leaves_the_covariance_about_it():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 2)) @ np.array([[1.0, 0.4], [0.0, 0.8]]) + [1.0, -1.0]
    held = np.array([0.5, 0.0])
    est = mf.MultivariateGaussianEstimator(reg_covar=0.0, frozen=["mu"])
    model = mf.optimize(x, est, init=mf.MultivariateGaussianDistribution(held, np.eye(2)),
                        progress=False)
    np.testing.assert_array_equal(model.mu, held)
    np.testing.assert_allclose(model.cov, (x - held).T @ (x - held) / len(x), rtol=1e-10)


def test_frozen_names_inside_a_tree_and_through_bind():
    """A categorical field of each mixture component held (its levels bound from the data),
    the Gaussian field estimated."""
    rng = np.random.default_rng(3)
    rows = [{"x": float(v), "c": c} for v, c in zip(two_clusters(400),
                                                    rng.choice(["a", "b"], size=400))]
    est = mf.MixtureEstimator([mf.RecordEstimator({
        "x": mf.GaussianEstimator(), "c": mf.CategoricalEstimator(frozen=["probs"])})] * 2)
    init = mf.MixtureDistribution([mf.RecordDistribution({
        "x": mf.GaussianDistribution(m, 1.0),
        "c": mf.CategoricalDistribution({"a": p, "b": 1 - p})}) for m, p in ((-2, 0.9), (3, 0.3))],
        [0.5, 0.5])
    model = mf.optimize(rows, est, init=init, progress=False)
    probs = [c.fields["c"].prob("a") for c in model.components]
    assert probs == [0.9, 0.3]
    assert model.components[0].fields["x"].mu < 0 < model.components[1].fields["x"].mu
    assert model.weights.tolist() != [0.5, 0.5]


def test_frozen_transitions_of_a_hidden_markov_model_match_hmmlearn():
    hmm = pytest.importorskip("hmmlearn.hmm")
    rng = np.random.default_rng(4)
    seqs = [np.where(rng.random(200).cumsum() % 2 < 1, -1.0, 2.0) + rng.normal(0, 0.8, 200)
            for _ in range(5)]
    trans = np.array([[0.9, 0.1], [0.2, 0.8]])
    init = mf.HiddenMarkovDistribution([mf.GaussianDistribution(-0.5, 1.0),
                                        mf.GaussianDistribution(1.5, 1.0)], [0.5, 0.5], trans)
    est = mf.HiddenMarkovEstimator([mf.GaussianEstimator(reg_covar=0.0)] * 2,
                                   frozen=["transitions"])
    model = mf.optimize(seqs, est, init=init, max_iter=50, tol=0.0, progress=False)
    peer = hmm.GaussianHMM(2, covariance_type="diag", params="smc", init_params="",
                           n_iter=50, tol=0.0, min_covar=0.0, covars_prior=0.0)
    peer.startprob_, peer.transmat_ = np.array([0.5, 0.5]), trans.copy()
    peer.means_, peer.covars_ = np.array([[-0.5], [1.5]]), np.array([[1.0], [1.0]])
    peer.fit(np.concatenate(seqs)[:, None], [len(s) for s in seqs])
    np.testing.assert_array_equal(model.transitions, trans)
    np.testing.assert_allclose([e.mu for e in model.emissions], peer.means_[:, 0], rtol=1e-6)
    np.testing.assert_allclose([e.sigma2 for e in model.emissions], peer.covars_[:, 0, 0],
                               rtol=1e-6)


def test_frozen_is_checked():
    with pytest.raises(ParameterError, match=r"GaussianEstimator: frozen names 'mean', not a "
                                             r"parameter of GaussianDistribution"):
        mf.GaussianEstimator(frozen=["mean"])
    x = np.random.default_rng(5).gamma(2.0, 1.5, size=200)
    with pytest.raises(ParameterError, match="Gamma estimates shape, scale together"):
        mf.fit(x, mf.GammaEstimator(frozen=["scale"]), init=mf.GammaDistribution(2.0, 1.0))
    with pytest.raises(ValueError, match="held at their value in init="):
        mf.fit(x, mf.GammaEstimator(frozen=["shape", "scale"]))
    est = mf.MixtureEstimator([mf.GaussianEstimator()] * 2, frozen=["means"])
    with pytest.raises(ParameterError, match=r"frozen names 'means', not a parameter of the "
                                             r"Mixture node of init"):
        mf.fit(x, est, init=mf.MixtureDistribution([mf.GaussianDistribution(1, 1)] * 2,
                                                   [0.5, 0.5]))


def test_frozen_and_accelerated_reach_the_fixed_point_of_em_with_the_weights_fixed():
    x = two_clusters()
    init = mf.MixtureDistribution([mf.GaussianDistribution(-2.0, 1.0),
                                   mf.GaussianDistribution(3.0, 1.0)], [0.7, 0.3])
    est = mf.MixtureEstimator([mf.GaussianEstimator(reg_covar=0.0)] * 2, frozen=["weights"])
    fast = mf.optimize(x, est, init=init, tol=1e-15, max_iter=5000, accelerate="squarem",
                       progress=False)
    mu, var = em_with_fixed_weights(x, np.array([0.7, 0.3]), np.array([-2.0, 3.0]),
                                    np.array([1.0, 1.0]), 3000)
    assert fast.weights.tolist() == [0.7, 0.3]
    np.testing.assert_allclose([c.mu for c in fast.components], mu, rtol=1e-6)
    np.testing.assert_allclose([c.sigma2 for c in fast.components], var, rtol=1e-6)


def test_hmmlearn_letters_left_out_of_params_are_frozen():
    x = two_clusters(400)[:, None]
    model = GaussianHMM(2, params="mc", init_params="mc", n_iter=20, random_state=0)
    model.startprob_ = np.array([0.6, 0.4])
    model.transmat_ = np.array([[0.7, 0.3], [0.4, 0.6]])
    model.fit(x, [200, 200])
    np.testing.assert_array_equal(model.startprob_, [0.6, 0.4])
    np.testing.assert_array_equal(model.transmat_, [[0.7, 0.3], [0.4, 0.6]])
    assert model.model_.fit_result.iterations > 1
