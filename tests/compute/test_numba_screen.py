"""compute/numba_screen.py: the compiled rescoring equals :meth:`Screen.rescore_numpy` and a
brute-force float64 E-step (to float32's exp and log where a row has several candidates), on
rows no component scores, single rows, padded score blocks and far rows; the float32 band's
``exact_top_normalise`` equals the brute force too."""

import numpy as np
import pytest

pytest.importorskip("numba")

from mixfold.compute.kernels import band_kernels  # noqa: E402
from mixfold.compute.screened import SCREEN_CUTOFF, Screen  # noqa: E402
from tests.compute.terms import (MatrixTerms, band_block, brute_estep,  # noqa: E402
                                 screened_problem)

SHIFT = -2.5
#: float32 exp and log of a row's few candidates (numba_bands: under 3e-7 relative each)
F32 = 2e-6


def _run(kernel_name, screen, part, band, w, pad=0):
    scores, z, codes = band_block(screen, part, band, pad=pad)
    m = len(w)
    lse = np.full(m, np.nan)
    post = np.full((screen.coef.shape[0], m), np.nan, np.float32)
    if kernel_name == "numpy":
        counts = screen.rescore_numpy(scores, z, w, codes, lse, post)
    elif kernel_name == "screen_rescore":
        counts = screen.rescore(band_kernels()[kernel_name], scores, z, w, codes, lse, post)
    else:
        counts = screen.rescore_top(band_kernels()[kernel_name], scores, z, w, codes, lse, post)
    return lse, post, counts


@pytest.mark.parametrize("band", ["bfloat16", "float16"])
@pytest.mark.parametrize("far, dead, levels", [(1.0, False, 5), (4.0, True, 5), (30.0, False, None),
                                               (1.0, False, None)])
def test_screen_rescore_equals_numpy_and_brute_force(band, far, dead, levels):
    part, lw = screened_problem(5000, k=7, f=3, far=far, dead=dead, levels=levels, seed=11)
    w = np.random.default_rng(12).uniform(0, 3, 5000)
    w[::9] = 0.0
    screen = Screen.plan([part.terms], lw, SHIFT, band)
    lse, post, counts = _run("screen_rescore", screen, part, band, w, pad=5)
    ref_lse, ref_post, ref_counts = _run("numpy", screen, part, band, w, pad=5)
    want = brute_estep([part], lw, w)
    live = np.isfinite(want["lse"])
    assert np.array_equal(np.isfinite(lse), live) and (lse[~live] == -np.inf).all()
    assert (post[:, ~live] == 0).all() and not np.isnan(post).any()
    np.testing.assert_allclose(lse[live], ref_lse[live], rtol=0, atol=F32)
    np.testing.assert_allclose(lse[live], want["lse"][live], rtol=0,
                               atol=F32 + 7 * np.exp(-SCREEN_CUTOFF))
    np.testing.assert_allclose(post, ref_post, rtol=F32, atol=F32 * w.max())
    np.testing.assert_allclose(post.T, want["resp"], rtol=F32, atol=F32 * w.max())
    np.testing.assert_allclose(counts, ref_counts, rtol=F32, atol=F32 * w.sum())
    if levels:
        np.testing.assert_allclose(counts, want["counts0"], rtol=1e-5, atol=F32 * w.sum())


def test_a_row_with_one_candidate_is_exact():
    # separated clusters: one candidate per row, whose float64 score is the log-density and
    # whose posterior is the row's weight, bit for bit
    rng = np.random.default_rng(13)
    centres = np.array([-100.0, 0.0, 100.0])
    x = (centres[rng.integers(0, 3, 2000)] + rng.normal(0, 1, 2000)).astype(np.float32)
    phi = np.stack([x * x, x], axis=1).astype(np.float64)
    coef = np.stack([np.full(3, -0.5), centres], axis=1)
    part = MatrixTerms(phi, coef, -0.5 * centres ** 2 - 0.5 * np.log(2 * np.pi))
    lw = np.log([0.2, 0.3, 0.5])
    w = rng.uniform(0.5, 1.5, 2000)
    screen = Screen.plan([part.terms], lw, SHIFT, "bfloat16")
    lse, post, _ = _run("screen_rescore", screen, part, "bfloat16", w)
    want = brute_estep([part], lw, w)
    assert ((post > 0).sum(axis=0) == 1).all()
    np.testing.assert_array_equal(post.sum(axis=0), w.astype(np.float32))
    np.testing.assert_allclose(lse, want["lse"], rtol=0, atol=1e-10)  # terms of 5e3 nats


@pytest.mark.parametrize("m", [1, 2, 33])
def test_a_few_rows(m):
    part, lw = screened_problem(m, k=4, f=2, far=2.0, seed=15)
    w = np.ones(m)
    screen = Screen.plan([part.terms], lw, SHIFT, "float16")
    lse, post, _ = _run("screen_rescore", screen, part, "float16", w, pad=3)
    want = brute_estep([part], lw, w)
    live = np.isfinite(want["lse"])
    np.testing.assert_allclose(lse[live], want["lse"][live], atol=F32)
    np.testing.assert_allclose(post.T, want["resp"], rtol=F32, atol=F32)


@pytest.mark.parametrize("dead", [False, True])
def test_exact_top_normalise_equals_brute_force(dead):
    part, lw = screened_problem(5000, k=5, f=3, far=2.0, dead=dead, seed=16)
    w = np.random.default_rng(17).uniform(0, 2, 5000)
    screen = Screen.plan([part.terms], lw, SHIFT, "float32")
    lse, post, counts = _run("exact_top_normalise", screen, part, "float32", w, pad=4)
    want = brute_estep([part], lw, w)
    live = np.isfinite(want["lse"])
    assert np.array_equal(np.isfinite(lse), live) and (lse[~live] == -np.inf).all()
    assert (post[:, ~live] == 0).all() and not np.isnan(post).any()
    # every posterior from float32 scores of a few hundred nats: within 1e-4 of its row
    np.testing.assert_allclose(lse[live], want["lse"][live], rtol=0, atol=1e-4)
    np.testing.assert_allclose(post.T, want["resp"], rtol=1e-3, atol=1e-4 * w.max())
    np.testing.assert_allclose(counts, want["counts0"], rtol=1e-3, atol=1e-4 * w.sum())
