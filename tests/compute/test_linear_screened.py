"""compute/linear_screened.py: the screened E-step of the CPU bands up to float32 against a
brute-force float64 E-step, on the NumPy GEMM screener and (where the CPU has them) the AMX
tiles; the same bits on any number of threads and with the kernels or NumPy's rescoring."""

import numpy as np
import pytest

import mixfold.compute.linear_screened as linear_screened
from mixfold.compute.amx_tiles import amx_available
from mixfold.compute.encoded import ArrayEncoded
from mixfold.compute.linear import MAX_FUSED_BLOCK_ROWS
from mixfold.compute.linear_screened import (GemmScreener, ScreenedEStep, TileScreener,
                                             screener_for, statistics)
from mixfold.compute.screened import SCREEN_CUTOFF
from mixfold.precision import resolve_precision
from tests.compute.terms import MatrixTerms, brute_estep, screened_problem

#: float32 features summed in float32 partials of the statistics GEMM; float32 exp and log of a
#: row's candidates (screened bands); float32 scores give every posterior (the float32 band)
TOL = {"bfloat16": 1e-5, "float16": 1e-5, "float32": 1e-4}


def _fold(parts, lw, w, band):
    for p in parts:
        p.sums[:], p.mass[:] = 0.0, 0.0
        if p.counts is not None:
            p.counts[:] = 0.0
    mass, lse = ScreenedEStep([p.terms for p in parts], lw, ArrayEncoded(np.zeros(len(w))), w,
                              resolve_precision(band)).run()
    return mass, lse.copy()


def _check(parts, lw, w, band):
    mass, lse = _fold(parts, lw, w, band)
    want = brute_estep(parts, lw, w)
    live = np.isfinite(want["lse"])
    assert np.array_equal(np.isfinite(lse), live) and (lse[~live] == -np.inf).all()
    tol = TOL[band] + 10 * np.exp(-SCREEN_CUTOFF)
    np.testing.assert_allclose(lse[live], want["lse"][live], rtol=tol, atol=tol)
    total = w.sum()
    np.testing.assert_allclose(mass, want["mass"], rtol=tol, atol=tol * total)
    for i, p in enumerate(parts):
        if p.coef.shape[1]:
            scale = np.abs(p.phi).max() * total
            np.testing.assert_allclose(p.sums, want[f"sums{i}"], rtol=tol, atol=tol * scale)
        if p.table is not None:
            np.testing.assert_allclose(p.counts, want[f"counts{i}"], rtol=tol, atol=tol * total)
    return mass, lse


@pytest.fixture(params=["gemm", "tiles"])
def screener(request, monkeypatch):
    if request.param == "tiles" and not amx_available():
        pytest.skip("needs a CPU with AMX-BF16 tiles")
    if request.param == "gemm":
        monkeypatch.setattr(linear_screened, "runs_on_tiles", lambda terms, band: False)
    return request.param


@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("far, dead", [(1.0, False), (5.0, True)])
def test_screened_fold_equals_brute_force(band, far, dead, screener):
    if screener == "tiles" and band != "bfloat16":
        pytest.skip("the tiles screen bfloat16 only")
    parts = []
    part, lw = screened_problem(6000, k=5, f=3, far=far, dead=dead, seed=21)
    parts.append(part)
    extra = MatrixTerms(np.zeros((6000, 0)), np.zeros((5, 0)), np.zeros(5),
                        table=np.log(np.random.default_rng(2).dirichlet(np.ones(80), 5)),
                        codes=np.random.default_rng(3).integers(0, 80, 6000))
    parts.append(extra)  # a second, larger table beside the first
    w = np.random.default_rng(22).uniform(0, 2, 6000)
    _check(parts, lw, w, band)


@pytest.mark.parametrize("band", ["bfloat16", "float32"])
def test_several_blocks_and_threads_give_the_same_bits(band, monkeypatch):
    n = MAX_FUSED_BLOCK_ROWS + 1000
    part, lw = screened_problem(n, k=3, f=2, far=2.0, seed=23)
    w = np.random.default_rng(24).uniform(0, 1, n)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "2")
    threaded = _check([part], lw, w, band) + (part.sums.copy(),)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "1")
    serial = _fold([part], lw, w, band) + (part.sums.copy(),)
    for a, b in zip(threaded, serial):
        np.testing.assert_array_equal(a, b)


def test_numpy_rescoring_where_the_kernels_are_missing(monkeypatch):
    part, lw = screened_problem(3000, k=4, f=2, far=3.0, dead=True, seed=25)
    w = np.ones(3000)
    compiled = _fold([part], lw, w, "float16")
    monkeypatch.setattr(linear_screened, "band_kernels", lambda: None)
    assert ScreenedEStep([part.terms], lw, ArrayEncoded(np.zeros(3000)), w,
                         resolve_precision("float16")).compiled is None
    plain = _check([part], lw, w, "float16")
    np.testing.assert_allclose(plain[1], compiled[1], rtol=0, atol=1e-6)


def test_a_single_row():
    part, lw = screened_problem(1, k=3, f=2, seed=26)
    _check([part], lw, np.array([2.0]), "bfloat16")


def test_an_empty_chunk():
    part, lw = screened_problem(0, k=3, f=2, seed=27)
    mass, lse = _fold([part], lw, np.empty(0), "bfloat16")
    assert mass.tolist() == [0.0] * 3 and lse.shape == (0,)


def test_screener_choice():
    part, _ = screened_problem(10, k=2, f=2)
    tiles = amx_available() and linear_screened.band_kernels() is not None
    assert screener_for([part.terms], "bfloat16") is (TileScreener if tiles else GemmScreener)
    assert screener_for([part.terms], "float16") is GemmScreener
    assert screener_for([part.terms], "float32") is GemmScreener
    wide = MatrixTerms(np.zeros((10, 600)), np.zeros((2, 600)), np.zeros(2))
    assert screener_for([wide.terms], "bfloat16") is GemmScreener  # past the tiles' features


def test_statistics_are_float64_sums_of_float32_partials():
    rng = np.random.default_rng(28)
    m = 3 * linear_screened.PARTIAL_ROWS + 17
    z = rng.uniform(1, 2, (m, 3)).astype(np.float32)
    post = rng.uniform(0, 1, (4, m)).astype(np.float32)
    got = statistics(z, post)
    want = post.astype(np.float64) @ z.astype(np.float64)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=linear_screened.PARTIAL_ROWS * 2.0 ** -24)


@pytest.mark.parametrize("ratio", [100.0, 1.25])  # room for the tiles' bit patterns; for the
def test_kept_features_give_the_bits_of_computed_ones(ratio):  # exact features only
    from mixfold.compute.feature_cache import FeatureCache
    from tests.compute.test_feature_cache import diagonal_mixture, folded, record_mixture

    for model in (diagonal_mixture(), record_mixture()):
        rows = model.sampler(5).sample(40000)  # two row blocks, the last short
        enc = model.encoder().fit(rows).encode(rows)
        weights = np.random.default_rng(6).uniform(0, 2, enc.n_rows)
        computed = folded(model, enc, weights, "bfloat16@cpu")
        cache = FeatureCache(1e12, ratio=ratio)
        with cache.active():
            filling = folded(model, enc.rows(0, enc.n_rows), weights, "bfloat16@cpu")
        with cache.active():
            reading = folded(model, enc.rows(0, enc.n_rows), weights, "bfloat16@cpu")
        assert cache.kept_bytes > 0
        np.testing.assert_array_equal(filling, computed)
        np.testing.assert_array_equal(reading, computed)
