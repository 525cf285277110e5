"""Online (stepwise) EM: updates from blocks as they arrive, the model usable between blocks."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, GaussianDistribution,
                     GaussianEstimator, OnlineEM, RecordDistribution, RecordEstimator, RowBlocks)
from mixfold.errors import DataError
from mixfold.online import step_size
from tests.streaming.test_out_of_core import diag_estimator, gaussian_mixture_rows


def held_out_mean_ll(model, rows):
    return float(model.seq_log_density(model.encoder().encode(rows)).mean())


def test_a_shuffled_stream_reaches_the_batch_fit_on_held_out_rows():
    train, held_out = gaussian_mixture_rows(30_000, seed=0), gaussian_mixture_rows(20_000, seed=99)
    batch = mixfold.optimize(train, diag_estimator(), max_iter=500, tol=1e-10, progress=False)
    online = OnlineEM(diag_estimator())
    shuffled = train[np.random.default_rng(0).permutation(len(train))]
    online.fit_blocks(RowBlocks.from_array(shuffled, 500))
    assert online.n_rows_seen == 30_000 and online.n_steps == 59  # 1000 rows seed the first
    gap = held_out_mean_ll(batch, held_out) - online.score(held_out)
    assert abs(gap) < 1e-3, gap


def test_alpha_one_on_a_leaf_is_the_running_mean_for_any_blocks_even_of_one_row():
    x = np.random.default_rng(1).normal(2.0, 3.0, size=700)
    batch = mixfold.optimize(x, GaussianEstimator(), progress=False)
    online = OnlineEM(GaussianEstimator(), step_exponent=1.0, init_rows=1)
    cuts = [0, 0, 1, 2, 2, 300, 301, 699, 700, 700]
    for begin, end in zip(cuts, cuts[1:]):
        online.partial_fit(x[begin:end])
    assert online.n_rows_seen == 700 and online.n_steps == 6  # empty blocks take no step
    np.testing.assert_allclose([online.model.mu, online.model.sigma2],
                               [batch.mu, batch.sigma2], rtol=1e-12)


def test_single_rows_and_larger_blocks_give_nearly_the_same_fit():
    x = gaussian_mixture_rows(3000, seed=4)
    by_row = OnlineEM(diag_estimator(), init_rows=200)
    for row in x:
        by_row.partial_fit(row[None, :])
    by_block = OnlineEM(diag_estimator(), init_rows=200).fit_blocks(RowBlocks.from_array(x, 50))
    assert by_row.n_rows_seen == by_block.n_rows_seen == 3000
    held_out = gaussian_mixture_rows(5000, seed=5)
    assert abs(by_row.score(held_out) - by_block.score(held_out)) < 5e-3


def test_the_model_is_seeded_from_the_first_rows_and_usable_between_blocks():
    x = gaussian_mixture_rows(2000, seed=2)
    online = OnlineEM(diag_estimator(), init_rows=600)
    online.partial_fit(x[:400]).partial_fit(np.zeros((0, 2)))
    assert online.model is None and online.n_steps == 0
    with pytest.raises(ValueError, match="600 rows seed it \\(400 so far"):
        online.score(x)
    online.partial_fit(x[400:700])
    first = online.model
    assert online.n_steps == 1 and online.n_rows_seen == 700
    online.partial_fit(x[700:])
    assert online.model is not first and online.n_steps == 2
    assert np.isfinite(online.score(x))
    assert OnlineEM(diag_estimator()).partial_fit(x[:10]).flush().n_rows_seen == 10


def test_vocabularies_come_from_init_the_estimator_or_the_first_rows():
    rows = [{"age": 20.0 + i % 7, "plan": "free" if i % 3 else "pro"} for i in range(300)]
    late = [{"age": 30.0, "plan": "team"}]
    est = RecordEstimator({"age": GaussianEstimator(), "plan": CategoricalEstimator()})
    learnt = OnlineEM(est, init_rows=100).partial_fit(rows)
    assert learnt.model.fields["plan"].levels == ("free", "pro")
    with pytest.raises(DataError, match="row 300, field \\['plan'\\]: level 'team' is not"):
        learnt.partial_fit(late)
    fixed = RecordEstimator({"age": GaussianEstimator(),
                             "plan": CategoricalEstimator(["free", "pro", "team"], 0.5)})
    given = OnlineEM(fixed, init_rows=100).partial_fit(rows).partial_fit(late)
    assert given.model.fields["plan"].prob("team") > 0
    init = RecordDistribution({"age": GaussianDistribution(25.0, 4.0),
                               "plan": CategoricalDistribution({"free": 0.5, "team": 0.4,
                                                                "pro": 0.1})})
    started = OnlineEM(est, init=init)
    assert started.model is init
    started.partial_fit(rows[:5])  # with init, the first block takes a step at once
    assert started.n_steps == 1 and started.model.fields["plan"].levels == ("free", "team", "pro")


def test_table_blocks_are_read_as_the_estimator_reads_rows():
    frame = pd.DataFrame({"age": np.linspace(20, 60, 200), "plan": ["free", "pro"] * 100})
    est = RecordEstimator({"age": GaussianEstimator(), "plan": CategoricalEstimator()})
    online = OnlineEM(est, init_rows=50, step_exponent=1.0)
    online.partial_fit(frame[:100]).partial_fit(pa.Table.from_pandas(frame[100:]))
    assert online.n_rows_seen == 200
    np.testing.assert_allclose(online.model.fields["age"].mu, 40.0, rtol=1e-12)
    gauss = OnlineEM(GaussianEstimator(), init_rows=1).partial_fit(frame[["age"]])
    np.testing.assert_allclose(gauss.model.mu, 40.0, rtol=1e-12)


def test_step_sizes():
    assert step_size(0, 1, 0.7, 1.0) == 1.0
    np.testing.assert_allclose(step_size(90, 10, 1.0, 1.0), 0.1)  # 10 new rows of 100
    # one block of m1 + m2 rows steps as far as two blocks of m1 and m2 rows
    a, b = step_size(40, 7, 0.8, 3.0), step_size(47, 5, 0.8, 3.0)
    np.testing.assert_allclose(step_size(40, 12, 0.8, 3.0), 1 - (1 - a) * (1 - b), rtol=1e-12)
    assert 0 < step_size(10_000, 1, 0.6, 1.0) < step_size(100, 1, 0.6, 1.0) < 1


def test_bad_options_are_named():
    with pytest.raises(ValueError,
                       match=r"step_exponent must be a finite number in \(0.5, 1\], got 0.5"):
        OnlineEM(GaussianEstimator(), step_exponent=0.5)
    with pytest.raises(ValueError, match="step_offset must be a finite number >= 1, got 0"):
        OnlineEM(GaussianEstimator(), step_offset=0)
    with pytest.raises(ValueError, match="init_rows must be an integer >= 1"):
        OnlineEM(GaussianEstimator(), init_rows=0)
    with pytest.raises(TypeError, match="estimator must be a mixfold Estimator"):
        OnlineEM(GaussianDistribution(0.0, 1.0))
    with pytest.raises(ValueError, match="epochs must be an integer >= 1"):
        OnlineEM(GaussianEstimator()).fit_blocks(RowBlocks.from_array(np.ones(3), 2), epochs=0)
