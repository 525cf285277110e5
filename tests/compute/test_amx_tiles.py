"""The AMX tile GEMM (mixfold.compute.amx_tiles) against float64 products of the same bfloat16
values, for shapes that fill, split and pad the tiles; operand checks. Skipped where the CPU
(or the system) has no AMX-BF16 tiles."""

import numpy as np
import pytest

from mixfold.compute.amx_tiles import (MAX_FEATURES, ROW_ALIGN, amx_available, score_layout,
                                       tile_gemms)

pytestmark = pytest.mark.skipif(not amx_available(), reason="needs a CPU with AMX-BF16 tiles")


def _bits(a: np.ndarray) -> np.ndarray:
    """float32 -> the nearest bfloat16's bit patterns (ties to even)."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("k, f1, m", [(16, 22, 4096), (3, 4, 64), (17, 66, 96), (40, 128, 32),
                                      (1, 2, 32), (33, 40, 160)])
def test_the_gemm_equals_float64_products_of_the_band_values(k, f1, m):
    rng = np.random.default_rng(k * f1)
    z = _bits(rng.standard_normal((f1, m)) * 10)
    coef = _bits(rng.standard_normal((k, f1)))
    gemms = tile_gemms(k, f1)
    scores = np.empty((k, m), np.float32)
    gemms.score(coef, score_layout(z), scores)
    want = _values(coef) @ _values(z)
    # float32 accumulation over the f1 products of each score
    scale = np.abs(_values(coef)) @ np.abs(_values(z))
    assert (np.abs(scores - want) <= f1 * 2.0 ** -24 * scale).all()


def test_the_layout_pairs_features():
    z = np.arange(4 * 32, dtype=np.uint16).reshape(4, 32)
    pairs = score_layout(z)
    assert pairs.shape == (2, 32, 2) and pairs[1, 5].tolist() == [z[2, 5], z[3, 5]]


def test_operands_are_checked_before_the_call():
    gemms = tile_gemms(2, 4)
    z = np.zeros((4, 64), np.uint16)
    coef = np.zeros((2, 4), np.uint16)
    with pytest.raises(ValueError, match="multiple of 32"):
        gemms.score(coef, score_layout(np.zeros((4, 48), np.uint16)), np.empty((2, 48),
                                                                               np.float32))
    with pytest.raises(ValueError, match=r"float32 array of shape \(2, 64\)"):
        gemms.score(coef, score_layout(z), np.empty((2, 64)))
    with pytest.raises(ValueError, match="uint16"):
        gemms.score(np.zeros((2, 4), np.float32), score_layout(z), np.empty((2, 64), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        gemms.score(np.zeros((2, 8), np.uint16)[:, ::2], score_layout(z),
                    np.empty((2, 64), np.float32))
    for k, f1 in ((2, 3), (2, MAX_FEATURES + 2), (0, 4)):
        with pytest.raises(ValueError, match="even feature count"):
            tile_gemms(k, f1)
    assert ROW_ALIGN == 32
