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


@pytest.fixture
def parquet_folder(tmp_path):
    """Parquet files of unequal sizes (Spark packs them into partitions out of name order),
    each of several row groups, with a nullable string column."""
    import pandas as pd

    rng = np.random.default_rng(7)
    for i, n in enumerate([120, 310, 45, 200, 90]):
        frame = pd.DataFrame({"x": rng.normal(2.0 * (i % 2), 1.0, n),
                              "c": rng.choice(["u", "v", f"only{i}"], n),
                              "o": [None if v < 0.2 else "p" for v in rng.random(n)]})
        frame.to_parquet(tmp_path / f"part{i}.parquet", row_group_size=64)
    return str(tmp_path)


def scanned_rows(df):
    """Every row pyarrow reads from the files Spark's scan of ``df`` lists, or None."""
    from mixfold.backends.spark import _arrow_schema
    from mixfold.backends._spark_parquet import parquet_scan, parquet_tables

    schema = _arrow_schema(df)
    files = parquet_scan(df, schema)
    if files is None:
        return None
    return [r for part in files for t in parquet_tables(schema, 7, part)
            for r in t.to_pylist()]


def test_a_parquet_scan_is_read_by_its_tasks_in_the_dataframes_order(spark_session,
                                                                     parquet_folder,
                                                                     small_batches):
    df = spark_session.read.parquet(parquet_folder)
    assert df.rdd.getNumPartitions() >= 2
    assert scanned_rows(df) == [r.asDict() for r in df.collect()]
    projected = df.select("o", "x")
    assert scanned_rows(projected) == [r.asDict() for r in projected.collect()]
    est = mixfold.MixtureEstimator([mixfold.RecordEstimator({
        "x": mixfold.GaussianEstimator(), "c": mixfold.CategoricalEstimator(),
        "o": mixfold.OptionalEstimator(mixfold.CategoricalEstimator())})] * 2)
    (handle, _), jobs = jobs_run(spark_session.sparkContext,
                                 lambda: SparkEncodedData.from_dataframe(df, est))
    handle.close()
    assert jobs == 1
    on_spark, local = fit_both(df, est, seed=4, max_iter=5, tol=0.0)
    np.testing.assert_allclose(on_spark.log_likelihood, local.log_likelihood, rtol=1e-12)


def test_what_is_not_a_bare_parquet_scan_goes_through_the_jvms_batches(spark_session,
                                                                       parquet_folder,
                                                                       tmp_path_factory):
    import pandas as pd
    from pyspark.sql import functions as F

    df = spark_session.read.parquet(parquet_folder)
    assert scanned_rows(df.filter(F.col("x") > 0)) is None
    assert scanned_rows(df.select((F.col("x") * 2).alias("x"))) is None
    assert scanned_rows(df.limit(10)) is None
    split = "spark.sql.files.maxPartitionBytes"
    before = spark_session.conf.get(split)
    spark_session.conf.set(split, "2000")  # each file read by several tasks
    try:
        assert scanned_rows(spark_session.read.parquet(parquet_folder)) is None
    finally:
        spark_session.conf.set(split, before)
    nested = tmp_path_factory.mktemp("by_day")
    (nested / "day=1").mkdir()
    pd.DataFrame({"x": [1.0, 2.0]}).to_parquet(nested / "day=1" / "p.parquet")
    assert scanned_rows(spark_session.read.parquet(str(nested))) is None  # a partition column
    ints = tmp_path_factory.mktemp("ints")
    pd.DataFrame({"x": np.arange(5, dtype=np.uint32)}).to_parquet(ints / "p.parquet")
    assert scanned_rows(spark_session.read.parquet(str(ints))) is None  # uint32 read as long
    dated = tmp_path_factory.mktemp("dated")
    pd.DataFrame({"x": [1.0], "t": pd.to_datetime(["1500-01-01"])}).to_parquet(
        dated / "p.parquet")
    assert scanned_rows(spark_session.read.parquet(str(dated))) is None  # Spark may rebase it
    kept = df.filter(F.col("x") > 0)
    est = mixfold.RecordEstimator({"x": mixfold.GaussianEstimator(),
                                   "c": mixfold.CategoricalEstimator()})
    on_spark, local = fit_both(kept.select("x", "c"), est, max_iter=3)
    np.testing.assert_allclose(on_spark.log_likelihood, local.log_likelihood, rtol=1e-12)


def test_an_array_column_fits_a_vector_field_as_the_rows_do(spark_session, small_batches):
    # array<double> reaches the encoder as Arrow's list column: an object array of rows
    rng = np.random.default_rng(5)
    v = np.concatenate([rng.normal(-2.0, 1.0, (150, 3)), rng.normal(3.0, 0.5, (150, 3))])
    rows = [([float(a) for a in r], float(t)) for r, t in zip(v, rng.normal(size=300))]
    df = spark_session.createDataFrame(
        spark_session.sparkContext.parallelize(rows, 3), "v array<double>, y double")
    est = mixfold.MixtureEstimator([mixfold.RecordEstimator(
        {"v": mixfold.MultivariateGaussianEstimator(), "y": mixfold.GaussianEstimator()})] * 2)
    on_spark, local = fit_both(df, est, seed=3, max_iter=5, tol=0.0)
    # (tol=0 stops at an exact fixed point, which a last bit of the partitions' summation order
    # reaches an iteration sooner or later: the common iterations and the ends are compared)
    common = min(len(on_spark.log_likelihood), len(local.log_likelihood))
    assert common >= 3
    np.testing.assert_allclose(on_spark.log_likelihood[:common], local.log_likelihood[:common],
                               rtol=1e-12)
    assert on_spark.final_log_likelihood == pytest.approx(local.final_log_likelihood, rel=1e-12)
    for ours, theirs in zip(on_spark.model.components, local.model.components):
        np.testing.assert_allclose(ours.fields["v"].cov, theirs.fields["v"].cov, rtol=1e-10)


@pytest.mark.parametrize("learns", ["in the pass", "from a sample"])
def test_a_bad_row_is_named_by_its_row_in_the_dataframe(spark_session, small_batches, learns):
    # the row in its third partition's second batch, counted from the DataFrame's first row
    rng = np.random.default_rng(6)
    rows = [(float(x), str(c)) for x, c in zip(rng.normal(size=300), rng.choice(["a", "b"], 300))]
    rows[250] = (float("nan"), "a")
    df = spark_session.createDataFrame(
        spark_session.sparkContext.parallelize(rows, 3), "x double, c string")
    fields = {"x": mixfold.GaussianEstimator()}
    if learns == "from a sample":  # a bag of tokens keeps the vocabulary sample
        df = df.selectExpr("x", "array(c) as c")
        fields["c"] = mixfold.MultinomialEstimator()
    with pytest.raises(DataError) as err:
        mixfold.fit(df, mixfold.RecordEstimator(fields), backend=spark_session, progress=False)
    assert (err.value.row, err.value.path) == (250, ("x",))
    assert "finite" in str(err.value)
