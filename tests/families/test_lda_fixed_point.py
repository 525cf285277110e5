"""families/_lda_fixed_point.py: the compiled path over every topic at once (each document
solved to convergence in one call) against a plain per-document NumPy/scipy fixed point, the
topic-range path it replaces for a whole fold, and its expected counts bit for bit."""

import numpy as np
import pytest
from scipy.special import digamma

import mixfold
from mixfold import LDADistribution, LDAEstimator
from mixfold.compute import kernels
from mixfold.families._hooks import whole_range
from mixfold.families._lda_fixed_point import add_expected_counts, solve
from mixfold.precision.bands import FLOAT64

pytest.importorskip("numba")

K, V = 6, 80


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(3)
    truth = LDADistribution(rng.dirichlet(np.full(V, 0.1), K) * 1e6, 0.3, vocabulary=range(V),
                            mean_length=50.0)
    docs = truth.sampler(2).sample(300) + [{}]  # and an empty document
    est = LDAEstimator(K, alpha=0.3, vocabulary=range(V))
    enc = est.encoder().encode(docs)
    model = est.initial_guess(enc, np.ones(enc.n_rows), mixfold.InitRandom(0))
    return est, enc, model


def _reference(enc, table, alpha, iterations, tol):
    """Blei et al.'s fixed point one document at a time (scikit-learn's E-step's loop)."""
    n = enc.n_rows
    gamma, exp_theta = np.empty((n, K)), np.empty((n, K))
    norm, steps = np.empty(enc.words.shape[0]), np.zeros(n, dtype=np.int64)
    for d in range(n):
        a, b = enc.offsets[d], enc.offsets[d + 1]
        rows, counts = table[:, enc.words[a:b]].T, enc.counts[a:b]
        g = alpha.copy() if a == b else np.ones(K)
        et = np.exp(digamma(g) - digamma(g.sum()))
        for _ in range(iterations if a < b else 0):
            new = alpha + et * ((counts / (rows @ et)) @ rows)
            change = np.abs(new - g).mean()
            g, steps[d] = new, steps[d] + 1
            et = np.exp(digamma(g) - digamma(g.sum()))
            if change < tol:
                break
        gamma[d], exp_theta[d], norm[a:b] = g, et, rows @ et
    return gamma, exp_theta, norm, steps


@pytest.mark.parametrize("tol", [1e-3, 1e-8])
def test_each_document_equals_a_plain_per_document_fixed_point(setup, tol):
    _, enc, model = setup
    want = _reference(enc, model._table, model.alpha_vector, 100, tol)
    got = kernels.lda_documents(model._table.T, enc.words, enc.counts, enc.offsets,
                                model.alpha_vector, 100, tol)
    for g, w in zip(got[:3], want[:3]):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert np.array_equal(got[3], want[3])  # the same iterations, document by document
    assert got[3][-1] == 0 and np.array_equal(got[0][-1], model.alpha_vector)


def one_range(n_topics):
    """Every topic as one range, as an executor's callback hands it (not the serial run): the
    range path."""
    return lambda task: [task(0, n_topics)]


def test_the_compiled_path_equals_the_range_path_and_its_counts_bit_for_bit(setup):
    _, enc, model = setup
    args = (enc, model.alpha_vector, model._table)
    fast, ranges = solve(*args, whole_range(K), 100, 1e-3), solve(*args, one_range(K), 100, 1e-3)
    for name in ("gamma", "exp_theta", "norm"):
        np.testing.assert_allclose(getattr(fast, name), getattr(ranges, name), rtol=1e-12)
    w = np.random.default_rng(0).uniform(0.5, 2.0, enc.n_rows)
    once, by_range = np.zeros((K, V)), np.zeros((K, V))
    add_expected_counts(once, model._table, enc, w, fast, whole_range(K))
    add_expected_counts(by_range, model._table, enc, w, fast, one_range(K))
    assert np.array_equal(once, by_range)  # the same sums in the same order


def test_five_em_iterations_equal_the_range_path_to_1e9(setup):
    _, enc, start = setup
    fits = []
    for run in (whole_range(K), one_range(K)):
        model = start
        est = LDAEstimator(K, alpha=None, vocabulary=range(V), doc_tol=1e-8,
                           doc_iterations=2000)
        for _ in range(5):
            acc = est.accumulator_factory().make()
            acc.fold_ranges(enc, np.ones(enc.n_rows), model, FLOAT64, run)
            model = est.estimate(enc.n_rows, ((acc.topic_words, acc.log_theta, acc.sums), None))
        fits.append(model)
    np.testing.assert_allclose(fits[0].topics, fits[1].topics, rtol=1e-9)
    np.testing.assert_allclose(fits[0].alpha_vector, fits[1].alpha_vector, rtol=1e-9)

