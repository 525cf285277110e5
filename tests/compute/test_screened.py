"""compute/screened.py: the band's scores stay within the screen's bound of the exact float64
scores (random and adversarial data, every band), a screened-out component cannot hold a
posterior, and the NumPy rescoring equals a brute-force float64 E-step."""

import ml_dtypes
import numpy as np
import pytest

from mixfold.compute.screened import (BAND_MAX, BAND_UNIT, SCREEN_CUTOFF, Screen, round_to_band,
                                      screens)
from tests.compute.terms import MatrixTerms, band_block, brute_estep, screened_problem

BANDS = ["bfloat16", "float16", "float32"]
SHIFT = 3.75


def _exact(screen, z, codes):
    """Every component's exact score less the shift, (K, m) float64."""
    out = screen.coef @ z.astype(np.float64).T
    for c in codes:
        out += screen.tables[:, c]
    return out


def _assert_bound_holds(screen, part, band, round_features=False):
    scores, z, codes = band_block(screen, part, band, round_features)
    exact = _exact(screen, z, codes)
    bound = screen.eta * (np.abs(z.astype(np.float64)) @ screen.cmax) + screen.slack
    live = np.isfinite(exact)
    assert np.array_equal(live, np.isfinite(scores))  # an impossible level stays impossible
    with np.errstate(invalid="ignore"):  # (-inf less -inf, where a level is impossible)
        err = np.abs(scores.astype(np.float64) - exact)
    assert (err[live] <= np.broadcast_to(bound, err.shape)[live]).all(), \
        f"largest error / bound {np.max(err[live] / np.broadcast_to(bound, err.shape)[live])}"


@pytest.mark.parametrize("band", BANDS)
@pytest.mark.parametrize("far", [1.0, 1e3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_screening_bound_holds_on_random_data(band, far, seed):
    part, lw = screened_problem(3000, k=5, f=4, far=far, seed=seed)
    screen = Screen.plan([part.terms], lw, SHIFT, band)
    _assert_bound_holds(screen, part, band)
    if band == "bfloat16":  # the tiles round the features to the band too
        _assert_bound_holds(screen, part, band, round_features=True)


@pytest.mark.parametrize("band", BANDS)
def test_the_screening_bound_holds_on_adversarial_data(band):
    rng = np.random.default_rng(9)
    m, k, f = 2000, 3, 64
    u = BAND_UNIT[band]
    # coefficients at the band's rounding ties, features that cancel in the sum to about 0,
    # large table entries, a row at float32's coarsest spacing
    coef = (1.0 + u * rng.choice([-1.0, 1.0, 0.5, 1.5], (k, f))) * rng.choice([-1, 1], (k, f))
    phi = np.repeat(rng.uniform(1e3, 2e3, (m, f // 2)), 2, axis=1)
    phi[:, 1::2] *= -1.0
    phi = phi.astype(np.float32).astype(np.float64)
    phi[0] = np.float32(1e7)
    table = rng.uniform(-900.0, -800.0, (k, 7))
    part = MatrixTerms(phi, coef, np.array([0.0, 1e3, -1e3]), table=table,
                       codes=rng.integers(0, 7, m))
    screen = Screen.plan([part.terms], np.log([0.2, 0.3, 0.5]), SHIFT, band)
    _assert_bound_holds(screen, part, band)


def test_a_model_the_band_cannot_hold_bounds_nothing():
    part, lw = screened_problem(10, far=1.0)
    big = MatrixTerms(part.phi, part.coef * 1e5, part.const, table=part.table, codes=part.codes)
    assert Screen.plan([big.terms], lw, 0.0, "float16").eta == np.inf
    assert np.isfinite(Screen.plan([big.terms], lw, 0.0, "bfloat16").eta)


def test_plan_lays_out_the_coefficients_and_tables():
    part, lw = screened_problem(50, k=3, f=2, levels=4)
    other = MatrixTerms(np.zeros((50, 0)), np.zeros((3, 0)), np.ones(3),
                        table=np.log(np.full((3, 6), 1 / 6)), codes=np.arange(50) % 6)
    screen = Screen.plan([part.terms, other.terms], lw, SHIFT, "bfloat16")
    f = part.coef.shape[1]
    np.testing.assert_array_equal(screen.coef[:, :f], part.coef)
    np.testing.assert_allclose(screen.coef[:, f], part.const + 1.0 + lw - SHIFT, rtol=1e-15)
    assert screen.table_columns == (0, 4) and screen.n_levels == 10
    codes = screen.codes([part.codes, np.array(other.codes)], 5, 9)
    assert codes.tolist() == [part.codes[5:9].tolist(), (4 + np.arange(5, 9) % 6).tolist()]
    counts = np.arange(30.0).reshape(3, 10)
    left, right = screen.split_counts(counts)
    assert left.tolist() == counts[:, :4].tolist() and right.tolist() == counts[:, 4:].tolist()
    assert screen.cmax.tolist() == (np.abs(screen.coef).max(axis=0) * (1 + 2 ** -8)).tolist()


def test_codes_outside_the_table_are_clipped_as_the_gather_does():
    part, lw = screened_problem(4, k=2, f=1, levels=3)
    screen = Screen.plan([part.terms], lw, 0.0, "float16")
    assert screen.codes([np.array([-5, 0, 2, 99])], 0, 4).tolist() == [[0, 0, 2, 2]]


@pytest.mark.parametrize("band", BANDS)
def test_round_to_band_is_the_nearest_band_value(band):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(100_000) * 10.0 ** rng.integers(-30, 30, 100_000)
    a = a[np.abs(a) < BAND_MAX[band]]
    got = round_to_band(a, band)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    ref = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[band]
    want = a.astype(np.float32).astype(ref).astype(np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("band", ["bfloat16", "float16"])
def test_round_to_band_saturates_finite_values_and_keeps_infinities(band):
    big = BAND_MAX[band]
    got = round_to_band(np.array([1e39, -1e300, np.inf, -np.inf, 2 * big]), band)
    lim = float(round_to_band(np.array([big]), band)[0])
    assert got.tolist() == [lim, -lim, np.inf, -np.inf, lim]
    assert lim <= np.finfo(ml_dtypes.bfloat16 if band == "bfloat16" else np.float16).max


def test_which_bands_screen():
    assert [b for b in ("fp8", "bfloat16", "float16", "float32", "float64", "dd")
            if screens(b)] == ["fp8", "bfloat16", "float16", "float32"]


def _rescore_numpy(screen, part, band, w, pad=0):
    scores, z, codes = band_block(screen, part, band, pad=pad)
    m = len(w)
    lse, post = np.empty(m), np.full((screen.coef.shape[0], m), np.nan, np.float32)
    counts = screen.rescore_numpy(scores, z, w, codes, lse, post)
    return lse, post, counts


@pytest.mark.parametrize("band", ["bfloat16", "float16"])
@pytest.mark.parametrize("dead", [False, True])
def test_rescore_numpy_equals_a_brute_force_estep(band, dead):
    part, lw = screened_problem(4000, k=6, f=3, far=3.0, dead=dead, seed=5)
    w = np.random.default_rng(6).uniform(0, 2, 4000)
    screen = Screen.plan([part.terms], lw, SHIFT, band)
    lse, post, counts = _rescore_numpy(screen, part, band, w, pad=7)
    want = brute_estep([part], lw, w)
    live = np.isfinite(want["lse"])
    assert np.array_equal(np.isfinite(lse), live) and (lse[~live] == -np.inf).all()
    assert dead == (not live.all())
    # a screened-out component holds at most exp(-cutoff) of its row
    tol = 6 * np.exp(-SCREEN_CUTOFF)
    np.testing.assert_allclose(lse[live], want["lse"][live], rtol=0, atol=tol)
    np.testing.assert_allclose(post.T, want["resp"], rtol=1e-6, atol=tol * w.max())
    assert (post[:, ~live] == 0).all()
    np.testing.assert_allclose(counts, want["counts0"], rtol=1e-5, atol=tol * w.sum())


def test_an_infinite_eta_rescores_every_component():
    part, lw = screened_problem(500, k=4, f=2, levels=None, seed=7)
    screen = Screen.plan([part.terms], lw, 0.0, "bfloat16")
    blind = Screen(screen.coef, screen.cmax, np.inf, screen.slack, screen.shift, screen.tables,
                   screen.table_columns)
    w = np.ones(500)
    lse, post, _ = _rescore_numpy(blind, part, "bfloat16", w)
    want = brute_estep([part], lw, w)
    np.testing.assert_allclose(lse, want["lse"], rtol=1e-12)
    np.testing.assert_allclose(post.T, want["resp"], rtol=1e-6, atol=1e-30)
