"""compute/encoded.py: encoded rows keep their global start, seeded per-row randomness does not
depend on the chunking (and is uniform, by a KS test), row weights are checked with one clear
error naming the row."""

import numpy as np
import pytest
from scipy import stats

from mixfold.compute.encoded import ArrayEncoded, InitRandom, as_weights
from mixfold.errors import DataError, DataTypeError


def test_array_encoded_slices_keep_the_global_start():
    values = np.arange(20.0).reshape(10, 2)
    enc = ArrayEncoded(values, start=100)
    part = enc.rows(3, 7)
    assert (part.n_rows, part.start, len(part)) == (4, 103, 4)
    assert np.shares_memory(part.values, values)  # a view, not a copy
    assert part.rows(1, 2).start == 104 and part.rows(1, 2).values.tolist() == [[8.0, 9.0]]
    taken = enc.take(np.array([1, 4]))
    assert taken.start == 0 and taken.values.tolist() == [[2.0, 3.0], [8.0, 9.0]]
    assert not np.shares_memory(taken.values, values)
    assert enc.nbytes == values.nbytes and enc.node_sizes() == [10]
    assert enc.with_starts(iter([7])).start == 7
    joined = ArrayEncoded.concat([enc.rows(0, 3), enc.rows(3, 10)])
    assert joined.start == 100 and np.array_equal(joined.values, values)
    empty = enc.rows(5, 5)
    assert empty.n_rows == 0 and empty.start == 105


def test_row_uniforms_do_not_depend_on_the_chunking():
    r = InitRandom(2024).child("weights").child(3)
    enc = ArrayEncoded(np.zeros(1000), start=5_000)
    whole = r.row_uniform(enc, 3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        cuts = np.unique(np.concatenate([[0, 1000], rng.integers(0, 1000, 6)]))
        pieces = [r.row_uniform(enc.rows(a, b), 3) for a, b in zip(cuts, cuts[1:])]
        assert np.array_equal(np.concatenate(pieces), whole)
    # a shard that starts where another ends draws the rows that follow, not the same ones
    shifted = r.row_uniform(ArrayEncoded(np.zeros(1000), start=5_001), 3)
    assert np.array_equal(shifted[:-1], whole[1:])


def test_row_uniforms_are_uniform_and_streams_independent():
    enc = ArrayEncoded(np.zeros(20_000))
    root = InitRandom(7)
    a = root.child("a").row_uniform(enc, 2)
    b = root.child("b").row_uniform(enc, 1)[:, 0]
    c = InitRandom(8).child("a").row_uniform(enc, 2)
    assert a.min() >= 0.0 and a.max() < 1.0
    for u in (a[:, 0], a[:, 1], b, c[:, 0]):
        assert stats.kstest(u, "uniform").pvalue > 1e-3
    # siblings, columns and seeds are distinct streams: correlations within sampling noise
    for u, v in ((a[:, 0], b), (a[:, 0], a[:, 1]), (a[:, 0], c[:, 0])):
        assert abs(np.corrcoef(u, v)[0, 1]) < 4 / np.sqrt(len(u))
    assert np.array_equal(root.child("a").row_uniform(enc, 2), a)  # the same child again


def test_generator_is_seeded_by_seed_and_node():
    r = InitRandom(11).child("init")
    assert np.array_equal(r.generator().random(5), r.generator().random(5))
    assert not np.array_equal(r.generator().random(5), InitRandom(12).child("init")
                              .generator().random(5))
    assert not np.array_equal(r.generator().random(5), InitRandom(11).generator().random(5))


def test_weights_default_to_ones_and_keep_their_values():
    assert as_weights(None, 3).tolist() == [1.0, 1.0, 1.0]
    assert as_weights(None, 0).shape == (0,)
    got = as_weights([1, 0, 2.5], 3)
    assert got.dtype == np.float64 and got.tolist() == [1.0, 0.0, 2.5]
    big = np.array([1e300, 1e300])
    assert as_weights(big, 2).tolist() == big.tolist()


@pytest.mark.parametrize("weights, row, kind", [
    ([1.0, -0.5, 1.0], 1, DataError),
    ([1.0, 1.0, np.nan], 2, DataError),
    ([np.inf, 1.0, 1.0], 0, DataError),
    ([1.0, "2", 1.0], 1, DataTypeError),
    ([1.0, None, 1.0], 1, DataTypeError),
    ([True, False, True], 0, DataTypeError),
    ([1.0, 1.0, 1j], 2, DataTypeError),
    ([1.0, [1.0, 2.0], 1.0], 1, DataTypeError),
])
def test_bad_weights_name_the_row(weights, row, kind):
    with pytest.raises(kind) as err:
        as_weights(weights, 3)
    assert err.value.row == row and f"row {row}" in str(err.value)
    assert "\n" not in str(err.value)


def test_weights_of_the_wrong_shape_or_summing_past_float64_raise():
    with pytest.raises(DataError, match=r"shape \(3,\), got \(2,\)"):
        as_weights([1.0, 2.0], 3)
    with pytest.raises(DataError, match="shape"):
        as_weights(np.ones((3, 1)), 3)
    with pytest.raises(DataError, match="largest float64"):
        as_weights(np.array([1.7e308, 1.7e308]), 2)
