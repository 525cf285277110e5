"""families/_full_gaussian_fold.py: the fused full-covariance fold gives the bits of the three
steps (the stack's scores, its compiled normalisation, the stacked update), and a fit on data
hard for it (means 1e6 from the origin, covariances of condition number 1e8, well separated
components) equals NumPy's float64 path (main's arithmetic) to round-off; at wider D the
whitened fold of a small chunk likewise, and against an extended-precision E-step."""

import warnings

import numpy as np
import pytest

import mixfold
from mixfold import (MixtureEstimator, MultivariateGaussianDistribution,
                     MultivariateGaussianEstimator)
from mixfold.compute import logspace
from mixfold.families import _full_gaussian_moments as moments
from mixfold.families._full_gaussian_fold import fused_full_fold, whitened_full_fold
from mixfold.families.stacked_gaussian import update_block_rows
from tests.families.hard_full_gaussians import OFFSET, hard_full_rows
from tests.families.sklearn_em import sklearn_trajectory

pytest.importorskip("numba")



def _hard(n: int, d: int, k: int = 3, seed: int = 0):
    """(rows, start): well separated (means 40 long-axis sd apart), rows shuffled; the start's means
    moved 1 sd."""
    return hard_full_rows(n, d, k, seed, spacing=4000.0, start_shift=100.0, shuffled=True)


def _fit(x, start, iterations=8):
    k = len(start.components)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mixfold.fit(x, MixtureEstimator([MultivariateGaussianEstimator()] * k),
                           init=start, max_iter=iterations, tol=0.0, progress=False)


def _numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Main's float64 arithmetic: NumPy's scores, log-sum-exp and sums."""
    monkeypatch.setattr(moments, "full_gaussian_kernels", lambda: None)
    monkeypatch.setattr(logspace, "full_gaussian_kernels", lambda: None)


def _accumulators(k: int, d: int):
    factory = MultivariateGaussianEstimator(dim=d).accumulator_factory()
    return [factory.make() for _ in range(k)]


def _three_steps(model, enc, weights, d):
    """The three steps' own calls: scores, the stack's normalisation, the stacked update."""
    comps = model.components
    stack = type(comps[0])
    scores = np.asfortranarray(stack.stack_log_density(comps, enc)) + np.log(model.weights)
    resp, lse = stack.stack_normalise(scores, weights)
    accs = _accumulators(len(comps), d)
    for acc, point in zip(accs, accs[0].stack_reference(comps)):
        acc.set_reference(point)
    type(accs[0]).stack_update(accs, enc, resp)
    return accs, resp.sum(axis=0), lse


@pytest.mark.parametrize("n, d", [(700, 3), (60_000, 4), (5000, 8)])
def test_the_fused_fold_has_the_three_steps_bits(n, d):
    x, start = _hard(n, d)
    enc = start.components[0].encoder().encode(x)
    weights = np.random.default_rng(1).uniform(0.5, 2.0, n)
    want_accs, want_mass, want_lse = _three_steps(start, enc, weights, d)
    accs = _accumulators(3, d)
    mass, lse = fused_full_fold(accs, start.components, np.log(start.weights), enc, weights,
                                update_block_rows(d))
    assert np.array_equal(mass, want_mass) and np.array_equal(lse, want_lse)
    for a, b in zip(accs, want_accs):
        assert all(np.array_equal(u, v) for u, v in zip(a.arrays(), b.arrays()))


def _frozen(a):
    a = a.copy()
    a.flags.writeable = False  # an Arrow table's buffer
    return a


def test_read_only_rows_and_weights_give_the_same_bits():
    x, start = _hard(3000, 3)
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(x))
    got = []
    for rows, weights, log_weights in ((x, w, np.log(start.weights)),
                                       (_frozen(x), _frozen(w), _frozen(np.log(start.weights)))):
        enc = start.components[0].encoder().encode(rows)
        accs = _accumulators(3, 3)
        mass, lse = fused_full_fold(accs, start.components, log_weights, enc, weights,
                                    update_block_rows(3))
        got.append([mass, lse] + [a for acc in accs for a in acc.arrays()])
    assert all(np.array_equal(a, b) for a, b in zip(*got))


def test_a_row_no_component_scores_leaves_the_fold_to_the_three_steps():
    x, start = _hard(600, 3)
    x[17] = 1e200  # every squared distance overflows: no finite score
    enc = start.components[0].encoder().encode(x)
    accs = _accumulators(3, 3)
    assert fused_full_fold(accs, start.components, np.log(start.weights), enc, np.ones(len(x)),
                           update_block_rows(3)) is None
    assert all(acc.weight == 0 for acc in accs)


def test_wide_rows_are_not_fused():
    x, start = _hard(300, moments.COMPILED_MAX_DIM + 1)
    enc = start.components[0].encoder().encode(x)
    assert fused_full_fold(_accumulators(3, x.shape[1]), start.components,
                           np.log(start.weights), enc, np.ones(len(x)), 1024) is None


@pytest.mark.parametrize("n, d", [(30_000, 3), (20_000, 5)])
def test_the_fit_on_hard_data_equals_numpy_s_float64_path(monkeypatch, n, d):
    x, start = _hard(n, d)
    fit = _fit(x, start)
    with monkeypatch.context() as m:
        _numpy_path(m)
        plain = _fit(x, start)
    ll, plain_ll = np.array(fit.log_likelihood), np.array(plain.log_likelihood)
    assert ll[-1] - ll[0] > 0.05  # EM moved
    # the sums' rounding (64 partial sums each, against NumPy's rank-k updates), which the
    # covariances' small directions (1e-4 against rows ~1e4 from the sums' point) amplify in
    # the log-likelihood: measured 4.5e-10 (D=3) and 2.1e-9 (D=5)
    np.testing.assert_allclose(ll, plain_ll, rtol=5e-9, atol=0)
    np.testing.assert_allclose(fit.model.weights, plain.model.weights, rtol=1e-10, atol=0)
    _assert_near_numpy_and_scikit_learn(fit, plain, start, x, 1e-10, 5e-9)


def _assert_near_numpy_and_scikit_learn(fit, plain, start, x, params: float,
                                        slack: float) -> None:
    """Each component's parameters within ``params`` of NumPy's path (the means relative to
    their offset from the origin: the digits the data carry), and scikit-learn's EM from the
    same start (rows moved exactly to the origin; its start takes the precisions as inv(cov),
    which at condition 1e8 moves the first log-likelihood by up to 1.5e-6) no nearer to NumPy's
    path than to the fit's, to ``slack`` of its log-likelihood."""
    for ca, cb in zip(fit.model.components, plain.model.components):
        assert np.abs(ca.mu - cb.mu).max() <= params * np.abs(cb.mu - OFFSET).max()
        assert np.abs(ca.cov - cb.cov).max() <= params * np.abs(cb.cov).max()
    ll, plain_ll = np.array(fit.log_likelihood), np.array(plain.log_likelihood)
    comps = start.components
    ref, _ = sklearn_trajectory(x - OFFSET, "full", start.weights,
                                np.array([c.mu for c in comps]) - OFFSET,
                                np.array([np.linalg.inv(c.cov) for c in comps]), len(ll))
    assert np.abs(ll - ref).max() <= np.abs(plain_ll - ref).max() + slack * np.abs(ref).max()


def test_a_fit_with_a_read_only_weight_column_equals_the_writable_one():
    # a weight column read from Arrow (the engines' local fit) reaches every compiled pass
    x, _ = _hard(3000, 3)
    w = np.random.default_rng(5).uniform(0.5, 2.0, len(x))
    est = MixtureEstimator([MultivariateGaussianEstimator()] * 3)
    fits = [mixfold.fit(rows, est, weights=weights, max_iter=4, tol=0.0, progress=False)
            for rows, weights in ((x, w), (_frozen(x), _frozen(w)))]
    assert fits[0].log_likelihood == fits[1].log_likelihood


# -- wider rows of a small chunk: whitened by BLAS, scored and normalised in one compiled call --


@pytest.mark.parametrize("n, d, k", [(600, 30, 3), (1500, 25, 2), (3000, 40, 4)])
def test_the_whitened_fold_has_the_three_steps_bits(n, d, k):
    x, start = _hard(n, d, k)
    enc = start.components[0].encoder().encode(x)
    weights = np.random.default_rng(1).uniform(0.5, 2.0, n)
    want_accs, want_mass, want_lse = _three_steps(start, enc, weights, d)
    accs = _accumulators(k, d)
    mass, lse = whitened_full_fold(accs, start.components, np.log(start.weights), enc, weights,
                                   update_block_rows(d))
    assert np.array_equal(mass, want_mass) and np.array_equal(lse, want_lse)
    for a, b in zip(accs, want_accs):
        assert all(np.array_equal(u, v) for u, v in zip(a.arrays(), b.arrays()))


def test_the_whitened_fold_against_an_extended_precision_e_step():
    # components 3 long-axis sd apart: posteriors between 0 and 1
    x, start = hard_full_rows(900, 30, 3, 0, spacing=300.0, start_shift=60.0, shuffled=True)
    comps, log_w = start.components, np.log(start.weights)
    enc = comps[0].encoder().encode(x)
    accs = _accumulators(3, 30)
    mass, lse = whitened_full_fold(accs, comps, log_w, enc, np.ones(len(x)), 4096)
    # every row's log-density and posteriors in long double, from the Cholesky factors held
    long = np.longdouble
    scores = np.array([-0.5 * ((((x.astype(long) - c.mu.astype(long))
                                 @ c.precision_cholesky.astype(long)) ** 2).sum(axis=1))
                       + long(c.log_det_precision_cholesky) - 15 * np.log(2 * np.pi, dtype=long)
                       + long(w) for c, w in zip(comps, log_w)])
    top = scores.max(axis=0)
    want_lse = top + np.log(np.exp(scores - top).sum(axis=0))
    resp = np.exp(scores - want_lse)
    # measured: the log-densities 3.9e-14 of their largest, masses 1.2e-14, first sums 1.8e-14
    # of the sums of their magnitudes, second sums 2.1e-14 of their largest
    assert np.abs(lse - want_lse.astype(float)).max() <= 4e-13 * np.abs(want_lse).max()
    np.testing.assert_allclose(mass, resp.sum(axis=1).astype(float), rtol=1e-13)
    point = accs[0].reference()
    y = x.astype(long) - point.astype(long)
    for acc, r in zip(accs, resp):
        assert (np.abs(acc.sum_x - r @ y) <= 2e-13 * (r @ np.abs(y))).all()
        want_xx = (r[:, None] * y).T @ y
        assert np.abs(acc.sum_xx - want_xx).max() <= 2e-13 * np.abs(want_xx).max()


def test_the_whitened_fold_declines_outside_its_form():
    x, start = _hard(600, 30, 3)
    enc = start.components[0].encoder().encode(x)
    w, log_w = np.ones(len(x)), np.log(start.weights)
    accs = _accumulators(3, 30)
    # more rows than one whitened block, narrower rows (the compiled scores take them), a tied
    # stack (its rows whitened once), a row no component scores: nothing added
    many, _ = _hard(5000, 30, 3)
    narrow, narrow_start = _hard(600, moments.COMPILED_SCORES_MAX_DIM, 3)
    far = x.copy()
    far[17] = 1e200
    tied = MultivariateGaussianDistribution.tied([c.mu for c in start.components],
                                                 start.components[0].cov)
    for rows, comps in ((many, start.components), (narrow, narrow_start.components),
                        (x, tied), (far, start.components)):
        enc = comps[0].encoder().encode(rows)
        assert whitened_full_fold(accs, comps, log_w, enc, np.ones(len(rows)), 4096) is None
    assert all(acc.weight == 0 for acc in accs)
    assert whitened_full_fold(accs, start.components, log_w, start.components[0].encoder().encode(
        x), w, 4096) is not None


def test_a_row_no_component_scores_is_named_by_the_generic_path():
    x, start = _hard(600, 30, 3)
    x[17] = 1e200
    with pytest.raises(Exception, match="17"):
        _fit(x, start, iterations=2)


def test_the_wide_fit_on_hard_data_equals_numpy_s_float64_path_and_scikit_learn(monkeypatch):
    # D=30, 1e6 from the origin, condition 1e8, components 3 long-axis sd apart (posteriors
    # that are not 0 or 1): EM amplifies the scores' and sums' round-off, measured 1.7e-11 on
    # the log-likelihood, 3.3e-9 on the means (of their offset), 2.6e-9 on the covariances
    x, start = hard_full_rows(1500, 30, 3, 0, spacing=300.0, start_shift=60.0, shuffled=True)
    fit = _fit(x, start, iterations=15)
    with monkeypatch.context() as m:
        _numpy_path(m)
        plain = _fit(x, start, iterations=15)
    ll, plain_ll = np.array(fit.log_likelihood), np.array(plain.log_likelihood)
    assert len(ll) == 15 and ll[-1] - ll[0] > 1.0  # EM moved
    np.testing.assert_allclose(ll, plain_ll, rtol=1e-10, atol=0)
    _assert_near_numpy_and_scikit_learn(fit, plain, start, x, 1e-8, 1e-10)
