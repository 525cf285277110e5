"""compute/linear.py: the fused float64/float32 E-step against a brute-force float64 E-step
(scipy's logsumexp) on hard inputs -- features far from the origin, tables with -inf, rows no
component scores, rows far below the peak shift, large tables, several blocks, empty and
one-row chunks -- and the Gaussian terms against scipy.stats."""

import numpy as np
import pytest
from scipy.stats import norm, poisson

from mixfold.compute.encoded import ArrayEncoded
from mixfold.compute.linear import (MAX_FUSED_BLOCK_ROWS, MIN_BLOCK_ROWS, ONE_HOT_LEVELS,
                                    SCORE_BLOCK_BYTES, block_rows, box_peak, centred_gaussian,
                                    feature_ranges,
                                    fold_linear_mixture, gaussian_centre, linear_fold,
                                    reduce_components, sub_block_shape, sub_blocks)
from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
from tests.compute.terms import MatrixTerms, brute_estep


def _problem(n, k=3, f=2, levels=None, dead_level=False, peaks=False, seed=0):
    """A feature part (quadratic-in-x scores, bounded above) and optionally a table part."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 3.0, n)
    mu = np.linspace(-4, 4, k)
    var = np.linspace(0.5, 2.0, k)
    phi = np.stack([x * x, x], axis=1)[:, :f]
    coef = np.stack([-0.5 / var, mu / var], axis=1)[:, :f]
    const = -0.5 * (mu * mu / var + np.log(2 * np.pi * var))
    peak = -0.5 * np.log(2 * np.pi * var) if peaks else None
    parts = [MatrixTerms(phi, coef, const, peak=peak)]
    if levels:
        table = np.log(rng.dirichlet(np.ones(levels), k))
        table[:, 1] = -np.inf  # an impossible level for every component: rows nobody scores
        if not dead_level:
            table[:, 1] = np.log(0.5)
        table[0, 2] = -np.inf  # impossible for one component only
        codes = rng.integers(0, levels, n)
        parts.append(MatrixTerms(np.zeros((n, 0)), np.zeros((k, 0)), np.zeros(k), table=table,
                                 codes=codes, peak=table.max(axis=1) if peaks else None))
    return parts, np.log(np.linspace(1, 2, k) / np.linspace(1, 2, k).sum())


def _check(parts, log_weights, w, precision="float64", rtol=1e-10):
    n = len(w)
    mass, lse = linear_fold([p.terms for p in parts], log_weights, ArrayEncoded(np.zeros(n)), w,
                            precision)
    want = brute_estep(parts, log_weights, w)
    assert np.array_equal(np.isfinite(lse), np.isfinite(want["lse"]))
    live = np.isfinite(want["lse"])
    np.testing.assert_allclose(lse[live], want["lse"][live], rtol=rtol, atol=rtol)
    assert (lse[~live] == -np.inf).all()
    np.testing.assert_allclose(mass, want["mass"], rtol=rtol, atol=rtol * n)
    for i, p in enumerate(parts):
        np.testing.assert_allclose(p.mass, want["mass"], rtol=rtol, atol=rtol * n)
        if p.coef.shape[1]:
            scale = np.abs(want[f"sums{i}"]).max()
            np.testing.assert_allclose(p.sums, want[f"sums{i}"], rtol=rtol, atol=rtol * scale)
        if p.table is not None:
            np.testing.assert_allclose(p.counts, want[f"counts{i}"], rtol=rtol, atol=rtol * n)
    return lse


@pytest.mark.parametrize("peaks", [False, True])
@pytest.mark.parametrize("levels", [None, 5, ONE_HOT_LEVELS + 30])
def test_float64_fold_equals_brute_force(peaks, levels):
    parts, lw = _problem(5000, levels=levels, peaks=peaks)
    w = np.random.default_rng(1).uniform(0, 2, 5000)
    w[::13] = 0.0
    _check(parts, lw, w)


@pytest.mark.parametrize("peaks", [False, True])
def test_rows_no_component_scores_get_no_posterior(peaks):
    parts, lw = _problem(3000, levels=6, dead_level=True, peaks=peaks)
    lse = _check(parts, lw, np.ones(3000))
    assert (lse == -np.inf).sum() == (parts[1].codes == 1).sum() > 0


def test_several_blocks_and_a_short_last_one():
    n = 2 * MAX_FUSED_BLOCK_ROWS + 123
    parts, lw = _problem(n, k=2, peaks=True, seed=2)
    _check(parts, lw, np.random.default_rng(3).uniform(0, 1, n))


def test_rows_far_below_the_peak_are_scored_against_their_own_best():
    # rows 1e3 sd out: every shifted score is below exp's range, the fold must rescore them
    parts, lw = _problem(4000, peaks=True, seed=4)
    x = parts[0].phi[:, 1]
    x[::7] = np.random.default_rng(5).choice([-1, 1], x[::7].size) * 3000.0
    parts[0].phi[:, 0] = x * x
    lse = _check(parts, lw, np.ones(4000))
    assert lse[0] < -1e6 and np.isfinite(lse).all()


def test_features_far_from_the_origin():
    # a large offset cancels in the scores only if the fold keeps float64 throughout
    n, k = 2000, 2
    rng = np.random.default_rng(6)
    phi = np.stack([rng.normal(1e6, 1.0, n), np.ones(n)], axis=1)
    coef = np.array([[1.0, -1e6], [1.5, -1.5e6 - 2.0]])
    _check([MatrixTerms(phi, coef, np.zeros(k))], np.log([0.5, 0.5]), np.ones(n), rtol=1e-9)


def test_base_moves_the_density_not_the_posteriors():
    parts, lw = _problem(1000, seed=7)
    base = np.random.default_rng(8).normal(0, 100, 1000)
    with_base = MatrixTerms(parts[0].phi, parts[0].coef, parts[0].const, base=base)
    lse = _check([with_base], lw, np.ones(1000))
    plain = _check([MatrixTerms(parts[0].phi, parts[0].coef, parts[0].const)], lw, np.ones(1000))
    np.testing.assert_allclose(lse - plain, base, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_single_row_chunks(n):
    parts, lw = _problem(n, levels=4, peaks=True, seed=9)
    lse = _check(parts, lw, np.full(n, 2.5))
    assert lse.shape == (n,)


def test_float32_fold_is_close_to_float64():
    parts, lw = _problem(20_000, levels=5, peaks=True, seed=10)
    _check(parts, lw, np.ones(20_000), precision="float32", rtol=2e-4)


def test_the_result_does_not_depend_on_how_the_rows_are_cut():
    parts, lw = _problem(9000, levels=70, seed=11)
    w = np.random.default_rng(12).uniform(0, 1, 9000)
    whole = linear_fold([p.terms for p in parts], lw, ArrayEncoded(np.zeros(9000)), w)
    sums, counts = parts[0].sums.copy(), parts[1].counts.copy()
    pieces = []
    for a, b in [(0, 1), (1, 4000), (4000, 9000)]:
        cut = [MatrixTerms(parts[0].phi[a:b], parts[0].coef, parts[0].const),
               MatrixTerms(parts[1].phi[a:b], parts[1].coef, parts[1].const,
                           table=parts[1].table, codes=parts[1].codes[a:b])]
        pieces.append((cut, linear_fold([c.terms for c in cut], lw,
                                        ArrayEncoded(np.zeros(b - a)), w[a:b])))
    np.testing.assert_allclose(np.concatenate([lse for _, (_, lse) in pieces]), whole[1],
                               rtol=1e-13)
    np.testing.assert_allclose(sum(c[0].sums for c, _ in pieces), sums, rtol=1e-11)
    np.testing.assert_allclose(sum(c[1].counts for c, _ in pieces), counts, rtol=1e-11,
                               atol=1e-11)


@pytest.mark.parametrize("offset", [0.0, 1e8, -3e12])
def test_centred_gaussian_scores_are_the_log_densities(offset):
    mu = offset + np.array([[-1.0, 2.0], [0.5, 0.0], [3.0, -2.0]])
    var = np.array([[1.0, 0.25], [4.0, 1.0], [0.5, 2.0]])
    c, coef, const, peak = centred_gaussian(mu, var)
    x = offset + np.random.default_rng(13).normal(0, 2, (50, 2))
    d = x - c
    phi = np.concatenate([d * d, d], axis=1)
    got = phi @ coef.T + const
    want = np.stack([norm.logpdf(x, mu[k], np.sqrt(var[k])).sum(axis=1) for k in range(3)], 1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(peak, [norm.logpdf(mu[k], mu[k], np.sqrt(var[k])).sum()
                                      for k in range(3)], rtol=1e-14)


def test_gaussian_centre_is_on_a_grid_and_stays_put():
    rng = np.random.default_rng(14)
    mu = 1e6 + rng.normal(0, 3, (4, 2))
    var = rng.uniform(0.5, 2, (4, 2))
    c = gaussian_centre(mu, var)
    spread = np.sqrt((var + (mu - mu.mean(axis=0)) ** 2).mean(axis=0))
    grid = 2.0 ** np.ceil(np.log2(spread))
    assert np.array_equal(c / grid, np.round(c / grid))  # on the grid
    assert (np.abs(c - mu.mean(axis=0)) <= grid / 2).all()  # the grid point nearest the mean
    # an EM step moves the means a little: the centre stays (so kept features stay valid)
    moved = gaussian_centre(mu + rng.normal(0, 1e-3, mu.shape), var * 1.001)
    assert np.array_equal(moved, c) or np.abs(c / grid - np.round(c / grid)).max() > 0.49
    assert gaussian_centre(np.zeros((2, 1)), np.zeros((2, 1))).tolist() == [0.0]  # no spread


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 2, 3, 16, 100, 1000, 10_000])
def test_block_rows_is_a_power_of_two_within_its_bounds(k, dtype):
    rows = block_rows(k, dtype)
    assert rows & (rows - 1) == 0 and MIN_BLOCK_ROWS <= rows <= MAX_FUSED_BLOCK_ROWS
    itemsize = np.dtype(dtype).itemsize
    assert rows == MIN_BLOCK_ROWS or rows * k * itemsize <= SCORE_BLOCK_BYTES
    assert rows == MAX_FUSED_BLOCK_ROWS or 2 * rows * k * itemsize > SCORE_BLOCK_BYTES


@pytest.mark.parametrize("m, p", [(1, 4), (4, 4), (10, 4), (4097, 1024)])
def test_sub_blocks_cover_the_rows_once(m, p):
    parts, size = sub_block_shape(m, p)
    assert parts * size >= m > (parts - 1) * size
    lo = 100
    pieces = sub_blocks(lo, lo + m, size)
    covered = [row for a, b, _, _ in pieces for row in range(a, b)]
    assert covered == list(range(lo, lo + m))
    assert [i for _, _, i, _ in pieces] == [0, (m // size)][:len(pieces)]


@pytest.mark.parametrize("k", [1, 2, 3, 7, 8])
def test_reduce_components_is_the_maximum(k):
    a = np.random.default_rng(k).normal(size=(3, k, 11))
    a[0, :, 0] = -np.inf
    keep = a.copy()
    got = reduce_components(np.maximum, a, f"test.top{k}")
    np.testing.assert_array_equal(got, keep.max(axis=1))


def test_a_poisson_of_rate_zero_is_outside_the_form():
    accs = [PoissonAccumulator() for _ in range(2)]
    enc = ArrayEncoded(np.array([0, 3]))
    assert fold_linear_mixture(accs, [PoissonDistribution(0.0), PoissonDistribution(2.0)],
                               np.log([0.5, 0.5]), enc, np.ones(2)) is None


def test_box_peak_bounds_each_components_scores_over_the_rows():
    rng = np.random.default_rng(5)
    features = [rng.poisson(6.0, 5000).astype(float), rng.uniform(-2.0, 3.0, 5000)]
    coef, const = rng.normal(size=(4, 2)), rng.normal(size=4)
    peak = box_peak(coef, const, feature_ranges(features))
    scores = coef @ np.stack(features) + const[:, None]  # (K, rows)
    assert (scores.max(axis=1) <= peak + 1e-12).all()
    # one feature: the bound is the largest score itself
    one = box_peak(coef[:, :1], const, feature_ranges(features[:1]))
    np.testing.assert_allclose(one, (coef[:, :1] @ features[0][None] + const[:, None]).max(axis=1))


def test_box_peak_is_none_when_the_scores_span_too_wide_or_a_feature_is_not_finite():
    def peak(*features):
        return box_peak(np.array([[1.0]]), np.zeros(1), feature_ranges(features))

    assert peak(np.array([0.0, 1000.0])) is None  # spans 1000 nats
    assert peak(np.array([0.0, np.inf])) is None
    assert peak(np.empty(0)) is None


def test_a_poisson_mixture_declares_its_box_peak_and_folds_as_scipy_scores():
    # log x! is a base kept out of the GEMM: the peak bounds x log lam - lam over the rows
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.poisson(3.0, 4000), rng.poisson(15.0, 4000)])
    comps, w = [PoissonDistribution(2.0), PoissonDistribution(12.0)], np.array([0.4, 0.6])
    accs = [PoissonAccumulator() for _ in comps]
    enc = ArrayEncoded(x)
    terms = PoissonAccumulator.linear_terms(accs, comps, enc)
    peak = np.log([2.0, 12.0]) * x.max() - np.array([2.0, 12.0])
    np.testing.assert_allclose(terms.peak, peak, rtol=1e-15)
    out = fold_linear_mixture(accs, comps, np.log(w), enc, np.ones(x.size))
    assert out is not None
    dens = w * poisson.pmf(x[:, None], [2.0, 12.0])
    np.testing.assert_allclose(out[1], np.log(dens.sum(axis=1)), rtol=1e-12)
    resp = dens / dens.sum(axis=1, keepdims=True)
    np.testing.assert_allclose([a.sums[1] for a in accs], resp.T @ x, rtol=1e-11)
