"""compute/numba_gaussian.py: the compiled squares and moments of stacked full-covariance
Gaussians against extended-precision references on data hard for them (means 1e6 from the
origin, covariances of condition number 1e8), no less accurate than NumPy's passes, and a range
of components computed with the bits of the whole stack; the passes around BLAS's products at
wider D (the fold's its three steps' bits), the sums' reference point (gaussian_centre's bits) and
the stacked factorisation."""

import numpy as np
import pytest

pytest.importorskip("numba")

from mixfold.compute.linear import gaussian_centre  # noqa: E402
from mixfold.compute.logspace import log_normalize_rows  # noqa: E402
from mixfold.compute.numba_gaussian import (CHUNK, centred_columns, factor_covariances,  # noqa: E402
                                            full_fold, full_moments, full_squares,
                                            normalise_scores, reference_point, weighted_rows,
                                            whitened_fold, whitened_squares)

LONG = np.longdouble


def _hard(d: int, k: int = 4, n: int = 3 * CHUNK + 17, seed: int = 0):
    """(rows (n, D), means (K, D), upper-triangular precision factors (K, D, D)): means 1e6 from
    the origin and well apart, each covariance of condition number 1e8 in a random basis."""
    rng = np.random.default_rng(seed)
    means = 1e6 + rng.normal(0.0, 50.0, size=(k, d))
    factors, rows = [], []
    for mu in means:
        basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
        cov = basis @ np.diag(np.logspace(0, -8, d)) @ basis.T
        cov = 0.5 * (cov + cov.T)
        factors.append(np.linalg.cholesky(np.linalg.inv(cov)).T)  # upper: P = U U^T
        rows.append(rng.multivariate_normal(mu, cov, size=n // k + 1))
    x = np.ascontiguousarray(np.concatenate(rows)[:n])
    return x, means, np.array(factors)


def _squares(x, means, factors):
    center = means.mean(axis=0)
    out = np.empty((len(means), len(x)))
    full_squares(x, center, np.ascontiguousarray(means - center), factors, out)
    return out


def _numpy_squares(x, means, factors):
    """The NumPy path's form: ``(x - c) U - (mu - c) U`` per component."""
    center = means.mean(axis=0)
    return np.array([(((x - center) @ u - (mu - center) @ u) ** 2).sum(axis=1)
                     for mu, u in zip(means, factors)])


def _long_squares(x, means, factors):
    return np.array([((((x.astype(LONG) - mu.astype(LONG)) @ u.astype(LONG)) ** 2).sum(axis=1))
                     for mu, u in zip(means, factors)])


@pytest.mark.parametrize("d", [1, 2, 3, 7, 16])
def test_squares_are_as_accurate_as_numpy_s_against_extended_precision(d):
    x, means, factors = _hard(d)
    want = _long_squares(x, means, factors)
    err = np.abs(_squares(x, means, factors) - want) / want
    numpy_err = np.abs(_numpy_squares(x, means, factors) - want) / want
    # the row and the mean differenced first (exactly, at 1e6 with 50 apart): a few ulps of the
    # quadratic form, where NumPy's (x - c) U - (mu - c) U cancels (measured up to 4e-12)
    assert err.max() < 2e-15 and err.max() <= numpy_err.max()


def test_a_range_of_components_gets_the_whole_stack_s_bits():
    x, means, factors = _hard(5, k=6)
    center = means.mean(axis=0)
    whole = np.empty((6, len(x)))
    full_squares(x, center, np.ascontiguousarray(means - center), factors, whole)
    part = np.empty((2, len(x)))
    full_squares(x, center, np.ascontiguousarray(means[2:4] - center),
                 np.ascontiguousarray(factors[2:4]), part)
    assert np.array_equal(part, whole[2:4])

    resp = np.ascontiguousarray(np.random.default_rng(1).dirichlet(np.ones(6), len(x)).T)
    sums = [np.empty(6), np.empty((6, 5)), np.empty((6, 5, 5))]
    full_moments(x, center, resp, 5, len(x) - 3, *sums)
    sub = [np.empty(2), np.empty((2, 5)), np.empty((2, 5, 5))]
    full_moments(x, center, np.ascontiguousarray(resp[2:4]), 5, len(x) - 3, *sub)
    for a, b in zip(sub, sums):
        assert np.array_equal(a, b[2:4])


@pytest.mark.parametrize("d", [1, 3, 10])
def test_moments_against_extended_precision_over_a_row_range(d):
    x, means, _ = _hard(d)
    point = means.mean(axis=0)
    rng = np.random.default_rng(2)
    resp = np.ascontiguousarray(rng.dirichlet(np.ones(4), len(x)).T)
    lo, hi = 3, len(x) - CHUNK // 2  # a range that starts and ends inside chunks
    mass, sum_x, sum_xx = np.empty(4), np.empty((4, d)), np.empty((4, d, d))
    full_moments(x, point, resp, lo, hi, mass, sum_x, sum_xx)
    y = x[lo:hi].astype(LONG) - point.astype(LONG)
    r = resp[:, lo:hi].astype(LONG)
    np.testing.assert_allclose(mass, r.sum(axis=1).astype(float), rtol=1e-14)
    want_x = (r @ y).astype(float)
    want_xx = np.einsum("kn,na,nb->kab", r, y, y).astype(float)
    # sums about the centre of means 50 apart: |sum_x| and |sum_xx| are their sums' scale
    scale_x = (r @ np.abs(y)).astype(float)
    assert (np.abs(sum_x - want_x) <= 1e-13 * scale_x).all()
    assert (np.abs(sum_xx - want_xx) <= 1e-13 * np.abs(want_xx) + 1e-300).all()
    assert np.array_equal(sum_xx, sum_xx.transpose(0, 2, 1))


def test_no_rows_add_nothing():
    x, means, _ = _hard(3)
    resp = np.ones((2, len(x)))
    sums = [np.full(2, 7.0), np.full((2, 3), 7.0), np.full((2, 3, 3), 7.0)]
    full_moments(x, means[0], resp, 10, 10, *sums)
    assert all((s == 0).all() for s in sums)


def test_read_only_rows_are_taken_as_they_are():
    x, means, factors = _hard(3)
    frozen = x.copy()
    frozen.flags.writeable = False  # an Arrow table's buffer, a memory map
    assert np.array_equal(_squares(frozen, means, factors), _squares(x, means, factors))
    resp = np.ones((2, len(x)))
    got = [np.empty(2), np.empty((2, 3)), np.empty((2, 3, 3))]
    want = [np.empty(2), np.empty((2, 3)), np.empty((2, 3, 3))]
    full_moments(frozen, means[0], resp, 0, len(x), *got)
    full_moments(x, means[0], resp, 0, len(x), *want)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def _scores(n: int = 3 * CHUNK + 5, k: int = 4, seed: int = 4) -> np.ndarray:
    """(K, n) log-scores: a wide spread, gaps past exp's underflow, ties."""
    rng = np.random.default_rng(seed)
    s = rng.normal(0.0, 30.0, size=(k, n)) - 1e3
    s[1, :10] = s[0, :10]
    s[2, 10:20] = s[0, 10:20] - 800.0
    return s


def test_normalise_scores_is_numpy_s_normalisation_to_a_few_ulps():
    s = _scores()
    w = np.random.default_rng(5).uniform(0.0, 3.0, s.shape[1])
    top, total = np.empty(s.shape[1]), np.empty(s.shape[1])
    got = s.copy()
    assert normalise_scores(got, w, top, total)
    want, lse = log_normalize_rows(np.asfortranarray(s.T), w)
    np.testing.assert_allclose(got.T, want, rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(top + np.log(total), lse, rtol=1e-15)


def test_normalise_scores_writes_nothing_where_a_row_has_no_finite_score():
    s = _scores()
    s[:, 2 * CHUNK + 3] = -np.inf
    got = s.copy()
    n = s.shape[1]
    assert not normalise_scores(got, np.ones(n), np.empty(n), np.empty(n))
    assert np.array_equal(got, s)


@pytest.mark.parametrize("d", [1, 3, 8])
def test_the_fused_fold_is_the_squares_the_normalisation_and_the_moments(d):
    x, means, factors = _hard(d)
    n, k = len(x), len(means)
    center = means.mean(axis=0)
    offsets = np.ascontiguousarray(means - center)
    const, log_w = np.linspace(-3.0, 1.0, k), np.log(np.full(k, 1.0 / k))
    w = np.random.default_rng(6).uniform(0.5, 2.0, n)
    point = means[1]
    lo, hi = 7, n - 3
    squares = np.empty((k, n))
    full_squares(x, center, offsets, factors, squares)
    scores = np.ascontiguousarray(((squares * -0.5) + const[:, None] + log_w[:, None])[:, lo:hi])
    top, total = np.empty(hi - lo), np.empty(hi - lo)
    assert normalise_scores(scores, np.ascontiguousarray(w[lo:hi]), top, total)
    want = [np.empty(k), np.empty((k, d)), np.empty((k, d, d))]
    resp = np.zeros((k, n))
    resp[:, lo:hi] = scores
    full_moments(x, point, resp, lo, hi, *want)
    got = [np.empty(k), np.empty((k, d)), np.empty((k, d, d))]
    got_resp, got_top, got_total = np.zeros((k, n)), np.empty(n), np.empty(n)
    assert full_fold(x, center, offsets, factors, const, log_w, w, point, lo, hi, got_resp,
                     got_top, got_total, *got)
    assert np.array_equal(got_resp, resp)
    assert np.array_equal(got_top[lo:hi], top) and np.array_equal(got_total[lo:hi], total)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


# -- the passes around BLAS's products at wider D ---------------------------------------------


def _whitened(x, means, factors):
    """(yt (K, D, n) as the stack's GEMMs make it, offsets (K, D)): ``U_k^T (x - c)^T`` and
    ``(mu_k - c) U_k``, c the mean of the means."""
    center = means.mean(axis=0)
    xct = np.empty((x.shape[1], len(x)))
    centred_columns(x, center, 0, len(x), xct)
    assert np.array_equal(xct, (x - center).T)
    yt = np.array([u.T @ xct for u in factors])
    return yt, np.array([(mu - center) @ u for mu, u in zip(means, factors)])


@pytest.mark.parametrize("d", [9, 30])
def test_whitened_squares_are_numpy_s_form_against_extended_precision(d):
    x, means, factors = _hard(d)
    yt, offsets = _whitened(x, means, factors)
    out = np.empty((len(means), len(x) + 5))
    whitened_squares(yt, offsets, 5, out)
    want = _long_squares(x, means, factors)
    err = np.abs(out[:, 5:] - want) / want
    numpy_err = np.abs(_numpy_squares(x, means, factors) - want) / want
    # NumPy's form, (x - c) U - (mu - c) U: the same cancellation (measured 2.6e-13 at D=9 and
    # 1.2e-13 at D=30, NumPy's the same to two digits), no worse
    assert err.max() <= 2 * numpy_err.max()


@pytest.mark.parametrize("d", [9, 30])
def test_weighted_rows_against_extended_precision(d):
    x, means, _ = _hard(d)
    point = means.mean(axis=0)
    resp = np.ascontiguousarray(np.random.default_rng(2).dirichlet(np.ones(4), len(x)).T)
    lo, hi = 3, len(x) - 7
    mass, sum_x, rooted = np.empty(4), np.empty((4, d)), np.empty((4, hi - lo, d))
    weighted_rows(x, point, resp, lo, hi, mass, sum_x, rooted)
    y = x[lo:hi].astype(LONG) - point.astype(LONG)
    r = resp[:, lo:hi].astype(LONG)
    np.testing.assert_allclose(mass, r.sum(axis=1).astype(float), rtol=1e-14)
    assert (np.abs(sum_x - (r @ y).astype(float)) <= 1e-13 * (r @ np.abs(y)).astype(float)).all()
    want = (np.sqrt(r)[:, :, None] * y[None]).astype(float)
    assert (np.abs(rooted - want) <= 2.3e-16 * np.abs(want)).all()


def test_the_whitened_fold_is_the_squares_the_normalisation_and_the_weighted_rows():
    x, means, factors = _hard(30, k=3)
    yt, offsets = _whitened(x, means, factors)
    k, n, d = len(means), len(x), x.shape[1]
    const, log_w = np.array([-3.0, -1.5, 2.0]), np.log(np.array([0.2, 0.3, 0.5]))
    weights = np.random.default_rng(3).uniform(0.5, 2.0, n)
    point = np.round(means.mean(axis=0))
    # the three steps: the squares, the stack's constants and the mixture's weights added,
    # the stack's normalisation, the stacked update's weighted rows
    want = np.empty((k, n))
    whitened_squares(yt, offsets, 0, want)
    want *= -0.5
    want += const[:, None]
    want += log_w[:, None]
    top, total = np.empty(n), np.empty(n)
    assert normalise_scores(want, weights, top, total)
    sums = [np.empty(k), np.empty((k, d)), np.empty((k, n, d))]
    weighted_rows(x, point, want, 0, n, *sums)
    resp, got_top, got_total = np.empty((k, n)), np.empty(n), np.empty(n)
    got = [np.empty(k), np.empty((k, d)), np.empty((k, n, d))]
    assert whitened_fold(yt, offsets, const, log_w, weights, resp, got_top, got_total, x, point,
                         *got)
    assert np.array_equal(resp, want)
    assert np.array_equal(got_top, top) and np.array_equal(got_total, total)
    assert all(np.array_equal(a, b) for a, b in zip(got, sums))


def test_the_whitened_fold_stops_where_a_row_has_no_finite_score():
    x, means, factors = _hard(30, k=2)
    yt, offsets = _whitened(x, means, factors)
    yt[1, 4, 17] = np.inf  # row 17 under component 1: -inf; under component 0: NaN
    yt[0, 2, 17] = np.nan
    n, d = len(x), x.shape[1]
    assert not whitened_fold(yt, offsets, np.zeros(2), np.zeros(2), np.ones(n),
                             np.empty((2, n)), np.empty(n), np.empty(n), x, means[0],
                             np.empty(2), np.empty((2, d)), np.empty((2, n, d)))


def test_reference_point_is_gaussian_centre_bit_for_bit():
    rng = np.random.default_rng(0)
    for t in range(3000):
        k, d = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        scale = 10.0 ** rng.uniform(-8, 8)
        mu = rng.normal(size=(k, d)) * scale + rng.normal() * 10.0 ** rng.uniform(-3, 9)
        s2 = np.abs(rng.normal(size=(k, d))) * scale ** 2 * 10.0 ** rng.uniform(-6, 2)
        if t % 5 == 0:
            s2[:] = 0.0  # no spread: the mean kept
        if t % 7 == 0:
            mu[0, 0] = np.nan
        if t % 11 == 0:
            s2[0, -1] = np.inf
        if t % 13 == 0:
            mu = np.round(mu)  # means on the grid
        out = np.empty(d)
        reference_point(mu, s2, out)
        with np.errstate(all="ignore"):
            want = gaussian_centre(mu, s2)
        assert np.array_equal(out, want, equal_nan=True), (mu, s2)


@pytest.mark.parametrize("d", [1, 4, 30])
def test_factor_covariances_against_extended_precision(d):
    rng = np.random.default_rng(d)
    covs, conds = [], (1e0, 1e4, 1e8)
    for cond in conds:
        basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
        covs.append(basis @ np.diag(np.logspace(0, -np.log10(cond), d)) @ basis.T)
    cov = np.array(covs)
    cov[1] += 1e-17 * rng.normal(size=(d, d))  # not quite symmetric: symmetrised first
    sym, low, up, log_det = (np.empty(cov.shape), np.empty(cov.shape), np.empty(cov.shape),
                             np.empty(len(cov)))
    assert factor_covariances(cov, sym, low, up, log_det) == -1
    assert np.array_equal(sym, 0.5 * (cov + cov.transpose(0, 2, 1)))
    for s, lo, u, ld, cond in zip(sym, low, up, log_det, conds):
        assert np.array_equal(lo, np.tril(lo)) and np.array_equal(u, np.triu(u))
        want = np.linalg.cholesky(s)
        # backward stable: L L^T is the covariance to round-off, whatever its condition
        assert np.abs(lo @ lo.T - s).max() <= 1e-15 * d * np.abs(s).max()
        assert np.abs(lo - want).max() <= 1e-8 * np.abs(want).max()
        # U L^T = I: the triangular inverse by forward substitution
        eye = (u.astype(LONG).T @ lo.astype(LONG)).astype(float)
        assert np.abs(eye - np.eye(d)).max() <= 1e-14 * d * np.linalg.cond(lo)
        # log|U| = -log det(cov) / 2, the eigenvalues' (a backward error of d eps |cov| moves it
        # by up to d eps cond)
        exact = 0.5 * np.log(np.logspace(0, -np.log10(cond), d)).sum()
        assert abs(ld + exact) <= 1e-15 * d * max(cond, 10.0) * max(1.0, abs(exact))


def test_factor_covariances_names_the_first_covariance_not_positive_definite():
    good = np.eye(3)
    bad = np.diag([1.0, -1.0, 1.0])
    nan = np.diag([1.0, np.nan, 1.0])
    for stack, first in (([good, bad, nan], 1), ([good, nan], 1), ([good, good], -1)):
        cov = np.array(stack)
        out = [np.empty(cov.shape) for _ in range(3)] + [np.empty(len(cov))]
        assert factor_covariances(cov, *out) == first
