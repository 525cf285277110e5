"""The band engines of the fused linear E-step on this CPU (mixfold.compute.linear_screened) and
on torch (mixfold.compute.linear_torch): every band against double-double, fits against
float64, residency, refusals, calibration and planned execution; the GPU steps on the CPU's
torch; the CUDA tests skip without a device."""

import numpy as np
import pytest

import mixfold
from mixfold.compute.accuracy import estep_op_count, fold_statistics
from mixfold.compute.amx_tiles import amx_available
from mixfold.compute.band_engines import engine_for
from mixfold.compute.kernels import band_kernels
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.fold import fold_rows
from mixfold.compute.linear import block_rows
from mixfold.compute.linear_screened import ScreenedEStep
from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous, workers_from
from mixfold.parallel.resources import DeviceSpec, Resources
from mixfold.precision import (FIT_DISTANCE, BandSupportError, fused_statistics_bound,
                               relative_error, resolve_precision)
from mixfold.precision.gpu import torch_device_available

torch = pytest.importorskip("torch")

CUDA = torch_device_available("cuda")
#: the CPU's bfloat16 is screened on AMX tiles here (mixfold.compute.linear_screened)
ON_TILES = amx_available() and band_kernels() is not None
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def _diagonal_mixture(k: int = 4, d: int = 3, seed: int = 0) -> mixfold.MixtureDistribution:
    rng = np.random.default_rng(seed)
    comps = [mixfold.DiagonalGaussianDistribution(rng.normal(0, 3, d), rng.uniform(0.5, 2, d))
             for _ in range(k)]
    return mixfold.MixtureDistribution(comps, np.full(k, 1.0 / k))


def _errors(model, enc, precision, reference="dd"):
    got = fold_statistics(model, enc, precision, raw=True)
    ref = fold_statistics(model, enc, reference, raw=True)
    return max(relative_error(g, r) for g, r in zip(got, ref))


@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32", "float64"])
def test_every_band_on_the_cpu_is_within_float32s_bound_of_double_double(band):
    """The bands up to float32 screen in the band and rescore in float64 from float32
    features: their statistics are float32's, however coarse the band's GEMM."""
    model = _diagonal_mixture()
    enc = model.encoder().encode(model.sampler(1).sample(3000))
    bound = fused_statistics_bound("float32" if band != "float64" else band,
                                   estep_op_count(model), enc.n_rows, block_rows(4, np.float32))
    assert 0 < _errors(model, enc, f"{band}@cpu") <= bound
    if band != "float64":  # a bare band is the same screened engine, the same bits
        accs = [c.estimator().accumulator_factory().make() for c in model.components]
        terms = type(accs[0]).linear_terms(accs, model.components, enc)
        assert engine_for([terms], resolve_precision(band)) is ScreenedEStep is \
            engine_for([terms], resolve_precision(f"{band}@cpu"))
        assert fold_statistics(model, enc, band)[0].tolist() == \
            fold_statistics(model, enc, f"{band}@cpu")[0].tolist()


def test_families_linear_in_features_and_records_of_them_run_on_torch():
    rng = np.random.default_rng(3)
    counts = np.concatenate([rng.poisson(1.0, 800), rng.poisson(7.0, 700)])
    pois = mixfold.MixtureDistribution([mixfold.PoissonDistribution(1.5),
                                        mixfold.PoissonDistribution(6.0)], [0.5, 0.5])
    enc = pois.encoder().encode(counts)
    bound = fused_statistics_bound("float32", estep_op_count(pois), enc.n_rows, 32768)
    assert _errors(pois, enc, "float32@cpu", "float64") <= bound
    assert _errors(pois, enc, "bfloat16", "float64") <= \
        fused_statistics_bound("bfloat16", estep_op_count(pois), enc.n_rows, 32768)
    # a record of a categorical (a table: gathered and counted) and a Gaussian field
    rec = [mixfold.CompositeDistribution([mixfold.CategoricalDistribution({"a": p, "b": 1 - p}),
                                          mixfold.GaussianDistribution(mu, 1.0)])
           for p, mu in ((0.8, -2.0), (0.3, 2.0))]
    mix = mixfold.MixtureDistribution(rec, [0.4, 0.6])
    enc = mix.encoder().encode(mix.sampler(2).sample(2000))
    assert _errors(mix, enc, "float32@cpu", "float64") <= 1e-5
    assert _errors(mix, enc, "bfloat16", "float64") <= 1e-5


@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32"])
def test_a_whole_fit_ends_within_the_stated_distance_of_float64(band):
    model = _diagonal_mixture()
    x = model.sampler(1).sample(4000)
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 4)
    # tol=0: with the default tol, float32's noise in the log-likelihood decides at which
    # iteration the float32 fit stops (that alone moved the distance from 2e-10 to 5e-7)
    ref = mixfold.optimize(x, est, seed=0, max_iter=30, tol=0.0, progress=False)
    fit = mixfold.optimize(x, est, seed=0, max_iter=30, tol=0.0, progress=False,
                           precision=f"{band}@cpu")
    enc = ref.encoder().encode(x)
    want, got = ref.seq_log_density(enc).sum(), fit.seq_log_density(enc).sum()
    assert abs(got - want) / abs(want) <= FIT_DISTANCE[band]
    assert fit.fit_result.precision == f"{band}@cpu"


@pytest.mark.parametrize("band", ["bfloat16", "float32"])
def test_a_row_far_below_the_peak_keeps_its_log_density_and_posteriors(band):
    # the engine shifts scores by the largest peak inside the GEMM; a row far from every
    # component (its best score ~ -1200) is rescored in float64 about its own best candidate:
    # its log-density and posteriors stay exact, not 0/0
    model = _diagonal_mixture()
    rows = model.sampler(2).sample(3000)
    rows[1234] = [50.0, -50.0, 50.0]
    enc = model.encoder().encode(rows)
    got = fold_statistics(model, enc, f"{band}@cpu", raw=True)
    ref = fold_statistics(model, enc, "dd", raw=True)
    assert np.isfinite(got[0]).all()
    assert max(relative_error(g, r) for g, r in zip(got, ref)) <= fused_statistics_bound(
        band, estep_op_count(model), enc.n_rows, block_rows(4, np.float32))
    lse = model.seq_log_density(enc, resolve_precision(f"{band}@cpu"))
    want = model.seq_log_density(enc)
    assert np.isfinite(lse).all()
    assert abs(lse[1234] - want[1234]) <= 1e-3 * abs(want[1234])


def test_features_are_kept_between_folds():
    model = _diagonal_mixture()
    enc = model.encoder().encode(model.sampler(1).sample(5000))
    factory = model.estimator().accumulator_factory()
    cache = FeatureCache(4 * enc.nbytes, ratio=4.0)
    weights = np.ones(enc.n_rows)
    results = []
    for _ in range(2):
        acc = factory.make()
        with cache.active():
            ll = fold_rows(acc, enc, weights, model, resolve_precision("bfloat16"), 1 << 18)
        results.append((ll, [a.copy() for a in acc.arrays()]))
        assert cache.kept_bytes > 0  # the exact features (and the tiles' layout) kept
    (ll0, s0), (ll1, s1) = results
    assert ll0 == ll1 and all(np.array_equal(a, b) for a, b in zip(s0, s1))
    z = next(iter(next(iter(cache._entries.values()))[0].values()))
    exact = z[1] if ON_TILES else z
    assert exact.dtype == np.float32 and exact.shape[1] == 7  # 6 features and the ones column
    assert (exact[:, 6] == 1.0).all()
    if ON_TILES:  # the tiles' layout holds the same values' bfloat16 bits, in pairs
        pairs = z[0]
        plain = pairs.transpose(0, 2, 1).reshape(8, -1)
        assert pairs.dtype == np.uint16 and (plain[7] == 0).all()
        assert (plain[6, :5000] == 0x3F80).all()  # the ones row: 1.0
    # a cache with no room keeps nothing: the same bits
    acc = factory.make()
    with FeatureCache(1, ratio=0.0).active():
        assert fold_rows(acc, enc, weights, model, resolve_precision("bfloat16"), 1 << 18) == ll0
    assert all(np.array_equal(a, b) for a, b in zip(acc.arrays(), s0))


def test_models_the_engine_cannot_run_are_refused_by_family_and_device():
    with pytest.raises(BandSupportError, match="Poisson family"):
        mixfold.optimize(np.arange(20) % 4, mixfold.PoissonEstimator(), precision="bfloat16",
                         progress=False)
    x = _diagonal_mixture().sampler(0).sample(200)
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 2)
    if not CUDA:
        with pytest.raises(BandSupportError, match="'fp8@cpu'.*'cpu' has no fp8"):
            mixfold.optimize(x, est, precision="fp8@cpu", max_iter=2, progress=False)
        with pytest.raises(RuntimeError, match="does not have"):
            mixfold.optimize(x, est, precision="bfloat16@cuda", max_iter=2, progress=False)


def test_calibration_measures_the_real_engines_and_the_planner_uses_them():
    model = _diagonal_mixture()
    sample = model.sampler(0).sample(4000)
    resources = Resources((DeviceSpec("cpu", precisions=("fp8", "bfloat16", "float16",
                                                         "float32", "float64")),))
    rates = resources.calibrate(model, sample, min_seconds=0.02).devices[0].band_throughput
    # fp8's only engine here is the emulator: never timed, never planned on a nominal speed
    assert set(rates) == {"bfloat16", "float16", "float32", "float64"}
    worker = workers_from(Resources((DeviceSpec("cpu", precisions=tuple(rates),
                                                band_throughput=rates),)))[0]
    assert worker.band_throughput == rates
    plan = plan_heterogeneous([worker], 1000, target_rel_error=0.5, op_count=10)
    fastest = max(rates, key=rates.get)
    assert plan.assignments[0].precision == fastest and plan.assignments[0].measured_throughput
    # float16 is planned only where it is faster than every more accurate band
    if rates["float16"] < rates["float32"]:
        assert plan.assignments[0].precision != "float16"


def test_a_mixed_cpu_float64_and_cpu_bfloat16_plan_runs():
    model = _diagonal_mixture()
    x = model.sampler(1).sample(4000)
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 4)
    pool = [Worker("exact", precisions=("float64",), band_throughput={"float64": 1.0}),
            Worker("fast", precisions=("bfloat16",), band_throughput={"bfloat16": 3.0})]
    fit = mixfold.optimize(x, est, resources=pool, precision="auto", seed=0, max_iter=30,
                           progress=False)
    plan = fit.fit_result.plan
    assert [(a.precision, a.rows) for a in plan.assignments] == [("float64", 1000),
                                                                 ("bfloat16", 3000)]
    ref = mixfold.optimize(x, est, seed=0, max_iter=30, progress=False)
    enc = ref.encoder().encode(x)
    want, got = ref.seq_log_density(enc).sum(), fit.seq_log_density(enc).sum()
    assert abs(got - want) / abs(want) <= FIT_DISTANCE["bfloat16"]


def test_plan_shows_the_measured_rates(tmp_path):
    from click.testing import CliRunner

    from mixfold.cli import main

    spec = tmp_path / "spec.json"
    spec.write_text('{"mixture": [{"gaussian": {}}, {"gaussian": {}}]}')
    resources = Resources((DeviceSpec("cpu", precisions=("bfloat16", "float32", "float64"),
                                      band_throughput={"bfloat16": 3e6, "float64": 1e6}),))
    (tmp_path / "r.json").write_text(resources.to_json())
    out = CliRunner().invoke(main, ["plan", "--model", str(spec), "--resources",
                                    str(tmp_path / "r.json"), "--rows", "1000"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    at = lines.index("measured rows per second (Resources.calibrate; - not measured)")
    assert lines[at + 1].split() == ["device", "bfloat16", "float64"]
    assert lines[at + 2].split() == ["cpu", "3e+06", "1e+06"]


# -- CUDA (skipped without a device; scripts/gpu_checks.sh runs them) ------------------------


@needs_cuda
@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32", "float64"])
def test_every_band_on_cuda_matches_the_emulator_within_its_bound(band):
    model = _diagonal_mixture()
    enc = model.encoder().encode(model.sampler(1).sample(20000))
    bound = fused_statistics_bound(band, estep_op_count(model), enc.n_rows, enc.n_rows)
    assert 0 < _errors(model, enc, f"{band}@cuda") <= bound
    fit = mixfold.optimize(model.sampler(2).sample(20000),
                           mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 4),
                           precision=f"{band}@cuda", max_iter=5, seed=0, progress=False)
    assert fit.fit_result.precision == f"{band}@cuda"


@needs_cuda
def test_fp8_runs_on_a_device_that_has_it_or_is_refused_naming_it():
    from mixfold.compute.linear_torch import fp8_supported

    model = _diagonal_mixture()
    enc = model.encoder().encode(model.sampler(1).sample(20000))
    if not fp8_supported("cuda"):
        with pytest.raises(BandSupportError, match="'cuda' has no fp8"):
            fold_statistics(model, enc, "fp8@cuda")
        return
    bound = fused_statistics_bound("fp8", estep_op_count(model), enc.n_rows, enc.n_rows)
    assert 1e-4 < _errors(model, enc, "fp8@cuda") <= bound


@needs_cuda
def test_calibration_times_the_gpu_with_torch():
    model = _diagonal_mixture()
    resources = Resources((DeviceSpec("gpu:0", kind="gpu",
                                      precisions=("bfloat16", "float32", "float64")),))
    rates = resources.calibrate(model, model.sampler(0).sample(20000),
                                min_seconds=0.05).devices[0].band_throughput
    assert set(rates) == {"bfloat16", "float32", "float64"}
    assert resolve_precision("bfloat16@cuda:0").engine == "torch"


def test_the_fp8_layout_and_scales_screen_within_float32s_accuracy(monkeypatch):
    """fp8's scoring GEMM (torch._scaled_mm, power-of-two scales per feature row, padded
    operands) runs here on the CPU's own _scaled_mm: the gate that keeps fp8 to CUDA devices
    with an fp8 unit is opened for this test only, so the layout's arithmetic is checked
    without a GPU."""
    from mixfold.compute import linear_torch

    if not hasattr(torch, "_scaled_mm"):
        pytest.skip("this torch has no _scaled_mm")
    monkeypatch.setattr(linear_torch, "fp8_supported", lambda device: True)
    model = _diagonal_mixture()
    enc = model.encoder().encode(model.sampler(1).sample(3000))
    got = _errors(model, enc, "fp8@cpu")
    emulated = _errors(model, enc, "fp8@emulated")
    # fp8 only screens: every row's candidates are rescored in float64 from float32 features
    assert got <= fused_statistics_bound("float32", estep_op_count(model), enc.n_rows, 32768)
    assert got < emulated / 100


def test_full_covariance_mixtures_are_screened_in_the_bands():
    """A full-covariance mixture is linear in the products of its coordinates: the bands screen
    it through the fused engine, and the fit stays within the band's promise of float64's."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(-2, 1, (500, 3)), rng.normal(2, 1, (500, 3))])
    est = mixfold.MixtureEstimator([mixfold.MultivariateGaussianEstimator()] * 2)
    ref = mixfold.optimize(x, est, seed=0, max_iter=15, progress=False)
    fit = mixfold.optimize(x, est, seed=0, max_iter=15, progress=False, precision="float16@cpu")
    enc = ref.encoder().encode(x)
    want, got = ref.seq_log_density(enc).sum(), fit.seq_log_density(enc).sum()
    assert abs(got - want) / abs(want) <= FIT_DISTANCE["float16"]


def test_an_impossible_level_gets_no_posterior_and_a_dead_row_is_named():
    comps = [mixfold.CategoricalDistribution({"a": 1.0, "b": 0.0, "c": 0.0}),
             mixfold.CategoricalDistribution({"a": 0.5, "b": 0.5, "c": 0.0})]
    mix = mixfold.MixtureDistribution(comps, [0.5, 0.5])
    enc = mix.encoder().encode(["a", "b", "b", "a"])
    for precision in map(resolve_precision, ("bfloat16", "float32@cpu")):
        acc = mix.estimator().accumulator_factory().make()
        fold_rows(acc, enc, np.ones(4), mix, precision, 1 << 18)
        assert acc.components[0].counts.tolist()[1] == 0.0  # exactly: no mass where p = 0
        assert acc.counts.sum() == pytest.approx(4.0, rel=1e-2)
    dead = mix.encoder().encode(["a", "c"])
    with pytest.raises(mixfold.errors.NumericalError, match="row 1"):
        fold_rows(mix.estimator().accumulator_factory().make(), dead, np.ones(2), mix,
                  resolve_precision("bfloat16"), 1 << 18)


def test_the_command_line_takes_an_engine_in_the_precision(tmp_path):
    from click.testing import CliRunner

    from mixfold.cli import main

    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", np.vstack([rng.normal(0, 1, (200, 2)),
                                           rng.normal(5, 1, (200, 2))]))
    spec = '{"mixture": "diagonal_gaussian", "k": 2}'
    for precision in ("bfloat16@cpu", "bfloat16@emulated", "float16"):
        out = CliRunner().invoke(main, ["fit", str(tmp_path / "x.npy"), "--model", spec,
                                        "--precision", precision, "--out",
                                        str(tmp_path / "m.json"), "--no-progress"])
        assert out.exit_code == 0, out.output
        model = mixfold.load(tmp_path / "m.json")
        assert sorted(round(c.mu[0]) for c in model.components) == [0, 5]
    bad = CliRunner().invoke(main, ["fit", str(tmp_path / "x.npy"), "--model", spec,
                                    "--precision", "float32@emulated"])
    assert bad.exit_code == 2 and "the emulator runs bands" in bad.output


def _record_mixture() -> mixfold.MixtureDistribution:
    # a table with a level impossible in two components (-inf scores) beside a Poisson field
    levels = ({"a": 0.9, "b": 0.1, "c": 0.0}, {"a": 0.2, "b": 0.8, "c": 0.0},
              {"a": 0.5, "b": 0.3, "c": 0.2})
    comps = [mixfold.CompositeDistribution([mixfold.CategoricalDistribution(p),
                                            mixfold.PoissonDistribution(lam)])
             for p, lam in zip(levels, (1.0, 6.0, 3.0))]
    return mixfold.MixtureDistribution(comps, [0.3, 0.3, 0.4])


@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("case", ["gaussian", "far row", "record"])
def test_the_compiled_rescoring_equals_numpys(band, case, monkeypatch):
    """The compiled kernel (mixfold.compute.numba_screen) against the same rescoring in NumPy's
    operations: log-densities to float32's exp and log, statistics to float32's sums (in
    bfloat16 the compiled side screens on AMX tiles where the CPU has them)."""
    import mixfold.compute.linear_screened as engine

    if case == "record":
        model = _record_mixture()
        rows = model.sampler(3).sample(5000)
    else:
        model = _diagonal_mixture()
        rows = model.sampler(3).sample(5000)
        if case == "far row":
            rows[77] = [60.0, -60.0, 60.0]
    enc = model.encoder().encode(rows)

    def fold():
        acc = model.estimator().accumulator_factory().make()
        lse = acc.seq_update(enc, np.ones(enc.n_rows), model, resolve_precision(f"{band}@cpu"))
        return fold_statistics(model, enc, f"{band}@cpu", raw=True), lse

    compiled, lse = fold()
    monkeypatch.setattr(engine, "band_kernels", lambda: None)
    monkeypatch.setattr(engine, "runs_on_tiles", lambda terms, band: False)
    plain, lse_plain = fold()
    if case == "record":  # rows of level c: two components score -inf, the third all the mass
        assert any(r[0] == "c" for r in rows)
    np.testing.assert_allclose(lse, lse_plain, rtol=1e-6, atol=1e-6)
    assert max(relative_error(c, p) for c, p in zip(compiled, plain)) <= 1e-6


def test_the_compiled_exp_log_and_bfloat16_rounding_against_references():
    import numba
    import torch as t

    from mixfold.compute.numba_bands import exp32, log32
    from mixfold.compute.screened import round_to_band

    @numba.njit
    def apply(x, totals, out_exp, out_log):
        for i in range(x.size):
            out_exp[i] = exp32(x[i])
            out_log[i] = log32(totals[i])

    rng = np.random.default_rng(0)
    x = rng.uniform(-80, 5, 20001).astype(np.float32)
    totals = rng.uniform(1.0, 256.0, 20001).astype(np.float32)  # a row's sum of candidates
    e, lg = np.empty_like(x), np.empty_like(x)
    apply(x, totals, e, lg)
    exact = np.exp(x.astype(np.float64))
    assert (np.abs(e - exact) <= 4e-7 * exact).all()
    want = np.log(totals.astype(np.float64))
    assert (np.abs(lg - want) <= 4e-7 * want + 2e-7).all()
    y = np.random.default_rng(1).normal(0, 100, 5000)
    rounded = t.from_numpy(y.astype(np.float32)).bfloat16().float().numpy()
    assert (round_to_band(y, "bfloat16") == rounded).all()  # torch's rounding, bit for bit
    assert (round_to_band(y, "float16") == y.astype(np.float16).astype(np.float32)).all()


@pytest.mark.parametrize("band", ["bfloat16", "float16", "float32"])
def test_the_gpu_steps_run_on_the_cpu_within_the_bands_bound(band, monkeypatch):
    """The GPU branches of TorchFusedEStep (one large block after another, the band's products
    handed back in float32, the exp on the device, the block's sums added on the device) run
    here on the CPU's torch, so that they are executed where no GPU is lent: the same
    statistics as the CPU engine within the band's bound."""
    import mixfold.compute.linear_torch as engine

    model = _diagonal_mixture()
    rows = model.sampler(4).sample(6000)
    rows[17] = [40.0, -40.0, 40.0]  # a row far from every component
    enc = model.encoder().encode(rows)

    def fold(cls):
        accs = [c.estimator().accumulator_factory().make() for c in model.components]
        terms = type(accs[0]).linear_terms(accs, model.components, enc)
        mass, lse = cls([terms], model.log_weights, enc, np.ones(enc.n_rows),
                        resolve_precision(f"{band}@cpu")).run()
        return mass, lse, [np.concatenate([a.ravel() for a in acc.arrays()]) for acc in accs]

    cpu = fold(ScreenedEStep)
    monkeypatch.setattr(engine, "runs_as_gpu", lambda device: True)
    step = engine.TorchFusedEStep([], np.zeros(1), enc, np.ones(enc.n_rows),
                                  resolve_precision(f"{band}@cpu"))
    assert step.on_gpu and step.block == engine.GPU_BLOCK_ROWS and step.screen is not None
    gpu = fold(engine.TorchFusedEStep)
    # both screen and rescore in float64 from float32 features: float32's statistics
    bound = fused_statistics_bound("float32", estep_op_count(model), enc.n_rows, enc.n_rows)
    assert relative_error(gpu[0], cpu[0]) <= 2 * bound
    assert max(relative_error(g, c) for g, c in zip(gpu[2], cpu[2])) <= 2 * bound
    # per row the same log-densities, the far row's included
    assert np.isfinite(gpu[1]).all()
    np.testing.assert_allclose(gpu[1], cpu[1], rtol=1e-6, atol=1e-6)
