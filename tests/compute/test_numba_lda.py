"""compute/numba_lda.py: the compiled steps of LDA's fixed point against dense float64 NumPy
(each nonzero's normaliser, each document's gamma), with empty documents, a single document
and values far from 1; through :mod:`mixfold.compute.kernels` on a topic range's slice too.
Each document at once: the kernels' digamma and exp(E[log theta]) against scipy, and the same
bits on any number of threads (the documents against a plain fixed point:
``tests/families/test_lda_fixed_point.py``)."""

import numpy as np
import pytest

pytest.importorskip("numba")

from mixfold.compute import kernels  # noqa: E402
from mixfold.compute.kernel_cache import load_kernel_module  # noqa: E402

lda = load_kernel_module("mixfold.compute.numba_lda")


def _corpus(sizes, topics=7, seed=0):
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes, np.int64)
    nnz = int(sizes.sum())
    theta = rng.gamma(0.5, 1.0, (len(sizes), topics)) * 10.0 ** rng.integers(-3, 3, (len(sizes), 1))
    cols = rng.dirichlet(np.ones(topics) * 0.3, nnz) * 10.0 ** rng.integers(-5, 1, (nnz, 1))
    counts = rng.integers(1, 50, nnz).astype(np.float64)
    alpha = rng.uniform(0.01, 1.0, topics)
    return theta, cols, sizes, counts, alpha


def _readonly(*arrays):
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _reference(theta, cols, sizes, counts, alpha, ratio=None):
    doc = np.repeat(np.arange(len(sizes)), sizes)
    norm = np.einsum("pk,pk->p", theta[doc], cols)
    r = counts / norm if ratio is None else ratio
    acc = np.zeros_like(theta)
    np.add.at(acc, doc, r[:, None] * cols)
    return norm, alpha + theta * acc


SIZES = [[3, 0, 5, 1, 0, 12], [1], [0, 0, 4], [40] * 9]


@pytest.mark.parametrize("sizes", SIZES)
def test_the_compiled_steps_equal_dense_numpy(sizes):
    theta, cols, sizes, counts, alpha = _corpus(sizes)
    ratio = np.random.default_rng(1).uniform(0.1, 5.0, len(cols))
    norm_want, _ = _reference(theta, cols, sizes, counts, alpha)
    _, update_want = _reference(theta, cols, sizes, counts, alpha, ratio)
    _, step_want = _reference(theta, cols, sizes, counts, alpha)
    theta, cols, sizes, counts, alpha, ratio = _readonly(theta, cols, sizes, counts, alpha, ratio)

    norm = np.full(len(cols), np.nan)
    lda.lda_norm(theta, cols, sizes, norm)
    np.testing.assert_allclose(norm, norm_want, rtol=1e-13)
    out = np.full(theta.shape, np.nan)
    lda.lda_update(theta, cols, sizes, ratio, alpha, out)
    np.testing.assert_allclose(out, update_want, rtol=1e-13)
    step = np.full(theta.shape, np.nan)
    lda.lda_step(theta, cols, sizes, counts, alpha, step)
    np.testing.assert_allclose(step, step_want, rtol=1e-13)
    empty = np.asarray(sizes) == 0  # a document without words keeps alpha exactly
    assert np.array_equal(step[empty], np.broadcast_to(alpha, step[empty].shape))


def test_the_wrappers_take_a_topic_range_slice_and_write_a_slice():
    theta, cols, sizes, counts, alpha = _corpus([30] * 50 + [0, 2], topics=12, seed=3)
    lo, hi = 4, 9  # a topic cut: non-contiguous slices in and out
    ratio = np.random.default_rng(4).uniform(0.1, 2.0, len(cols))
    norm_want, update_want = _reference(theta[:, lo:hi], cols[:, lo:hi], sizes, counts,
                                        alpha[lo:hi], ratio)
    np.testing.assert_allclose(kernels.lda_norm(theta[:, lo:hi], cols[:, lo:hi], sizes),
                               norm_want, rtol=1e-13)
    out = np.zeros(theta.shape)
    kernels.lda_update(theta[:, lo:hi], cols[:, lo:hi], sizes, ratio, alpha[lo:hi],
                       out[:, lo:hi])
    np.testing.assert_allclose(out[:, lo:hi], update_want, rtol=1e-13)
    assert (out[:, :lo] == 0).all() and (out[:, hi:] == 0).all()
    step = np.empty(theta.shape)
    kernels.lda_step(theta, cols, sizes, counts, alpha, step)
    np.testing.assert_allclose(step, _reference(theta, cols, sizes, counts, alpha)[1],
                               rtol=1e-13)


# --- every topic at once: digamma's pieces and exp(E[log theta]) against scipy ---------------

def _digamma(x):
    """digamma from the kernels' pieces: the recurrence's raised argument and sum, the series."""
    y, s = lda._raised(x)
    return np.log(y) + lda._series_tail(y) - s


def test_the_kernels_digamma_equals_scipy_over_sixteen_decades():
    from scipy.special import digamma
    xs = np.exp(np.random.default_rng(5).uniform(np.log(1e-8), np.log(1e8), 20_000))
    xs = np.concatenate([xs, [1e-8, 0.5, 1.0, 1.4616321449683622, 2.0, 9.999999, 10.0, 1e8]])
    got = np.array([_digamma(x) for x in xs])
    want = digamma(xs)
    # relative, or absolute near digamma's root (1.4616...), where no float is relative-exact
    np.testing.assert_array_less(np.abs(got - want), 3e-15 * np.maximum(np.abs(want), 1.0))


def test_exp_expectation_equals_scipys_exp_digamma_difference():
    from scipy.special import digamma
    rng = np.random.default_rng(6)
    gammas = np.concatenate([rng.gamma(0.3, 30.0, (300, 10)) + 1e-3,
                             10.0 ** rng.uniform(-6, 6, (300, 10))])
    got = np.empty_like(gammas)
    for g, out in zip(gammas, got):
        lda._expect(g, out)
    terms = digamma(gammas), np.broadcast_to(digamma(gammas.sum(axis=1))[:, None], gammas.shape)
    want = np.exp(terms[0] - terms[1])
    # the exponent to the precision of its two digammas' floats; subnormals aside
    normal = want > 1e-300
    scale = np.maximum(np.maximum(np.abs(terms[0]), np.abs(terms[1])), 1.0)[normal]
    np.testing.assert_array_less(np.abs(np.log(got[normal]) - np.log(want[normal])),
                                 2e-15 * scale)
    assert (got[~normal] < 1e-299).all()


def test_each_document_at_once_gives_the_same_bits_on_any_number_of_threads(monkeypatch):
    # each document's result is its own: the blocks the threads take never change a bit
    rng = np.random.default_rng(8)
    sizes = rng.integers(0, 40, 3000)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    words = np.concatenate([np.sort(rng.choice(200, s, replace=False)) for s in sizes])
    counts = rng.integers(1, 5, words.size).astype(float)
    table = rng.gamma(0.5, 1.0, (200, 9))
    args = (table, words, counts, offsets, np.full(9, 0.2), 100, 1e-3)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "1")
    serial = kernels.lda_documents(*args)
    assert serial[3].max() > 1 and (serial[3][sizes == 0] == 0).all()
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "3")
    for _ in range(3):  # threaded, then on this thread once measured, then the faster
        assert all(np.array_equal(a, b) for a, b in zip(serial, kernels.lda_documents(*args)))
