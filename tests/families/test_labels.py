"""Partial and soft labels (``optimize(labels=...)``): fully labelled fits equal the supervised
maximum-likelihood estimate; partial and soft ones equal EM whose posteriors are multiplied by
the labels (NumPy, and pomegranate's ``priors=``); the labels ride with the rows to every
backend."""

from __future__ import annotations

import numpy as np
import pytest

import mixfold as mf
from mixfold.compute.labelled import Labelled
from mixfold.errors import DataError
from mixfold.families._labels import label_prior


def two_clusters(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0.0, 1.0, 300), rng.normal(2.0, 1.5, 300)])
    return x, np.repeat([0, 1], 300)


def gaussians(k: int = 2) -> mf.MixtureEstimator:
    return mf.MixtureEstimator([mf.GaussianEstimator(reg_covar=0.0)] * k)


def em_with_priors(x, prior, weights, mu, var, iterations):
    """Closed-form EM of a 1-D Gaussian mixture whose posteriors are multiplied by ``prior``."""
    for _ in range(iterations):
        logp = np.log(weights) - 0.5 * (np.log(2 * np.pi * var) + (x[:, None] - mu) ** 2 / var)
        with np.errstate(divide="ignore"):
            logp = logp + np.log(prior)
        resp = np.exp(logp - logp.max(axis=1, keepdims=True))
        resp /= resp.sum(axis=1, keepdims=True)
        mass = resp.sum(axis=0)
        weights, mu = mass / mass.sum(), resp.T @ x / mass
        var = (resp * (x[:, None] - mu) ** 2).sum(axis=0) / mass
    return weights, mu, var


def test_every_row_labelled_is_the_supervised_estimate():
    x, z = two_clusters()
    model = mf.optimize(x, gaussians(), labels=z, progress=False)
    for k in range(2):
        rows = x[z == k]
        assert model.components[k].mu == pytest.approx(rows.mean(), rel=1e-12)
        assert model.components[k].sigma2 == pytest.approx(rows.var(), rel=1e-12)
    np.testing.assert_allclose(model.weights, [0.5, 0.5], rtol=1e-12)


def test_every_row_labelled_full_covariance_is_the_supervised_estimate():
    rng = np.random.default_rng(1)
    x = np.vstack([rng.normal(0, 1, (200, 2)), rng.normal(3, 1, (100, 2)) @ [[1, 0.5], [0, 1]]])
    z = np.repeat([1, 0], [200, 100])
    est = mf.MixtureEstimator([mf.MultivariateGaussianEstimator(reg_covar=0.0)] * 2)
    model = mf.optimize(x, est, labels=z, progress=False)
    for k in range(2):
        rows = x[z == k]
        np.testing.assert_allclose(model.components[k].mu, rows.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(model.components[k].cov, np.cov(rows.T, bias=True),
                                   rtol=1e-10)
    np.testing.assert_allclose(model.weights, [1 / 3, 2 / 3], rtol=1e-12)


def partial_and_soft_prior(z: np.ndarray) -> np.ndarray:
    prior = np.full((len(z), 2), 0.5)
    prior[:100] = [1.0, 0.0]  # known
    prior[300:400] = [0.0, 1.0]
    prior[500:] = [0.8, 0.2]  # soft
    return prior


def test_partial_and_soft_labels_are_em_with_the_posteriors_times_the_labels():
    x, z = two_clusters()
    prior = partial_and_soft_prior(z)
    init = mf.MixtureDistribution([mf.GaussianDistribution(-1.0, 1.0),
                                   mf.GaussianDistribution(3.0, 1.0)], [0.5, 0.5])
    model = mf.optimize(x, gaussians(), init=init, labels=prior, max_iter=40, tol=0.0,
                        progress=False)
    w, mu, var = em_with_priors(x, prior, np.array([0.5, 0.5]), np.array([-1.0, 3.0]),
                                np.array([1.0, 1.0]), 40)
    np.testing.assert_allclose(model.weights, w, rtol=1e-10)
    np.testing.assert_allclose([c.mu for c in model.components], mu, rtol=1e-10)
    np.testing.assert_allclose([c.sigma2 for c in model.components], var, rtol=1e-10)
    # the same labels as integers (-1 unknown) and as a prior of ones fit alike
    labels = np.full(600, -1)
    labels[:100], labels[300:400] = 0, 1
    ints = mf.optimize(x, gaussians(), init=init, labels=labels, max_iter=20, tol=0.0,
                       progress=False)
    ones = np.ones((600, 2))
    ones[:100], ones[300:400] = [1, 0], [0, 1]
    probs = mf.optimize(x, gaussians(), init=init, labels=ones, max_iter=20, tol=0.0,
                        progress=False)
    assert ints.to_dict() == probs.to_dict()


def test_known_rows_keep_their_labels_through_em():
    x, z = two_clusters()
    labels = np.where(np.arange(600) % 4 == 0, z, -1)
    model = mf.optimize(x, gaussians(), labels=labels, seed=3, progress=False)
    result = model.fit_result
    assert result.converged
    assert np.all(np.diff(result.log_likelihood) >= -1e-12)
    # a known row's posterior, its label given, is its label
    post = model.seq_posterior(Labelled(model.encoder().encode(x), label_prior(labels, 2, 600,
                                                                               "row")))
    known = labels >= 0
    np.testing.assert_array_equal(post[known].argmax(axis=1), labels[known])
    assert np.all(post[known].max(axis=1) == 1.0)


def test_soft_labels_match_pomegranate_priors():
    torch = pytest.importorskip("torch")
    gmm = pytest.importorskip("pomegranate.gmm")
    dists = pytest.importorskip("pomegranate.distributions")
    x, z = two_clusters()
    prior = partial_and_soft_prior(z)  # rows sum to 1, as pomegranate requires
    peer = gmm.GeneralMixtureModel(
        [dists.Normal(torch.tensor([m], dtype=torch.float64),
                      torch.tensor([1.0], dtype=torch.float64), covariance_type="diag")
         for m in (-1.0, 3.0)], priors=np.array([0.5, 0.5]), max_iter=300, tol=1e-9)
    peer.fit(x[:, None], priors=prior)
    init = mf.MixtureDistribution([mf.GaussianDistribution(-1.0, 1.0),
                                   mf.GaussianDistribution(3.0, 1.0)], [0.5, 0.5])
    model = mf.optimize(x, gaussians(), init=init, labels=prior, tol=1e-12, max_iter=1000,
                        progress=False)
    # pomegranate sums its statistics in float32: agreement to its precision
    np.testing.assert_allclose(model.weights, peer.priors.detach().numpy(), rtol=5e-3)
    np.testing.assert_allclose([c.mu for c in model.components],
                               [d.means.item() for d in peer.distributions], rtol=5e-3)
    np.testing.assert_allclose([c.sigma2 for c in model.components],
                               [d.covs.item() for d in peer.distributions], rtol=5e-3)


def hmm_data(n_seq: int = 8, length: int = 60, seed: int = 4):
    rng = np.random.default_rng(seed)
    states = [(np.arange(length) // 10 + i) % 2 for i in range(n_seq)]
    seqs = [np.where(s == 0, 0.0, 2.5) + rng.normal(0, 1, length) for s in states]
    return seqs, states


def test_every_step_labelled_is_the_supervised_hidden_markov_estimate():
    seqs, states = hmm_data()
    est = mf.HiddenMarkovEstimator([mf.GaussianEstimator(reg_covar=0.0)] * 2)
    model = mf.optimize(seqs, est, labels=states, progress=False)
    flat_x, flat_s = np.concatenate(seqs), np.concatenate(states)
    first = np.bincount([s[0] for s in states], minlength=2)
    pairs = np.zeros((2, 2))
    for s in states:
        np.add.at(pairs, (s[:-1], s[1:]), 1.0)
    np.testing.assert_allclose(model.initial, first / first.sum(), rtol=1e-12)
    np.testing.assert_allclose(model.transitions, pairs / pairs.sum(axis=1, keepdims=True),
                               rtol=1e-12)
    for k in range(2):
        assert model.emissions[k].mu == pytest.approx(flat_x[flat_s == k].mean(), rel=1e-12)
        assert model.emissions[k].sigma2 == pytest.approx(flat_x[flat_s == k].var(), rel=1e-12)


def test_partial_state_labels_hold_and_the_rest_are_inferred():
    seqs, states = hmm_data()
    partial = [np.where(np.arange(len(s)) % 10 == 0, s, -1) for s in states]
    est = mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * 2)
    model = mf.optimize(seqs, est, labels=partial, seed=1, progress=False)
    assert model.emissions[0].mu < 1.0 < model.emissions[1].mu  # the labels fix which is which
    decoded = np.concatenate([model.viterbi(s) for s in seqs])
    assert np.mean(decoded == np.concatenate(states)) > 0.9


def test_labels_are_checked():
    x, z = two_clusters()
    with pytest.raises(DataError, match=r"label of row 5 must be -1 \(unknown\) or a component "
                                        r"in \[0, 2\), got 2"):
        mf.fit(x, gaussians(), labels=np.where(np.arange(600) == 5, 2, z))
    with pytest.raises(DataError, match=r"labels must have shape \(600,\)"):
        mf.fit(x, gaussians(), labels=z[:10])
    with pytest.raises(DataError, match="label probabilities of row 0 must be finite"):
        mf.fit(x, gaussians(), labels=np.zeros((600, 2)))
    with pytest.raises(ValueError, match="labels= label the components of a MixtureEstimator"):
        mf.fit(x, mf.GaussianEstimator(), labels=z)
    with pytest.raises(ValueError, match="fold in float64"):
        mf.fit(x, gaussians(), labels=z, precision="float32")
    seqs, states = hmm_data()
    with pytest.raises(DataError, match=r"sequence 2"):
        mf.fit(seqs, mf.HiddenMarkovEstimator([mf.GaussianEstimator()] * 2),
               labels=[s[:-1] if i == 2 else s for i, s in enumerate(states)])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["mp", "dask"])
def test_labels_ride_with_the_rows_to_every_backend(backend):
    x, z = two_clusters()
    labels = np.where(np.arange(600) % 3 == 0, z, -1)
    local = mf.optimize(x, gaussians(), labels=labels, tol=1e-10, progress=False)
    engine, client = backend, None
    if backend == "dask":
        from mixfold.backends.dask import local_dask_client

        engine = client = local_dask_client(2)
    try:
        remote = mf.optimize(x, gaussians(), labels=labels, tol=1e-10, backend=engine,
                             num_workers=2, progress=False)
    finally:
        if client is not None:
            cluster = client.cluster
            client.close()
            cluster.close()
    np.testing.assert_allclose(remote.weights, local.weights, rtol=1e-9)
    np.testing.assert_allclose([c.mu for c in remote.components],
                               [c.mu for c in local.components], rtol=1e-9)
