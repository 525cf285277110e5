"""Fits that do not depend on where the data sits or on its unit (issue [numerics]): translation
and scaling equivariance of the Gaussian families' fits, log-densities at extreme parameters
against mpmath, and every reproduction of the issue as a test."""

import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mixfold
from mixfold import (BinomialEstimator, DiagonalGaussianDistribution, DiagonalGaussianEstimator,
                     ExponentialEstimator, GammaDistribution,
                     GammaEstimator, GaussianDistribution, GaussianEstimator, GeometricEstimator,
                     HiddenMarkovDistribution,
                     LogGaussianDistribution, LogGaussianEstimator, MixtureDistribution,
                     MixtureEstimator, MultivariateGaussianDistribution,
                     MultivariateGaussianEstimator, VonMisesDistribution, VonMisesEstimator)
from mixfold.errors import DegenerateFitWarning
from mixfold.online import OnlineEM
from mixfold.precision.bands import UNIT_ROUNDOFF

SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def fit(x, estimator, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateFitWarning)
        return mixfold.fit(x, estimator, progress=False, **options)


def shifted(x, offset):
    """(base, base + offset) with ``base + offset`` exact: the base is the shifted data's
    rounding brought back, so both fits see the same rows up to the translation."""
    moved = x + offset
    return moved - offset, moved


def ulps(value):
    return 4 * np.spacing(np.abs(np.asarray(value, dtype=np.float64)))


def close_shifted(got, want, offset, spread, rel=1e-6):
    """``got == want + offset`` to ``rel`` of the spread, plus what float64 can hold of a
    parameter at ``offset`` (a few of its ulps)."""
    got, want = np.asarray(got, float), np.asarray(want, float)
    assert np.all(np.abs(got - (want + offset)) <= rel * spread + ulps(want + offset)), \
        (got, want + offset)


def rows(seed, n, d=None, spread=1.0):
    rng = np.random.default_rng(seed)
    return spread * (rng.standard_normal(n) if d is None else rng.standard_normal((n, d)))


# ---------------------------------------------------------------------------------------------
# Translation: offsets up to 1e12 times the spread


@SETTINGS
@given(seed=st.integers(0, 2 ** 16), exponent=st.floats(0, 12), sign=st.sampled_from([-1, 1]),
       log_spread=st.floats(-3, 3))
def test_gaussian_fit_is_translation_equivariant(seed, exponent, sign, log_spread):
    spread = 10.0 ** log_spread
    offset = sign * spread * 10.0 ** exponent
    base, moved = shifted(rows(seed, 300, spread=spread), offset)
    a, b = fit(base, GaussianEstimator()), fit(moved, GaussianEstimator())
    close_shifted(b.model.mu, a.model.mu, offset, spread)
    assert b.model.sigma2 == pytest.approx(a.model.sigma2, rel=1e-6)
    assert b.final_log_likelihood == pytest.approx(a.final_log_likelihood, abs=1e-6)


@SETTINGS
@given(seed=st.integers(0, 2 ** 16), exponent=st.floats(0, 12), sign=st.sampled_from([-1, 1]))
def test_diagonal_and_full_gaussian_fits_are_translation_equivariant(seed, exponent, sign):
    rng = np.random.default_rng(seed)
    spread = np.array([1.0, 30.0, 0.01])
    x = rng.standard_normal((300, 3)) @ np.array([[1, 0.5, 0], [0, 1, 0], [0, 0.3, 1]]) * spread
    offset = sign * np.array([1.0, -0.5, 1.0]) * 10.0 ** exponent * spread
    base, moved = shifted(x, offset)
    for est in (DiagonalGaussianEstimator(), MultivariateGaussianEstimator()):
        a, b = fit(base, est), fit(moved, est)
        close_shifted(b.model.mu, a.model.mu, offset, spread)
        var_a = a.model.sigma2 if hasattr(a.model, "sigma2") else a.model.cov
        var_b = b.model.sigma2 if hasattr(b.model, "sigma2") else b.model.cov
        diag = var_a if var_a.ndim == 1 else np.diag(var_a)
        scale = diag if var_a.ndim == 1 else np.sqrt(np.outer(diag, diag))
        assert np.all(np.abs(var_b - var_a) <= 1e-6 * scale), (var_b, var_a)
        assert b.final_log_likelihood == pytest.approx(a.final_log_likelihood, abs=1e-6)


@SETTINGS
@given(seed=st.integers(0, 2 ** 16), exponent=st.floats(0, 8),
       kind=st.sampled_from(["gaussian", "diagonal", "full"]),
       precision=st.sampled_from(["float64", "dd"]))
def test_mixture_fits_are_translation_equivariant(seed, exponent, kind, precision):
    # a mixture's posteriors move with its means, which float64 holds to ulp(offset) only: so
    # offsets up to 1e8 times the spread here (ulp(1e8) = 1.5e-8 of it)
    rng = np.random.default_rng(seed)
    d = 1 if kind == "gaussian" else 2
    x = np.concatenate([rng.standard_normal((200, d)), 6.0 + 0.5 * rng.standard_normal((100, d))])
    x = x[:, 0] if kind == "gaussian" else x
    offset = 10.0 ** exponent * (1.0 if kind == "gaussian" else np.array([1.0, -3.0]))
    base, moved = shifted(x, offset)
    leaf = {"gaussian": GaussianEstimator, "diagonal": DiagonalGaussianEstimator,
            "full": MultivariateGaussianEstimator}[kind]()
    est = MixtureEstimator([leaf] * 2)
    a = fit(base, est, seed=1, max_iter=30, precision=precision)
    b = fit(moved, est, seed=1, max_iter=30, precision=precision)
    for ca, cb in zip(a.model.components, b.model.components):
        close_shifted(cb.mu, ca.mu, offset, 1.0)
    np.testing.assert_allclose(b.model.weights, a.model.weights, atol=1e-6)
    assert b.final_log_likelihood == pytest.approx(a.final_log_likelihood, abs=1e-6)


def test_float32_mixture_fit_is_translation_equivariant_to_float32_resolution():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.standard_normal((3000, 2)), 5.0 + rng.standard_normal((2000, 2))])
    offset = np.array([1e7, -3e7])
    base, moved = shifted(x, offset)
    est = MixtureEstimator([DiagonalGaussianEstimator()] * 2)
    a = fit(base, est, seed=2, max_iter=20, precision="float32")
    b = fit(moved, est, seed=2, max_iter=20, precision="float32")
    for ca, cb in zip(a.model.components, b.model.components):
        close_shifted(cb.mu, ca.mu, offset, 1.0, rel=1e-4)
        np.testing.assert_allclose(cb.sigma2, ca.sigma2, rtol=1e-4)


@pytest.mark.parametrize("kind", ["gaussian", "diagonal"])
def test_hidden_markov_fit_is_translation_equivariant(kind):
    # the emissions' statistics are summed about the stack's centre, like a mixture's
    emission = GaussianDistribution if kind == "gaussian" else DiagonalGaussianDistribution
    params = [(-1.0, 0.7), (2.5, 2.0)] if kind == "gaussian" else \
        [([-1.0, 0.0], [0.7, 1.0]), ([2.5, 1.0], [2.0, 0.5])]
    truth = HiddenMarkovDistribution([emission(*p) for p in params], [0.3, 0.7],
                                     [[0.8, 0.2], [0.35, 0.65]])
    seqs = truth.sampler(3, sample_length=40).sample(60)
    offset = 1e9
    base = [np.asarray(q) + offset - offset for q in seqs]
    moved = [q + offset for q in base]
    est = truth.estimator()
    a = fit(base, est, init=truth, max_iter=15, tol=0.0).model
    b = fit(moved, est, init=HiddenMarkovDistribution(
        [emission(np.asarray(p[0]) + offset, p[1]) for p in params], [0.3, 0.7],
        [[0.8, 0.2], [0.35, 0.65]]), max_iter=15, tol=0.0).model
    np.testing.assert_allclose(b.transitions, a.transitions, atol=1e-6)
    for ea, eb in zip(a.emissions, b.emissions):
        close_shifted(eb.mu, ea.mu, offset, 1.0)
        np.testing.assert_allclose(eb.sigma2, ea.sigma2, rtol=1e-6)


def test_process_pool_fit_is_translation_equivariant():
    # shards fold apart about the same point (the model's), so their payloads still add up
    x = np.concatenate([rows(6, 600, 2), 5.0 + rows(7, 400, 2)])
    base, moved = shifted(x, np.array([1e9, -1e9]))
    est = MixtureEstimator([MultivariateGaussianEstimator()] * 2)
    a = fit(base, est, seed=1, max_iter=20)
    b = fit(moved, est, seed=1, max_iter=20, backend="mp", num_workers=2)
    for ca, cb in zip(a.model.components, b.model.components):
        close_shifted(cb.mu, ca.mu, np.array([1e9, -1e9]), 1.0)
        np.testing.assert_allclose(cb.cov, ca.cov, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("offset", [1e8, 1e12])
@pytest.mark.parametrize("kind", ["gaussian", "diagonal"])
@pytest.mark.parametrize("precision", ["fp8@emulated", "bfloat16@emulated", "float16@emulated",
                                       "bfloat16@cpu", "float16@cpu"])
def test_band_fits_are_translation_equivariant_to_their_resolution(precision, kind, offset):
    # a band scores the deviation x - mu rounded into it once: x = 1e8 itself overflows float16;
    # at 1e12 a mean's own float64 spacing is 1e-4 of the spread, well inside every band's
    # resolution; bare bfloat16/float16 are the @cpu ones where torch is installed
    if precision.endswith("@cpu"):
        pytest.importorskip("torch")
    u = UNIT_ROUNDOFF[precision.split("@")[0]]
    rng = np.random.default_rng(9)
    dim = () if kind == "gaussian" else (2,)
    x = np.concatenate([rng.standard_normal((600, *dim)), 5.0 + rng.standard_normal((400, *dim))])
    base, moved = shifted(x, offset)
    est = MixtureEstimator([GaussianEstimator() if kind == "gaussian"
                            else DiagonalGaussianEstimator()] * 2)
    a = fit(base, est, seed=1, max_iter=10, precision=precision).model
    b = fit(moved, est, seed=1, max_iter=10, precision=precision).model
    np.testing.assert_allclose(b.weights, a.weights, atol=2 * u)
    for ca, cb in zip(a.components, b.components):
        np.testing.assert_allclose(np.asarray(cb.mu) - offset, ca.mu, atol=2 * u)  # spread 1
        np.testing.assert_allclose(cb.sigma2, ca.sigma2, rtol=2 * u)


def test_tied_components_pool_statistics_about_one_point():
    # a seeded start sums each tied component about its own rows' mean: the pool moves them to
    # one point before adding (else the sums of two references would be added as one)
    x = np.concatenate([rows(11, 300), 4.0 + rows(12, 200)])
    base, moved = shifted(x, 1e8)
    est = MixtureEstimator([GaussianEstimator(keys="tied")] * 2)
    a, b = fit(base, est, seed=1, max_iter=5).model, fit(moved, est, seed=1, max_iter=5).model
    for ca, cb in zip(a.components, b.components):
        close_shifted(cb.mu, ca.mu, 1e8, 1.0)
        assert cb.sigma2 == pytest.approx(ca.sigma2, rel=1e-6)
    assert a.components[0] == a.components[1]
    assert a.components[0].sigma2 == pytest.approx(x.var(), rel=1e-6)
    # two tied accumulators summed about different points pool to the moments of all rows
    est = MixtureEstimator([GaussianEstimator(keys="tied")] * 2)
    acc = est.accumulator_factory().make()
    enc = GaussianEstimator().encoder().encode(moved)
    acc.components[0].seq_update(enc.rows(0, 300), np.ones(300), GaussianDistribution(1e8, 1.0))
    acc.components[1].seq_update(enc.rows(300, 500), np.ones(200),
                                 GaussianDistribution(1e8 + 4.0, 1.0))
    acc.tie_keys()
    pooled = GaussianEstimator(reg_covar=0.0).estimate(500.0, acc.components[1].value())
    assert pooled.sigma2 == pytest.approx(x.var(), rel=1e-9)


def test_online_em_is_translation_equivariant():
    # online EM averages statistics folded under successive models: each step's are about that
    # step's mean, so the running ones are moved onto it before they are averaged
    x = rows(5, 4000)
    base, moved = shifted(x, 1e9)
    fits = []
    for data in (base, moved):
        online = OnlineEM(GaussianEstimator(), init_rows=200)
        for lo in range(0, len(data), 500):
            online.partial_fit(data[lo:lo + 500])
        fits.append(online.model)
    close_shifted(fits[1].mu, fits[0].mu, 1e9, 1.0)
    assert fits[1].sigma2 == pytest.approx(fits[0].sigma2, rel=1e-6)
    assert fits[0].sigma2 == pytest.approx(x.var(), rel=0.05)


# ---------------------------------------------------------------------------------------------
# Scaling by 10^-8 .. 10^8: parameters scale, the mean log-likelihood shifts by -D log s


@SETTINGS
@given(seed=st.integers(0, 2 ** 16), exponent=st.floats(-8, 8))
def test_gaussian_fits_are_scale_equivariant_with_relative_floors(seed, exponent):
    s = 10.0 ** exponent
    x = rows(seed, 300, 2) + np.array([3.0, -1.0])
    for est in (GaussianEstimator(reg_covar_mode="relative", min_variance=1e-300),
                DiagonalGaussianEstimator(reg_covar_mode="relative", min_variance=1e-300),
                MultivariateGaussianEstimator(reg_covar_mode="relative")):
        data = x[:, 0] if isinstance(est, GaussianEstimator) else x
        d = 1 if data.ndim == 1 else 2
        a, b = fit(data, est), fit(data * s, est)
        np.testing.assert_allclose(b.model.mu, a.model.mu * s, rtol=1e-9)
        var_a = a.model.cov if hasattr(a.model, "cov") else a.model.sigma2
        var_b = b.model.cov if hasattr(b.model, "cov") else b.model.sigma2
        np.testing.assert_allclose(var_b, np.asarray(var_a) * s * s, rtol=1e-9, atol=1e-9 * s * s)
        jacobian = -d * math.log(s)
        assert b.final_log_likelihood == pytest.approx(a.final_log_likelihood + jacobian,
                                                       abs=1e-9 * (1 + abs(jacobian)))


@SETTINGS
@given(seed=st.integers(0, 2 ** 16), exponent=st.floats(-8, 8))
def test_log_gaussian_gamma_and_exponential_fits_are_scale_equivariant(seed, exponent):
    s = 10.0 ** exponent
    rng = np.random.default_rng(seed)
    x = rng.gamma(2.5, 1.5, size=400)
    for est, scaled in ((LogGaussianEstimator(), lambda a, b: (b.mu - math.log(s), a.mu)),
                        (GammaEstimator(), lambda a, b: (b.scale / s, a.scale)),
                        (ExponentialEstimator(max_rate=1e300), lambda a, b: (b.rate * s, a.rate))):
        a, b = fit(x, est), fit(x * s, est)
        got, want = scaled(a.model, b.model)
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert b.final_log_likelihood == pytest.approx(a.final_log_likelihood - math.log(s),
                                                       abs=1e-9 * (1 + abs(math.log(s))))


def test_relative_floor_agrees_in_metres_and_kilometres():
    x = np.random.default_rng(8).standard_normal((500, 2)) * 1e-4  # kilometres: tiny variances
    est = MultivariateGaussianEstimator(reg_covar_mode="relative")
    km, m = fit(x, est).model, fit(x * 1e3, est).model
    np.testing.assert_allclose(m.cov, km.cov * 1e6, rtol=1e-10)
    absolute = fit(x, MultivariateGaussianEstimator()).model  # reg_covar 1e-6 swamps 1e-8
    assert not np.allclose(absolute.cov * 1e6, m.cov, rtol=1e-3)


@pytest.mark.parametrize("kappa", [2.0, 1e6, 1e12])
def test_von_mises_concentration_is_recovered_at_any_size(kappa):
    # 1 - rbar is summed from half-angle terms about the model's direction: at kappa = 1e12 a
    # float rbar (1 - 5e-13) would hold it to 2e-4 only
    x = VonMisesDistribution(1.0, kappa).sampler(4).sample(20000)
    got = fit(x, VonMisesEstimator(max_kappa=1e20)).model
    # the MLE from the sample itself, in mpmath
    with mpmath.workdps(50):  # (mpmath's precision is global: for this block only)
        c = mpmath.fsum(mpmath.cos(mpmath.mpf(v) - 1) for v in x)
        s = mpmath.fsum(mpmath.sin(mpmath.mpf(v) - 1) for v in x)
        gap = float(1 - mpmath.sqrt(c * c + s * s) / len(x))
        want = mpmath.findroot(lambda k: mpmath.besseli(1, k) / mpmath.besseli(0, k) - (1 - gap),
                               0.5 / gap if gap < 0.1 else kappa) if kappa < 1e5 else 0.5 / gap
    assert got.kappa == pytest.approx(kappa, rel=0.05)
    assert got.kappa == pytest.approx(float(want), rel=1e-6)


# ---------------------------------------------------------------------------------------------
# Log-densities at extreme parameters against mpmath

mpmath.mp.dps = 60


def mp_gaussian(x, mu, s2):
    x, mu, s2 = mpmath.mpf(x), mpmath.mpf(mu), mpmath.mpf(s2)
    return -(x - mu) ** 2 / (2 * s2) - mpmath.log(2 * mpmath.pi * s2) / 2


def mp_von_mises(x, mu, kappa):
    kappa = mpmath.mpf(kappa)
    # log I0 at large kappa from mpmath's own asymptotic-safe evaluation, scaled by e^-kappa
    log_i0 = mpmath.log(mpmath.besseli(0, kappa))
    return kappa * mpmath.cos(mpmath.mpf(x) - mu) - mpmath.log(2 * mpmath.pi) - log_i0


def mp_gamma(x, k, theta):
    x, k, theta = mpmath.mpf(x), mpmath.mpf(k), mpmath.mpf(theta)
    return (k - 1) * mpmath.log(x) - x / theta - mpmath.loggamma(k) - k * mpmath.log(theta)


@pytest.mark.parametrize("x, mu, s2", [(1e12 + 0.5, 1e12, 1e-3), (1e-300, 0.0, 1e-300),
                                       (3e150, -1e150, 1e300), (0.0, 1e-20, 1e-40)])
def test_gaussian_log_density_at_extreme_parameters(x, mu, s2):
    got = GaussianDistribution(mu, s2).log_density(x)
    want = mp_gaussian(x, mu, s2)
    assert got == pytest.approx(float(want), rel=1e-13, abs=1e-13)


@pytest.mark.parametrize("kappa", [1e-8, 0.5, 700.0, 999.9, 1000.0, 1e4, 1e8, 1e20])
@pytest.mark.parametrize("angle", [0.0, 1e-6, 0.3])
def test_von_mises_log_density_against_mpmath(kappa, angle):
    mpmath.mp.dps = 60 + int(math.log10(kappa)) if kappa > 1 else 60
    want = float(mp_von_mises(angle, 0.0, kappa))
    got = VonMisesDistribution(0.0, kappa).log_density(angle)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    # the stacked scoring of a mixture (kappa cos x cos mu + ...) takes the half-angle form too
    other = float(mp_von_mises(angle, 2.0, 1.0))
    stacked = MixtureDistribution([VonMisesDistribution(0.0, kappa),
                                   VonMisesDistribution(2.0, 1.0)], [0.5, 0.5])
    assert stacked.log_density(angle) == pytest.approx(np.logaddexp(want, other) + math.log(0.5),
                                                       rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("x, k, theta", [(1e-300, 2.0, 1e-300), (1e-318, 200.0, 5e-321),
                                          (1e300, 1e-3, 1e305), (1.0, 1e8, 1e-8),
                                          (1.001, 1e8, 1e-8), (2.0, 1e8, 1e-8),
                                          (1e-300, 1e5, 1e-305), (1200.0, 1e3, 1.0)])
def test_gamma_log_density_against_mpmath(x, k, theta):
    # at a large shape each term of the textbook form is of order k log k: Stirling's form
    got = GammaDistribution(k, theta).log_density(x)
    assert got == pytest.approx(float(mp_gamma(x, k, theta)), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# The reproductions


def unit_rows():
    return np.random.default_rng(0).standard_normal((1000, 2))


def test_gaussian_far_from_the_origin_keeps_its_variance():
    x = unit_rows()[:, 0]
    d = mixfold.optimize(x + 1e8, GaussianEstimator(), progress=False)
    assert d.sigma2 == pytest.approx(x.var() + 1e-6, rel=1e-6)


def test_diagonal_and_full_gaussians_far_from_the_origin_keep_their_variances():
    x = unit_rows()
    d = mixfold.optimize(x + 1e8, DiagonalGaussianEstimator(), progress=False)
    np.testing.assert_allclose(d.sigma2, x.var(axis=0) + 1e-6, rtol=1e-6)
    m = mixfold.optimize(x + 1e8, MultivariateGaussianEstimator(), progress=False)
    np.testing.assert_allclose(m.cov, np.cov(x.T, bias=True) + 1e-6 * np.eye(2), rtol=1e-6,
                               atol=1e-9)


def test_full_covariance_mixture_at_an_offset_of_a_million():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal((400, 2)), [4.0, 0.0] + rng.standard_normal((300, 2))])
    est = MixtureEstimator([MultivariateGaussianEstimator()] * 2)
    a = fit(x, est, seed=3).model
    b = fit(x + 1e6, est, seed=3).model
    for ca, cb in zip(a.components, b.components):
        np.testing.assert_allclose(cb.cov, ca.cov, rtol=1e-6, atol=1e-9)


def test_collinear_columns_at_a_large_scale_stay_positive_definite():
    x = unit_rows()[:, :1]
    d = mixfold.optimize(np.hstack([x, 2 * x, x + 1]) * 1e6, MultivariateGaussianEstimator(),
                         progress=False)
    np.testing.assert_allclose(d.cov[0, 1], 2e12 * x.var(), rtol=1e-9)
    assert np.all(np.linalg.eigvalsh(d.cov) > 0)


def test_gamma_near_the_smallest_float():
    mix = fit([1e-300] * 20, MixtureEstimator([GammaEstimator()] * 3)).model
    assert sum(w * c.shape * c.scale for w, c in zip(mix.weights, mix.components)) == \
        pytest.approx(1e-300, rel=1e-9)
    one = fit([1e-318] * 20, GammaEstimator()).model
    assert one.scale > 0 and one.shape * one.scale == pytest.approx(1e-318, rel=1e-3)


@pytest.mark.parametrize("scale", [1e-300, 1e-315])
def test_ratio_families_with_weights_near_the_smallest_float(scale):
    # a component's responsibilities can be subnormal: Geometric and Binomial take ratios of
    # two sums of the same weights (x >= 1 for a Geometric), so neither scale goes to 0
    rng = np.random.default_rng(2)
    for est, x in ((GeometricEstimator(), rng.geometric(0.2, 300).astype(float)),
                   (BinomialEstimator(10), rng.binomial(10, 0.3, 300).astype(float))):
        enc = est.encoder().encode(x)
        w = rng.uniform(0.5, 1.5, 300)
        plain, tiny = (est.accumulator_factory().make() for _ in range(2))
        plain.seq_update(enc, w, None)
        tiny.seq_update(enc, w * scale, None)
        got = est.estimate(1.0, tiny.value()).p
        assert 0 < got and got == pytest.approx(est.estimate(1.0, plain.value()).p, rel=1e-6)


def test_von_mises_at_a_huge_concentration():
    assert VonMisesDistribution(0.0, 1e20).log_density(0.0) == pytest.approx(22.10691239673578,
                                                                              rel=1e-13)
    result = fit(np.zeros(20), VonMisesEstimator(max_kappa=1e20))
    assert result.model.kappa == 1e20
    assert result.final_log_likelihood == pytest.approx(22.10691239673578, rel=1e-13)


def test_posterior_of_an_extreme_value_is_a_distribution():
    m = MixtureDistribution([GaussianDistribution(0.0, 1.0), GaussianDistribution(1.0, 4.0)],
                            [0.5, 0.5])
    for x in (1e200, -1e300, 1e155, 1e100):
        p = m.posterior(x)
        assert p.tolist() == [0.0, 1.0], x  # the wider component wins far out
    for comps, x in (([DiagonalGaussianDistribution([0, 0], [1, 1]),
                       DiagonalGaussianDistribution([1, 1], [4, 4])], [1e200, -1e200]),
                     ([MultivariateGaussianDistribution([0, 0], np.eye(2)),
                       MultivariateGaussianDistribution([1, 1], 4 * np.eye(2))], [1e200, 0.0]),
                     ([LogGaussianDistribution(0.0, 1.0), LogGaussianDistribution(0.0, 4.0)],
                      1e300)):
        p = MixtureDistribution(comps, [0.5, 0.5]).posterior(x)
        assert np.isfinite(p).all() and p.sum() == pytest.approx(1.0)
    # equal variances: the nearer mean wins, by a margin no float can hold
    tied = MixtureDistribution([GaussianDistribution(0.0, 1.0), GaussianDistribution(1.0, 1.0)],
                               [0.5, 0.5])
    assert tied.posterior(1e200).tolist() == [0.0, 1.0]


@pytest.mark.parametrize("spreads", [(1.0, 1.0), (1.0, 1.0 + 1e-9), (1.0, 4.0)])
def test_posterior_of_a_far_row_ranks_the_means_at_every_magnitude(spreads):
    # between 1e16 and 1e154 every log-density is finite, but x - mu has lost the means: the
    # plain scores tie components of one variance; the posterior follows mpmath all the way out
    comps = [GaussianDistribution(0.25, spreads[0]), GaussianDistribution(1.0, spreads[1]),
             GaussianDistribution(-3.0, spreads[0])]
    weights = [0.2, 0.5, 0.3]
    mix = MixtureDistribution(comps, weights)
    rows = [s * m for m in (1.0, -1.0) for s in (3.0, 1e5, 1e9, 1e16, 1e20, 1e100, 1e154, 1e200)]
    got = mix.seq_posterior(mix.encoder().encode(rows))
    for x, p in zip(rows, got):
        with mpmath.workdps(700):
            logs = [mpmath.log(w) - (mpmath.mpf(x) - c.mu) ** 2 / (2 * mpmath.mpf(c.sigma2))
                    - mpmath.log(c.sigma2) / 2 for c, w in zip(comps, weights)]
            top = max(logs)
            e = [mpmath.exp(v - top) for v in logs]
            expect = [float(v / sum(e)) for v in e]
        np.testing.assert_allclose(p, expect, atol=1e-9, err_msg=str(x))
    # log-Gaussians: the same on log x
    logs_mix = MixtureDistribution([LogGaussianDistribution(c.mu, c.sigma2) for c in comps],
                                   weights)
    np.testing.assert_allclose(logs_mix.posterior(np.exp(2.0)), mix.posterior(2.0), rtol=1e-12)


def _mp_posterior(comps, weights, x):
    """Posterior of one row by mpmath at 700 digits: x = 1e300 leaves x - mu exact there."""
    with mpmath.workdps(700):
        xs = mpmath.matrix([mpmath.mpf(float(v)) for v in x])
        logs = []
        for c, w in zip(comps, weights):
            cov = mpmath.matrix(np.diag(c.sigma2).tolist() if hasattr(c, "sigma2")
                                else c.cov.tolist())
            d = xs - mpmath.matrix([mpmath.mpf(float(m)) for m in c.mu])
            quad = (d.T * mpmath.inverse(cov) * d)[0]
            logs.append(mpmath.log(w) - quad / 2 - mpmath.log(mpmath.det(cov)) / 2)
        top = max(logs)
        e = [mpmath.exp(v - top) for v in logs]
        return [float(v / sum(e)) for v in e]


@pytest.mark.parametrize("family", ["diagonal", "full"])
def test_vector_posterior_of_an_extreme_row_against_mpmath(family):
    # equal covariances: log p_a - log p_b = (mu_a - mu_b) S^-1 x + const is linear in x, so
    # far out the component whose mean lies further along x takes all the mass
    rng = np.random.default_rng(5)
    for trial in range(6):
        d, k = 1 + trial % 3, 2 + trial % 2
        if family == "diagonal":
            s2 = rng.uniform(0.5, 3.0, d)
            comps = [DiagonalGaussianDistribution(rng.normal(0, 2, d), s2) for _ in range(k)]
        else:
            a = rng.normal(size=(d, d))
            cov = a @ a.T + d * np.eye(d)
            comps = [MultivariateGaussianDistribution(rng.normal(0, 2, d), cov)
                     for _ in range(k)]
        weights = rng.dirichlet(np.ones(k))
        mix = MixtureDistribution(comps, weights)
        for scale in (1e200, 1e300, 1e160):  # every log-density below -1e308
            x = rng.choice([-1.0, 1.0], d) * scale
            got = mix.posterior(x)
            np.testing.assert_allclose(got, _mp_posterior(comps, weights, x), atol=1e-12)
            assert got.max() == 1.0, (family, trial, x)
        # a row whose linear terms tie: the constant (the means' norms, the weights) decides
        x = np.zeros(d)
        x[0] = 1e250
        fair = [type(c)(np.eye(d)[1 % d] * (i + 1) if d > 1 else [0.0], *(
            (c.sigma2,) if family == "diagonal" else (c.cov,))) for i, c in enumerate(comps)]
        np.testing.assert_allclose(MixtureDistribution(fair, weights).posterior(x),
                                   _mp_posterior(fair, weights, x), atol=1e-12)
    # ordinary rows keep the plain log-sum-exp posterior bit for bit
    rows = rng.normal(0, 3, (50, d))
    scores = np.stack([np.log(w) + c.seq_log_density(c.encoder().encode(rows))
                       for c, w in zip(comps, weights)], axis=1)
    expect = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(mix.seq_posterior(mix.encoder().encode(rows)),
                               expect / expect.sum(axis=1, keepdims=True), rtol=1e-12)
