"""``FitResult.workers``: one record per shard on every engine -- the engine's own id of where it
ran, its planned device and band, its rows, its fold's seconds measured where it ran."""

import os

import numpy as np
import pytest

import mixfold
from mixfold.backends.worker_records import TimedCombine, timed_task
from mixfold.compute.payload import add_payloads, run_task
from mixfold.parallel.heterogeneous import Worker
from mixfold.precision import FLOAT64
from tests.backends.cases import CASES

N_ROWS = len(CASES["gmm"]()[0])


def fit(**extra):
    rows, est, options = CASES["gmm"]()
    return mixfold.fit(rows, est, progress=False, **{**options, **extra})


def mixed_pool(names=("w0", "w1", "w2")):
    """The first worker runs float32 (three times as fast), the others float64."""
    return [Worker(n, precisions=("float32",) if i == 0 else ("float64",),
                   base_throughput=3.0 if i == 0 else 1.0) for i, n in enumerate(names)]


def check(res, devices, bands):
    """Rows add up to the data, in row order; devices and bands as planned; every fold timed."""
    assert [w.shard for w in res.workers] == list(range(len(devices)))
    assert sum(w.rows for w in res.workers) == N_ROWS
    assert [w.device for w in res.workers] == devices
    assert [w.band for w in res.workers] == bands
    assert all(w.seconds_per_iteration > 0 for w in res.workers if w.rows)
    if res.plan is not None:
        assert [w.rows for w in res.workers] == [a.rows for a in res.plan.assignments]


def test_the_seconds_of_each_shard_ride_behind_its_payload_and_add_up_in_the_reduce():
    rows, est, _ = CASES["gmm"]()
    model = fit(max_iter=1).model
    enc = model.encoder().encode(rows)
    weights = np.ones(enc.n_rows)
    args = (est, model, FLOAT64, 1000, False)
    parts = [timed_task("fold", enc.rows(a, b), weights[a:b], args, i, 2)
             for i, (a, b) in enumerate([(0, 100), (100, enc.n_rows)])]
    total = TimedCombine(add_payloads, 2)(*parts)
    plain = add_payloads(run_task("fold", enc.rows(0, 100), weights[:100], args),
                         run_task("fold", enc.rows(100, enc.n_rows), weights[100:], args))
    assert total[:-2].tolist() == plain.tolist()  # the statistics are untouched
    assert total[-2:].tolist() == [parts[0][-2], parts[1][-1]] and min(total[-2:]) > 0


def test_a_local_fit_records_this_process():
    res = fit()
    check(res, ["cpu"], ["float64"])
    assert res.workers[0].executor == f"pid {os.getpid()}"


def test_a_planned_local_fit_records_each_workers_band():
    res = fit(resources=mixed_pool(), precision="auto")
    check(res, ["w0", "w1", "w2"], ["float32", "float64", "float64"])


def test_mp_records_each_worker_process():
    res = fit(backend="mp", num_workers=2, precision="float32")
    check(res, ["cpu", "cpu"], ["float32", "float32"])
    pids = [w.executor for w in res.workers]
    assert len(set(pids)) == 2 and f"pid {os.getpid()}" not in pids


@pytest.mark.slow
def test_spark_records_the_executor_holding_each_partition(spark_session):
    sc = spark_session.sparkContext
    res = fit(backend=spark_session, resources=mixed_pool(), precision="auto")
    check(res, ["w0", "w1", "w2"], ["float32", "float64", "float64"])
    # local mode runs every task in the driver's executor
    assert {w.executor for w in res.workers} == {sc.getConf().get("spark.executor.id")}


@pytest.mark.slow
def test_dask_records_the_worker_holding_each_shard(dask_client):
    workers = sorted(dask_client.scheduler_info()["workers"])
    res = fit(backend=dask_client, num_workers=2)
    check(res, ["cpu", "cpu"], ["float64", "float64"])
    assert [w.executor for w in res.workers] == workers
    assert {w.host for w in res.workers} == {"127.0.0.1"}


@pytest.mark.slow
def test_dask_gpu_resources_are_devices_and_a_gpu_devices_rows_fold_on_its_worker():
    distributed = pytest.importorskip("distributed")
    from mixfold.parallel.resources import Resources

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                       resources={"GPU": 1})
    try:
        with distributed.Client(cluster) as client:
            workers = sorted(client.scheduler_info()["workers"])
            devices = Resources.from_dask(client).devices
            assert [(d.name, d.kind) for d in devices] == [
                (w, kind) for a in workers
                for w, kind in ((a, "cpu"), (f"dask:{a}:gpu0", "gpu"))]
            # the declared GPU's rows run float32 here, on this CPU (no real GPU is needed to
            # place them): the plan names the device, the fold is pinned to its worker
            names = (f"dask:{workers[1]}:gpu0", workers[0])
            res = fit(backend=client, resources=mixed_pool(names), precision="auto")
            check(res, list(names), ["float32", "float64"])
            assert [w.executor for w in res.workers] == [workers[1], workers[0]]
    finally:
        cluster.close()


@pytest.mark.slow
def test_ray_records_the_node_each_shard_folded_on(ray_started):
    import ray

    res = fit(backend="ray", resources=mixed_pool(), precision="auto")
    check(res, ["w0", "w1", "w2"], ["float32", "float64", "float64"])
    node = ray.get_runtime_context().get_node_id()
    assert {w.executor for w in res.workers} == {node}
    assert {w.host for w in res.workers} == {"127.0.0.1"}



def column_fit(frame, engine):
    est = mixfold.RecordEstimator({"x": mixfold.GaussianEstimator()})
    return mixfold.fit(frame, est, backend=engine, max_iter=3, tol=0.0, progress=False)


def check_partitions(res, n_rows, executors):
    """Every partition a record, in order: rows add up, each non-empty one timed where it
    lived."""
    assert [w.shard for w in res.workers] == list(range(len(res.workers)))
    assert sum(w.rows for w in res.workers) == n_rows
    assert {w.executor for w in res.workers if w.rows} <= set(executors)
    assert all(w.seconds_per_iteration > 0 for w in res.workers if w.rows)
    assert {w.band for w in res.workers} == {"float64"}


@pytest.mark.slow
def test_a_dask_dataframe_encoded_on_the_workers_records_its_partitions(dask_client):
    import dask.dataframe as dd
    import pandas as pd

    x = np.random.default_rng(1).normal(size=900)
    frame = dd.from_pandas(pd.DataFrame({"x": x}), npartitions=3)
    res = column_fit(frame, dask_client)
    assert len(res.workers) == 3
    check_partitions(res, 900, dask_client.scheduler_info()["workers"])


@pytest.mark.slow
def test_a_spark_dataframe_encoded_on_the_executors_records_its_partitions(spark_session):
    x = np.random.default_rng(1).normal(size=900)
    frame = spark_session.createDataFrame([{"x": float(v)} for v in x]).repartition(3)
    res = column_fit(frame, spark_session)
    assert len(res.workers) == 3
    check_partitions(res, 900, {spark_session.sparkContext.getConf().get("spark.executor.id")})
