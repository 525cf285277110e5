"""A Spark DataFrame's encode learns its vocabularies in its one pass (no sample job) and
fits as the local backend does on the same rows in the same order."""

import uuid

import numpy as np
import pytest

import mixfold
from mixfold.backends.spark import SparkEncodedData
from mixfold.errors import DataError

pytestmark = pytest.mark.slow

BATCH_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"


def jobs_run(sc, fn):
    """(fn(), the number of Spark jobs it ran), counted by the status tracker."""
    group = f"count-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "jobs counted by a test")
    try:
        out = fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return out, len(sc.statusTracker().getJobIdsForGroup(group))


@pytest.fixture
def small_batches(spark_session):
    """Arrow batches of 40 rows, so that every partition holds several."""
    before = spark_session.conf.get(BATCH_ROWS)
    spark_session.conf.set(BATCH_ROWS, "40")
    yield
    spark_session.conf.set(BATCH_ROWS, before)


def fit_both(df, est, **options):
    ordered = [r.asDict() for r in df.collect()]  # the DataFrame's own row order
    on_spark = mixfold.fit(df, est, backend=df.sparkSession, progress=False, **options)
    local = mixfold.fit(ordered, est, progress=False, **options)
    return on_spark, local


# DataFrames made without a shuffle: adaptive execution runs a shuffle's map stage as a job
# of its own


def test_a_numeric_dataframe_is_encoded_by_one_job(spark_session, small_batches):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-3, 1, 300), rng.normal(2, 0.5, 200)])
    df = spark_session.createDataFrame(
        spark_session.sparkContext.parallelize([(float(v),) for v in x], 3), "x double")
    est = mixfold.MixtureEstimator([mixfold.RecordEstimator(
        {"x": mixfold.GaussianEstimator()})] * 2)
    (handle, _), jobs = jobs_run(spark_session.sparkContext,
                                 lambda: SparkEncodedData.from_dataframe(df, est))
    handle.close()
    assert jobs == 1  # the encoding pass: no vocabulary sample, no second pass
    on_spark, local = fit_both(df, est, seed=2, max_iter=6, tol=0.0)
    np.testing.assert_allclose(on_spark.log_likelihood, local.log_likelihood, rtol=1e-12)


def test_a_level_first_seen_in_the_last_partition_is_learnt_in_the_one_pass(spark_session,
                                                                            small_batches):
    rng = np.random.default_rng(3)
    n = 600
    plan = ["m", "k", "a"] * (n // 3)
    plan[-3:] = ["late"] * 3  # only the last partition's last batch holds it
    tier = [None] * 80 + [str(t) for t in rng.choice(["gold", "basic"], n - 80)]  # a null batch
    rows = list(zip(plan, tier, rng.normal(0, 1, n).tolist()))
    df = spark_session.createDataFrame(spark_session.sparkContext.parallelize(rows, 3),
                                       "plan string, tier string, x double")
    est = mixfold.MixtureEstimator([mixfold.RecordEstimator({
        "plan": mixfold.CategoricalEstimator(),
        "tier": mixfold.OptionalEstimator(mixfold.CategoricalEstimator()),
        "x": mixfold.GaussianEstimator()})] * 2)
    (handle, bound), jobs = jobs_run(spark_session.sparkContext,
                                     lambda: SparkEncodedData.from_dataframe(df, est))
    handle.close()
    assert jobs == 1
    assert bound.encoder() == est.encoder().fit(df.toPandas())  # the local vocabularies
    on_spark, local = fit_both(df, est, seed=1, max_iter=8, tol=0.0)
    assert on_spark.backend == "spark"
    assert on_spark.model.components[0].fields["plan"].levels == ("a", "k", "late", "m")
    np.testing.assert_allclose(on_spark.log_likelihood, local.log_likelihood, rtol=1e-12)
    np.testing.assert_allclose(on_spark.model.weights, local.model.weights, rtol=1e-12)


def test_a_token_the_vocabulary_sample_lacks_takes_a_second_pass(spark_session, small_batches,
                                                                 monkeypatch):
    # words are learnt from the first rows, then a second pass with every vocabulary
    import mixfold.backends.spark as spark_backend

    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(12)]
    docs = [[str(w) for w in rng.choice(words[:8] if i < 300 else words, 10)]
            for i in range(400)]
    df = spark_session.createDataFrame(spark_session.sparkContext.parallelize(
        [(d,) for d in docs], 2), "doc array<string>")
    est = mixfold.RecordEstimator({"doc": mixfold.LDAEstimator(3)})
    monkeypatch.setattr(spark_backend, "VOCABULARY_SAMPLE_ROWS", 20)
    on_spark, local = fit_both(df, est, seed=1, max_iter=4, tol=0.0)
    assert on_spark.model.fields["doc"].vocabulary == tuple(sorted(words))
    np.testing.assert_allclose(on_spark.log_likelihood, local.log_likelihood, rtol=1e-10)


def test_a_categorical_column_without_a_value_is_named(spark_session):
    df = spark_session.createDataFrame([(1.0, None), (2.0, None)], "x double, tier string")
    est = mixfold.RecordEstimator({
        "x": mixfold.GaussianEstimator(),
        "tier": mixfold.OptionalEstimator(mixfold.CategoricalEstimator())})
    with pytest.raises(DataError, match="tier.*no values to learn the categorical levels"):
        SparkEncodedData.from_dataframe(df, est)
