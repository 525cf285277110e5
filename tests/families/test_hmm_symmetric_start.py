"""A hidden Markov model of single symbols starts with states it can tell apart: seeding the
emissions as a mixture of the items alone makes every state the symbols' marginal (a saddle EM
never leaves), so the start falls back to seeded random state posteriors."""

import numpy as np

import mixfold
from mixfold import CategoricalEstimator, HiddenMarkovEstimator
from mixfold.sklearn import CategoricalHMM


def _sequence(seed: int) -> list[int]:
    truth = CategoricalHMM(2)
    truth.startprob_ = np.array([0.6, 0.4])
    truth.transmat_ = np.array([[0.7, 0.3], [0.4, 0.6]])
    truth.emissionprob_ = np.array([[0.1, 0.4, 0.5], [0.6, 0.3, 0.1]])
    return truth.sample(500, random_state=seed)[0][:, 0].tolist()


def test_states_of_single_symbols_start_apart_and_the_fit_climbs():
    est = HiddenMarkovEstimator([CategoricalEstimator()] * 2)
    for seed in (8, 18, 24):  # samples whose items-only start made both states the marginal
        rows = [_sequence(seed)]
        start = mixfold.fit(rows, est, max_iter=0, seed=0, progress=False).model
        a, b = (e.seq_log_density(e.encoder().encode([0, 1, 2])) for e in start.emissions)
        assert np.abs(a - b).max() > 1e-6
        fit = mixfold.fit(rows, est, max_iter=20, tol=0, seed=0, progress=False)
        assert fit.log_likelihood[-1] > fit.log_likelihood[0] + 1e-6
