"""scipy.sparse rows for Multinomial and LDA: read as CSR, never densified, fitting what the
same rows as ``{level: count}`` mappings fit."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import mixfold
from mixfold import (DataError, LDADistribution, LDAEstimator, MixtureEstimator,
                     MultinomialDistribution, MultinomialEstimator)
from mixfold.families.lda import BagOfWordsEncoded

V = 30


def counts_matrix(n=400, v=V, seed=0):
    """Two groups of rows drawing their levels from different halves of the columns."""
    rng = np.random.default_rng(seed)
    group = rng.random(n) < 0.4
    p = np.where(group[:, None], np.r_[np.full(v // 2, 2.0), np.full(v - v // 2, 0.2)],
                 np.r_[np.full(v // 2, 0.2), np.full(v - v // 2, 2.0)])
    x = np.array([rng.multinomial(rng.integers(0, 12), q / q.sum()) for q in p])
    return sp.csr_matrix(x.astype(float)), group


def as_mappings(x):
    return [{int(j): int(c) for j, c in zip(r.indices, r.data)} for r in x]


def test_multinomial_log_density_of_csr_rows_is_scipys(rng):
    x, _ = counts_matrix()
    d = MultinomialDistribution(rng.dirichlet(np.ones(V)), levels=range(V))
    dense = x.toarray()
    want = [stats.multinomial(int(r.sum()), d.probs).logpmf(r) for r in dense]
    np.testing.assert_allclose(d.seq_log_density(x), want, rtol=1e-12, atol=1e-12)
    zero = MultinomialDistribution(np.r_[0.0, np.full(V - 1, 1 / (V - 1))], levels=range(V))
    got = zero.seq_log_density(sp.csr_matrix(np.eye(2, V)))
    assert got[0] == -np.inf and np.isfinite(got[1])


def test_csr_rows_are_encoded_without_densifying():
    x, _ = counts_matrix(n=1000)
    for est in (MultinomialEstimator(), LDAEstimator(3)):
        encoder = est.encoder().fit(x)
        enc = encoder.encode(x)
        assert isinstance(enc, BagOfWordsEncoded)
        assert enc.words.size == x.nnz and enc.n_rows == 1000
        assert enc.nbytes < 3 * (x.data.nbytes + x.indices.nbytes + x.indptr.nbytes)
    # duplicates add up, explicit zeros are no nonzeros, any sparse format reads
    coo = sp.coo_matrix(([2.0, 1.0, 0.0, 3.0], ([0, 0, 1, 2], [4, 4, 1, 0])), shape=(3, V))
    enc = MultinomialEstimator().encoder().fit(coo).encode(coo)
    assert enc.offsets.tolist() == [0, 1, 1, 2]
    assert enc.words.tolist() == [4, 0] and enc.counts.tolist() == [3.0, 3.0]


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_mixture_of_multinomials_on_csr_fits_as_on_mappings(precision):
    x, group = counts_matrix()
    est = MixtureEstimator([MultinomialEstimator(levels=range(V))] * 2)
    sparse = mixfold.fit(x, est, max_iter=30, tol=0.0, progress=False, precision=precision)
    rows = mixfold.fit(as_mappings(x), est, max_iter=30, tol=0.0, progress=False)
    np.testing.assert_allclose(sparse.log_likelihood, rows.log_likelihood, rtol=1e-7)
    for a, b in zip(sparse.model.components, rows.model.components):
        np.testing.assert_allclose(a.probs, b.probs, atol=1e-7)
    found = sparse.model.seq_posterior(x).argmax(axis=1).astype(bool)
    assert max(np.mean(found == group), np.mean(found != group)) > 0.95


def test_csr_rows_with_weights_and_learnt_levels():
    x, _ = counts_matrix(n=60)
    w = np.random.default_rng(1).integers(0, 3, 60)
    a = mixfold.optimize(x, MultinomialEstimator(), weights=w, progress=False)
    b = mixfold.optimize(sp.csr_matrix(np.repeat(x.toarray(), w, axis=0)),
                         MultinomialEstimator(), progress=False)
    assert a.levels == tuple(range(V))
    np.testing.assert_allclose(a.probs, b.probs, rtol=1e-12)


def test_lda_on_csr_fits_as_on_word_counts():
    truth = LDADistribution(np.random.default_rng(0).dirichlet(np.full(V, 0.1), 3) * 1e7, 0.3,
                            vocabulary=range(V), mean_length=50.0)
    docs = truth.sampler(1).sample(300)
    x = sp.lil_matrix((len(docs), V))
    for i, d in enumerate(docs):
        for w, c in d.items():
            x[i, w] = c
    x = x.tocsr()
    start = LDADistribution(np.random.RandomState(5).gamma(100.0, 0.01, (3, V)), 1 / 3,
                            vocabulary=range(V))
    options = dict(init=start, max_iter=10, tol=0.0, progress=False)
    a = mixfold.fit(x, LDAEstimator(3, alpha=1 / 3), **options)
    b = mixfold.fit(docs, LDAEstimator(3, alpha=1 / 3), **options)
    np.testing.assert_allclose(a.log_likelihood, b.log_likelihood, rtol=1e-12)
    np.testing.assert_allclose(a.model.topic_word, b.model.topic_word, rtol=1e-10)
    assert a.model.perplexity(x) == pytest.approx(b.model.perplexity(docs), rel=1e-12)
    named = LDAEstimator(3, vocabulary=[f"w{j}" for j in range(V)])
    assert mixfold.optimize(x, named, max_iter=2, progress=False).vocabulary[-1] == f"w{V - 1}"


def test_bad_sparse_rows_raise_naming_the_row():
    x = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, -1.0, 0.0]]))
    with pytest.raises(DataError, match="row 1: expected an integer count >= 0 in column 1"):
        MultinomialEstimator().encoder().fit(x).encode(x)
    with pytest.raises(DataError, match="row 1: expected a finite count"):
        LDAEstimator(2).encoder().fit(x).encode(x)
    with pytest.raises(DataError, match="row 0: expected an integer count"):
        MultinomialEstimator().encoder().fit(x).encode(sp.csr_matrix([[0.5, 0.0, 0.0]]))
    with pytest.raises(DataError, match="one column per level \\(4\\), got 3 columns"):
        MultinomialEstimator(levels="abcd").encoder().encode(x)
    with pytest.raises(DataError, match="no rows"):
        mixfold.optimize(sp.csr_matrix((0, 3)), MultinomialEstimator(), progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["mp", "dask"])
def test_engine_backends_fit_csr_rows_as_local(backend):
    x, _ = counts_matrix(n=2000, seed=3)
    est = MixtureEstimator([MultinomialEstimator()] * 2)
    local = mixfold.fit(x, est, max_iter=8, tol=0.0, progress=False)
    other = mixfold.fit(x, est, max_iter=8, tol=0.0, backend=backend, num_workers=2,
                        progress=False)
    np.testing.assert_allclose(other.log_likelihood, local.log_likelihood, rtol=1e-12)


def test_spark_vectors_encode_as_their_counts():
    """Spark ML vectors are plain Python objects: no session needed to encode them."""
    linalg = pytest.importorskip("pyspark.ml.linalg")
    x, _ = counts_matrix(n=50)
    rows = [linalg.SparseVector(V, r.indices.tolist(), r.data.tolist()) for r in x]
    rows[3] = linalg.DenseVector(x[3].toarray()[0])
    for est in (MultinomialEstimator(), LDAEstimator(2)):
        encoder = est.encoder().fit(rows)
        got, want = encoder.encode(rows), est.encoder().fit(x).encode(x)
        dense = got.values if hasattr(got, "values") else sp.csr_matrix(
            (got.counts, got.words, got.offsets), shape=(50, V)).toarray()
        np.testing.assert_array_equal(dense, sp.csr_matrix(
            (want.counts, want.words, want.offsets), shape=(50, V)).toarray())
    with pytest.raises(DataError, match="row 1: expected a vector of length 3"):
        MultinomialEstimator().encoder().fit([linalg.SparseVector(3, [0], [1.0]),
                                              linalg.SparseVector(4, [0], [1.0])])


def test_spark_vectors_through_arrow_encode_as_their_counts():
    # a DataFrame read through Arrow batches hands a vector column over as its SQL struct
    x, _ = counts_matrix(n=50)
    rows = [{"type": 0, "size": V, "indices": r.indices.tolist(), "values": r.data.tolist()}
            for r in x]
    rows[3] = {"type": 1, "size": None, "indices": None, "values": x[3].toarray()[0].tolist()}
    for est in (MultinomialEstimator(), LDAEstimator(2)):
        got, want = est.encoder().fit(rows).encode(rows), est.encoder().fit(x).encode(x)
        dense = got.values if hasattr(got, "values") else sp.csr_matrix(
            (got.counts, got.words, got.offsets), shape=(50, V)).toarray()
        np.testing.assert_array_equal(dense, sp.csr_matrix(
            (want.counts, want.words, want.offsets), shape=(50, V)).toarray())
    with pytest.raises(DataError, match="row 1: expected a vector of length 3"):
        MultinomialEstimator().encoder().fit([
            {"type": 0, "size": 3, "indices": [0], "values": [1.0]},
            {"type": 0, "size": 4, "indices": [0], "values": [1.0]}])


@pytest.mark.parametrize("family", ["multinomial", "lda"])
def test_a_dense_count_matrix_is_read_as_counts_like_its_sparse_form(family):
    """A densified document-term matrix fits what its sparse form fits (it once turned into
    rows of tokens whose levels were the count values)."""
    x, _ = counts_matrix()
    dense = x.toarray().astype(np.int64)
    if family == "multinomial":
        est = MixtureEstimator([MultinomialEstimator()] * 2)
    else:
        est = LDAEstimator(2)
    a = mixfold.fit(dense, est, seed=1, max_iter=5, progress=False)
    b = mixfold.fit(x, est, seed=1, max_iter=5, progress=False)
    np.testing.assert_allclose(a.log_likelihood, b.log_likelihood, rtol=1e-12)
    levels = a.model.components[0].levels if family == "multinomial" else a.model.vocabulary
    assert tuple(levels) == tuple(range(V))


def test_a_dense_count_matrix_with_a_fraction_names_its_row_and_column():
    x, _ = counts_matrix()
    dense = x.toarray()
    dense[7, 3] = 2.5
    with pytest.raises(DataError, match=r"row 7: expected an integer count >= 0 in column 3, "
                                         r"got 2\.5"):
        mixfold.optimize(dense, MultinomialEstimator(), progress=False)
    with pytest.raises(DataError, match="one column per level"):
        MultinomialEstimator(levels=range(V + 1)).encoder().encode(dense)
