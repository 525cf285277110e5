"""Every data backend, on its real engine, gives the local fit."""

import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

import mixfold
from mixfold.backends import MissingEngineError
from mixfold.backends._shard import require
from mixfold.compute.tree import shard_bounds, tree_reduce
from tests.backends.cases import CASES
from tests.backends.mpirun import run_mpiexec

ENGINES = ["mp", "spark", "dask", "ray"]
ROOT = Path(__file__).resolve().parents[2]


def close(a, b, rtol=1e-10):
    """Two model dicts agree: same structure, numbers within rtol."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            close(a[k], b[k], rtol)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, rtol)
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=rtol, abs=1e-300)
    else:
        assert a == b


def fit_case(case, **extra):
    rows, est, options = CASES[case]()
    return mixfold.fit(rows, est, progress=False, **{**options, **extra})


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES, indirect=True)
@pytest.mark.parametrize("case", ["gmm", "records", "missing_entries", "lda"])
def test_same_start_and_same_fit_as_local(engine, case):
    local_start = fit_case(case, max_iter=0).model
    local = fit_case(case)
    start = fit_case(case, max_iter=0, backend=engine, num_workers=2).model
    res = fit_case(case, backend=engine, num_workers=2)
    close(start.to_dict(), local_start.to_dict())
    close(res.model.to_dict(), local.model.to_dict())
    assert res.iterations == local.iterations
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_keyed_ties_hold_across_shards_and_payload_is_fixed_size(engine):
    from mixfold.dispatch import open_backend

    rows, est, options = CASES["records"]()
    sizes = []
    for n in (1000, 3000):
        handle, bound, _ = open_backend(engine, rows[-n:], est, chunk_rows=500, num_workers=2)
        try:
            res = mixfold.fit(handle, bound, progress=False, **options)
            sizes.append(handle.last_payload_size)
        finally:
            handle.close()
        for comp in res.model.components:
            assert comp.fields["a"] == comp.fields["b"]
    stats = bound.accumulator_factory().make().payload_size()
    assert sizes == [stats + 3, stats + 3]


def test_mp_worker_killed_mid_fit_is_restarted_and_the_result_is_unchanged():
    from mixfold.dispatch import open_backend

    rows, est, options = CASES["gmm"]()
    undisturbed = fit_case("gmm").model
    handle, bound, _ = open_backend("mp", rows, est, chunk_rows=1000, num_workers=2)
    killed = []

    def kill_a_worker(info):
        if info.iteration == 3:
            pid = handle.pids[1]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    try:
        res = mixfold.fit(handle, bound, progress=False, callbacks=[kill_a_worker], **options)
        assert killed and handle.restarts == 1 and killed[0] not in handle.pids
    finally:
        handle.close()
    close(res.model.to_dict(), undisturbed.to_dict())


@pytest.mark.slow
@pytest.mark.parametrize("case", ["gmm", "gmm_far", "records", "missing_entries"])
def test_mpi_spmd_fit_equals_local(tmp_path, case):
    out = tmp_path / "mpi.json"
    run_mpiexec(2, ["-m", "mpi4py", str(ROOT / "tests/backends/mpi_fit.py"), str(out), "2",
                    case])
    got = json.loads(out.read_text())
    # rows at 1e9 are known to ulp(1e9) = 1.2e-7, 1.7e-7 of their spread: shards that sum in
    # another order agree to that resolution, not to the last bits of rows near the origin
    rtol = 1e-7 if case == "gmm_far" else 1e-10
    close(got["start"], fit_case(case, max_iter=0).model.to_dict(), rtol)
    local = fit_case(case)
    close(got["final"], local.model.to_dict(), rtol)
    np.testing.assert_allclose(got["trace"], local.log_likelihood,
                               rtol=1e-9 if case == "gmm_far" else 1e-12)
    assert got["payload"] == got["stats_size"] + 3
    # one record per rank: its rows, the band it ran, its fold's seconds measured on it
    shards, executors, _, devices, bands, rows, seconds = zip(*got["workers"])
    assert executors == ("rank 0", "rank 1") and shards == (0, 1)
    assert sum(rows) == len(CASES[case]()[0]) and bands == ("float64", "float64")
    assert devices == ("cpu", "cpu") and all(s > 0 for s in seconds)


def test_mp_workers_keeping_their_features_fit_the_same_bits(monkeypatch):
    # each worker holds its shard and may keep its fused E-step's features between folds
    fits = []
    for ratio in ["0", "8"]:  # none kept; room for the float32 features of every shard
        monkeypatch.setenv("MIXFOLD_FEATURE_CACHE", ratio)
        fits.append(fit_case("gmm", backend="mp", num_workers=2, precision="float32"))
    assert fits[0].model.to_dict() == fits[1].model.to_dict()
    assert fits[0].log_likelihood == fits[1].log_likelihood


def test_missing_engine_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if PySpark were not installed
    rows, est, _ = CASES["tuples"]()
    with pytest.raises(MissingEngineError, match=r"mixfold\[spark\]"):
        mixfold.optimize(rows, est, backend="spark", progress=False)
    with pytest.raises(MissingEngineError, match=r"mixfold\[ray\]"):
        require("no_such_engine_module", "ray", "ray")


def test_unknown_backend_object_is_refused():
    with pytest.raises(ValueError, match="SparkSession"):
        mixfold.optimize([1.0, 2.0], mixfold.GaussianEstimator(), backend=object(),
                         progress=False)


def test_shards_and_tree_order():
    assert shard_bounds(10, 3) == [(0, 3), (3, 7), (7, 10)]
    assert shard_bounds(2, 5) == [(0, 1), (1, 2)]
    assert tree_reduce(list("abcde"), lambda *xs: "(" + "".join(xs) + ")") == "(((ab)(cd))e)"
    assert tree_reduce(list("abcde"), lambda *xs: "(" + "".join(xs) + ")", 3) == "((abc)(de))"


@pytest.mark.slow
def test_spark_dataframe_is_encoded_on_the_executors(spark_session):
    rows, est, options = CASES["records"]()
    df = spark_session.createDataFrame(rows).repartition(3)
    ordered = [r.asDict() for r in df.collect()]  # the DataFrame's own row order
    local = mixfold.fit(ordered, est, progress=False, **options)
    res = mixfold.fit(df, est, backend=spark_session, progress=False, **options)
    assert res.backend == "spark"
    close(res.model.to_dict(), local.model.to_dict())
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)


@pytest.mark.slow
def test_spark_dataframe_with_empty_partitions_lays_out_its_rows(spark_session):
    from mixfold.dispatch import open_backend

    x = np.random.default_rng(1).normal(0.5, 2.0, 5)
    rows = [{"x": float(v)} for v in x]
    df = spark_session.createDataFrame(rows).repartition(8)  # more partitions than rows
    est = mixfold.RecordEstimator({"x": mixfold.GaussianEstimator()})
    handle, _, _ = open_backend(spark_session, df, est)
    try:
        sizes = [b - a for a, b in handle.bounds]
        assert len(sizes) == 8 and 0 in sizes and sum(sizes) == handle.n_rows == 5
        assert handle.bounds[0][0] == 0
        assert all(p[1] == q[0] for p, q in zip(handle.bounds, handle.bounds[1:]))
    finally:
        handle.close()
    m = mixfold.optimize(df, est, backend=spark_session, progress=False)
    assert m.fields["x"].mu == pytest.approx(x.mean(), rel=1e-12)
    local = mixfold.optimize(rows, est, progress=False)
    close(m.to_dict(), local.to_dict(), rtol=1e-12)


@pytest.mark.slow
def test_spark_dataframe_of_many_batches_with_a_level_first_seen_late(spark_session):
    # several Arrow batches per partition (joined by each fold, row indices re-based across
    # them, codes mapped onto the merged levels) and a level first seen in a late batch
    rng = np.random.default_rng(3)
    levels = ["a", "b", "c"] * 100 + ["late"] * 7
    rows = [{"c": c, "x": float(v)} for c, v in zip(levels, rng.normal(0, 1, len(levels)))]
    est = mixfold.MixtureEstimator([mixfold.RecordEstimator(
        {"c": mixfold.CategoricalEstimator(), "x": mixfold.GaussianEstimator()})] * 2)
    batch_rows = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark_session.conf.get(batch_rows)
    spark_session.conf.set(batch_rows, "40")
    try:
        df = spark_session.createDataFrame(rows).coalesce(3)
        ordered = [r.asDict() for r in df.collect()]
        res = mixfold.fit(df, est, backend=spark_session, max_iter=8, tol=0.0, seed=1,
                          progress=False)
    finally:
        spark_session.conf.set(batch_rows, before)
    local = mixfold.fit(ordered, est, max_iter=8, tol=0.0, seed=1, progress=False)
    assert "late" in res.model.components[0].fields["c"].levels
    close(res.model.to_dict(), local.model.to_dict(), rtol=1e-12)
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)


@pytest.mark.slow
def test_spark_dataframe_with_a_weight_column(spark_session):
    rng = np.random.default_rng(0)
    x, w = rng.normal(1.0, 2.0, 500), rng.uniform(0, 3, 500)
    df = spark_session.createDataFrame([{"x": float(a), "w": float(b)} for a, b in zip(x, w)])
    est = mixfold.RecordEstimator({"x": mixfold.GaussianEstimator()})
    m = mixfold.optimize(df, est, backend="spark", weights="w", progress=False)
    assert m.fields["x"].mu == pytest.approx(np.average(x, weights=w), rel=1e-10)


@pytest.mark.slow
def test_backend_spark_by_name_leaves_a_running_session_running(spark_session):
    rows, est, options = CASES["gmm"]()
    named = mixfold.fit(rows, est, backend="spark", progress=False, **options)
    assert named.final_log_likelihood == pytest.approx(fit_case("gmm").final_log_likelihood,
                                                       rel=1e-10)
    assert spark_session.range(3).count() == 3  # the user's session (and its JVM) still runs


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["spark", "dask", "ray"], indirect=True)
def test_fits_on_every_engine_are_translation_equivariant(engine):
    # every shard sums about the model's point, so the reduced payloads hold the spread of rows
    # far from the origin: the fit at 1e9 is the fit at 0 moved by 1e9
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.standard_normal((600, 2)), 5.0 + rng.standard_normal((400, 2))])
    offset = np.array([1e9, -1e9])
    moved = x + offset
    base = moved - offset  # the rows both fits see, up to the translation
    est = mixfold.MixtureEstimator([mixfold.MultivariateGaussianEstimator()] * 2)
    a = mixfold.fit(base, est, seed=1, max_iter=20, progress=False)
    b = mixfold.fit(moved, est, seed=1, max_iter=20, progress=False, backend=engine,
                    num_workers=2)
    for ca, cb in zip(a.model.components, b.model.components):
        np.testing.assert_allclose(cb.mu - offset, ca.mu, rtol=0, atol=1e-6 + 4 * np.spacing(1e9))
        np.testing.assert_allclose(cb.cov, ca.cov, rtol=1e-6, atol=1e-9)
