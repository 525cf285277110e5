"""The bfloat16 band on AMX tiles (mixfold.compute.linear_amx) against the CPU engine that
multiplies the same band values in float32 (CpuTorchFusedEStep), and the compiled passes it
calls (mixfold.compute.numba_bands: one-call normalisation with the log-densities, the tile
layouts), which run on any CPU."""

import numpy as np
import pytest

import mixfold
from mixfold.compute.accuracy import estep_op_count, fold_statistics
from mixfold.compute.amx_tiles import amx_available, score_layout, stats_layout
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.fold import fold_rows
from mixfold.compute.kernels import band_kernels
from mixfold.precision import fused_statistics_bound, relative_error

torch = pytest.importorskip("torch")
numba_bands = pytest.importorskip("mixfold.compute.numba_bands")

ON_TILES = amx_available() and band_kernels() is not None
needs_tiles = pytest.mark.skipif(not ON_TILES, reason="needs a CPU with AMX-BF16 tiles")


def _gaussians(k: int, d: int, seed: int = 0) -> mixfold.MixtureDistribution:
    rng = np.random.default_rng(seed)
    comps = [mixfold.DiagonalGaussianDistribution(rng.normal(0, 3, d), rng.uniform(0.5, 2, d))
             for _ in range(k)]
    return mixfold.MixtureDistribution(comps, np.full(k, 1.0 / k))


def _fold(cls, model, enc, weights):
    accs = [c.estimator().accumulator_factory().make() for c in model.components]
    terms = type(accs[0]).linear_terms(accs, model.components, enc)
    mass, lse = cls([terms], model.log_weights, enc, weights, "bfloat16@cpu").run()
    return mass, lse, [np.concatenate([a.ravel() for a in acc.arrays()]) for acc in accs]


@needs_tiles
@pytest.mark.parametrize("k, d", [(16, 10), (20, 3), (4, 20)])
def test_the_tiles_equal_the_float32_gemms_of_the_same_band_values(k, d):
    """Three blocks, the last not a multiple of 32 rows, row weights and a row far below every
    component (scored again against each row's maximum); tiles filled, split over components
    (K=20) and over features (41 features: two scoring tiles, three statistics ones): the same
    log-densities and, up to the order of float32 sums, the same statistics; both within the
    band's bound of double-double."""
    from mixfold.compute.linear_amx import AmxFusedEStep
    from mixfold.compute.linear_torch import CpuTorchFusedEStep

    model = _gaussians(k, d)
    rows = model.sampler(1).sample(70_001)
    rows[40_000] = 80.0  # far from every component
    enc = model.encoder().encode(rows)
    weights = np.random.default_rng(2).uniform(0.2, 2.0, enc.n_rows)
    tiles = _fold(AmxFusedEStep, model, enc, weights)
    wide = _fold(CpuTorchFusedEStep, model, enc, weights)
    np.testing.assert_allclose(tiles[1], wide[1], rtol=2e-6, atol=2e-5)
    assert np.isfinite(tiles[1]).all() and tiles[1][40_000] < wide[1].min() + 1.0
    assert relative_error(tiles[0], wide[0]) <= 1e-5
    for a, b in zip(tiles[2], wide[2]):
        assert relative_error(a, b) <= 1e-4  # a posterior may round to the neighbouring value
    got = fold_statistics(model, enc.rows(0, 5000), "bfloat16@cpu", raw=True)
    ref = fold_statistics(model, enc.rows(0, 5000), "dd", raw=True)
    bound = fused_statistics_bound("bfloat16", estep_op_count(model), 5000, 32768)
    assert 1e-5 < max(relative_error(g, r) for g, r in zip(got, ref)) <= bound


@needs_tiles
def test_bfloat16_on_the_cpu_runs_on_the_tiles_and_other_bands_do_not():
    from mixfold.compute.band_engines import engine_for
    from mixfold.compute.linear_amx import AmxFusedEStep
    from mixfold.compute.linear_torch import CpuTorchFusedEStep

    model = _gaussians(2, 2)
    enc = model.encoder().encode(model.sampler(0).sample(10))
    accs = [c.estimator().accumulator_factory().make() for c in model.components]
    terms = [type(accs[0]).linear_terms(accs, model.components, enc)]
    assert engine_for(terms, "bfloat16@cpu") is AmxFusedEStep
    assert engine_for(terms, "bfloat16") is AmxFusedEStep  # the fastest real engine here
    assert engine_for(terms, "float16@cpu") is CpuTorchFusedEStep
    assert engine_for(terms, "float32") is None  # NumPy's


@needs_tiles
def test_kept_tile_layouts_and_kept_band_values_give_the_same_bits():
    """A budget with room keeps both tile layouts; a tight one keeps the band's values and lays
    each block out again: the same fold, bit for bit."""
    model = _gaussians(4, 3)
    enc = model.encoder().encode(model.sampler(1).sample(40_000))
    factory = model.estimator().accumulator_factory()
    weights = np.ones(enc.n_rows)
    folds = []
    for cache in (FeatureCache(4 * enc.nbytes, ratio=4.0), FeatureCache.for_rows(enc.nbytes)):
        for _ in range(2):
            acc = factory.make()
            with cache.active():
                ll = fold_rows(acc, enc, weights, model, "bfloat16@cpu", 1 << 18)
            folds.append((ll, [a.copy() for a in acc.arrays()]))
        kept = next(iter(next(iter(cache._entries.values()))[0].values()))[0]
        folds[-1] += (type(kept),)
    (ll0, s0), (ll1, s1, roomy), (ll2, s2), (ll3, s3, tight) = folds
    assert roomy is tuple and tight is torch.Tensor
    for ll, s in ((ll1, s1), (ll2, s2), (ll3, s3)):
        assert ll == ll0 and all(np.array_equal(a, b) for a, b in zip(s, s0))


def test_one_call_normalisation_equals_the_two_passes_and_logs():
    """band_normalise_bits: the posteriors' bits are the two-pass bfloat16 values' (torch's
    rounding), each row's log-density log(total) + top (+ the shift, in float64) to float32's
    accuracy, a dead row's
    -inf; a row below the least total without centring leaves lse and bits untouched."""
    kernels = band_kernels()
    if kernels is None:
        pytest.skip("the compiled kernels are disabled")
    rng = np.random.default_rng(0)
    k, m = 5, 4096
    scores = rng.uniform(-40, 5, (k, m)).astype(np.float32)
    scores[:, 7] = -np.inf  # a dead row
    floor, floor_exp = np.float32(-60.0), float(np.exp(np.float32(-60.0)))
    w = rng.uniform(0.5, 2.0, m).astype(np.float32)
    for centre in (False, True):
        s, top, total, scale = (np.empty(m, np.float32) for _ in range(4))
        s = scores.copy()
        bits, lse = np.empty((k, m), np.uint16), np.empty(m)
        assert kernels["band_normalise_bits"](s, top, centre, floor, floor_exp, total, -1.0, w,
                                              scale, bits, lse, 10.0)
        lse -= 10.0  # the shift, added in float64
        two = scores.copy()
        t2, top2 = np.empty(m, np.float32), np.empty(m, np.float32)
        kernels["band_exp_totals"](two, top2, centre, floor, floor_exp, t2)
        kernels["band_posteriors"](two, w, t2, np.empty(m, np.float32), True)
        assert np.array_equal((bits.astype(np.uint32) << 16).view(np.float32), two)
        with np.errstate(divide="ignore"):
            want = np.log(t2.astype(np.float64)) + top2
        alive = np.isfinite(want)
        assert np.all(np.abs(lse[alive] - want[alive]) <= 3e-7 * np.maximum(1, np.abs(want[alive])))
        assert lse[7] == -np.inf and (bits[:, 7] == 0).all()
    far = scores.copy()
    bits, lse = np.full((k, m), 7, np.uint16), np.full(m, 3.0)
    assert not kernels["band_normalise_bits"](far, top, False, floor, floor_exp, total, 1.0, w,
                                              scale, bits, lse, 0.0)
    assert (bits == 7).all() and (lse == 3.0).all()


def test_the_compiled_log_against_numpy():
    import numba

    @numba.njit
    def logs(x, out):
        for i in range(x.size):
            out[i] = numba_bands._log(x[i])

    x = np.concatenate([np.geomspace(1e-37, 1e37, 100_001), np.linspace(0.5, 2.0, 50_001),
                        [1.0, 2.0, 0.70710677, 0.7071068, 1.4142135]]).astype(np.float32)
    out = np.empty_like(x)
    logs(x, out)
    want = np.log(x.astype(np.float64))
    assert (np.abs(out - want) <= 2.5e-7 * np.maximum(1.0, np.abs(want))).all()  # 2 ulps


def test_tile_layouts_round_to_bfloat16_and_pad_with_zeros():
    kernels = band_kernels()
    if kernels is None:
        pytest.skip("the compiled kernels are disabled")
    rng = np.random.default_rng(1)
    z = (rng.standard_normal((7, 45)) * 100).astype(np.float32)
    pairs, rows = np.full((4, 64, 2), 9, np.uint16), np.full((32, 8, 2), 9, np.uint16)
    kernels["band_tile_layouts"](z, pairs.view(np.uint32)[..., 0], rows.view(np.uint32)[..., 0])
    plain = np.zeros((8, 64), np.uint16)
    plain[:7, :45] = torch.from_numpy(z).bfloat16().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(pairs, score_layout(plain)) and np.array_equal(rows,
                                                                         stats_layout(plain))
