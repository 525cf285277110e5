import json

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import mixfold
from mixfold.precision import resolve_precision
from mixfold import (CategoricalDistribution, CategoricalEstimator, CompositeDistribution,
                     CompositeEstimator, DataError, DataTypeError, Distribution,
                     GaussianDistribution, GaussianEstimator, MixtureDistribution,
                     MixtureEstimator, ParameterError, RecordEstimator)
from mixfold.families._protocol import InitRandom
from mixfold.families.sequence import (SequenceDistribution, SequenceEncoded, SequenceEstimator,
                                       flatten_rows)

PAGES = {"home": 0.5, "search": 0.3, "cart": 0.2}
LENGTHS = {0: 0.1, 1: 0.2, 2: 0.3, 4: 0.4}


def page_model():
    return SequenceDistribution(CategoricalDistribution(PAGES), CategoricalDistribution(LENGTHS))


def gaussian_mixture_items():
    items = MixtureDistribution([GaussianDistribution(-2.0, 0.5), GaussianDistribution(3.0, 1.5)],
                                [0.4, 0.6])
    return SequenceDistribution(items, CategoricalDistribution({0: 0.2, 1: 0.3, 3: 0.5}))


def assert_same_model(a, b, rtol):
    """Walk two to_dict() trees; floats equal to ``rtol``, everything else exactly."""
    def walk(x, y, where):
        if isinstance(x, dict):
            assert isinstance(y, dict) and x.keys() == y.keys(), where
            for k in x:
                walk(x[k], y[k], f"{where}.{k}")
        elif isinstance(x, list):
            assert isinstance(y, list) and len(x) == len(y), where
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{where}[{i}]")
        elif isinstance(x, float):
            assert y == pytest.approx(x, rel=rtol, abs=rtol), where
        else:
            assert x == y, where
    walk(a.to_dict(), b.to_dict(), "model")


# ---------------------------------------------------------------------------------------------
# Scoring


def test_log_density_matches_per_row_brute_force(rng):
    d = page_model()
    rows = [list(rng.choice(list(PAGES), size=rng.choice(list(LENGTHS)))) for _ in range(200)]
    expected = [sum(np.log(PAGES[p]) for p in r) + np.log(LENGTHS[len(r)]) for r in rows]
    got = d.seq_log_density(d.encoder().encode(rows))
    np.testing.assert_allclose(got, expected, rtol=1e-13)
    assert any(len(r) == 0 for r in rows)
    assert d.log_density([]) == pytest.approx(np.log(0.1), rel=1e-15)


def test_mixture_items_score_and_update_per_row(rng):
    d = gaussian_mixture_items()
    rows = [list(rng.normal(0, 3, size=rng.choice([0, 1, 3]))) for _ in range(150)]

    def item_ll(x):
        return logsumexp([np.log(0.4) + stats.norm(-2, np.sqrt(0.5)).logpdf(x),
                          np.log(0.6) + stats.norm(3, np.sqrt(1.5)).logpdf(x)])

    expected = [sum(item_ll(x) for x in r) + np.log({0: 0.2, 1: 0.3, 3: 0.5}[len(r)])
                for r in rows]
    enc = d.encoder().encode(rows)
    np.testing.assert_allclose(d.seq_log_density(enc), expected, rtol=1e-12)
    # a mixture item reports its per-item log-densities, so the update returns row totals
    acc = d.estimator().accumulator_factory().make()
    np.testing.assert_allclose(acc.seq_update(enc, np.ones(len(rows)), d), expected, rtol=1e-12)


def test_leaf_items_update_returns_none_and_precision_is_passed_down(rng):
    d = SequenceDistribution(GaussianDistribution(1.0, 2.0))
    rows = [rng.normal(size=k) for k in rng.integers(0, 6, size=100)]
    enc = d.encoder().encode(rows)
    acc = d.estimator().accumulator_factory().make()
    assert acc.seq_update(enc, np.ones(100), d) is None
    expected = [stats.norm(1.0, np.sqrt(2.0)).logpdf(r).sum() for r in rows]
    np.testing.assert_allclose(d.seq_log_density(enc), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d.seq_log_density(
        enc, resolve_precision("float32")), expected, rtol=1e-5, atol=1e-5)


def test_empty_sequences_score_the_length_law_only():
    d = page_model()
    enc = d.encoder().encode([[], [], ["cart"], []])
    np.testing.assert_allclose(d.seq_log_density(enc),
                               [np.log(0.1)] * 2 + [np.log(0.2 * 0.2), np.log(0.1)], rtol=1e-14)
    all_empty = d.encoder().encode([[], []])
    assert all_empty.items.n_rows == 0
    np.testing.assert_allclose(d.seq_log_density(all_empty), [np.log(0.1)] * 2)
    assert SequenceDistribution(GaussianDistribution(0, 1)).log_density([]) == 0.0


# ---------------------------------------------------------------------------------------------
# Encoding


def test_rows_and_take_slice_ragged_rows_consistently(rng):
    d = gaussian_mixture_items()
    rows = d.sampler(3).sample(40)
    enc = d.encoder().encode(rows)
    full = d.seq_log_density(enc)
    part = enc.rows(5, 17)
    assert part.start == 5 and part.offsets[0] == 0
    assert part.items.start == enc.offsets[5]  # the global flat index of the first item
    assert part.rows(2, 4).items.start == enc.offsets[7]
    np.testing.assert_allclose(d.seq_log_density(part), full[5:17], rtol=1e-15)
    idx = np.array([0, 3, 4, 11, 39])
    taken = enc.take(idx)
    assert taken.start == 0 and taken.n_rows == 5
    assert taken.counts().tolist() == [len(rows[i]) for i in idx]
    np.testing.assert_allclose(d.seq_log_density(taken), full[idx], rtol=1e-15)
    assert enc.take(np.array([], dtype=np.int64)).n_rows == 0
    assert enc.nbytes > 0


def test_array_and_list_inputs_encode_alike():
    d = SequenceDistribution(CompositeDistribution([GaussianDistribution(0, 1),
                                                    GaussianDistribution(1, 2)]))
    arr = np.arange(24, dtype=np.float64).reshape(4, 3, 2)  # 4 rows of 3 vectors
    as_lists = [[tuple(v) for v in r] for r in arr.tolist()]
    a, b = d.encoder().encode(arr), d.encoder().encode(as_lists)
    assert a.offsets.tolist() == b.offsets.tolist() == [0, 3, 6, 9, 12]
    np.testing.assert_array_equal(d.seq_log_density(a), d.seq_log_density(b))
    flat, offsets = flatten_rows(r for r in [[1, 2], (3,), np.array([4.0])])
    assert flat == [1, 2, 3, 4.0] and offsets.tolist() == [0, 2, 3, 4]


def test_sharded_encoding_merges_rebases_and_concatenates(rng):
    rows = page_model().sampler(9).sample(30)
    shard_a, shard_b = rows[:12], [[], ["checkout"]] + rows[12:]  # a level only shard b has
    whole = rows[:12] + shard_b
    est = SequenceEstimator(CategoricalEstimator(), CategoricalEstimator())
    fitted = est.encoder().fit(shard_a).merge(est.encoder().fit(shard_b))
    assert fitted == est.encoder().fit(whole)
    assert est.encoder().fit([[], []]).merge(fitted) == fitted  # no items: nothing learnt
    enc_a, enc_b, enc = (fitted.encode(r) for r in (shard_a, shard_b, whole))
    assert enc_a.node_sizes() == [12, int(enc_a.offsets[-1]), 12]
    rebased = enc_b.with_starts(iter(enc_a.node_sizes()))
    expected = enc.rows(12, len(whole))
    assert (rebased.start, rebased.items.start, rebased.lengths.start) == \
        (expected.start, expected.items.start, expected.lengths.start)
    joined = type(enc_a).concat([enc_a, rebased])
    assert joined.node_sizes() == enc.node_sizes()
    np.testing.assert_array_equal(joined.offsets, enc.offsets)
    np.testing.assert_array_equal(joined.items.values, enc.items.values)
    with pytest.raises(ValueError):
        fitted.merge(SequenceEstimator(CategoricalEstimator()).encoder())


def test_scalar_or_string_row_is_a_type_error_with_its_row():
    est = SequenceEstimator(GaussianEstimator())
    for bad, row in [([[1.0], 2.0, [3.0]], 1), ([[1.0], [2.0], "abc"], 2), ([None], 0)]:
        with pytest.raises(DataTypeError) as err:
            mixfold.optimize(bad, est, progress=False)
        assert err.value.row == row


def test_bad_item_names_row_and_position():
    est = SequenceEstimator(GaussianEstimator())
    with pytest.raises(DataError) as err:
        mixfold.optimize([[1.0, 2.0], [], [0.5, 1.5, np.nan]], est, progress=False)
    assert (err.value.row, err.value.path) == (2, (2,))
    rec = RecordEstimator({"visits": est})
    with pytest.raises(DataError) as err:
        mixfold.optimize([{"visits": [1.0]}, {"visits": [0.0, "x"]}], rec, progress=False)
    assert isinstance(err.value, DataTypeError)
    assert (err.value.row, err.value.path) == (1, ("visits", 1))
    assert "row 1, field ['visits'][1]" in str(err.value)


def test_ragged_vector_items_and_unseen_levels_are_located():
    est = SequenceEstimator(CompositeEstimator([GaussianEstimator(), GaussianEstimator()]))
    with pytest.raises(DataTypeError) as err:
        mixfold.optimize([[(1.0, 2.0)], [(1.0, 2.0), (3.0, 4.0), (5.0,)]], est, progress=False)
    assert (err.value.row, err.value.path) == (1, (2,))
    enc = page_model().encoder()
    with pytest.raises(DataError) as err:
        enc.encode([["home"], ["home", "checkout"]])
    assert (err.value.row, err.value.path) == (1, (1,))
    with pytest.raises(DataError) as err:  # length 3 is not a level of the length law
        enc.encode([["home"], ["home", "home", "cart"]])
    assert err.value.row == 1 and "sequence length" in str(err.value)


# ---------------------------------------------------------------------------------------------
# Fitting


def test_fit_recovers_item_and_length_laws():
    rows = page_model().sampler(0).sample(20_000)
    est = SequenceEstimator(CategoricalEstimator(), CategoricalEstimator())
    fit = mixfold.optimize(rows, est, progress=False)
    assert fit.length.levels == (0, 1, 2, 4)
    np.testing.assert_allclose(fit.length.probs, list(LENGTHS.values()), atol=0.01)
    np.testing.assert_allclose([fit.item.prob(p) for p in PAGES], list(PAGES.values()), atol=0.01)
    # the closed-form MLE: item frequencies over all items
    flat = [p for r in rows for p in r]
    assert fit.item.prob("cart") == pytest.approx(flat.count("cart") / len(flat), rel=1e-12)


def test_fit_with_poisson_length():
    poisson = pytest.importorskip("mixfold.families.poisson")
    truth = SequenceDistribution(GaussianDistribution(2.0, 1.0), poisson.PoissonDistribution(3.0))
    rows = truth.sampler(1).sample(5000)
    est = SequenceEstimator(GaussianEstimator(), poisson.PoissonEstimator())
    fit = mixfold.optimize(rows, est, progress=False)
    assert fit.length.lam == pytest.approx(np.mean([len(r) for r in rows]), rel=1e-12)
    assert fit.item.mu == pytest.approx(2.0, abs=0.05)


def test_fit_mixture_items_recovers_components():
    rows = gaussian_mixture_items().sampler(2).sample(6000)
    est = SequenceEstimator(MixtureEstimator([GaussianEstimator()] * 2), CategoricalEstimator())
    fit = mixfold.optimize(rows, est, seed=1, progress=False)
    order = np.argsort([c.mu for c in fit.item.components])
    np.testing.assert_allclose(fit.item.weights[order], [0.4, 0.6], atol=0.02)
    np.testing.assert_allclose([fit.item.components[i].mu for i in order], [-2.0, 3.0], atol=0.1)
    np.testing.assert_allclose(fit.length.probs, [0.2, 0.3, 0.5], atol=0.02)


def test_all_empty_rows_fit_the_item_default():
    est = SequenceEstimator(GaussianEstimator(), CategoricalEstimator())
    fit = mixfold.optimize([[], [], []], est, progress=False)
    assert fit.length == CategoricalDistribution({0: 1.0})
    assert fit.item == GaussianDistribution(0.0, 1.0)  # the Gaussian's zero-weight default


def test_weighted_rows_equal_repeated_rows(rng):
    rows = page_model().sampler(4).sample(60)
    w = rng.integers(0, 4, size=60)
    est = SequenceEstimator(CategoricalEstimator(), CategoricalEstimator())
    a = mixfold.optimize(rows, est, weights=w, progress=False)
    b = mixfold.optimize([r for r, k in zip(rows, w) for _ in range(k)], est, progress=False)
    assert_same_model(a, b, rtol=1e-13)


@pytest.mark.parametrize("make", [
    lambda: SequenceEstimator(MixtureEstimator([GaussianEstimator()] * 2), CategoricalEstimator()),
    lambda: MixtureEstimator([SequenceEstimator(GaussianEstimator(), CategoricalEstimator())] * 2),
])
def test_chunking_does_not_change_the_fit(make):
    rows = gaussian_mixture_items().sampler(5).sample(700)
    fits = [mixfold.optimize(rows, make(), seed=2, max_iter=8, tol=0.0, chunk_rows=c,
                             progress=False) for c in (7, 10_000)]
    assert fits[0].fit_result.iterations == fits[1].fit_result.iterations == 8
    assert_same_model(fits[0], fits[1], rtol=1e-12)


def test_seeded_initialisation_is_chunk_independent():
    d = gaussian_mixture_items()
    enc = d.encoder().encode(d.sampler(6).sample(50))
    est = d.estimator()
    whole = est.accumulator_factory().make()
    whole.seq_initialize(enc, np.ones(50), InitRandom(9))
    pieces = est.accumulator_factory().make()
    for b in range(0, 50, 7):
        part = est.accumulator_factory().make()
        part.seq_initialize(enc.rows(b, b + 7), np.ones(enc.rows(b, b + 7).n_rows), InitRandom(9))
        pieces.combine(part)
    # a seeded start sums a Gaussian about its rows' mean: the pieces' moved to the whole's
    pieces.align_references(whole)
    np.testing.assert_allclose(pieces.to_array(), whole.to_array(), rtol=1e-12, atol=1e-12)


def test_payload_round_trip_and_combine_of_halves():
    d = gaussian_mixture_items()
    enc = d.encoder().encode(d.sampler(7).sample(300))
    w = np.linspace(0.5, 1.5, 300)
    factory = d.estimator().accumulator_factory()
    one = factory.make()
    one.seq_update(enc, w, d)
    a, b = factory.make(), factory.make()
    a.seq_update(enc.rows(0, 123), w[:123], d)
    b.seq_update(enc.rows(123, 300), w[123:], d)
    np.testing.assert_allclose(a.combine(b).to_array(), one.to_array(), rtol=1e-13)
    flat = one.to_array()
    assert flat.shape == (one.payload_size(),) and flat[0] == pytest.approx(w @ enc.counts())
    back = factory.make().from_array(flat)
    np.testing.assert_array_equal(back.to_array(), flat)
    assert d.estimator().estimate(w.sum(), back.value()) == \
        d.estimator().estimate(w.sum(), one.value())


# ---------------------------------------------------------------------------------------------
# Sampling, serialization, validation


def test_sampled_lengths_and_items_follow_the_laws():
    rows = page_model().sampler(8).sample(20_000)
    assert all(isinstance(r, list) for r in rows)
    lengths = np.array([len(r) for r in rows])
    for k, p in LENGTHS.items():
        assert np.mean(lengths == k) == pytest.approx(p, abs=0.01)
    flat = [x for r in rows for x in r]
    assert flat.count("home") / len(flat) == pytest.approx(0.5, abs=0.01)
    assert page_model().sampler(8).sample(5) == page_model().sampler(8).sample(5)


def test_sampling_without_length_law_needs_a_fixed_length():
    d = SequenceDistribution(GaussianDistribution(0.0, 1.0))
    with pytest.raises(ValueError, match="sample_length"):
        d.sampler(0).sample(3)
    rows = d.sampler(0, sample_length=4).sample(3)
    assert [len(r) for r in rows] == [4, 4, 4]
    assert d.sampler(0, sample_length=0).sample(2) == [[], []]
    with pytest.raises(ValueError, match="sample_length"):
        d.sampler(0, sample_length=-1)


@pytest.mark.parametrize("d", [page_model(), gaussian_mixture_items(),
                               SequenceDistribution(GaussianDistribution(0.1 + 0.2, 1 / 3))])
def test_to_dict_from_dict_is_exact(d):
    back = Distribution.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back == d and back.to_dict() == d.to_dict()
    assert isinstance(back, SequenceDistribution)


def test_parameters_are_validated():
    with pytest.raises(ParameterError):
        SequenceDistribution("not a distribution")
    with pytest.raises(ParameterError):
        SequenceDistribution(GaussianDistribution(0, 1), length=3)
    with pytest.raises(TypeError):
        SequenceEstimator(GaussianDistribution(0, 1))
    assert isinstance(page_model().encoder().encode([["home"]]), SequenceEncoded)
