"""Row blocks run on all cores give the bits one thread gives, and the right statistics."""

import threading

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from mixfold.compute.row_blocks import MeasuredThreads, map_row_blocks, row_threads
from mixfold.families._protocol import ArrayEncoded
from mixfold.compute.linear import MAX_FUSED_BLOCK_ROWS, fold_linear_mixture, gaussian_centre
from mixfold.families.diagonal_gaussian import (DiagonalGaussianAccumulator,
                                                DiagonalGaussianDistribution)


def stacked_fold(x, w, comps, log_w, precision="float64"):
    accs = [DiagonalGaussianAccumulator(x.shape[1]) for _ in comps]
    mass, lse = fold_linear_mixture(accs, comps, log_w, ArrayEncoded(x), w, precision)
    return mass, lse, np.concatenate([a.to_array() for a in accs])


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    d, k, n = 7, 5, 2 * MAX_FUSED_BLOCK_ROWS + 1001  # blocks that do not divide the rows
    comps = [DiagonalGaussianDistribution(rng.normal(0, 3, d), rng.uniform(0.5, 2, d))
             for _ in range(k)]
    log_w = np.log(rng.dirichlet(np.ones(k)))
    x = rng.normal(0, 4, size=(n, d)) + 100.0  # far from the origin: centring matters
    w = rng.uniform(0, 2, n)
    return x, w, comps, log_w


def test_blocks_come_back_in_order_and_cover_the_rows():
    assert map_row_blocks(10, 3, lambda lo, hi: (lo, hi)) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert map_row_blocks(0, 3, lambda lo, hi: (lo, hi)) == []


def test_stacked_fold_equals_brute_force(problem):
    x, w, comps, log_w = problem
    mass, lse, flat = stacked_fold(x, w, comps, log_w)
    joint = np.stack([norm.logpdf(x, c.mu, np.sqrt(c.sigma2)).sum(axis=1) for c in comps],
                     axis=1) + log_w
    want_lse = logsumexp(joint, axis=1)
    resp = np.exp(joint - want_lse[:, None]) * w[:, None]
    c = gaussian_centre(np.array([c.mu for c in comps]), np.array([c.sigma2 for c in comps]))
    xc = x - c  # the statistics are summed about the fold's centre, carried as sum w c
    want = np.concatenate([np.concatenate([[r.sum()], r @ xc, r @ (xc * xc), r.sum() * c])
                           for r in resp.T])
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)
    np.testing.assert_allclose(mass, resp.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(flat, want, rtol=1e-10)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_thread_count_and_calling_thread_do_not_change_a_bit(problem, monkeypatch, precision):
    x, w, comps, log_w = problem
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "2")
    assert row_threads() == 2
    threaded = stacked_fold(x, w, comps, log_w, precision)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "1")
    serial = stacked_fold(x, w, comps, log_w, precision)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "2")
    from_worker: list = []  # a non-main thread folds its blocks itself: pools never nest
    t = threading.Thread(target=lambda: from_worker.append(stacked_fold(x, w, comps, log_w,
                                                                        precision)))
    with threadpool_limits(1, "blas"):  # as mixfold's workers hold it
        t.start()
        t.join()
    for a, b, c in zip(threaded, serial, from_worker[0]):
        assert np.array_equal(a, b) and np.array_equal(a, c)


def test_float32_scores_stay_close_to_float64(problem):
    x, w, comps, log_w = problem
    f64, f32 = stacked_fold(x, w, comps, log_w), stacked_fold(x, w, comps, log_w, "float32")
    np.testing.assert_allclose(f32[1], f64[1], rtol=1e-5)
    np.testing.assert_allclose(f32[2], f64[2], rtol=1e-4)


def test_float32_responsibilities_below_the_floor_are_exactly_zero():
    """A component far from every row takes no mass in float32, as in float64 (the floor
    before the exp keeps subnormals out and gives exact zeros, not e^-60)."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, size=(5000, 3))
    comps = [DiagonalGaussianDistribution(np.zeros(3), np.ones(3)),
             DiagonalGaussianDistribution(np.full(3, 40.0), np.ones(3))]
    log_w = np.log([0.5, 0.5])
    w = np.ones(len(x))
    for precision in ("float64", "float32"):
        mass, lse, stats = stacked_fold(x, w, comps, log_w, precision)
        assert mass[1] == 0.0 and mass[0] == pytest.approx(len(x), rel=1e-6)
        assert np.all(stats[10:] == 0.0)  # the far component's weight, sums, squares, sum w c
        np.testing.assert_allclose(lse, norm.logpdf(x).sum(axis=1) + np.log(0.5),
                                   rtol=1e-12 if precision == "float64" else 1e-4)


@pytest.mark.parametrize("slow_way", [True, False])
def test_measured_threads_settle_on_the_faster_way_and_try_the_other_again(slow_way):
    # a way that sleeps 4 ms a call against one that returns at once: the fast way is chosen,
    # the slow one tried again after at most 16 x 32 calls (so a change of load is noticed)
    import time

    choice, ways = MeasuredThreads(), []
    for _ in range(1100):
        way = choice.threaded(5000)
        choice.timed(5000, way, (lambda: time.sleep(0.004)) if way == slow_way else (lambda: 0))
        ways.append(way)
    slow_calls = [i for i, w in enumerate(ways) if w == slow_way]
    assert ways.count(not slow_way) >= 1096
    assert 1 + 2 <= len(slow_calls) <= 4  # the first measurement, then one per 512 calls
    assert choice.threaded(10**6) is True  # another size class is measured on its own
