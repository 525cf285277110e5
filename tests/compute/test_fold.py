"""compute/fold.py: the one fold loop gives the same statistics and log-likelihood however the
rows are chunked, equal to a brute-force float64 E-step, and names a row the model rules out."""

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm, poisson

from mixfold import (CategoricalDistribution, GaussianDistribution, MixtureDistribution,
                     PoissonDistribution)
from mixfold.compute.encoded import ArrayEncoded, InitRandom
from mixfold.compute.fold import (INIT_SAMPLE_ROWS, FoldResult, fold_rows, fold_rows_total,
                                  init_sample_mask)
from mixfold.errors import NumericalError
from mixfold.precision import DOUBLE_DOUBLE, FLOAT64, BandSupportError, resolve_precision


@pytest.fixture(scope="module")
def gaussian_mixture():
    rng = np.random.default_rng(0)
    model = MixtureDistribution([GaussianDistribution(1e6, 4.0), GaussianDistribution(1e6 + 5, 1.0),
                                 GaussianDistribution(1e6 - 40, 100.0)], [0.5, 0.3, 0.2])
    x = np.concatenate([rng.normal(1e6, 2, 700), rng.normal(1e6 + 5, 1, 400),
                        rng.normal(1e6 - 40, 10, 301)])
    w = rng.uniform(0.0, 2.0, len(x))
    w[::17] = 0.0
    return model, x, w


def _brute(model, x, w):
    """Weighted log-likelihood, per-component mass, weighted sums of x and x^2 in float64."""
    s = np.stack([norm.logpdf(x, c.mu, np.sqrt(c.sigma2)) for c in model.components], axis=1)
    s += np.log(model.weights)
    lse = logsumexp(s, axis=1)
    r = np.exp(s - lse[:, None]) * w[:, None]
    return float(w @ lse), r.sum(axis=0), r.T @ x, r.T @ (x * x)


def _component_moments(acc, k):
    """(mass, sum x, sum x^2) of component k's accumulator, about the origin."""
    comp = acc.children()[k]
    weight, sum_x, sum_xx, ref_mass = (float(a[0]) for a in comp.own_arrays())
    c = ref_mass / weight if weight else 0.0  # the reference point the sums are about
    return weight, sum_x + weight * c, sum_xx + 2 * c * sum_x + weight * c * c


@pytest.mark.parametrize("precision, chunk_rows", [
    ("float64", 1), ("float64", 7), ("float64", 256), ("float64", 1401), ("float64", 10_000),
    ("dd", 97), ("dd", 1401), ("dd", 10_000)])  # (a dd chunk costs milliseconds)
def test_fold_equals_brute_force_at_any_chunk_size(gaussian_mixture, precision, chunk_rows):
    model, x, w = gaussian_mixture
    enc = model.encoder().encode(list(x))
    acc = model.estimator().accumulator_factory().make()
    ll = fold_rows(acc, enc, w, model, resolve_precision(precision), chunk_rows)
    want_ll, mass, sx, sxx = _brute(model, x, w)
    assert ll == pytest.approx(want_ll, rel=1e-12)
    for k in range(3):
        got = _component_moments(acc, k)
        np.testing.assert_allclose(got, (mass[k], sx[k], sxx[k]), rtol=1e-9)


def test_dd_fold_does_not_depend_on_the_chunking(gaussian_mixture):
    model, x, w = gaussian_mixture
    enc = model.encoder().encode(list(x))
    totals, arrays = [], []
    for chunk in (61, 256, 1401):
        acc = model.estimator().accumulator_factory().make()
        totals.append(fold_rows_total(acc, enc, w, model, DOUBLE_DOUBLE, chunk))
        arrays.append([a.copy() for a in acc.arrays()])
    assert all(t.hi == totals[0].hi for t in totals)
    assert all(abs(t.lo - totals[0].lo) <= 2 ** -100 * abs(t.hi) for t in totals)
    for got in arrays[1:]:  # the hi parts of the statistics, bit for bit
        for a, b in zip(got, arrays[0]):
            np.testing.assert_allclose(a, b, rtol=2 ** -50, atol=0)


def test_float64_fold_total_is_a_plain_pair(gaussian_mixture):
    model, x, w = gaussian_mixture
    enc = model.encoder().encode(list(x))
    got = fold_rows_total(None, enc, w, model, FLOAT64, 500)
    assert got.lo == 0.0 and got.hi == fold_rows(None, enc, w, model, FLOAT64, 500)


def test_scoring_only_folds_nothing_and_matches_scipy():
    model = MixtureDistribution([PoissonDistribution(0.5), PoissonDistribution(300.0)],
                                [0.9, 0.1])
    x = np.array([0, 1, 2, 290, 310, 5000])
    enc = model.encoder().encode(list(x))
    w = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])
    s = np.stack([poisson.logpmf(x, 0.5), poisson.logpmf(x, 300.0)], axis=1) + np.log([.9, .1])
    got = fold_rows(None, enc, w, model, FLOAT64, 4)
    assert got == pytest.approx(float(w @ logsumexp(s, axis=1)), rel=1e-13)


def test_empty_and_single_row_folds():
    model = GaussianDistribution(3.0, 2.0)
    empty = ArrayEncoded(np.empty(0))
    acc = model.estimator().accumulator_factory().make()
    assert fold_rows(acc, empty, np.empty(0), model, FLOAT64, 16) == 0.0
    assert all((a == 0).all() for a in acc.arrays())
    one = ArrayEncoded(np.array([-1e8]))
    got = fold_rows(None, one, np.array([2.0]), model, FLOAT64, 16)
    assert got == pytest.approx(2.0 * norm.logpdf(-1e8, 3.0, np.sqrt(2.0)), rel=1e-15)


def test_a_row_the_model_rules_out_is_named_by_its_global_index():
    model = CategoricalDistribution([0.5, 0.5, 0.0])
    enc = model.encoder().encode([0, 1, 0, 1, 2, 0])
    w = np.ones(6)
    for chunk in (1, 2, 6):
        with pytest.raises(NumericalError, match="row 4 has log-density -inf"):
            fold_rows(None, enc, w, model, FLOAT64, chunk)
    w[4] = 0.0  # a zero-weight row adds nothing, even ruled out
    assert fold_rows(None, enc, w, model, FLOAT64, 2) == pytest.approx(5 * np.log(0.5))


def test_the_dd_fold_names_a_ruled_out_row_too():
    model = GaussianDistribution(0.0, 1.0)
    enc = ArrayEncoded(np.array([0.0, 1.0, 1e200, 2.0]))  # its log-density is -inf in float64
    w = np.ones(4)
    with pytest.raises(NumericalError, match="row 2 has log-density"), np.errstate(all="ignore"):
        fold_rows_total(None, enc, w, model, DOUBLE_DOUBLE, 3)
    w[2] = 0.0
    want = float(norm.logpdf([0.0, 1.0, 2.0]).sum())
    with np.errstate(all="ignore"):
        got = fold_rows_total(None, enc, w, model, DOUBLE_DOUBLE, 3).hi
    assert got == pytest.approx(want, rel=1e-15)


def test_a_band_the_model_cannot_run_raises_before_folding():
    model = CategoricalDistribution([0.5, 0.5])
    enc = model.encoder().encode([0, 1])
    acc = model.estimator().accumulator_factory().make()
    with pytest.raises(BandSupportError):
        fold_rows(acc, enc, np.ones(2), model, resolve_precision("bfloat16@emulated"), 16)
    assert all((a == 0).all() for a in acc.arrays())


@pytest.mark.parametrize("x", [1e154, 1e200])
def test_the_dd_log_density_of_a_far_row_agrees_with_float64(x):
    model = GaussianDistribution(0.0, 1.0)
    enc = ArrayEncoded(np.array([x]))
    want = fold_rows(None, enc, np.ones(1), model, FLOAT64, 4) if x < 1e155 else -np.inf
    with np.errstate(all="ignore"):
        got = model.seq_log_density(enc, DOUBLE_DOUBLE)[0]
    assert got == want


def test_init_sample_is_chunk_independent_and_about_the_asked_size():
    n = 200_000
    enc = ArrayEncoded(np.zeros(n))
    whole = init_sample_mask(enc, 5, n)
    parts = np.concatenate([init_sample_mask(enc.rows(a, min(a + 30_001, n)), 5, n)
                            for a in range(0, n, 30_001)])
    assert np.array_equal(whole, parts)
    expected, sd = INIT_SAMPLE_ROWS, np.sqrt(INIT_SAMPLE_ROWS)
    assert abs(whole.sum() - expected) < 5 * sd
    assert init_sample_mask(enc.rows(0, 10), 5, 10).all()  # a small data set is all sample
    u = InitRandom(5).child("init-sample").row_uniform(enc, 1)[:, 0]
    assert np.array_equal(whole, u < INIT_SAMPLE_ROWS / n)


def test_fold_result_mean():
    assert FoldResult(3, 4.0, -8.0, None).mean_log_density == -2.0
    assert np.isnan(FoldResult(0, 0.0, 0.0, None).mean_log_density)
