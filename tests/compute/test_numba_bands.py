"""compute/numba_bands.py: the float32 exp and log within their stated ulps over their whole
range (against float64's, rounded), and the bfloat16 layout against ml_dtypes' rounding."""

import math

import ml_dtypes
import numpy as np
import pytest

numba = pytest.importorskip("numba")

from mixfold.compute.numba_bands import (band_pairs_layout, band_rows_pairs_layout,  # noqa: E402
                                         exp32, log32)

#: the stated errors: exp "about 3e-7, five float32 ulps", log "under 3 float32 ulps"
EXP_ULPS, LOG_ULPS = 5.0, 3.0
#: exp's whole range: inputs whose 2**n and polynomial both stay normal float32 (the kernels
#: pass [-80, 0]; within half a ln 2 of float32's own limits the exponent arithmetic leaves its
#: range: exp32(88.72) is NaN, exp32(-87.34) 24 ulps off)
EXP_LO, EXP_HI = (-126 + 0.5) * math.log(2), (127 - 0.5) * math.log(2)


@numba.njit
def _exp_all(x, out):
    for i in range(x.size):
        out[i] = exp32(x[i])


@numba.njit
def _log_all(x, out):
    for i in range(x.size):
        out[i] = log32(x[i])


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the float32 spacing at want (float64 ``want``)."""
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def _exp32(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _exp_all(x, out)
    return out


def _log32(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _log_all(x, out)
    return out


def test_exp32_within_its_ulps_over_its_whole_range():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        np.linspace(EXP_LO, EXP_HI, 2_000_001, dtype=np.float32),
        rng.uniform(-0.35, 0.35, 200_000).astype(np.float32),  # the reduced interval itself
        (np.arange(-125, 128) * np.log(2)).astype(np.float32),  # at the reduction's seams
        ((np.arange(-125, 127) + 0.5) * np.log(2)).astype(np.float32),
        np.float32([0.0, -0.0, 1e-30, -1e-30, -60.0, -80.0, 1.0])])
    x = x[(x >= EXP_LO) & (x <= EXP_HI)]
    got = _exp32(x)
    want = np.exp(x.astype(np.float64))
    assert np.isfinite(got).all() and (got > 0).all()
    assert _ulps(got, want).max() <= EXP_ULPS
    np.testing.assert_allclose(got, want, rtol=3.6e-7)


def test_log32_within_three_ulps_for_every_normal_float32():
    rng = np.random.default_rng(1)
    tiny, huge = np.finfo(np.float32).tiny, np.finfo(np.float32).max
    bits = rng.integers(np.float32(tiny).view(np.uint32), np.float32(huge).view(np.uint32),
                        2_000_000, dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32),
                        np.float32([tiny, huge, 1.0, 2.0, 0.5, math.sqrt(0.5), math.sqrt(2.0)]),
                        np.nextafter(np.float32(1.0), np.float32([0.0, 2.0])),
                        rng.uniform(0.5, 2.0, 200_000).astype(np.float32)])
    got = _log32(x)
    want = np.log(x.astype(np.float64))
    live = want != 0.0
    assert _ulps(got[live], want[live]).max() <= 3.0
    assert (got[~live] == 0.0).all()  # log(1) is exactly 0


def test_log32_within_its_stated_ulps():
    x = np.random.default_rng(1).uniform(0.5, 2.0, 2_000_000).astype(np.float32)
    assert _ulps(_log32(x), np.log(x.astype(np.float64))).max() <= LOG_ULPS


def test_exp_and_log_keep_what_the_kernels_rely_on():
    # a dead row's zero total logs to below every live total's (never NaN; the kernels mend
    # the row to -inf), and exp of the floor is tiny but normal
    assert -89 < _log32(np.float32([0.0]))[0] < -87
    assert 0 < _exp32(np.float32([-80.0]))[0] < 1e-34


def _bf16_bits(a: np.ndarray) -> np.ndarray:
    return a.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)


@pytest.mark.parametrize("f1, m, f1p, mp", [(3, 5, 4, 32), (4, 32, 4, 32), (1, 1, 2, 16),
                                            (7, 40, 8, 64)])
def test_band_pairs_layout_rounds_to_nearest_even_and_pads_with_zeros(f1, m, f1p, mp):
    rng = np.random.default_rng(f1 * m)
    z = (rng.standard_normal((f1, m)) * 10.0 ** rng.integers(-30, 30, (f1, m))).astype(np.float32)
    z[0, 0] = np.float32(1.0 + 2.0 ** -8)   # a tie: to the even 1.0
    if m > 1:
        z[0, 1] = np.float32(1.0 + 3 * 2.0 ** -8)  # a tie: up to the even 1 + 2^-7
    pairs = np.full((f1p // 2, mp), 0xDEADBEEF, np.uint32)
    band_pairs_layout(z, pairs)
    padded = np.zeros((f1p, mp), np.float32)
    padded[:f1, :m] = z
    want = _bf16_bits(padded[0::2]) | (_bf16_bits(padded[1::2]) << 16)
    np.testing.assert_array_equal(pairs, want)
    assert pairs[0, 0] & 0xFFFF == 0x3F80


@pytest.mark.parametrize("f1, m, f1p, mp", [(3, 5, 4, 32), (21, 100, 22, 128), (1, 1, 2, 32)])
def test_band_rows_pairs_layout_equals_the_feature_major_layout(f1, m, f1p, mp):
    rng = np.random.default_rng(f1 + m)
    z = (rng.standard_normal((f1, m)) * 10.0 ** rng.integers(-3, 3, (f1, m))).astype(np.float32)
    want = np.full((f1p // 2, mp), 0xDEADBEEF, np.uint32)
    got = want.copy()
    band_pairs_layout(z, want)
    band_rows_pairs_layout(np.ascontiguousarray(z.T), got)
    np.testing.assert_array_equal(got, want)
