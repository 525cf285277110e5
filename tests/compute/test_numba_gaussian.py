"""compute/numba_gaussian.py: the compiled squares and moments of stacked full-covariance
Gaussians against extended-precision references on data hard for them (means 1e6 from the
origin, covariances of condition number 1e8), no less accurate than NumPy's passes, and a range
of components computed with the bits of the whole stack."""

import numpy as np
import pytest

pytest.importorskip("numba")

from mixfold.compute.numba_gaussian import CHUNK, full_moments, full_squares  # noqa: E402

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
