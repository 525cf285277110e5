import numpy as np
import pytest
from scipy import optimize, stats

import mixfold
from mixfold import (CensoredDistribution, CensoredEstimator, DataError, DataTypeError,
                     ExponentialDistribution, ExponentialEstimator, GammaDistribution,
                     GammaEstimator, GaussianDistribution, GaussianEstimator,
                     LogGaussianDistribution, LogGaussianEstimator, MixtureDistribution,
                     MixtureEstimator, ParameterError, PoissonEstimator, RecordEstimator,
                     WeibullDistribution, WeibullEstimator, survival_rows)
from mixfold.families._intervals import quadrature_points
from tests.families.family_checks import (check_decomposition, check_model_file,
                                          check_payload_halves)

# family -> (distribution, estimator, scipy law from log-parameters, log-parameters of a model)
FAMILIES = {
    "Gaussian": (GaussianDistribution(1.0, 4.0), lambda: GaussianEstimator(reg_covar=0.0),
                 lambda t: stats.norm(t[0], np.exp(t[1])),
                 lambda d: [d.mu, 0.5 * np.log(d.sigma2)]),
    "LogGaussian": (LogGaussianDistribution(0.5, 0.25), lambda: LogGaussianEstimator(reg_covar=0.0),
                    lambda t: stats.lognorm(np.exp(t[1]), scale=np.exp(t[0])),
                    lambda d: [d.mu, 0.5 * np.log(d.sigma2)]),
    "Exponential": (ExponentialDistribution(0.7), ExponentialEstimator,
                    lambda t: stats.expon(scale=np.exp(-t[0])), lambda d: [np.log(d.rate)]),
    "Gamma": (GammaDistribution(2.5, 1.5), GammaEstimator,
              lambda t: stats.gamma(np.exp(t[0]), scale=np.exp(t[1])),
              lambda d: [np.log(d.shape), np.log(d.scale)]),
    "Weibull": (WeibullDistribution(1.7, 2.0), WeibullEstimator,
                lambda t: stats.weibull_min(np.exp(t[0]), scale=np.exp(t[1])),
                lambda d: [np.log(d.shape), np.log(d.scale)]),
}


def reference_log_likelihood(law, rows, window=(-np.inf, np.inf)):
    """Per row, from scipy's density, distribution and survival functions."""
    a, b = window
    pairs = np.array([(v, v) if np.isscalar(v) else v for v in rows], dtype=float)
    low = np.fmax(np.where(np.isnan(pairs[:, 0]), -np.inf, pairs[:, 0]), a)
    high = np.fmin(np.where(np.isnan(pairs[:, 1]), np.inf, pairs[:, 1]), b)
    exact, right = low == high, np.isinf(high)
    left = ~exact & ~right & (low <= law.support()[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(exact, law.logpdf(low), np.where(
            right, law.logsf(low), np.where(left, law.logcdf(high),
                                            np.log(law.sf(low) - law.sf(high)))))
    return out - np.log(law.cdf(b) - law.cdf(a))


def censored_rows(dist, n, seed, window=(-np.inf, np.inf), times=None):
    """Exact values, right-censored at follow-up times, left-censored below a detection limit,
    and rounded to intervals of width 0.5, a quarter each, all inside ``window``."""
    rng = np.random.default_rng(seed)
    law = dist.scipy_law()
    lo, hi = law.cdf(window[0]), law.cdf(window[1])
    x = law.ppf(lo + (hi - lo) * rng.random(n))
    limit = law.ppf(lo + 0.3 * (hi - lo))
    follow = law.ppf(lo + (hi - lo) * rng.uniform(0.4, 1.0, n)) if times is None else \
        rng.choice(times, n)
    rows = []
    for i, v in enumerate(x):
        kind = i % 4
        if kind == 0 or (kind == 1 and v < follow[i]) or (kind == 2 and v > limit):
            rows.append((v, v))
        elif kind == 1:
            rows.append((follow[i], None))
        elif kind == 2:
            rows.append((None, limit))
        else:
            left = np.floor(v * 2) / 2
            rows.append((max(left, window[0], law.support()[0]), min(left + 0.5, window[1])))
    return rows


def _window_of(case):
    return {"Gaussian": (-1.0, 6.0), "LogGaussian": (0.8, np.inf), "Exponential": (0.2, 4.0),
            "Gamma": (1.0, np.inf), "Weibull": (0.0, 3.5)}[case]


@pytest.mark.parametrize("case", FAMILIES)
@pytest.mark.parametrize("truncated", [False, True])
def test_log_likelihood_matches_scipys_survival_functions(case, truncated):
    dist, _, law_of, params = FAMILIES[case]
    window = _window_of(case) if truncated else (-np.inf, np.inf)
    rows = censored_rows(dist, 200, 0, window)
    d = CensoredDistribution(dist, window)
    want = reference_log_likelihood(law_of(params(dist)), rows, window)
    np.testing.assert_allclose(d.seq_log_density(rows), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", FAMILIES)
def test_interval_points_give_the_truncated_laws_moments(case):
    """Closed forms and quadrature against scipy's numerical expectation."""
    dist = FAMILIES[case][0]
    law = dist.scipy_law()
    low = np.array([law.support()[0], 0.5, 1.0, 2.5])
    high = np.array([1.5, np.inf, 1.25, np.inf])
    points, probs = dist.interval_points(low, high)
    q_points, q_probs = quadrature_points(dist, low, high)
    stat = np.log if case in ("LogGaussian", "Gamma", "Weibull") else (lambda v: v)
    for j in range(len(low)):
        want = law.expect(stat, lb=low[j], ub=high[j], conditional=True, epsabs=1e-13,
                          epsrel=1e-12)
        assert probs[j] @ stat(points[j]) == pytest.approx(want, rel=1e-9, abs=1e-11)
        assert q_probs[j] @ stat(q_points[j]) == pytest.approx(want, rel=1e-9, abs=1e-11)


# (reg_covar=0: a variance floor would move the fixed point off the likelihood's maximum)
def _fit(rows, estimator, window=(None, None)):
    return mixfold.fit(rows, CensoredEstimator(estimator, truncate=window), max_iter=5000,
                       tol=1e-15, progress=False)


@pytest.mark.parametrize("case", FAMILIES)
@pytest.mark.parametrize("truncated", [False, True])
def test_fit_is_the_direct_maximum_of_the_censored_likelihood(case, truncated):
    dist, make, law_of, params = FAMILIES[case]
    window = _window_of(case) if truncated else (-np.inf, np.inf)
    # Gamma's quantiles are slow in scipy: follow-up on a few fixed dates, as in a study
    times = np.array([2.0, 3.0, 5.0]) if case == "Gamma" else None
    rows = censored_rows(dist, 1500, 1, window, times)
    res = _fit(rows, make(), window)
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-12 * np.abs(ll[1:])).all(), ll  # exact EM: never decreases
    def nll(t):
        return -reference_log_likelihood(law_of(t), rows, window).sum()
    fitted = np.array(params(res.model.base))
    ref = optimize.minimize(nll, fitted + 0.1, method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    assert nll(fitted) <= ref.fun + 1e-7 * abs(ref.fun)
    np.testing.assert_allclose(fitted, ref.x, atol=2e-5)
    assert res.log_likelihood[-1] * len(rows) == pytest.approx(-nll(fitted), rel=1e-10)


def test_truncated_normal_matches_scipys_fit():
    x = stats.truncnorm(-1.0, 2.0, loc=0.0, scale=1.0).rvs(4000, random_state=3)
    d = _fit(x, GaussianEstimator(reg_covar=0.0), (-1.0, 2.0)).model.base
    nll = lambda t: -stats.truncnorm.logpdf(  # noqa: E731
        x, (-1.0 - t[0]) / np.exp(t[1]), (2.0 - t[0]) / np.exp(t[1]), t[0], np.exp(t[1])).sum()
    ref = optimize.minimize(nll, [0.3, 0.2], method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12})
    assert d.mu == pytest.approx(ref.x[0], abs=1e-5)
    assert 0.5 * np.log(d.sigma2) == pytest.approx(ref.x[1], abs=1e-5)


def test_survival_rows_recover_a_weibull_under_heavy_censoring():
    truth = WeibullDistribution(1.5, 2.0)
    rng = np.random.default_rng(4)
    t = truth.sampler(rng).sample(20_000)
    follow = rng.choice([1.0, 2.0, 3.0], 20_000)
    rows = survival_rows(np.minimum(t, follow), t <= follow)
    assert (t > follow).mean() > 0.3
    d = _fit(rows, WeibullEstimator()).model.base
    assert d.shape == pytest.approx(1.5, rel=0.03)
    assert d.scale == pytest.approx(2.0, rel=0.03)
    naive = mixfold.optimize(rows[rows[:, 1] < np.inf, 0], WeibullEstimator(), progress=False)
    assert naive.scale < 1.6  # dropping the censored rows biases the scale down


def test_rows_and_options_are_checked():
    enc = CensoredEstimator(ExponentialEstimator(), truncate=(0.5, 4.0)).encoder()
    with pytest.raises(DataError, match="row 1"):
        enc.encode([1.0, (3.0, 2.0)])
    with pytest.raises(DataError, match="row 2"):
        enc.encode([1.0, 2.0, 5.0])  # outside the window
    with pytest.raises(DataError, match="row 1"):
        enc.encode([1.0, (5.0, None)])  # an interval outside the window
    with pytest.raises(DataError, match="row 0.*NaN"):
        enc.encode([float("nan")])
    with pytest.raises(DataTypeError, match="row 1"):
        enc.encode([1.0, ("a", 2.0)])
    with pytest.raises(DataTypeError, match="row 0"):
        enc.encode([(1.0, 2.0, 3.0)])
    with pytest.raises(DataError, match="row 1"):
        CensoredEstimator(ExponentialEstimator()).encoder().encode([1.0, -2.0])
    with pytest.raises(ParameterError, match="CDF"):
        CensoredEstimator(PoissonEstimator())
    with pytest.raises(ParameterError, match="truncate"):
        CensoredEstimator(GaussianEstimator(), truncate=(2.0, 1.0))
    with pytest.raises(ParameterError, match="truncate"):
        CensoredEstimator(GaussianEstimator(), truncate=3.0)
    got = enc.encode(np.array([[1.0, 1.0], [0.1, 0.7], [np.nan, 2.0], [3.0, np.nan]])).values
    np.testing.assert_array_equal(got, [[1.0, 1.0], [0.5, 0.7], [0.5, 2.0], [3.0, 4.0]])


def test_rows_that_tell_nothing_add_nothing():
    base = [1.0, (2.0, None), (None, 0.5), (0.5, 1.5)]
    est = CensoredEstimator(GaussianEstimator())
    a = mixfold.optimize(base * 50, est, max_iter=50, progress=False)
    b = mixfold.optimize(base * 50 + [(None, None)] * 30, est, max_iter=50, progress=False)
    assert a == b
    assert CensoredDistribution(GaussianDistribution(0, 1)).log_density((None, None)) == 0.0


def test_contract(rng, tmp_path):
    d = CensoredDistribution(GammaDistribution(2.0, 1.5), (0.5, None))
    rows = censored_rows(d.base, 300, 2, (0.5, np.inf), np.array([2.0, 4.0]))
    check_model_file(d, tmp_path)
    check_model_file(CensoredDistribution(GaussianDistribution(0.0, 1.0)), tmp_path)
    assert d.to_dict() == {"family": "Censored", "base": {"family": "Gamma", "shape": 2.0,
                                                          "scale": 1.5},
                           "truncate": [0.5, None]}
    assert d.n_parameters() == 2
    check_decomposition(d)
    check_payload_halves(CensoredEstimator(GammaEstimator(), (0.5, None)), rows, d, rng)
    few = [(1.0, None) if v > 1 else v for v in np.linspace(-1, 3, 40)]
    w = rng.integers(0, 4, size=len(few))
    est = CensoredEstimator(GaussianEstimator(), (-1.0, None))
    a = mixfold.optimize(few, est, weights=w, max_iter=30, progress=False).base
    b = mixfold.optimize([r for r, k in zip(few, w) for _ in range(k)], est, max_iter=30,
                         progress=False).base
    assert (a.mu, a.sigma2) == pytest.approx((b.mu, b.sigma2), rel=1e-9)
    samples = d.sampler(0).sample(5000)
    assert samples.min() >= 0.5
    law = d.base.scipy_law()
    window_cdf = lambda v: (law.cdf(v) - law.cdf(0.5)) / law.sf(0.5)  # noqa: E731
    assert stats.kstest(samples, window_cdf).pvalue > 1e-3


def test_mixture_of_censored_gaussians_and_a_record_field():
    truth = MixtureDistribution([GaussianDistribution(-3.0, 1.0), GaussianDistribution(3.0, 1.0)],
                                [0.5, 0.5])
    x = truth.sampler(0).sample(4000)
    rows = [(4.0, None) if v > 4.0 else (None, -4.0) if v < -4.0 else v for v in x]  # saturates
    res = mixfold.fit(rows, MixtureEstimator([CensoredEstimator(GaussianEstimator())] * 2),
                      max_iter=200, progress=False)
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-9 * np.abs(ll[1:])).all()
    means = sorted(c.base.mu for c in res.model.components)
    assert means == pytest.approx([-3.0, 3.0], abs=0.08)
    records = [{"t": r, "g": float(v)} for r, v in zip(rows, x)]
    rec = mixfold.optimize(records, RecordEstimator({"t": CensoredEstimator(GaussianEstimator()),
                                                     "g": GaussianEstimator()}),
                           progress=False)
    alone = mixfold.optimize(rows, CensoredEstimator(GaussianEstimator()), progress=False)
    assert rec.fields["t"] == alone


@pytest.mark.slow
def test_mp_backend_fits_the_same_model():
    rows = censored_rows(WeibullDistribution(1.7, 2.0), 3000, 5, (0.0, 3.5))
    est = MixtureEstimator([CensoredEstimator(WeibullEstimator(), (0.0, 3.5))] * 2)
    local = mixfold.fit(rows, est, max_iter=10, tol=0.0, progress=False)
    mp = mixfold.fit(rows, est, max_iter=10, tol=0.0, backend="mp", num_workers=2,
                     progress=False)
    np.testing.assert_allclose(mp.log_likelihood, local.log_likelihood, rtol=1e-11)
    for a, b in zip(mp.model.components, local.model.components):
        assert a.base.shape == pytest.approx(b.base.shape, rel=1e-10)
        assert a.base.scale == pytest.approx(b.base.scale, rel=1e-10)
