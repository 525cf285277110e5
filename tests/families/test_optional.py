import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import mixfold
from mixfold.precision import resolve_precision
from mixfold import (CategoricalDistribution, CategoricalEstimator, DataError, DataTypeError,
                     Distribution, GaussianDistribution, GaussianEstimator, MixtureDistribution,
                     MixtureEstimator, ParameterError, RecordEstimator)
from mixfold.families._protocol import InitRandom
from mixfold.families.optional import (MissingMarkers, OptionalDistribution, OptionalEncoded,
                                       OptionalEstimator)
from mixfold.families.sequence import SequenceDistribution, SequenceEstimator


def income_model(p=0.3):
    return OptionalDistribution(GaussianDistribution(50.0, 16.0), p)


def mixture_inner(p=0.25):
    inner = MixtureDistribution([GaussianDistribution(-3.0, 1.0), GaussianDistribution(2.0, 0.5)],
                                [0.5, 0.5])
    return OptionalDistribution(inner, p)


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


def with_gaps(rng, n, p):
    x = rng.normal(50.0, 4.0, size=n).tolist()
    for i in np.flatnonzero(rng.random(n) < p):
        x[i] = None if i % 2 else math.nan
    return x


# ---------------------------------------------------------------------------------------------
# Scoring and encoding


def test_log_density_matches_per_row_brute_force(rng):
    d = income_model()
    rows = with_gaps(rng, 300, 0.3)
    expected = [np.log(0.3) if v is None or v != v else
                np.log(0.7) + stats.norm(50, 4).logpdf(v) for v in rows]
    np.testing.assert_allclose(d.seq_log_density(d.encoder().encode(rows)), expected, rtol=1e-13)
    np.testing.assert_allclose(d.seq_log_density(
        d.encoder().encode(rows), resolve_precision("float32")), expected,
                               rtol=1e-5)


def test_categorical_inner_and_custom_markers():
    d = OptionalDistribution(CategoricalDistribution({"free": 0.8, "pro": 0.2}), 0.1,
                             missing=("", "n/a"))
    enc = d.encoder().encode(["pro", "", "free", "n/a"])
    np.testing.assert_allclose(d.seq_log_density(enc),
                               np.log([0.9 * 0.2, 0.1, 0.9 * 0.8, 0.1]), rtol=1e-14)
    with pytest.raises(DataError) as err:  # None is not a marker here, nor a level
        d.encoder().encode(["pro", "", None])
    assert err.value.row == 2
    back = Distribution.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back == d and back.missing == MissingMarkers(("n/a", ""))


def test_encoding_keeps_present_values_in_row_order_and_slices_without_copies(rng):
    d = mixture_inner()
    rows = d.sampler(3).sample(60)
    enc = d.encoder().encode(rows)
    full = d.seq_log_density(enc)
    assert enc.present.tolist() == [not math.isnan(v) for v in rows]
    part = enc.rows(10, 33)
    assert part.start == 10 and part.inner.start == int(enc.present[:10].sum())
    assert np.shares_memory(part.before, enc.before)
    sub = part.rows(4, 9)
    assert sub.inner.start == int(enc.present[:14].sum())
    np.testing.assert_allclose(d.seq_log_density(part), full[10:33], rtol=1e-15)
    np.testing.assert_allclose(d.seq_log_density(sub), full[14:19], rtol=1e-15)
    idx = np.array([0, 2, 3, 17, 59])
    taken = enc.take(idx)
    assert isinstance(taken, OptionalEncoded) and taken.start == 0
    np.testing.assert_allclose(d.seq_log_density(taken), full[idx], rtol=1e-15)


def test_float_array_and_dataframe_column_encode_like_lists(rng):
    rows = with_gaps(rng, 50, 0.4)
    enc = income_model().encoder()
    a = enc.encode(rows)
    b = enc.encode(np.array([np.nan if v is None else v for v in rows]))
    c = enc.encode(pd.DataFrame({"x": rows})["x"].to_numpy())
    for e in (b, c):
        np.testing.assert_array_equal(e.present, a.present)
        np.testing.assert_array_equal(e.inner.values, a.inner.values)


def test_sharded_encoding_merges_rebases_and_concatenates():
    shard_a, shard_b = [None, "free", None], [None, None, "pro", "free", None]
    est = OptionalEstimator(CategoricalEstimator())
    all_missing = est.encoder().fit([None, None])  # nothing to learn: the inner stays unfitted
    fitted = est.encoder().fit(shard_a).merge(all_missing).merge(est.encoder().fit(shard_b))
    assert fitted == est.encoder().fit(shard_a + shard_b)
    assert fitted.inner.levels == ("free", "pro")
    enc_a, enc_b, enc = (fitted.encode(r) for r in (shard_a, shard_b, shard_a + shard_b))
    assert enc_a.node_sizes() == [3, 1]
    rebased = enc_b.with_starts(iter(enc_a.node_sizes()))
    assert (rebased.start, rebased.inner.start) == (3, 1)
    assert rebased.rows(2, 4).inner.start == enc.rows(5, 7).inner.start == 1
    joined = type(enc).concat([enc_a, rebased])
    assert joined.node_sizes() == enc.node_sizes() == [8, 3]
    np.testing.assert_array_equal(joined.present, enc.present)
    np.testing.assert_array_equal(joined.before, enc.before)
    np.testing.assert_array_equal(joined.inner.values, enc.inner.values)
    with pytest.raises(ValueError):
        fitted.merge(OptionalEstimator(CategoricalEstimator(), missing=("",)).encoder())


def test_optional_sequences_and_sequences_of_optional_items():
    visits = pd.DataFrame({"v": [["a", "b"], None, [], ["b"], None]})["v"].to_numpy()
    est = OptionalEstimator(SequenceEstimator(CategoricalEstimator(), CategoricalEstimator()))
    fit = mixfold.optimize(visits, est, progress=False)
    assert fit.p_missing == pytest.approx(0.4, rel=1e-12)
    assert fit.inner.item.prob("b") == pytest.approx(2 / 3, rel=1e-12)
    assert fit.log_density(None) == pytest.approx(np.log(0.4), rel=1e-12)
    items = SequenceDistribution(OptionalDistribution(GaussianDistribution(0, 1), 0.5))
    rows = [[1.0, None], [], [math.nan, math.nan, 0.0]]
    expected = [np.log(0.25) + stats.norm.logpdf(1.0), 0.0,
                3 * np.log(0.5) + stats.norm.logpdf(0.0)]
    np.testing.assert_allclose(items.seq_log_density(items.encoder().encode(rows)), expected)
    with pytest.raises(DataError) as err:
        items.encoder().encode([[1.0], [None, "x"]])
    assert (err.value.row, err.value.path) == (1, (1,))


def test_bad_inner_value_keeps_the_original_row():
    est = OptionalEstimator(GaussianEstimator())
    with pytest.raises(DataTypeError) as err:
        mixfold.optimize([None, 1.0, None, None, "high", 2.0], est, progress=False)
    assert err.value.row == 4
    with pytest.raises(DataError) as err:
        mixfold.optimize([None, np.inf, 1.0], est, progress=False)
    assert err.value.row == 1
    rec = RecordEstimator({"income": est})
    with pytest.raises(DataError) as err:
        mixfold.optimize([{"income": None}, {"income": 3.0}, {"income": -np.inf}], rec,
                         progress=False)
    assert (err.value.row, err.value.path) == (2, ("income",))


def test_nan_is_an_error_when_it_is_not_a_marker():
    est = OptionalEstimator(GaussianEstimator(), missing=(None,))
    with pytest.raises(DataError) as err:
        mixfold.optimize([1.0, None, float("nan")], est, progress=False)
    assert err.value.row == 2


# ---------------------------------------------------------------------------------------------
# Fitting


def test_fit_recovers_p_missing_and_inner(rng):
    rows = income_model(0.3).sampler(0).sample(20_000)
    fit = mixfold.optimize(rows, OptionalEstimator(GaussianEstimator()), progress=False)
    x = rows[~np.isnan(rows)]
    assert fit.p_missing == pytest.approx(np.isnan(rows).mean(), rel=1e-12)
    assert fit.p_missing == pytest.approx(0.3, abs=0.01)
    assert fit.inner.mu == pytest.approx(x.mean(), rel=1e-12)
    assert fit.inner.sigma2 == pytest.approx(16.0, rel=0.05)


def test_pseudo_count_and_the_edge_cases():
    est = OptionalEstimator(GaussianEstimator(), pseudo_count=1.0)
    fit = mixfold.optimize([None, 1.0, 2.0, 3.0], est, progress=False)
    assert fit.p_missing == pytest.approx((1 + 1) / (4 + 2))
    none_missing = mixfold.optimize([1.0, 2.0, 4.0], OptionalEstimator(GaussianEstimator()),
                                    progress=False)
    assert none_missing.p_missing == 0.0
    assert np.isfinite(none_missing.log_density(1.0)) and none_missing.log_density(None) == -np.inf
    all_missing = mixfold.optimize([None, math.nan, None], OptionalEstimator(GaussianEstimator()),
                                   progress=False)
    assert all_missing.p_missing == 1.0
    assert all_missing.inner == GaussianDistribution(0.0, 1.0)  # the zero-weight default
    assert all_missing.log_density(None) == 0.0
    zero = OptionalEstimator(GaussianEstimator()).estimate(0.0, ((np.zeros(2),),
                                                                 (((np.zeros(3),), ()),)))
    assert zero.p_missing == 0.5


def test_mixture_of_optionals_recovers_what_is_identifiable():
    truth = MixtureDistribution([OptionalDistribution(GaussianDistribution(-4.0, 1.0), 0.1),
                                 OptionalDistribution(GaussianDistribution(4.0, 1.0), 0.6)],
                                [0.5, 0.5])
    rows = truth.sampler(1).sample(8000)
    fit = mixfold.optimize(rows, MixtureEstimator([OptionalEstimator(GaussianEstimator())] * 2),
                           seed=3, progress=False)
    order = np.argsort([c.inner.mu for c in fit.components])
    comps = [fit.components[i] for i in order]
    # missing rows say nothing about their component: only w_k (1 - p_k) and the overall
    # missing rate are identifiable from a single optional field
    present_mass = [w * (1 - c.p_missing) for w, c in zip(fit.weights[order], comps)]
    np.testing.assert_allclose(present_mass, [0.45, 0.2], atol=0.015)
    assert fit.log_density(None) == pytest.approx(np.log(np.isnan(rows).mean()), rel=1e-6)
    np.testing.assert_allclose([c.inner.mu for c in comps], [-4, 4], atol=0.1)


@pytest.mark.parametrize("make", [
    lambda: OptionalEstimator(MixtureEstimator([GaussianEstimator()] * 2)),
    lambda: MixtureEstimator([OptionalEstimator(GaussianEstimator())] * 2),
])
def test_chunking_does_not_change_the_fit(make):
    rows = mixture_inner(0.3).sampler(5).sample(700)
    fits = [mixfold.optimize(rows, make(), seed=2, max_iter=8, tol=0.0, chunk_rows=c,
                             progress=False) for c in (7, 10_000)]
    assert fits[0].fit_result.iterations == fits[1].fit_result.iterations == 8
    assert_same_model(fits[0], fits[1], rtol=1e-12)


def test_seeded_initialisation_is_chunk_independent():
    d = mixture_inner()
    enc = d.encoder().encode(d.sampler(6).sample(50))
    factory = d.estimator().accumulator_factory()
    whole = factory.make()
    whole.seq_initialize(enc, np.ones(50), InitRandom(9))
    pieces = factory.make()
    for b in range(0, 50, 7):
        part, chunk = factory.make(), enc.rows(b, b + 7)
        part.seq_initialize(chunk, np.ones(chunk.n_rows), InitRandom(9))
        pieces.combine(part)
    # a seeded start sums a Gaussian about its rows' mean: the pieces' moved to the whole's
    pieces.align_references(whole)
    np.testing.assert_allclose(pieces.to_array(), whole.to_array(), rtol=1e-12, atol=1e-12)


def test_payload_round_trip_and_combine_of_halves():
    d = mixture_inner()
    enc = d.encoder().encode(d.sampler(7).sample(300))
    w = np.linspace(0.5, 1.5, 300)
    factory = d.estimator().accumulator_factory()
    one = factory.make()
    ll = one.seq_update(enc, w, d)
    np.testing.assert_allclose(ll, d.seq_log_density(enc), rtol=1e-13)  # mixture inner: scored
    a, b = factory.make(), factory.make()
    a.seq_update(enc.rows(0, 101), w[:101], d)
    b.seq_update(enc.rows(101, 300), w[101:], d)
    np.testing.assert_allclose(a.combine(b).to_array(), one.to_array(), rtol=1e-13)
    flat = one.to_array()
    np.testing.assert_allclose(flat[:2], [w[~enc.present].sum(), w[enc.present].sum()])
    back = factory.make().from_array(flat)
    np.testing.assert_array_equal(back.to_array(), flat)
    assert d.estimator().estimate(w.sum(), back.value()) == \
        d.estimator().estimate(w.sum(), one.value())


# ---------------------------------------------------------------------------------------------
# Sampling, serialization, validation


def test_sampling_writes_nan_for_floats_and_none_otherwise():
    x = income_model(0.3).sampler(2).sample(20_000)
    assert isinstance(x, np.ndarray) and np.isnan(x).mean() == pytest.approx(0.3, abs=0.01)
    cats = OptionalDistribution(CategoricalDistribution({"a": 0.5, "b": 0.5}), 0.5).sampler(2)
    values = cats.sample(2000)
    assert {type(v) for v in values} == {str, type(None)}
    assert sum(v is None for v in values) / 2000 == pytest.approx(0.5, abs=0.04)


@pytest.mark.parametrize("d", [income_model(0.1 + 0.2), mixture_inner(1 / 3),
                               OptionalDistribution(GaussianDistribution(0, 1), 0.0),
                               OptionalDistribution(GaussianDistribution(0, 1), 1.0,
                                                    missing=(-999, "NA", ("a", 1)))])
def test_to_dict_from_dict_is_exact(d):
    text = json.dumps(d.to_dict(), allow_nan=False)
    back = Distribution.from_dict(json.loads(text))
    assert back == d and back.to_dict() == d.to_dict() and back.missing == d.missing


def test_parameters_are_validated():
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ParameterError):
            OptionalDistribution(GaussianDistribution(0, 1), bad)
    with pytest.raises(ParameterError):
        OptionalDistribution("inner", 0.1)
    with pytest.raises(ValueError):
        OptionalEstimator(GaussianEstimator(), pseudo_count=-1.0)
    with pytest.raises(ValueError):
        OptionalEstimator(GaussianEstimator(), missing="NA")
    with pytest.raises(TypeError):
        OptionalEstimator(CategoricalEstimator)
