"""Double-double arithmetic against exact rational and 50-digit references."""

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from mixfold.precision.doubledouble import (DD, dd_add, dd_div, dd_exp, dd_log, dd_mul,
                                            dd_sum_rows, two_prod, two_sum)



@pytest.fixture(autouse=True)
def _fifty_digits():
    # mpmath's precision is global: set for these tests only, as it was
    with mpmath.workdps(50):
        yield


def exact(pair):
    return Fraction(float(pair[0])) + Fraction(float(pair[1]))


def rel(pair, reference):
    value = mpmath.mpf(float(pair[0])) + mpmath.mpf(float(pair[1]))
    return float(abs((value - reference) / reference))


def test_error_free_transformations_are_exact(rng):
    a = rng.normal(size=200) * 10.0 ** rng.integers(-8, 8, 200)
    b = rng.normal(size=200) * 10.0 ** rng.integers(-8, 8, 200)
    s, p = two_sum(a, b), two_prod(a, b)
    for i in range(200):
        assert exact((s.hi[i], s.lo[i])) == Fraction(a[i]) + Fraction(b[i])
        assert exact((p.hi[i], p.lo[i])) == Fraction(a[i]) * Fraction(b[i])


def test_add_mul_div_carry_about_106_bits(rng):
    x, y = rng.uniform(0.1, 10, 50), rng.uniform(0.1, 10, 50)
    a, b = DD(x, x * 2.0 ** -60), DD(y, -y * 2.0 ** -61)
    for op, ref in ((dd_add, lambda u, v: u + v), (dd_mul, lambda u, v: u * v),
                    (dd_div, lambda u, v: u / v)):
        out = op(a, b)
        for i in range(50):
            u = mpmath.mpf(x[i]) + mpmath.mpf(x[i] * 2.0 ** -60)
            v = mpmath.mpf(y[i]) - mpmath.mpf(y[i] * 2.0 ** -61)
            assert rel((out.hi[i], out.lo[i]), ref(u, v)) < 2.0 ** -100


def test_exp_and_log_match_50_digits(rng):
    x = np.concatenate([rng.uniform(-40, 5, 40), [0.0, -1e-12, 1e-9, -300.0]])
    e = dd_exp(DD(x, np.zeros_like(x)))
    for i, v in enumerate(x):
        assert rel((e.hi[i], e.lo[i]), mpmath.exp(mpmath.mpf(v))) < 2.0 ** -100
    y = rng.uniform(1e-6, 1e6, 40)
    g = dd_log(DD(y, np.zeros_like(y)))
    for i, v in enumerate(y):
        ref = mpmath.log(mpmath.mpf(v))
        assert float(abs(mpmath.mpf(g.hi[i]) + mpmath.mpf(g.lo[i]) - ref)) < 2.0 ** -100 * max(
            1.0, float(abs(ref)))
    deep = dd_exp(DD(np.array([-700.0, -800.0]), np.zeros(2)))  # low part subnormal, then 0
    assert rel((deep.hi[0], deep.lo[0]), mpmath.exp(-700)) < 1e-15 and deep.hi[1] == 0.0


def test_row_sums_are_exactly_rounded_whatever_the_order(rng):
    # heavy cancellation: a naive float64 sum gets this wrong, the dd sum rounds the exact sum
    x = np.concatenate([rng.normal(size=5000) * 1e10, rng.normal(size=5000)])
    x = np.concatenate([x, -x[:5000]])
    exact_sum = math.fsum(x)
    for perm in (np.arange(x.size), rng.permutation(x.size), rng.permutation(x.size)):
        s = dd_sum_rows(DD(x[perm], np.zeros_like(x)))
        assert float(s.hi) == exact_sum
    assert dd_sum_rows(DD(np.zeros((0, 3)), np.zeros((0, 3)))).hi.shape == (3,)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64])
def test_row_sums_of_small_blocks(n, rng):
    x = rng.normal(size=(n, 2))
    s = dd_sum_rows(DD(x, np.zeros_like(x)))
    assert s.hi.tolist() == [math.fsum(x[:, 0]), math.fsum(x[:, 1])]
