"""Feature rows kept between folds: the same bits as computing them, within the budget, never
stale (a freed array's features go with it), released when the handle closes."""

import gc

import numpy as np
import pytest

import mixfold
from mixfold import (CategoricalDistribution, DiagonalGaussianDistribution, GaussianDistribution,
                     LogGaussianDistribution, MixtureDistribution, PoissonDistribution,
                     RecordDistribution)
from mixfold.compute.feature_cache import DEFAULT_RATIO, FeatureCache, cache_ratio, rows_identity
from mixfold.backends.local import LocalEncodedData
from mixfold.compute.linear import centred_gaussian
from mixfold.precision import resolve_precision


def record_mixture():
    comps = [RecordDistribution({
        "x": GaussianDistribution(50.0 + i, 1.0 + 0.3 * i),
        "y": LogGaussianDistribution(0.2 * i, 0.5),
        "n": PoissonDistribution(1.0 + 2 * i),
        "c": CategoricalDistribution([0.1 + 0.05 * i, 0.5, 0.4 - 0.05 * i], levels=["a", "b", "c"]),
        "v": DiagonalGaussianDistribution([i, -i], [1.0, 2.0])}) for i in range(3)]
    return MixtureDistribution(comps, [0.2, 0.3, 0.5])


def diagonal_mixture():
    comps = [DiagonalGaussianDistribution([3.0 * i, 100.0 - i, 0.5 * i], [1.0 + i, 2.0, 0.5])
             for i in range(4)]
    return MixtureDistribution(comps, [0.1, 0.2, 0.3, 0.4])


def folded(model, enc, weights, precision):
    acc = model.estimator().accumulator_factory().make()
    lse = acc.seq_update(enc, weights, model, resolve_precision(precision))
    return np.concatenate([acc.to_array(), lse])


@pytest.mark.parametrize("make", [diagonal_mixture, record_mixture])
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_kept_features_give_the_bits_of_computed_ones(make, precision, monkeypatch):
    monkeypatch.setenv("MIXFOLD_FEATURE_CACHE", "100")  # room for any precision's features
    model = make()
    rows = model.sampler(3).sample(70000)  # three row blocks, the last short
    enc = model.encoder().fit(rows).encode(rows)
    weights = np.random.default_rng(4).uniform(0, 2, enc.n_rows)
    computed = folded(model, enc, weights, precision)
    cache = FeatureCache(1e12)
    with cache.active():
        filling = folded(model, enc.rows(0, enc.n_rows), weights, precision)
        assert cache.kept_bytes > 0
        kept = cache.kept_bytes
        reading = folded(model, enc.rows(0, enc.n_rows), weights, precision)  # a new view
        assert cache.kept_bytes == kept  # the same rows: found, not kept twice
    np.testing.assert_array_equal(filling, computed)
    np.testing.assert_array_equal(reading, computed)


def test_the_budget_admits_float32_features_of_numeric_rows_not_float64_ones(monkeypatch):
    monkeypatch.delenv("MIXFOLD_FEATURE_CACHE", raising=False)
    assert cache_ratio() == DEFAULT_RATIO
    model = MixtureDistribution([DiagonalGaussianDistribution(np.full(10, i), np.ones(10))
                                 for i in range(16)], np.full(16, 1 / 16))
    x = np.random.default_rng(0).normal(size=(40000, 10))
    enc = model.encoder().fit(x).encode(x)
    for precision, keeps in [("float64", False), ("float32", True)]:
        cache = FeatureCache(1e12)
        with cache.active():
            folded(model, enc, np.ones(len(x)), precision)
        # float32: 2D + 1 = 21 float32 rows (84 bytes a row, padded) vs 80 bytes of values
        assert (cache.kept_bytes > 0) == keeps, precision
        assert cache.kept_bytes <= DEFAULT_RATIO * x.nbytes
    monkeypatch.setenv("MIXFOLD_FEATURE_CACHE", "0")
    cache = FeatureCache(1e12)
    with cache.active():
        folded(model, enc, np.ones(len(x)), "float32")
    assert cache.kept_bytes == 0


def test_a_bad_budget_is_named(monkeypatch):
    for bad in ["-1", "lots", "inf", "nan"]:
        monkeypatch.setenv("MIXFOLD_FEATURE_CACHE", bad)
        with pytest.raises(ValueError, match="MIXFOLD_FEATURE_CACHE"):
            LocalEncodedData(mixfold.GaussianDistribution(0, 1).encoder().encode(np.zeros(3)))


def test_entries_are_found_by_place_evicted_when_stale_and_dropped_with_their_rows():
    x = np.zeros((100, 4))
    cache = FeatureCache(limit=3000, ratio=1.25)
    with cache.active():  # one fold
        a = cache.entry("k", [x[:50]], 1000, 10 ** 6)
        assert cache.entry("k", [x[:50]], 1000, 10 ** 6) is a
        assert cache.entry("k", [x[50:]], 1000, 10 ** 6) is not a  # other rows
        assert cache.entry("other", [x[:50]], 1000, 10 ** 6) is not a  # other features
        assert cache.kept_bytes == 3000
        # full, and every store is in use in this fold: none is evicted for a fourth
        assert cache.entry("new", [x[:50]], 1000, 10 ** 6) is None
    with cache.active():  # the next fold uses ("k", x[:50]) and needs room for "new"
        assert cache.entry("k", [x[:50]], 1000, 10 ** 6) is a
        new = cache.entry("new", [x[:50]], 1000, 10 ** 6)  # ("k", x[50:]) goes: unused longest
        assert new is not None and cache.kept_bytes == 3000
        assert cache.entry("other", [x[:50]], 1000, 10 ** 6) is not None  # still there
        assert cache.entry("big", [x], 3001, 10 ** 6) is None  # over the limit
        assert cache.entry("big", [x], 2000, 1000) is None  # over the ratio of its rows' bytes
    del a, new
    y = np.zeros(10)
    with cache.active():
        assert cache.entry("y", [y[2:]], 10, 10 ** 6) is not None  # evicts a stale store
    assert rows_identity(y[2:])[1][0] == 16  # 2 float64 in
    del x
    gc.collect()
    assert cache.kept_bytes == 10  # only y's: x's went with x


def test_two_models_folding_the_same_rows_do_not_evict_each_other():
    # a mixture of mixtures folds the same rows once per inner mixture: when only one inner
    # mixture's features fit, that one keeps them; evicting each other at every fold would
    # cost allocations and never pay
    x = np.zeros((100, 4))
    cache = FeatureCache(limit=1500, ratio=1.25)
    kept = []
    for _ in range(3):
        with cache.active():
            kept.append(cache.entry("inner 1", [x], 1000, 10 ** 6))
            assert cache.entry("inner 2", [x], 1000, 10 ** 6) is None
    assert kept[0] is not None and kept[0] is kept[1] is kept[2]


def test_rows_in_a_reused_buffer_are_never_read_from_a_dead_array(monkeypatch):
    # fold rows, free them, fold other rows of the same shape (NumPy may hand out the same
    # address): the second fold must see its own rows
    monkeypatch.setenv("MIXFOLD_FEATURE_CACHE", "100")
    model = diagonal_mixture()
    cache = FeatureCache(1e12)
    with cache.active():
        for seed in range(3):
            x = model.sampler(seed).sample(5000)
            enc = model.encoder().fit(x).encode(x)
            got = folded(model, enc, np.ones(len(x)), "float32")
            with FeatureCache(0).active():
                want = folded(model, enc, np.ones(len(x)), "float32")
            np.testing.assert_array_equal(got, want)
            del x, enc


def test_a_float32_fit_keeps_its_features_and_releases_them_at_close(monkeypatch):
    monkeypatch.delenv("MIXFOLD_FEATURE_CACHE", raising=False)
    model = diagonal_mixture()
    x = model.sampler(5).sample(65536)  # whole blocks: no padding rows
    est = model.estimator()
    with LocalEncodedData(model.encoder().fit(x).encode(x)) as handle:
        res = mixfold.fit(handle, est, init=model, max_iter=5, tol=0, precision="float32",
                          progress=False)
        assert handle.features.kept_bytes > 0
    assert handle.features.kept_bytes == 0
    monkeypatch.setenv("MIXFOLD_FEATURE_CACHE", "0")
    plain = mixfold.fit(x, est, init=model, max_iter=5, tol=0, precision="float32",
                        progress=False)
    for a, b in zip(res.model.components, plain.model.components):
        np.testing.assert_array_equal(a.mu, b.mu)
        np.testing.assert_array_equal(a.sigma2, b.sigma2)
    assert res.log_likelihood == plain.log_likelihood


def test_the_gaussian_centre_stays_put_as_the_means_move():
    rng = np.random.default_rng(0)
    mu, sigma2 = rng.normal(1000.0, 5.0, size=(8, 3)), np.full((8, 3), 4.0)
    centre = centred_gaussian(mu, sigma2)[0]
    moved = centred_gaussian(mu + rng.normal(0, 0.05, size=mu.shape), sigma2)[0]
    np.testing.assert_array_equal(centre, moved)  # the features do not change
    assert np.all(np.abs(centre - mu.mean(axis=0)) <= np.sqrt(sigma2.mean(0) + mu.var(0)))
    # no spread at all (a point mass, which no fit makes): the plain mean of the means
    with np.errstate(divide="ignore", invalid="ignore"):
        point = centred_gaussian(np.array([[3.3]]), np.array([[0.0]]))[0]
    np.testing.assert_array_equal(point, [3.3])


def test_a_poisson_fields_log_factorials_are_computed_once_per_fit(monkeypatch):
    import mixfold.families.poisson as poisson

    # -log x! depends on the rows only: a handle that keeps its rows keeps it with the features
    calls = []
    monkeypatch.setattr(poisson, "log_factorial",
                        lambda x, real=poisson.log_factorial: calls.append(len(x)) or real(x))
    model = MixtureDistribution([RecordDistribution({"n": PoissonDistribution(lam),
                                                     "x": GaussianDistribution(lam, 1.0)})
                                 for lam in (1.0, 5.0)], [0.4, 0.6])
    rows = model.sampler(3).sample(5000)
    est = model.estimator()
    with LocalEncodedData(model.encoder().fit(rows).encode(rows)) as handle:
        res = mixfold.fit(handle, est, init=model, max_iter=6, tol=0, progress=False)
    assert calls == [5000]
    monkeypatch.setenv("MIXFOLD_FEATURE_CACHE", "0")  # nothing kept: once per fold, same bits
    calls.clear()
    plain = mixfold.fit(rows, est, init=model, max_iter=6, tol=0, progress=False)
    assert calls == [5000] * len(plain.log_likelihood)  # one per E-step
    assert res.log_likelihood == plain.log_likelihood
