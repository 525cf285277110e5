"""Free parameters per family (BIC/AIC's count): by hand for each family, tied keys once, and
scikit-learn's count for its Gaussian mixtures."""

import numpy as np
import pytest

import mixfold
from mixfold import (BernoulliDistribution, BinomialDistribution, CategoricalDistribution,
                     CompositeDistribution, DiagonalGaussianDistribution,
                     ExponentialDistribution, GammaDistribution, GaussianDistribution,
                     GeometricDistribution, HiddenMarkovDistribution, LogGaussianDistribution,
                     MixtureDistribution, MultivariateGaussianDistribution, OptionalDistribution,
                     PoissonDistribution, RecordDistribution, SequenceDistribution,
                     VonMisesDistribution)

G = GaussianDistribution(0.0, 1.0)
CASES = [
    (BernoulliDistribution(0.3), 1), (BinomialDistribution(10, 0.3), 1),
    (CategoricalDistribution({"a": 0.2, "b": 0.3, "c": 0.5}), 2),
    (DiagonalGaussianDistribution([0.0, 1.0, 2.0], [1.0, 1.0, 1.0]), 6),
    (ExponentialDistribution(2.0), 1), (GammaDistribution(2.0, 1.0), 2), (G, 2),
    (GeometricDistribution(0.5), 1), (LogGaussianDistribution(0.0, 1.0), 2),
    (MultivariateGaussianDistribution(np.zeros(3), np.eye(3)), 3 + 6),
    (PoissonDistribution(3.0), 1), (VonMisesDistribution(0.0, 1.0), 2),
    (MixtureDistribution([G, G, G], [0.2, 0.3, 0.5]), 2 + 3 * 2),
    (CompositeDistribution([G, PoissonDistribution(1.0)]), 3),
    (RecordDistribution({"x": G, "n": PoissonDistribution(1.0)}), 3),
    (SequenceDistribution(G, PoissonDistribution(4.0)), 3), (SequenceDistribution(G), 2),
    (OptionalDistribution(G, 0.1), 3),
    (HiddenMarkovDistribution([G, G], [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]), 1 + 2 + 4),
    (HiddenMarkovDistribution([G, G], [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]], [0.1, 0.1]),
     1 + 2 + 2 + 4),
]


@pytest.mark.parametrize("model,expected", CASES, ids=[type(m).__name__ for m, _ in CASES])
def test_free_parameters_of_each_family(model, expected):
    assert model.n_parameters() == expected


def test_tied_components_count_once():
    x = np.r_[np.zeros(20), np.ones(20) * 5] + np.arange(40) * 0.01
    free = mixfold.fit(x, mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 3),
                       progress=False)
    tied = mixfold.fit(x, mixfold.MixtureEstimator(
        [mixfold.GaussianEstimator(keys="g")] * 3), progress=False)
    assert (free.n_parameters, tied.n_parameters) == (8, 2 + 2)
    assert free.bic == pytest.approx(-2 * free.final_log_likelihood * 40 + 8 * np.log(40))


CORE_COVARIANCES = {
    "full": lambda: mixfold.MultivariateGaussianEstimator(),
    "diag": lambda: mixfold.DiagonalGaussianEstimator(),
    "spherical": lambda: mixfold.DiagonalGaussianEstimator(spherical=True),
    "tied": lambda: mixfold.MultivariateGaussianEstimator(covariance_keys="c"),
}


@pytest.mark.parametrize("kind", sorted(CORE_COVARIANCES))
def test_gaussian_mixture_count_equals_scikit_learns(kind):
    """The core estimators' count, scikit-learn's for each covariance type (a spherical
    variance counts once, a tied covariance once for the mixture)."""
    sklearn_mixture = pytest.importorskip("sklearn.mixture")
    X = np.random.default_rng(0).normal(size=(60, 4))
    est = CORE_COVARIANCES[kind]()
    ours = mixfold.fit(X, mixfold.MixtureEstimator([est] * 3), max_iter=2, progress=False)
    theirs = sklearn_mixture.GaussianMixture(3, covariance_type=kind, max_iter=2).fit(X)
    assert ours.n_parameters == theirs._n_parameters()


def test_frozen_parameters_are_not_counted():
    X = np.random.default_rng(1).normal(size=(80, 3))
    plain = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 2)
    start = mixfold.optimize(X, plain, max_iter=2, progress=False)

    def count(est):
        return mixfold.fit(X, est, init=start, max_iter=2, progress=False).n_parameters

    assert count(plain) == 1 + 2 * 6
    held_weights = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 2,
                                            frozen=["weights"])
    assert count(held_weights) == 2 * 6
    held_means = mixfold.MixtureEstimator(
        [mixfold.DiagonalGaussianEstimator(frozen=["mu"])] * 2)
    assert count(held_means) == 1 + 2 * 3
    a_tied_held_covariance = mixfold.MixtureEstimator(
        [mixfold.MultivariateGaussianEstimator(covariance_keys="c", frozen=["cov"])] * 2)
    full_start = mixfold.optimize(X, mixfold.MixtureEstimator(
        [mixfold.MultivariateGaussianEstimator()] * 2), max_iter=2, progress=False)
    held = mixfold.fit(X, a_tied_held_covariance, init=full_start, max_iter=2, progress=False)
    assert held.n_parameters == 1 + 2 * 3


def test_hidden_markov_held_transitions_are_not_counted():
    x = np.random.default_rng(2).normal(size=(60, 1))
    start = HiddenMarkovDistribution([G, GaussianDistribution(2.0, 1.0)], [0.5, 0.5],
                                     [[0.9, 0.1], [0.2, 0.8]])
    est = mixfold.HiddenMarkovEstimator([mixfold.GaussianEstimator()] * 2,
                                        frozen=["transitions"])
    res = mixfold.fit([x[:, 0]], est, init=start, max_iter=2, progress=False)
    assert res.n_parameters == 1 + 2 * 2
