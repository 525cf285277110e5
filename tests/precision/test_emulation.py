"""Band arithmetic: every step rounded to the band, on NumPy (ml_dtypes) and on torch."""

import ml_dtypes
import numpy as np
import pytest

import mixfold
from mixfold import (CompositeDistribution, GaussianDistribution, MixtureDistribution,
                     PoissonDistribution)
from mixfold.precision import BandSupportError, band_ops, require_band, resolve_precision
from mixfold.precision.emulation import RoundedOps, round_to_band

DTYPES = {"fp8": ml_dtypes.float8_e4m3fn, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


@pytest.mark.parametrize("band", ["fp8", "bfloat16", "float16"])
def test_each_operation_is_the_bands_correctly_rounded_result(band, rng):
    ops, dt = band_ops(resolve_precision(f"{band}@emulated")), DTYPES[band]
    a = rng.uniform(-20, 20, 500).astype(dt).astype(np.float64)
    b = rng.uniform(0.5, 20, 500).astype(dt).astype(np.float64)
    for got, exact in ((ops.add(a, b), a + b), (ops.sub(a, b), a - b), (ops.mul(a, b), a * b),
                       (ops.div(a, b), a / b), (ops.exp(-b), np.exp(-b)), (ops.log(b), np.log(b))):
        # representable in the band, and the nearest such value to the exact result
        assert np.array_equal(got, got.astype(dt).astype(np.float64))
        np.testing.assert_array_equal(got, np.asarray(exact).astype(dt).astype(np.float64))


def test_fp8_saturates_instead_of_overflowing_to_nan():
    assert round_to_band(np.array([1e6, -1e6, 449.0]), "fp8").tolist() == [448.0, -448.0, 448.0]
    assert np.isnan(np.array([1e6]).astype(ml_dtypes.float8_e4m3fn).astype(float))[0]


def test_gaussian_log_density_runs_every_step_in_float16(rng):
    d = GaussianDistribution(0.3, 2.5)
    x = rng.normal(0, 2, 1000)
    got = d.seq_log_density(d.encoder().encode(x), resolve_precision("float16@emulated"))
    # independent reference: NumPy's own float16 arithmetic, step by step
    h = np.float16
    # (the deviation enters the band rounded once: rows far from 0 are scored like rows near it)
    s2, z = h(2.5), (x - 0.3).astype(h)
    inner = z * z / s2 + (h(np.log(2 * np.pi)) + np.log(s2))
    np.testing.assert_array_equal(got, (h(-0.5) * inner).astype(np.float64))
    # and not merely the float64 result cast once at the end
    once = d.seq_log_density(d.encoder().encode(x)).astype(h).astype(np.float64)
    assert (got != once).sum() > 50


def test_bands_that_a_family_cannot_run_are_refused_by_name():
    with pytest.raises(BandSupportError, match="Poisson family"):
        mixfold.optimize(np.arange(20) % 4, mixfold.PoissonEstimator(), precision="float16",
                         progress=False)
    mix = MixtureDistribution([PoissonDistribution(1.0), PoissonDistribution(4.0)], [0.5, 0.5])
    with pytest.raises(BandSupportError, match="'fp8' cannot run the Poisson family"):
        mix.seq_log_density(mix.encoder().encode([1, 2]), resolve_precision("fp8"))
    comp = CompositeDistribution([GaussianDistribution(0, 1), GaussianDistribution(0, 1)])
    with pytest.raises(BandSupportError, match="Composite"):
        require_band(comp, "dd")
    require_band(comp, "float32")  # native bands run everywhere
    with pytest.raises(BandSupportError, match="LogGaussianAccumulator"):
        acc = mixfold.LogGaussianEstimator().accumulator_factory().make()
        enc = mixfold.LogGaussianDistribution(0, 1).encoder().encode([1.0, 2.0])
        acc.seq_update(enc, np.ones(2), None, resolve_precision("dd"))


def test_unknown_precisions_are_refused():
    with pytest.raises(ValueError, match="precision must be"):
        mixfold.optimize([1.0, 2.0], mixfold.GaussianEstimator(), precision="float12",
                         progress=False)
    with pytest.raises(ValueError, match="runs natively"):
        band_ops(resolve_precision("float64"))
    with pytest.raises(ValueError, match="fp8, bfloat16 or float16"):
        RoundedOps("dd")


def _mixture():
    return MixtureDistribution([GaussianDistribution(-2, 1), GaussianDistribution(1, 0.5),
                                GaussianDistribution(4, 2)], [0.3, 0.3, 0.4])


@pytest.mark.parametrize("band", ["fp8", "bfloat16", "float16", "float32", "dd"])
def test_torch_runs_the_same_band_arithmetic_on_its_cpu_device(band, rng):
    pytest.importorskip("torch")
    m = _mixture()
    enc = m.encoder().encode(m.sampler(1).sample(2000))
    reference = f"{band}@emulated" if band in DTYPES else band
    got = m.seq_log_density(enc, resolve_precision(f"{band}@cpu"))
    want = m.seq_log_density(enc, resolve_precision(reference))
    u = mixfold.precision.UNIT_ROUNDOFF[band]
    np.testing.assert_allclose(got, want, rtol=max(64 * u, 1e-28), atol=max(64 * u, 1e-28))
    exact = m.seq_log_density(enc)
    assert np.abs(got - exact).max() > 0 or band == "dd"


def test_a_missing_device_is_refused_clearly():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    m = _mixture()
    with pytest.raises(RuntimeError, match="does not have"):
        m.seq_log_density(m.encoder().encode([0.0]), resolve_precision("float16@cuda"))


@pytest.mark.skipif(not __import__("mixfold.precision.gpu", fromlist=["x"])
                    .torch_device_available("cuda"), reason="needs a CUDA device")
@pytest.mark.parametrize("band", ["fp8", "bfloat16", "float16", "float32", "float64", "dd"])
def test_gpu_bands_match_the_cpu_emulation(band):
    m = _mixture()
    x = m.sampler(2).sample(20000)
    enc = m.encoder().encode(x)
    u = mixfold.precision.UNIT_ROUNDOFF[band]
    got = m.seq_log_density(enc, resolve_precision(f"{band}@cuda"))
    want = m.seq_log_density(enc, resolve_precision(f"{band}@emulated" if band in DTYPES else band))
    np.testing.assert_allclose(got, want, rtol=max(64 * u, 1e-28), atol=max(64 * u, 1e-28))
    fit = mixfold.optimize(x, mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 3),
                           precision=f"{band}@cuda", max_iter=5, seed=0, progress=False)
    assert fit.fit_result.precision == f"{band}@cuda"
