"""families/units.py: the K-unit machinery a mixture and the hidden-state models share, against
scipy's log-sum-exp and softmax, per-unit loops written here, and itself over ranges (any range of
units, any block of rows, gets the bits of the whole)."""

import numpy as np
import pytest
from scipy.special import logsumexp, softmax
from scipy.stats import norm, poisson

from mixfold import (GaussianDistribution, GaussianEstimator, PoissonDistribution,
                     PoissonEstimator)
from mixfold.compute.encoded import InitRandom
from mixfold.families.units import (STACK_BLOCK_ROWS, SharedEncoder, UnitAccumulators, Units,
                                    band_matrix, band_posteriors, seeded_posteriors,
                                    shared_encoder)
from mixfold.precision import DOUBLE_DOUBLE, FLOAT64, band_ops

GAUSSIANS = [GaussianDistribution(m, s) for m, s in [(-2.0, 1.0), (0.5, 0.25), (3.0, 2.0)]]
MIXED = [GaussianDistribution(0.0, 1.0), PoissonDistribution(2.0), GaussianDistribution(3.0, 1.0)]


def reference_scores(children, x):
    return np.stack([norm.logpdf(x, c.mu, np.sqrt(c.sigma2)) if isinstance(c, GaussianDistribution)
                     else poisson.logpmf(x, c.lam) for c in children], axis=1)


@pytest.mark.parametrize("children", [GAUSSIANS, MIXED], ids=["stacked", "shared encoding"])
@pytest.mark.parametrize("row_normalised", [True, False])
def test_posteriors_and_log_density_equal_scipys(children, row_normalised):
    units = Units(children, row_normalised)
    assert (units.stack is not None) == (children is GAUSSIANS)
    assert (units.slots is None) == (children is GAUSSIANS)
    x = np.random.default_rng(0).integers(0, 6, 500).astype(float)
    enc = units.encoder.encode(x)
    offsets, w = np.log([0.2, 0.5, 0.3]), np.random.default_rng(1).uniform(0, 2, len(x))
    joint = reference_scores(children, x) + offsets
    np.testing.assert_allclose(units.scores(enc, FLOAT64), joint - offsets, rtol=1e-12)
    resp, lse = units.posteriors(enc, FLOAT64, offsets, w)
    np.testing.assert_allclose(lse, logsumexp(joint, axis=1), rtol=1e-13)
    np.testing.assert_allclose(resp, softmax(joint, axis=1) * w[:, None], rtol=1e-12)
    assert np.array_equal(units.log_density(enc, FLOAT64, offsets), lse)


def test_any_range_of_units_and_any_block_of_rows_gets_the_bits_of_the_whole():
    units = Units(GAUSSIANS, row_normalised=True)
    n = STACK_BLOCK_ROWS + 1000  # two blocks of rows
    x = np.random.default_rng(2).normal(0.0, 3.0, n)
    enc = units.encoder.encode(x)
    offsets, w = np.log([0.2, 0.5, 0.3]), np.ones(n)
    whole = np.empty((n, 3), order="F")
    units.score_columns(enc, FLOAT64, 0, 3, whole, offsets=offsets)
    apart = np.empty((n, 3), order="F")
    units.score_columns(enc, FLOAT64, 0, 1, apart, offsets=offsets)
    units.score_columns(enc, FLOAT64, 1, 3, apart, offsets=offsets)
    assert np.array_equal(whole, apart)
    resp, lse = units.posteriors(enc, FLOAT64, offsets, w)
    log_sum_exp = units.log_sum_exp(whole)
    assert np.array_equal(units.normalise(whole, w), lse)  # the gathered columns, in place
    assert np.array_equal(whole, resp) and np.array_equal(log_sum_exp, lse)


def test_scores_through_a_callback_come_from_it():
    units = Units(MIXED)
    enc = units.encoder.encode([0.0, 1.0, 4.0])
    seen = []

    def score(children, precision):
        seen.extend((c.index, c.dist) for c in children)
        return [np.full(c.rows.n_rows, float(c.index)) for c in children]

    out = np.zeros((3, 3))
    units.score_columns(enc, FLOAT64, 1, 3, out, score=score, offsets=np.array([0, 10, 20.0]))
    assert seen == [(1, MIXED[1]), (2, MIXED[2])]
    assert out.tolist() == [[0.0, 11.0, 22.0]] * 3


def test_units_hand_their_columns_down_as_each_accumulator_would_add_them():
    rows = np.random.default_rng(3).normal(0.0, 2.0, 300)
    est = GaussianEstimator()
    accs = [est.accumulator_factory().make() for _ in range(3)]
    handed = UnitAccumulators(accs, None)
    assert handed.stack_class is type(accs[0]) and handed.stack_update is not None
    units = Units(GAUSSIANS, row_normalised=True)
    enc = units.encoder.encode(rows)
    resp = np.random.default_rng(4).dirichlet(np.ones(3), len(rows))
    handed.add(enc, resp, units, FLOAT64, 0, 2)
    handed.add(enc, resp, units, FLOAT64, 2, 3)
    for k, acc in enumerate(accs):  # the stacked update against each unit's own
        ref = est.accumulator_factory().make()
        ref.seq_update(enc, np.ascontiguousarray(resp[:, k]), GAUSSIANS[k])
        ref.align_references(acc)
        np.testing.assert_allclose(acc.to_array(), ref.to_array(), rtol=1e-12, atol=1e-12)


def test_units_of_different_families_read_their_part_of_the_shared_encoding():
    encoder = shared_encoder([c.encoder() for c in MIXED])
    assert isinstance(encoder, SharedEncoder) and encoder.slot == (0, 1, 0)
    x = np.array([0.0, 1.0, 3.0, 5.0])
    units = Units(MIXED)
    enc = units.encoder.encode(x)
    ests = [GaussianEstimator(), PoissonEstimator(), GaussianEstimator()]
    accs = [e.accumulator_factory().make() for e in ests]
    handed = UnitAccumulators(accs, units.slots)
    assert handed.stack_class is None and handed.stack_update is None
    resp = np.full((4, 3), 1.0 / 3)
    handed.add(enc, resp, units, FLOAT64)
    ref = PoissonEstimator().accumulator_factory().make()
    ref.seq_update(PoissonDistribution(2.0).encoder().encode(x), resp[:, 1], MIXED[1])
    assert np.array_equal(accs[1].to_array(), ref.to_array())


def test_draw_puts_each_units_values_back_in_order():
    units = Units([GaussianDistribution(-100.0, 1e-4), GaussianDistribution(100.0, 1e-4)])
    which = np.array([1, 0, 0, 1, 1])
    drawn = units.draw(which, np.random.default_rng(0))
    assert np.sign(drawn).tolist() == [1, -1, -1, 1, 1]


def test_band_posteriors_equal_softmax_and_leave_absent_units_out():
    ops = band_ops(DOUBLE_DOUBLE)
    rng = np.random.default_rng(5)
    scores = rng.normal(-3.0, 2.0, (40, 3))
    resp, lse = band_posteriors([ops.array(scores[:, 0]), None, ops.array(scores[:, 2])], ops)
    assert resp[1] is None
    matrix = band_matrix(resp, ops, 40, 0.0)
    want = softmax(scores[:, [0, 2]], axis=1)
    np.testing.assert_allclose(matrix[:, [0, 2]], want, rtol=1e-14)
    assert (matrix[:, 1] == 0.0).all()
    np.testing.assert_allclose(ops.to_float64(lse), logsumexp(scores[:, [0, 2]], axis=1),
                               rtol=1e-14)


def test_seeded_posteriors_are_distributions_that_do_not_depend_on_the_chunking():
    enc = GaussianDistribution(0, 1).encoder().encode(np.zeros(100))
    rng = InitRandom(7)
    whole = seeded_posteriors(enc, 4, rng)
    np.testing.assert_allclose(whole.sum(axis=1), 1.0, rtol=1e-15)
    parts = np.concatenate([seeded_posteriors(enc.rows(0, 30), 4, rng),
                            seeded_posteriors(enc.rows(30, 100), 4, rng)])
    assert np.array_equal(whole, parts)
