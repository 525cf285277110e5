"""Every row method takes raw rows as well as encoded ones, with the same values."""

import numpy as np
import pytest

import mixfold
from mixfold import (CategoricalEstimator, GaussianDistribution, GaussianEstimator,
                     HiddenMarkovDistribution, MixtureEstimator, RecordEstimator)


def test_mixture_of_records_scores_raw_rows_and_frames():
    pd = pytest.importorskip("pandas")
    rows = [{"x": float(i % 7), "c": "ab"[i % 2]} for i in range(60)]
    model = mixfold.optimize(rows, MixtureEstimator(
        [RecordEstimator({"x": GaussianEstimator(), "c": CategoricalEstimator()})] * 2,
        pseudo_count=1.0), progress=False)
    enc = model.encoder().encode(rows)
    for raw in (rows, pd.DataFrame(rows)):
        np.testing.assert_array_equal(model.seq_log_density(raw), model.seq_log_density(enc))
        np.testing.assert_array_equal(model.seq_posterior(raw), model.seq_posterior(enc))
        np.testing.assert_array_equal(model.predict(raw), model.seq_posterior(enc).argmax(1))


def test_hidden_markov_takes_raw_sequences():
    seqs = [[0.0, 0.1, 5.0, 5.2], [5.1, 4.9, 0.2]]
    model = HiddenMarkovDistribution([GaussianDistribution(0, 1), GaussianDistribution(5, 1)],
                                     [0.5, 0.5], [[0.8, 0.2], [0.3, 0.7]])
    enc = model.encoder().encode(seqs)
    np.testing.assert_array_equal(model.seq_viterbi(seqs), model.seq_viterbi(enc))
    np.testing.assert_array_equal(model.seq_posterior(seqs), model.seq_posterior(enc))


def test_raw_rows_a_model_cannot_encode_name_the_row():
    model = mixfold.optimize(np.arange(10.0), GaussianEstimator(), progress=False)
    with pytest.raises(mixfold.DataError, match="row 1"):
        model.seq_log_density([1.0, float("nan")])
