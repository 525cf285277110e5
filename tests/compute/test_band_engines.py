"""compute/band_engines.py: ``engine_for`` chooses as its docstring says for every precision
name, and the fused fold runs the engine it chose (the same numbers as calling it directly,
and those of a brute-force float64 E-step)."""

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import poisson

from mixfold.compute.band_engines import engine_for, fused_linear_fold, fused_linear_mixture
from mixfold.compute.encoded import ArrayEncoded
from mixfold.compute.linear import linear_fold
from mixfold.compute.linear_screened import ScreenedEStep
from mixfold.compute.linear_torch import TorchFusedEStep
from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
from mixfold.precision.bands import BANDS, resolve_precision
from tests.compute.terms import brute_estep, screened_problem

DEVICES = [None, "cpu", "cuda", "cuda:1", "mps"]


def _documented(precision: str) -> type | None:
    """The module docstring's table: on a CPU, NumPy's fold for float64 and the screened
    engine for float32, float16 and bfloat16; torch's on cuda (any other torch device), for
    fp8, and for float64 named on a torch device."""
    p = resolve_precision(precision)
    if p.device not in (None, "cpu") or p.band == "fp8":
        return TorchFusedEStep
    if p.band in ("bfloat16", "float16", "float32"):
        return ScreenedEStep
    return TorchFusedEStep if p.engine == "torch" else None


def _fused_precisions():
    """Every precision name the fused fold is handed: the native ones and the torch ones (a
    mixture sends the emulator's and ``dd`` to its band path)."""
    for band in BANDS:
        for device in DEVICES:
            name = band if device is None else f"{band}@{device}"
            p = resolve_precision(name)
            if p.native or p.engine == "torch":
                yield name


@pytest.mark.parametrize("precision", list(_fused_precisions()))
def test_engine_for_follows_the_docstring(precision):
    part, _ = screened_problem(4)
    assert engine_for([part.terms], resolve_precision(precision)) is _documented(precision)


def test_every_band_is_covered():
    names = list(_fused_precisions())
    assert {resolve_precision(n).band for n in names} == set(BANDS)
    for name in ("float64", "float32", "bfloat16", "float16", "fp8@cpu", "float64@cpu"):
        assert name in names


@pytest.mark.parametrize("precision", ["dd", "bfloat16@emulated", "fp8"])
def test_a_precision_no_fused_engine_runs_raises_clearly(precision):
    part, lw = screened_problem(8)
    with pytest.raises(ValueError, match=f"precision '{precision}' has no native CPU"):
        fused_linear_fold([part.terms], lw, ArrayEncoded(np.zeros(8)), np.ones(8),
                          resolve_precision(precision))


@pytest.mark.parametrize("precision, tol", [("float64", 1e-10), ("float32", 1e-4),
                                            ("bfloat16", 1e-4), ("float16", 1e-4),
                                            ("float64@cpu", 1e-10)])
def test_the_fused_fold_runs_the_chosen_engine(precision, tol):
    precision = resolve_precision(precision)
    n = 3000
    part, lw = screened_problem(n, k=4, f=2, far=2.0, seed=31)
    w = np.random.default_rng(32).uniform(0, 2, n)
    enc = ArrayEncoded(np.zeros(n))
    mass, lse = fused_linear_fold([part.terms], lw, enc, w, precision)
    sums = part.sums.copy()
    part.sums[:], part.mass[:], part.counts[:] = 0.0, 0.0, 0.0
    engine = engine_for([part.terms], precision)
    if engine is None:
        direct = linear_fold([part.terms], lw, enc, w, precision)
    else:
        direct = engine([part.terms], lw, enc, w, precision).run()
    np.testing.assert_array_equal(lse, direct[1])
    np.testing.assert_array_equal(mass, direct[0])
    np.testing.assert_array_equal(sums, part.sums)
    want = brute_estep([part], lw, w)
    np.testing.assert_allclose(lse, want["lse"], rtol=tol, atol=tol)
    np.testing.assert_allclose(mass, want["mass"], rtol=tol, atol=tol * w.sum())


def test_fused_linear_mixture_of_poissons_and_one_outside_the_form():
    x = np.array([0, 1, 7, 9, 120, 3000])
    enc = ArrayEncoded(x)
    lam = np.array([1.0, 6.0, 2900.0])
    lw = np.log([0.3, 0.3, 0.4])
    s = poisson.logpmf(x[:, None], lam[None, :]) + lw
    want = logsumexp(s, axis=1)
    for precision in map(resolve_precision, ("float64", "bfloat16", "float32")):
        accs = [PoissonAccumulator() for _ in lam]
        mass, lse = fused_linear_mixture(accs, [PoissonDistribution(v) for v in lam], lw, enc,
                                         np.ones(6), precision)
        np.testing.assert_allclose(lse, want, rtol=1e-6)
        np.testing.assert_allclose(mass, np.exp(s - want[:, None]).sum(axis=0), atol=1e-6)
    accs = [PoissonAccumulator() for _ in range(2)]
    assert fused_linear_mixture(accs, [PoissonDistribution(0.0), PoissonDistribution(1.0)],
                                lw[:2], enc, np.ones(6), resolve_precision("bfloat16")) is None
