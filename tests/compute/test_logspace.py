"""compute/logspace.py against scipy's logsumexp and exact (mpmath) log-densities, on rows far
from the origin, rows of -inf, NaN, empty and single-row inputs."""

import mpmath
import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from mixfold.compute.logspace import (FAR_OUT, LOG_2PI, affine_far_rows, far_rows,
                                      log_normalize_rows, logsumexp_rows,
                                      normalise_rows_compiled,
                                      relative_affine_scores, relative_quadratic_scores)

NINF = -np.inf


def hard_scores():
    rng = np.random.default_rng(0)
    s = rng.standard_normal((50, 4)) * 10.0 ** rng.integers(-3, 300, (50, 1))
    s[0] = [NINF, 0.0, NINF, -1.0]           # -inf entries
    s[1] = [NINF] * 4                        # no component scores the row
    s[2] = [1e308, 1e308, -1e308, NINF]      # at float64's edge
    s[3] = [-1e308, -1e308 * (1 - 2 ** -52), NINF, NINF]
    s[4] = [-745.0, -746.0, -800.0, -1e4]    # every exp underflows unshifted
    s[5] = [1e-300, 0.0, -1e-300, 5e-324]
    return s


def test_log_normalize_rows_equals_scipy():
    s = hard_scores()
    w = np.random.default_rng(1).uniform(0, 3, len(s))
    with np.errstate(over="ignore"):  # (1e308 less -1e308: -inf, whose exp is the right 0)
        post, lse = log_normalize_rows(s.copy(), w)
        want = logsumexp(s, axis=1)
    assert np.array_equal(np.isfinite(lse), np.isfinite(want))
    live = np.isfinite(want)
    np.testing.assert_allclose(lse[live], want[live], rtol=1e-15, atol=1e-13)
    assert lse[1] == NINF and not np.isnan(post).any()
    np.testing.assert_array_equal(post[1], 0.0)
    with np.errstate(over="ignore"):
        ref = softmax(s[live], axis=1) * w[live, None]
    np.testing.assert_allclose(post[live], ref, rtol=1e-13, atol=1e-300)


def test_log_normalize_rows_works_in_place_and_without_weights():
    s = np.log(np.array([[1.0, 3.0], [2.0, 2.0]]))
    post, lse = log_normalize_rows(s)
    assert post is s
    np.testing.assert_allclose(post, [[0.25, 0.75], [0.5, 0.5]], rtol=1e-15)
    np.testing.assert_allclose(lse, np.log([4.0, 4.0]), rtol=1e-15)


def test_a_nan_row_stays_nan_and_others_are_untouched():
    s = np.array([[np.nan, np.nan], [0.0, 0.0]])
    post, lse = log_normalize_rows(s.copy())
    assert np.isnan(lse[0]) and lse[1] == pytest.approx(np.log(2.0), rel=1e-15)
    assert post[1].tolist() == [0.5, 0.5]


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (1, 5), (4, 1)])
def test_empty_single_row_and_single_component(shape):
    s = np.random.default_rng(2).standard_normal(shape) * 1e5
    post, lse = log_normalize_rows(s.copy())
    assert post.shape == shape and lse.shape == (shape[0],)
    np.testing.assert_allclose(lse, logsumexp(s, axis=1) if s.size else [], rtol=1e-15)
    np.testing.assert_allclose(post.sum(axis=1), np.ones(shape[0]), rtol=1e-15)
    np.testing.assert_array_equal(logsumexp_rows(s), lse)


def test_logsumexp_rows_equals_scipy_and_leaves_its_input():
    s = hard_scores()
    keep = s.copy()
    with np.errstate(over="ignore"):
        got = logsumexp_rows(s)
        want = logsumexp(s, axis=1)
    np.testing.assert_array_equal(s, keep)
    assert got[1] == NINF
    live = np.isfinite(want)
    np.testing.assert_allclose(got[live], want[live], rtol=1e-15, atol=1e-13)
    assert logsumexp_rows(np.array([[np.inf, 0.0]]))[0] == np.inf


def test_far_rows_by_their_definition():
    mu, spread = np.array([[3.0, -1.0], [0.5, 2.0]]), np.array([0.5, 4.0])
    scale = 3.0 + 4.0
    x = np.array([[1.0, 2.0], [FAR_OUT * scale, 0.0], [0.0, -FAR_OUT * scale * 1.0001],
                  [-1e300, 1e300], [np.inf, 0.0]])
    assert far_rows(x, mu, spread).tolist() == [False, False, True, True, True]
    assert far_rows(np.empty((3, 0)), np.empty((2, 0)), np.empty(0)).tolist() == [False] * 3
    f = 1.0 / np.array([[0.5, 4.0], [0.25, 1.0]])  # spreads 0.5..4: the same scale
    np.testing.assert_array_equal(affine_far_rows(x, mu, f), far_rows(x, mu, spread))
    full = np.stack([np.diag(r) + np.triu(np.ones((2, 2)), 1) for r in f])
    np.testing.assert_array_equal(affine_far_rows(x, mu, full), far_rows(x, mu, spread))


def _exact_relative(x, mu, factor, const):
    """-|(x - mu_k) F_k|^2 / 2 + const_k less its row's largest, in 3000-bit arithmetic."""
    out = []
    with mpmath.workprec(3000):
        for row in x:
            s = []
            for k in range(len(mu)):
                d = [mpmath.mpf(float(a)) - mpmath.mpf(float(b)) for a, b in zip(row, mu[k])]
                if factor.ndim == 2:
                    z = [a * mpmath.mpf(float(f)) for a, f in zip(d, factor[k])]
                else:
                    z = [mpmath.fsum(d[i] * mpmath.mpf(float(factor[k, i, j]))
                                     for i in range(len(d))) for j in range(len(d))]
                s.append(-mpmath.fsum(v * v for v in z) / 2 + mpmath.mpf(float(const[k])))
            top = max(s)
            out.append([float(v - top) for v in s])
    return np.array(out)


def _check_relative(got, want):
    # a gap beyond float64's range rounds to -inf (a posterior of exactly 0); every other is
    # finite and exact to rounding
    rel = got - got.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(np.isfinite(rel), np.isfinite(want))
    live = np.isfinite(want)
    np.testing.assert_allclose(rel[live], want[live], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(softmax(rel, axis=1), softmax(want, axis=1), atol=1e-12)


@pytest.mark.parametrize("full", [False, True])
def test_relative_affine_scores_are_exact_far_out(full):
    rng = np.random.default_rng(4)
    mu = np.array([[0.0, 1.0], [1.0, -2.0], [0.5, 0.5]])
    sd = np.array([[1.0, 1.0], [1.0, 1.0], [2.0, 0.5]])
    factor = 1.0 / sd
    if full:  # a Cholesky factor of a precision: lower triangle, diagonal 1 / conditional sd
        factor = np.stack([np.diag(f) + np.tril(rng.uniform(-0.3, 0.3, (2, 2)), -1)
                           for f in factor])
    const = np.array([0.0, -0.3, 0.7])
    x = rng.standard_normal((40, 2)) * 10.0 ** rng.integers(0, 290, (40, 1))
    x[:3] = [[3.0, -1.0], [1e16, 1e16 + 2.0], [-1e200, 7.0]]
    got = relative_affine_scores(x, mu, factor, const)
    assert not np.isnan(got).any() and (got.max(axis=1) > -np.inf).all()
    _check_relative(got, _exact_relative(x, mu, factor, const))


def test_relative_affine_scores_break_a_tie_by_the_constant_term():
    # |x - mu_k| tie to the first order and differ only in |mu_k|^2: a far row still prefers the
    # nearer mean exactly
    x = np.array([[1e200, 0.0]])
    mu = np.array([[0.0, 1.0], [0.0, 2.0]])
    got = relative_affine_scores(x, mu, np.ones((2, 2)), np.zeros(2))
    _check_relative(got, _exact_relative(x, mu, np.ones((2, 2)), np.zeros(2)))
    assert got[0, 0] > got[0, 1]


def test_relative_quadratic_scores_beyond_the_square_of_float64():
    rng = np.random.default_rng(5)
    z = rng.standard_normal((20, 3, 2)) * 10.0 ** rng.integers(0, 300, (20, 1, 1))
    const = np.array([0.0, 1.5, -2.0])
    got = relative_quadratic_scores(z, const)
    with mpmath.workprec(3000):
        want = []
        for row in z:
            s = [-mpmath.fsum(mpmath.mpf(float(v)) ** 2 for v in row[k]) / 2
                 + mpmath.mpf(float(const[k])) for k in range(3)]
            want.append([float(v - max(s)) for v in s])
    _check_relative(got, np.array(want))


def test_log_2pi():
    # np.log of 2 pi rounded: within an ulp of the exact value (another test may have left
    # mpmath's global precision anywhere, hence the explicit one)
    with mpmath.workprec(200):
        exact = mpmath.log(2 * mpmath.pi)
        assert abs(mpmath.mpf(LOG_2PI) - exact) <= np.spacing(LOG_2PI)


def test_the_best_of_components_whose_gaps_all_overflow():
    # beside a narrow first component, the two wider ones both score 1e400 nats better: the
    # widest is the best, the other's gap to it still beyond float64's range (posterior 0)
    x = np.array([[1e200, 1e200]])
    mu = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    factor = np.array([[4.0, 4.0], [2.0, 2.0], [1.0, 1.0]])
    got = relative_affine_scores(x, mu, factor, np.zeros(3))
    assert got.tolist() == [[-np.inf, -np.inf, 0.0]]
    _check_relative(got, _exact_relative(x, mu, factor, np.zeros(3)))


def test_live_rows_get_the_same_bits_beside_dead_rows_as_alone() -> None:
    # all-finite input takes the short path, a dead row the general one: live rows agree
    rng = np.random.default_rng(3)
    live, weights = rng.normal(0, 30, (50, 4)), rng.uniform(0.5, 2.0, 50)
    alone, lse_alone = log_normalize_rows(live.copy(), weights)
    mixed = np.vstack([live, np.full((1, 4), NINF)])
    post, lse = log_normalize_rows(mixed, np.append(weights, 1.0))
    assert np.array_equal(post[:50], alone) and np.array_equal(lse[:50], lse_alone)
    assert lse[50] == NINF and not post[50].any()
    assert np.allclose(alone.sum(axis=1), weights, rtol=1e-14)


@pytest.mark.parametrize("order", ["F", "C"])
def test_compiled_normalisation_is_numpy_s_to_a_few_ulps_in_either_order(order):
    scores = np.array(np.random.default_rng(3).normal(0.0, 40.0, size=(500, 4)), order=order)
    weights = np.random.default_rng(4).uniform(0.0, 2.0, 500)
    want, want_lse = log_normalize_rows(np.array(scores, order="F"), weights)
    got, lse = normalise_rows_compiled(scores, weights)
    assert got is scores  # in place
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-15)


def test_compiled_normalisation_leaves_rows_without_a_finite_score_to_numpy():
    scores = np.asfortranarray([[0.0, -1.0], [NINF, NINF], [np.nan, 0.0]])
    got, lse = normalise_rows_compiled(scores.copy(order="F"), np.ones(3))
    want, want_lse = log_normalize_rows(scores.copy(order="F"), np.ones(3))
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(lse, want_lse, equal_nan=True)
