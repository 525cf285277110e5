"""compute/payload.py: shard payloads reduced by the tree give the one-fold statistics (float64:
to rounding; ``dd``: the same bits however many shards), of a fixed length, NaN for a ruled-out
row, and their task arguments shared per band."""

from fractions import Fraction

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from mixfold import CategoricalDistribution, GaussianDistribution, MixtureDistribution
from mixfold.compute.fold import fold_rows
from mixfold.compute.payload import (HEADER, add_payloads, fold_shard, payload_combiner,
                                     run_task, score_shard, shard_task_args, unpack_fold)
from mixfold.compute.tree import shard_bounds, tree_reduce
from mixfold.precision import DOUBLE_DOUBLE, FLOAT64


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(1)
    model = MixtureDistribution([GaussianDistribution(-3e7, 1.0),
                                 GaussianDistribution(-3e7 + 2, 4.0)], [0.4, 0.6])
    x = -3e7 + rng.normal(1.0, 2.0, 999)
    w = rng.uniform(0.0, 3.0, 999)
    return model, model.encoder().encode(list(x)), x, w


def _reduced(model, enc, w, n_shards, compensated, fanout=2):
    precision = DOUBLE_DOUBLE if compensated else FLOAT64
    est = model.estimator()
    payloads = [fold_shard(enc.rows(a, b), w[a:b], est, model, precision, 128, compensated)
                for a, b in shard_bounds(enc.n_rows, n_shards)]
    assert len({p.size for p in payloads}) == 1  # fixed by the estimator, not by the rows
    return unpack_fold(tree_reduce(payloads, payload_combiner(compensated), fanout), est,
                       compensated)


@pytest.mark.parametrize("n_shards", [1, 2, 7, 999])
def test_reduced_float64_payloads_equal_brute_force(problem, n_shards):
    model, enc, x, w = problem
    got = _reduced(model, enc, w, n_shards, compensated=False)
    s = np.stack([norm.logpdf(x, c.mu, np.sqrt(c.sigma2)) for c in model.components], 1)
    s += np.log(model.weights)
    assert got.n_rows == 999 and got.weight == pytest.approx(w.sum(), rel=1e-14)
    assert got.log_density == pytest.approx(float(w @ logsumexp(s, axis=1)), rel=1e-12)
    assert got.mean_log_density == pytest.approx(got.log_density / w.sum(), rel=1e-15)
    one = model.estimator().accumulator_factory().make()
    fold_rows(one, enc, w, model, FLOAT64, 10_000)
    for a, b in zip(got.stats.arrays(), one.arrays()):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.abs(b).max())


def test_dd_payloads_give_the_same_bits_for_any_shard_count(problem):
    model, enc, _, w = problem
    results = [_reduced(model, enc, w, n, compensated=True, fanout=f)
               for n, f in [(1, 2), (3, 2), (16, 3), (64, 8)]]
    first = results[0]
    for r in results[1:]:
        assert (r.n_rows, r.weight, r.log_density) == (first.n_rows, first.weight,
                                                       first.log_density)
        for a, b in zip(r.stats.arrays(), first.stats.arrays()):
            np.testing.assert_array_equal(a, b)


def test_compensated_payload_is_hi_then_lo(problem):
    model, enc, _, w = problem
    est = model.estimator()
    plain = fold_shard(enc, w, est, model, FLOAT64, 128)
    dd = fold_shard(enc, w, est, model, DOUBLE_DOUBLE, 128, compensated=True)
    assert dd.size == 2 * plain.size
    assert dd[0] == 999 and dd[plain.size] == 0.0  # the row count has no low part
    exact = sum(Fraction(float(v)) for v in w)
    assert Fraction(float(dd[1])) + Fraction(float(dd[plain.size + 1])) - exact \
        <= exact * Fraction(2) ** -100


def test_score_shard_is_the_header_alone(problem):
    model, enc, x, w = problem
    got = score_shard(enc, w, model, FLOAT64, 100)
    assert got.size == HEADER and got[0] == 999 and got[1] == pytest.approx(w.sum(), rel=1e-15)
    assert got[2] == pytest.approx(fold_rows(None, enc, w, model, FLOAT64, 999), rel=1e-13)
    dd = score_shard(enc, w, model, DOUBLE_DOUBLE, 100, compensated=True)
    assert dd.size == 2 * HEADER and dd[2] == pytest.approx(got[2], rel=1e-13)
    assert np.array_equal(run_task("score", enc, w, (model, FLOAT64, 100, False)), got)


def test_a_ruled_out_row_makes_the_shard_log_density_nan():
    model = CategoricalDistribution([1.0, 0.0])
    enc = model.encoder().encode([0, 0, 1])
    est = model.estimator()
    got = fold_shard(enc, np.ones(3), est, model, FLOAT64, 2)
    assert got[0] == 3 and got[1] == 3.0 and np.isnan(got[2])
    assert np.isnan(score_shard(enc, np.ones(3), model, FLOAT64, 2)[2])


def test_add_payloads_leaves_its_inputs():
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    assert add_payloads(a, b, a).tolist() == [5.0, 8.0] and a.tolist() == [1.0, 2.0]


def test_task_args_are_shared_per_band():
    est, model = object(), object()
    args = shard_task_args("fold", ["float64", "float32", "float64"], (est, model, 64), False)
    assert args[0] is args[2] and args[0] == (est, model, "float64", 64, False)
    assert args[1] == (est, model, "float32", 64, False)
    score = shard_task_args("score", ["dd"], (model, 8), True)
    assert score == [(model, "dd", 8, True)]
    with pytest.raises(ValueError, match="unknown task 'sum'"):
        shard_task_args("sum", ["float64"], (), False)
    with pytest.raises(ValueError, match="unknown task 'sum'"):
        run_task("sum", None, None, ())
