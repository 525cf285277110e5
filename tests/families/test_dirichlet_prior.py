"""Dirichlet concentrations as estimator options (families/_dirichlet_prior.py): mixture
weights, a hidden Markov model's initial and transition probabilities and categorical
probabilities against ``max(counts + alpha - 1, 0)`` normalised, from the same statistics."""

import numpy as np
import pytest

import mixfold
from mixfold import (CategoricalEstimator, GaussianDistribution, GaussianEstimator,
                     HiddenMarkovDistribution, HiddenMarkovEstimator, MixtureDistribution,
                     MixtureEstimator)
from mixfold.errors import ParameterError


def _mode(counts, alpha):
    m = np.maximum(counts + np.asarray(alpha) - 1.0, 0.0)
    return m / m.sum(axis=-1, keepdims=True)


def _stats(estimator, model, rows):
    """The summed statistics of ``rows`` under ``model`` (one E-step)."""
    enc = estimator.encoder().fit(rows).encode(rows)
    acc = estimator.accumulator_factory().make()
    acc.seq_update(enc, np.ones(enc.n_rows), model)
    return acc.value()


def test_hidden_markov_priors_are_the_dirichlet_mode():
    truth = HiddenMarkovDistribution([GaussianDistribution(-2, 1), GaussianDistribution(2, 1)],
                                     [0.3, 0.7], [[0.8, 0.2], [0.4, 0.6]])
    rows = truth.sampler(0, sample_length=15).sample(20)
    alpha0, alpha = np.array([3.0, 0.5]), np.array([[2.0, 1.0], [0.2, 5.0]])
    est = HiddenMarkovEstimator([GaussianEstimator()] * 2, initial_prior=alpha0,
                                transition_prior=alpha)
    stats = _stats(est, truth, rows)
    fit = est.estimate(0.0, stats)
    initial_counts, transition_counts = stats[0][0], stats[0][1]
    np.testing.assert_allclose(fit.initial, _mode(initial_counts, alpha0), rtol=1e-14)
    np.testing.assert_allclose(fit.transitions, _mode(transition_counts, alpha), rtol=1e-14)
    # the emissions are unchanged by the chain's prior
    plain = HiddenMarkovEstimator([GaussianEstimator()] * 2).estimate(0.0, stats)
    assert [e.mu for e in fit.emissions] == [e.mu for e in plain.emissions]


def test_mixture_weights_prior_is_the_dirichlet_mode():
    model = MixtureDistribution([GaussianDistribution(-1, 1), GaussianDistribution(3, 2)],
                                [0.5, 0.5])
    rows = model.sampler(1).sample(200)
    est = MixtureEstimator([GaussianEstimator()] * 2, weights_prior=[10.0, 0.5])
    stats = _stats(est, model, rows)
    np.testing.assert_allclose(est.estimate(0.0, stats).weights,
                               _mode(stats[0][0], [10.0, 0.5]), rtol=1e-14)


def test_categorical_prior_and_a_fit_that_uses_it():
    est = CategoricalEstimator(prior=[1.0, 3.0, 0.5])
    fit = mixfold.optimize(["a", "a", "b", "c", "c", "c"], est, progress=False)
    np.testing.assert_allclose(fit.probs, _mode(np.array([2.0, 1.0, 3.0]), [1.0, 3.0, 0.5]))


def test_a_concentration_that_fits_no_counts_is_named():
    with pytest.raises(ParameterError, match="initial_prior must be None or a number >= 0"):
        HiddenMarkovEstimator([GaussianEstimator()] * 2, initial_prior=[-1.0, 1.0])
    est = MixtureEstimator([GaussianEstimator()] * 2, weights_prior=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="concentration of shape"):
        mixfold.optimize([0.0, 1.0, 5.0, 6.0], est, progress=False)
