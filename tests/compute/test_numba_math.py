"""compute/numba_math.py: the vectorisable exp64 against mpmath (50 digits) over the whole
float64 range of exp, its subnormal results and special values, and its loop vectorised."""

import re

import numpy as np
import pytest

numba = pytest.importorskip("numba")
mpmath = pytest.importorskip("mpmath")

from mixfold.compute.numba_math import EXP_MAX_ULPS, exp64  # noqa: E402

SMALLEST = 2.0 ** -1074  # the least subnormal


@numba.njit(error_model="numpy")
def _exp_all(x, out):
    for i in range(x.size):
        out[i] = exp64(x[i])


def _exp(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _exp_all(np.ascontiguousarray(x, dtype=np.float64), out)
    return out


def _reference(x: np.ndarray) -> np.ndarray:
    with mpmath.workdps(50):
        return np.array([float(mpmath.exp(mpmath.mpf(float(v)))) for v in x])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(want)


@pytest.mark.parametrize("lo, hi", [(-708.0, 709.7), (-40.0, 0.0), (-1e-3, 1e-3),
                                    (-0.35, 0.35)])
def test_normal_results_within_the_documented_ulps(lo, hi):
    x = np.random.default_rng(0).uniform(lo, hi, 4000)
    x = np.concatenate([x, np.log(2.0) * np.arange(-1021, 1024) / 2.0])  # near the cut points
    x = x[(x >= lo) & (x <= hi)]
    err = _ulps(_exp(x), _reference(x))
    assert err.max() <= EXP_MAX_ULPS
    assert err.max() <= 1.0  # measured: every result the nearest float or its neighbour


def test_subnormal_results_within_one_of_their_ulps():
    x = np.random.default_rng(1).uniform(-745.13, -708.4, 2000)
    got, want = _exp(x), _reference(x)
    assert (want < 2.0 ** -1022).any()
    assert (np.abs(got - want) <= SMALLEST).all()


def test_special_values_and_the_ends_of_the_range():
    x = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, -1e-300, 5e-324, 709.782712893384,
                  709.7827128933841, 710.0, 1e300, -745.1332191019411, -745.1332191019412,
                  -746.0, -1e300])
    got = _exp(x)
    assert got[0] == 0.0 and got[1] == np.inf and np.isnan(got[2])
    assert (got[3:7] == 1.0).all()
    assert np.isfinite(got[7]) and got[7] > 1.7e308
    assert (got[8:11] == np.inf).all()
    assert got[11] == SMALLEST and (got[12:] == 0.0).all()


def test_the_loop_over_rows_vectorises():
    @numba.njit(error_model="numpy")
    def loop(x, out):
        for i in range(x.size):
            out[i] = exp64(x[i])

    loop(np.zeros(8), np.zeros(8))
    ir = loop.inspect_llvm(loop.signatures[0])
    assert re.search(r"<(4|8) x double>", ir)
