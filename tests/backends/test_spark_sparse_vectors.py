"""A Spark DataFrame's column of ML vectors (SparseVector, DenseVector) as Multinomial and LDA
rows, encoded on the executors, fits what the same counts fit as a local CSR matrix."""

import numpy as np
import pytest
import scipy.sparse as sp

import mixfold
from mixfold import LDADistribution, LDAEstimator, MixtureEstimator, MultinomialEstimator
from tests.families.test_sparse_rows import V, counts_matrix


def vector_frame(spark_session, x, dense_every=0):
    from pyspark.ml.linalg import DenseVector, SparseVector

    rows = []
    for i, r in enumerate(x):
        if dense_every and i % dense_every == 0:
            rows.append((DenseVector(r.toarray()[0]),))
        else:
            rows.append((SparseVector(x.shape[1], r.indices.tolist(), r.data.tolist()),))
    return spark_session.createDataFrame(rows, ["counts"]).repartition(3)


def collected(df):
    """The DataFrame's rows in its own order, as a CSR matrix."""
    return sp.csr_matrix(np.array([r["counts"].toArray() for r in df.collect()]))


@pytest.mark.slow
def test_multinomial_mixture_on_a_vector_column(spark_session):
    x, _ = counts_matrix(n=600, seed=4)
    df = vector_frame(spark_session, x, dense_every=7)
    est = MixtureEstimator([MultinomialEstimator()] * 2)
    spark = mixfold.fit(df, est, backend=spark_session, max_iter=10, tol=0.0, progress=False)
    local = mixfold.fit(collected(df), est, max_iter=10, tol=0.0, progress=False)
    np.testing.assert_allclose(spark.log_likelihood, local.log_likelihood, rtol=1e-12)
    assert spark.model.components[0].levels == tuple(range(V))


@pytest.mark.slow
def test_lda_on_a_vector_column_with_named_words(spark_session):
    x, _ = counts_matrix(n=300, seed=5)
    df = vector_frame(spark_session, x)
    words = [f"w{j}" for j in range(V)]
    start = LDADistribution(np.random.RandomState(5).gamma(100.0, 0.01, (2, V)), 0.5,
                            vocabulary=words)
    options = dict(init=start, max_iter=4, tol=0.0, progress=False)
    spark = mixfold.fit(df, LDAEstimator(2, alpha=0.5), backend=spark_session, **options)
    local = mixfold.fit(collected(df), LDAEstimator(2, alpha=0.5), **options)
    np.testing.assert_allclose(spark.log_likelihood, local.log_likelihood, rtol=1e-12)
    short = vector_frame(spark_session, sp.csr_matrix(np.ones((4, 3))))
    # raised on an executor: Spark wraps it, the message names the lengths
    with pytest.raises(Exception, match="one column per level or word \\(30\\), got vectors of "
                                        "length 3"):
        mixfold.fit(short, LDAEstimator(2, alpha=0.5), backend=spark_session, **options)
