"""The accumulator contract every backend relies on: a commutative monoid with a flat payload."""

import numpy as np
import pytest

import mixfold
from mixfold import (
    CategoricalDistribution,
    CategoricalEstimator,
    CompositeDistribution,
    CompositeEstimator,
    GaussianDistribution,
    GaussianEstimator,
    MixtureDistribution,
    MixtureEstimator,
    RecordDistribution,
    RecordEstimator,
)
from mixfold.families import InitRandom


def model_and_estimator():
    rec = lambda m, p: RecordDistribution({  # noqa: E731
        "x": GaussianDistribution(m, 1.0), "c": CategoricalDistribution({"u": p, "v": 1 - p})})
    model = MixtureDistribution([rec(-1.0, 0.8), rec(2.0, 0.3)], [0.4, 0.6])
    est = MixtureEstimator([RecordEstimator({"x": GaussianEstimator(),
                                             "c": CategoricalEstimator(levels=["u", "v"])})] * 2)
    return model, est


def folded(est, model, enc, w):
    acc = est.accumulator_factory().make()
    acc.seq_update(enc, w, model)
    return acc


@pytest.fixture
def parts():
    model, est = model_and_estimator()
    rows = model.sampler(0).sample(900)
    enc = model.encoder().encode(rows)
    w = np.random.default_rng(1).uniform(0, 2, size=900)
    pieces = [(enc.rows(a, b), w[a:b]) for a, b in [(0, 200), (200, 650), (650, 900)]]
    return model, est, enc, w, pieces


def test_combine_is_associative_and_commutative(parts):
    model, est, enc, w, pieces = parts
    a, b, c = (folded(est, model, e, ww) for e, ww in pieces)
    whole = folded(est, model, enc, w).to_array()
    left = folded(est, model, *pieces[0]).combine(b).combine(c).to_array()
    right = folded(est, model, *pieces[2]).combine(folded(est, model, *pieces[1])
                                                    .combine(a)).to_array()
    np.testing.assert_allclose(left, whole, rtol=1e-12)
    np.testing.assert_allclose(right, whole, rtol=1e-12)


def test_payload_round_trips_exactly_and_has_fixed_size(parts):
    model, est, enc, w, pieces = parts
    acc = folded(est, model, enc, w)
    flat = acc.to_array()
    assert flat.dtype == np.float64 and flat.ndim == 1
    copy = est.accumulator_factory().make().from_array(flat)
    np.testing.assert_array_equal(copy.to_array(), flat)
    small = folded(est, model, *pieces[0])
    assert small.payload_size() == acc.payload_size() == flat.size
    # weights (2) + per component: gaussian sums about a reference (4) + categorical counts (2)
    assert flat.size == 2 + 2 * (4 + 2)
    with pytest.raises(ValueError, match="flat array"):
        copy.from_array(flat[:-1])


def test_value_round_trip(parts):
    model, est, enc, w, _ = parts
    acc = folded(est, model, enc, w)
    other = est.accumulator_factory().make().from_value(acc.value())
    np.testing.assert_array_equal(other.to_array(), acc.to_array())


def test_keys_tie_parameters_across_the_tree():
    rng = np.random.default_rng(0)
    rows = list(zip(rng.normal(0, 1, 500), rng.normal(10, 3, 500)))
    tied = CompositeEstimator([GaussianEstimator(keys="g"), GaussianEstimator(keys="g")])
    fit = mixfold.optimize(rows, tied, progress=False)
    assert fit.factors[0] == fit.factors[1]
    pooled = np.concatenate([[r[0] for r in rows], [r[1] for r in rows]])
    assert fit.factors[0].mu == pytest.approx(pooled.mean(), rel=1e-12)


def test_keys_tie_whole_subtrees():
    truth = CompositeDistribution([
        MixtureDistribution([GaussianDistribution(-3, 1), GaussianDistribution(3, 1)], [0.5, 0.5]),
        MixtureDistribution([GaussianDistribution(-3, 1), GaussianDistribution(3, 1)], [0.5, 0.5])])
    rows = truth.sampler(4).sample(2000)
    mix = MixtureEstimator([GaussianEstimator()] * 2, keys="shared-mixture")
    fit = mixfold.optimize(rows, CompositeEstimator([mix, mix]), progress=False, seed=2)
    assert fit.factors[0] == fit.factors[1]


def test_tied_nodes_of_different_shapes_are_refused():
    est = CompositeEstimator([GaussianEstimator(keys="k"), CategoricalEstimator(keys="k")])
    with pytest.raises(ValueError, match="different structures"):
        mixfold.optimize([(0.0, "a"), (1.0, "b")], est, progress=False)


def test_init_randomness_depends_on_rows_not_chunks():
    r = InitRandom(42).child("mixture").child(3)
    enc = GaussianDistribution(0, 1).encoder().encode(np.zeros(1000))
    whole = r.row_uniform(enc, 4)
    pieces = np.concatenate([r.row_uniform(enc.rows(a, min(a + 37, 1000)), 4)
                             for a in range(0, 1000, 37)])
    np.testing.assert_array_equal(whole, pieces)
    assert (whole >= 0).all() and (whole < 1).all()
    assert abs(whole.mean() - 0.5) < 0.02
    assert not np.array_equal(whole, InitRandom(43).child("mixture").child(3).row_uniform(enc, 4))
    assert not np.array_equal(whole, r.child(0).row_uniform(enc, 4))
