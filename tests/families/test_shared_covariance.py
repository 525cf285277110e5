"""Covariances shared by a combinator's children (``covariance_keys``) and spherical
variances, as core options: a MixtureEstimator of them against scikit-learn's GaussianMixture
(covariance_type "tied" / "spherical") from the same start, and a hidden Markov model's tied
emissions against the pooled closed form."""

import numpy as np
import pytest

import mixfold
from mixfold import (DiagonalGaussianDistribution, DiagonalGaussianEstimator,
                     HiddenMarkovDistribution, HiddenMarkovEstimator, MixtureDistribution,
                     MixtureEstimator, MultivariateGaussianDistribution,
                     MultivariateGaussianEstimator)

sklearn_mixture = pytest.importorskip("sklearn.mixture")


def _blobs():
    rng = np.random.default_rng(7)
    return np.vstack([rng.normal([0, 0, 0], [1.0, 0.5, 2.0], (150, 3)),
                      rng.normal([4, 1, -2], [0.7, 1.5, 1.0], (100, 3)),
                      rng.normal([-3, 5, 1], [1.2, 1.0, 0.4], (120, 3))])


START_MEANS = np.array([[0.5, 0.5, 0.0], [3.0, 0.0, -1.0], [-2.0, 4.0, 0.0]])
START_WEIGHTS = np.array([0.3, 0.3, 0.4])


@pytest.mark.parametrize("kind", ["tied", "spherical"])
def test_core_tied_and_spherical_mixtures_equal_scikit_learn(kind):
    x = _blobs()
    if kind == "tied":
        cov = np.array([[2.0, 0.3, 0.0], [0.3, 1.5, 0.2], [0.0, 0.2, 1.0]])
        start = MixtureDistribution(MultivariateGaussianDistribution.tied(START_MEANS, cov),
                                    START_WEIGHTS)
        component = MultivariateGaussianEstimator(covariance_keys="shared")
        precisions = np.linalg.inv(cov)
    else:
        variances = np.array([1.0, 2.0, 0.5])
        start = MixtureDistribution([DiagonalGaussianDistribution(m, np.full(3, v))
                                     for m, v in zip(START_MEANS, variances)], START_WEIGHTS)
        component = DiagonalGaussianEstimator(spherical=True)
        precisions = 1 / variances
    ours = mixfold.fit(x, MixtureEstimator([component] * 3), init=start, max_iter=6, tol=0.0,
                       progress=False)
    ref = sklearn_mixture.GaussianMixture(3, covariance_type=kind, weights_init=START_WEIGHTS,
                                          means_init=START_MEANS, precisions_init=precisions,
                                          max_iter=6, tol=0.0).fit(x)
    model = ours.model
    assert ours.iterations == 6
    np.testing.assert_allclose(model.weights, ref.weights_, rtol=1e-10)
    np.testing.assert_allclose([c.mu for c in model.components], ref.means_, rtol=1e-10)
    if kind == "tied":
        for c in model.components:
            np.testing.assert_allclose(c.cov, ref.covariances_, rtol=1e-10)
        # one covariance, factored once: the components share its factors
        assert model.components[1].precision_cholesky is model.components[0].precision_cholesky
    else:
        np.testing.assert_allclose([c.sigma2 for c in model.components],
                                   np.repeat(ref.covariances_[:, None], 3, axis=1), rtol=1e-10)
    assert model.seq_log_density(model.encoder().encode(x)).mean() == pytest.approx(
        ref.score(x), rel=1e-12)


def test_hidden_markov_tied_emissions_pool_their_scatter():
    emissions = [MultivariateGaussianDistribution([-2.0, 0.0], [[1.0, 0.3], [0.3, 0.5]]),
                 MultivariateGaussianDistribution([2.0, 1.0], [[0.5, 0.0], [0.0, 2.0]])]
    truth = HiddenMarkovDistribution(emissions, [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
    rows = truth.sampler(3, sample_length=30).sample(10)
    est = HiddenMarkovEstimator([MultivariateGaussianEstimator(reg_covar=0.0,
                                                               covariance_keys="t")] * 2)
    fit = mixfold.fit(rows, est, init=truth, max_iter=1, progress=False).model
    gamma = truth.seq_posterior(truth.encoder().encode(rows))
    x = np.concatenate([np.asarray(r) for r in rows])
    means = [(g @ x) / g.sum() for g in gamma.T]
    pooled = sum((g[:, None] * (x - m)).T @ (x - m) for g, m in zip(gamma.T, means))
    for e, m in zip(fit.emissions, means):
        np.testing.assert_allclose(e.mu, m, rtol=1e-10)
        np.testing.assert_allclose(e.cov, pooled / len(x), rtol=1e-10)


def test_components_of_one_key_must_share_a_shape():
    est = MixtureEstimator([MultivariateGaussianEstimator(covariance_keys="c"),
                            DiagonalGaussianEstimator(covariance_keys="c")])
    with pytest.raises(ValueError, match="sharing the covariance 'c' have covariances of"):
        mixfold.optimize(_blobs(), est, progress=False)
