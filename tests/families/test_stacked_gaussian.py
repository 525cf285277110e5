"""The stacked Gaussian mixture (families/stacked_gaussian.py) against the generic path: the same
fits (parameters and log-likelihood to 1e-10 relative) for every covariance type and option, the
generic path forced by switching the stacked fold and M-step off."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mixfold
from mixfold import (DiagonalGaussianDistribution, DiagonalGaussianEstimator, MixtureDistribution,
                     MixtureEstimator, MultivariateGaussianDistribution,
                     MultivariateGaussianEstimator)
from mixfold.families import stacked_gaussian
from mixfold.families.diagonal_gaussian import DiagonalGaussianAccumulator
from mixfold.families._tied_gaussian_sums import TiedGaussianAccumulator
from mixfold.families._shared_covariance import estimate_children
from mixfold.sklearn import GaussianMixture

RTOL = 1e-10

KINDS = {
    "diag": lambda **o: DiagonalGaussianEstimator(**o),
    "spherical": lambda **o: DiagonalGaussianEstimator(spherical=True, **o),
    "diag-tied": lambda **o: DiagonalGaussianEstimator(covariance_keys="c", **o),
    "full": lambda **o: MultivariateGaussianEstimator(**o),
    "tied": lambda **o: MultivariateGaussianEstimator(covariance_keys="c", **o),
}


def _data(offset: float = 0.0, spread: float = 1.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.array([[-1.0, 0.0, 0.5], [1.0, 0.5, -0.5], [0.0, 1.5, 1.0]])  # overlapping
    x = np.vstack([rng.normal(c, 1.0, (120, 3)) for c in centres])
    return offset + spread * x


def _generic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the stacked fold and M-step off: every chunk is too large, every estimate
    declined."""
    monkeypatch.setattr(stacked_gaussian, "STACKED_VALUES", 0)
    for est in (DiagonalGaussianEstimator, MultivariateGaussianEstimator):
        monkeypatch.setattr(est, "stack_estimate", staticmethod(lambda *a: None))


def _fit(x: np.ndarray, estimator: MixtureEstimator, **options) -> mixfold.FitResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixfold.fit(x, estimator, seed=0, max_iter=10, tol=0.0, progress=False,
                           **options)


def _params(model: MixtureDistribution) -> list[np.ndarray]:
    out = [model.weights]
    for c in model.components:
        out += [c.mu, c.sigma2 if isinstance(c, DiagonalGaussianDistribution) else c.cov]
    return out


def _same_fit(a: mixfold.FitResult, b: mixfold.FitResult, scale: float = 1.0,
              rtol: float = RTOL, ll_rtol: float | None = None) -> None:
    assert a.iterations == b.iterations
    np.testing.assert_allclose(a.log_likelihood, b.log_likelihood,
                               rtol=rtol if ll_rtol is None else ll_rtol, atol=0)
    for p, q in zip(_params(a.model), _params(b.model)):
        np.testing.assert_allclose(p, q, rtol=rtol, atol=rtol * scale * scale)


def _both(monkeypatch: pytest.MonkeyPatch, x: np.ndarray, make, **options
          ) -> tuple[mixfold.FitResult, mixfold.FitResult]:
    stacked = _fit(x, make(), **options)
    with monkeypatch.context() as m:
        _generic(m)
        generic = _fit(x, make(), **options)
    return stacked, generic


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_stacked_fit_is_the_generic_fit(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = _data()
    w = np.random.default_rng(1).uniform(0.2, 3.0, len(x))
    stacked, generic = _both(monkeypatch, x, lambda: MixtureEstimator([KINDS[kind]()] * 3),
                             weights=w)
    _same_fit(stacked, generic)
    assert stacked.final_log_likelihood > stacked.log_likelihood[0]


@pytest.mark.parametrize("kind", list(KINDS))
def test_far_from_the_origin(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spread = 1e-3
    x = _data(offset=1e6 * spread * 1e3, spread=spread)  # 1e6 spreads away from 0
    stacked, generic = _both(monkeypatch, x, lambda: MixtureEstimator([KINDS[kind]()] * 3))
    # a mean 1e9 spreads from 0 holds a spread to 1e-7 (its last bit): paths whose sums round
    # it to neighbouring values (the compiled E-step's and the generic, measured 1 ulp) move
    # the next mean log-likelihood by 3e-10 of itself
    _same_fit(stacked, generic, scale=spread, ll_rtol=1e-8)
    # the variances are the data's own, not the round-off of 1e6-times-larger sums
    var = [np.diagonal(np.atleast_2d(np.diag(c.sigma2) if c.sigma2.ndim == 1 else c.cov))
           if hasattr(c, "sigma2") else np.diagonal(c.cov) for c in stacked.model.components]
    assert 0.3 * spread ** 2 < np.min(var) < 3 * spread ** 2


@pytest.mark.parametrize("kind", ["full", "tied", "diag"])
def test_near_singular_covariances(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = _data()
    x = np.column_stack([x, x[:, 0] + 1e-7 * np.random.default_rng(2).normal(size=len(x))])
    stacked, generic = _both(monkeypatch, x,
                             lambda: MixtureEstimator([KINDS[kind]()] * 3))
    # a covariance of condition ~1e6 (reg_covar keeps it definite) turns a rounding of the sums
    # into ~1e-10 of the fit: the generic path chunked by 100 rows moves it by 5e-10 too
    _same_fit(stacked, generic, rtol=1e-8)


@pytest.mark.parametrize("kind", ["diag", "full", "tied"])
def test_priors_pseudo_counts_and_frozen(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    x = _data()
    prior = dict(mean_prior=0.5, mean_weight=2.0, covariance_prior=1.5, covariance_weight=4.0)
    stacked, generic = _both(monkeypatch, x, lambda: MixtureEstimator(
        [KINDS[kind](**prior)] * 3, pseudo_count=1.0))
    _same_fit(stacked, generic)
    start = _fit(x, MixtureEstimator([KINDS[kind]()] * 3)).model
    stacked, generic = _both(monkeypatch, x, lambda: MixtureEstimator(
        [KINDS[kind](frozen=["mu"])] * 3, weights_prior=2.0), init=start)
    _same_fit(stacked, generic)
    for held, fitted in zip(start.components, stacked.model.components):
        np.testing.assert_array_equal(held.mu, fitted.mu)


def test_relative_floor_and_collapsed_variance_warn_as_the_generic_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x = _data()
    x[:, 2] = 5.0  # a column on one value: every component's variance collapses onto the floor
    for make in (lambda: DiagonalGaussianEstimator(reg_covar=1e-4, reg_covar_mode="relative"),
                 lambda: MultivariateGaussianEstimator(reg_covar=1e-4,
                                                       reg_covar_mode="relative")):
        stacked, generic = _both(monkeypatch, x,
                                 lambda make=make: MixtureEstimator([make()] * 2))
        _same_fit(stacked, generic)
        collapsed = [note for note in stacked.warnings if "collapsed" in note]
        assert collapsed and collapsed == [n for n in generic.warnings if "collapsed" in n]


def test_the_fold_and_m_step_run_stacked(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"fold": 0, "estimate": 0}

    def counted(name, fn):
        def wrapper(*args):
            calls[name] += 1
            return fn(*args)
        return staticmethod(wrapper)

    monkeypatch.setattr(DiagonalGaussianAccumulator, "stack_fold",
                        counted("fold", stacked_gaussian.diagonal_fold))
    monkeypatch.setattr(DiagonalGaussianEstimator, "stack_estimate",
                        counted("estimate", stacked_gaussian.diagonal_estimate))
    # (the local backend's one-chunk fold of a diagonal mixture makes no accumulators)
    monkeypatch.setattr(DiagonalGaussianEstimator, "stack_statistics",
                        counted("fold", stacked_gaussian.diagonal_statistics))
    monkeypatch.setattr(MultivariateGaussianEstimator, "stack_estimate",
                        counted("estimate", stacked_gaussian.full_estimate))
    monkeypatch.setattr(TiedGaussianAccumulator, "stack_fold",
                        counted("fold", stacked_gaussian.tied_fold))
    monkeypatch.setattr(MultivariateGaussianEstimator, "stack_statistics",
                        counted("fold", stacked_gaussian.tied_statistics))
    for kind in ("diag", "spherical", "full", "tied"):
        calls.update(fold=0, estimate=0)
        GaussianMixture(3, covariance_type=kind, max_iter=5, tol=0.0).fit(_data())
        assert calls["estimate"] >= 5, kind
        assert calls["fold"] >= 5 or kind == "full", kind  # (its fold: the three steps' calls)


def _folded(fold, est, model, x):
    """(masses, log-densities, the accumulators) of ``fold`` over rows ``x`` under ``model``."""
    accs = [e.accumulator_factory().make() for e in est]
    enc = model.encoder().encode(x)
    mass, lse = fold(accs, model.components, model.log_weights, enc, np.ones(len(x)))
    return mass, lse, accs


def test_the_tied_fold_pools_the_scatter_and_declines_what_it_cannot_pool() -> None:
    x = _data(offset=50.0)
    est = [MultivariateGaussianEstimator(dim=3, covariance_keys="c")] * 3
    cov = np.array([[1.0, 0.3, 0.0], [0.3, 2.0, 0.4], [0.0, 0.4, 1.5]])
    comps = MultivariateGaussianDistribution.tied(50.0 + np.array(
        [[-1.0, 0.0, 0.5], [1.0, 0.5, -0.5], [0.0, 1.5, 1.0]]), cov)
    model = MixtureDistribution(comps, [0.2, 0.3, 0.5])
    mass, lse, pooled = _folded(stacked_gaussian.tied_fold, est, model, x)
    want_mass, want_lse, own = _folded(stacked_gaussian.full_fold, est, model, x)
    np.testing.assert_allclose(mass, want_mass, rtol=1e-13)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-13)
    for a, b in zip(pooled, own):  # each component's own first sums, about one point
        np.testing.assert_allclose(a.reference(), b.reference(), rtol=1e-15)
        np.testing.assert_allclose(a.sum_x, b.sum_x, rtol=1e-12, atol=1e-12 * np.abs(b.sum_x).max())
    # the second sums: each component a share, their sum the pooled scatter
    total = sum(b.sum_xx for b in own)
    np.testing.assert_allclose(sum(a.sum_xx for a in pooled), total, rtol=1e-12)
    # components with covariances of their own (a start), or two keys: full_fold's very sums
    apart = MixtureDistribution([MultivariateGaussianDistribution(c.mu, (1.0 + k) * cov)
                                 for k, c in enumerate(comps)], [0.2, 0.3, 0.5])
    two_keys = [MultivariateGaussianEstimator(dim=3, covariance_keys=key) for key in "aab"]
    for m, e in [(apart, est), (model, two_keys)]:
        got, want = (_folded(f, e, m, x) for f in (stacked_gaussian.tied_fold,
                                                   stacked_gaussian.full_fold))
        for a, b in zip(got[2], want[2]):
            assert all(np.array_equal(p, q) for p, q in zip(a.own_arrays(), b.own_arrays()))


def test_estimators_with_other_options_are_estimated_one_by_one() -> None:
    a, b = DiagonalGaussianEstimator(dim=2), DiagonalGaussianEstimator(dim=2, reg_covar=0.5)
    acc = [e.accumulator_factory().make() for e in (a, b)]
    x = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 1.0]])
    for ac in acc:
        ac._add(x, np.ones(3))
    stats = [ac.value() for ac in acc]
    assert stacked_gaussian.diagonal_estimate([a, b], np.ones(2), stats) is None
    made = estimate_children([a, b], np.ones(2), stats)
    assert made[1].sigma2 == pytest.approx(made[0].sigma2 - 1e-6 + 0.5)


def test_missing_entries_take_the_generic_path() -> None:
    x = _data()
    x[::7, 1] = np.nan
    fit = _fit(x, MixtureEstimator([DiagonalGaussianEstimator(missing=True)] * 3))
    assert np.isfinite(fit.final_log_likelihood)
    truth = MixtureDistribution([MultivariateGaussianDistribution(np.zeros(3), np.eye(3))] * 2,
                                [0.5, 0.5])
    enc = truth.encoder().encode(_data())
    acc = MixtureEstimator([MultivariateGaussianEstimator(dim=3)] * 2).accumulator_factory() \
        .make()
    lse = acc.seq_update(enc, np.ones(enc.n_rows), truth)
    np.testing.assert_allclose(lse, truth.seq_log_density(enc), rtol=1e-12)


def test_a_stack_of_distributions_is_the_constructor_s() -> None:
    mu, s2 = np.array([[0.0, 1.0], [2.0, -3.0]]), np.array([[1.0, 4.0], [0.5, 2.0]])
    made = DiagonalGaussianDistribution.stack_of(mu.copy(), s2.copy())
    for got, k in zip(made, range(2)):
        want = DiagonalGaussianDistribution(mu[k], s2[k])
        assert got.to_dict() == want.to_dict() and not got.mu.flags.writeable
    shared = DiagonalGaussianDistribution.stack_of(mu.copy(), s2[:1].copy())
    assert [d.sigma2.tolist() for d in shared] == [s2[0].tolist()] * 2
    for bad_mu, bad_s2, words in [(np.nan, 2.0, "mu must be finite"),
                                  (0.0, -1.0, "sigma2 must be finite and > 0"),
                                  (0.0, np.inf, "sigma2 must be finite and > 0")]:
        m, v = mu.copy(), s2.copy()
        m[1, 0], v[1, 1] = bad_mu, bad_s2  # component 1 refused, in the constructor's words
        with pytest.raises(mixfold.ParameterError, match=words):
            DiagonalGaussianDistribution.stack_of(m, v)


def test_tied_components_share_the_covariance_and_hold_their_means() -> None:
    base = MultivariateGaussianDistribution([0.0, 0.0], [[2.0, 0.5], [0.5, 1.0]])
    means = np.array([[1.0, 2.0], [3.0, 4.0]])
    made = base.sharing_covariance(means)
    means[0, 0] = 9.0  # the caller's array is not the components'
    assert [d.mu.tolist() for d in made] == [[1.0, 2.0], [3.0, 4.0]]
    assert all(d.cov is base.cov and not d.mu.flags.writeable for d in made)
    assert made[1].to_dict() == MultivariateGaussianDistribution([3.0, 4.0], base.cov).to_dict()
    with pytest.raises(mixfold.ParameterError, match="means must be finite"):
        base.sharing_covariance([[np.nan, 0.0]])


SMALL_CASES = [("iris", kind, 20) for kind in ("full", "tied", "diag", "spherical")] + [
    ("iris", "tied", 100), ("wine", "tied", 20), ("breast_cancer", "tied", 20),
    ("breast_cancer", "tied", 100), ("breast_cancer", "full", 20), ("breast_cancer", "full", 60)]


@pytest.mark.parametrize("name, kind, iterations", SMALL_CASES)
def test_small_data_fit_is_scikit_learns_from_the_same_start(name: str, kind: str,
                                                             iterations: int) -> None:
    # the small-data path (diagonal and spherical: the compiled E-step; tied: the compiled
    # E-step and the scatter pooled once) against scikit-learn's float64 EM from one start:
    # round-off apart (cases where EM does not amplify it: wine at 100 iterations, for one,
    # moves main and scikit-learn 1.6e-8 apart)
    from sklearn import datasets
    from sklearn.mixture import GaussianMixture as SkGaussianMixture

    data = getattr(datasets, f"load_{name}")()
    x = (data.data - data.data.mean(axis=0)) / data.data.std(axis=0)
    k = len(np.unique(data.target))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (one iteration does not converge)
        start = SkGaussianMixture(k, covariance_type=kind, max_iter=1, random_state=0).fit(x)
    options = dict(covariance_type=kind, max_iter=iterations, tol=0.0,
                   weights_init=start.weights_, means_init=start.means_,
                   precisions_init=start.precisions_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = GaussianMixture(k, **options).fit(x)
        theirs = SkGaussianMixture(k, **options).fit(x)
    for attr in ("means_", "covariances_", "weights_"):
        a, b = getattr(ours, attr), getattr(theirs, attr)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10 * np.abs(b).max())
    assert abs(ours.lower_bound_ - theirs.lower_bound_) <= 1e-12 * abs(theirs.lower_bound_)


def test_the_pooled_scatter_is_kept_for_its_rows_and_weights_only() -> None:
    from mixfold.compute.feature_cache import FeatureCache

    x = _data(offset=1e6)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(x))
    point = np.full(3, 1e6)

    def exact():
        y = x - point  # (exact: the rows lie within a factor 2 of the point)
        return (y * w[:, None]).T @ y

    cache = FeatureCache(1e9)
    with cache.active():
        first = stacked_gaussian.pooled_scatter(x, w, point)
        assert cache.kept_bytes > 0
        assert stacked_gaussian.pooled_scatter(x, w, point) is first  # kept
        np.testing.assert_allclose(first, exact(), rtol=1e-13)
        w[::5] *= 3.0  # the same buffer, other weights: made again
        np.testing.assert_allclose(stacked_gaussian.pooled_scatter(x, w, point), exact(),
                                   rtol=1e-13)


@pytest.mark.parametrize("mode", ["absolute", "relative"])
def test_the_compiled_diagonal_m_step_gives_numpys_bits(mode: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``diagonal_moments`` (one compiled call) against NumPy's operations on the same
    payloads: far from the origin, a coordinate whose rows sit on two values a few ulps apart
    (its variances collapse, round-off below 0 among them), weights over ten decades."""
    rng = np.random.default_rng(7)
    x = 1e6 + rng.normal(0.0, [1.0, 1e-3, 5.0], (90, 3))
    x[:, 1] = 1e6 + np.where(np.arange(len(x)) < 45, 0.0, 2e-10)  # nearly on one value
    w = 10.0 ** rng.uniform(-5, 5, len(x))
    est = [DiagonalGaussianEstimator(dim=3, reg_covar_mode=mode, reg_covar=1e-9)] * 3
    comps = [DiagonalGaussianDistribution(x[i * 30:(i + 1) * 30].mean(axis=0), [1.0, 1e-6, 4.0])
             for i in range(3)]
    accs = [e.accumulator_factory().make() for e in est]
    enc = comps[0].encoder().encode(x)
    stacked_gaussian.diagonal_fold(accs, comps, np.log(np.ones(3) / 3), enc, w)
    stats = [a.value() for a in accs]
    masses = np.array([s[0][0][0] for s in stats])

    def estimated() -> tuple[list, list[str]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = stacked_gaussian.diagonal_estimate(est, masses, stats)
        return out, [str(c.message) for c in caught]

    compiled, compiled_words = estimated()
    monkeypatch.setattr(stacked_gaussian, "mixture_kernels", lambda: None)
    numpy_path, numpy_words = estimated()
    assert compiled_words == numpy_words and any("collapsed" in m for m in numpy_words)
    for a, b in zip(compiled, numpy_path):
        assert np.array_equal(a.mu.view(np.uint64), b.mu.view(np.uint64))
        assert np.array_equal(a.sigma2.view(np.uint64), b.sigma2.view(np.uint64))
