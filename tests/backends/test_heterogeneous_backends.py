"""Planned fits (per-worker rows and bands, planned tree depth) and dd fits on every engine."""

import json
from pathlib import Path

import numpy as np
import pytest

import mixfold
from mixfold.parallel.heterogeneous import Worker
from tests.backends.cases import CASES
from tests.backends.mpirun import run_mpiexec

ENGINES = ["mp", "spark", "dask", "ray"]
ROOT = Path(__file__).resolve().parents[2]


def mixed_pool(n=3):
    """Worker 0 runs float32 (and is three times as fast), the others float64."""
    return [Worker(f"w{i}", precisions=("float32",) if i == 0 else ("float64",),
                   base_throughput=3.0 if i == 0 else 1.0) for i in range(n)]


def fit(case="gmm", **extra):
    rows, est, options = CASES[case]()
    return mixfold.fit(rows, est, progress=False, **{**options, **extra})


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_planned_fit_runs_the_plan_on_the_engine(engine):
    local = fit(resources=mixed_pool(), precision="auto")
    res = fit(resources=mixed_pool(), precision="auto", backend=engine)
    assert [a.rows for a in res.plan.assignments] == [2769, 616, 615]  # 4.5 : 1 : 1
    assert res.precision == "float32+float64"
    # the same bands on the same rows: the same fit as the planned local one, to round-off of
    # the reduce order; and visibly not the all-float64 fit
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)
    plain = fit()
    # in the components' standard deviations: a mean near 0 makes a relative difference large
    diff = max(abs(a.mu - b.mu) / np.sqrt(b.sigma2)
               for a, b in zip(res.model.components, plain.model.components))
    assert 1e-12 < diff < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_dd_is_bit_identical_on_the_engine(engine):
    local = fit(precision="dd")
    for workers in (2, 4):
        res = fit(precision="dd", backend=engine, num_workers=workers)
        assert res.model.to_dict() == local.model.to_dict()
        assert res.log_likelihood == local.log_likelihood
    planned = fit(precision="dd", backend=engine,
                  resources=[Worker(f"w{i}", precisions=("dd",)) for i in range(3)])
    assert planned.model.to_dict() == local.model.to_dict()


@pytest.mark.slow
def test_the_planned_tree_depth_is_used_on_every_engine(spark_session, dask_client, ray_started):
    from mixfold.compute.tree import tree_levels
    from mixfold.dispatch import open_backend
    from mixfold.parallel.heterogeneous import PlanRequest

    rows, est, options = CASES["gmm"]()
    pool = [Worker(f"w{i}", precisions=("float64",)) for i in range(8)]
    model = fit(max_iter=1).model
    for engine in ("mp", dask_client, "ray"):
        handle, bound, plan = open_backend(engine, rows, est,
                                             plan=PlanRequest(pool, "auto"))
        try:
            handle.fold(bound, model, plan)
            assert handle.last_reduce_levels == plan.reduce_depth == 2
            assert tree_levels(8, handle.fanout) == 2
        finally:
            handle.close()
    handle, bound, plan = open_backend(spark_session, rows, est, plan=PlanRequest(pool, "auto"))
    try:
        assert handle.reduce_depth == plan.reduce_depth == 2
        assert handle.rdd.getNumPartitions() == 8
    finally:
        handle.close()


@pytest.mark.slow
def test_mpi_runs_planned_and_dd_fits(tmp_path):
    out = tmp_path / "plan.json"
    run_mpiexec(3, ["-m", "mpi4py", str(ROOT / "tests/backends/mpi_plan.py"), str(out)],
                timeout=180)
    got = json.loads(out.read_text())
    local_dd = fit(precision="dd")
    assert got["dd"] == local_dd.model.to_dict() and got["dd_plan"] == got["dd"]
    assert got["dd_trace"] == local_dd.log_likelihood
    local = fit(resources=mixed_pool(), precision="auto")
    assert got["rows"] == [a.rows for a in local.plan.assignments] == [2769, 616, 615]
    assert got["bands"] == ["float32", "float64", "float64"]
    np.testing.assert_allclose(got["planned_trace"], local.log_likelihood, rtol=1e-12)


@pytest.mark.slow
def test_a_plan_of_dask_workers_places_each_shard_on_its_worker(dask_client):
    from mixfold.dispatch import open_backend
    from mixfold.parallel.heterogeneous import PlanRequest
    from mixfold.parallel.resources import Resources

    rows, est, _ = CASES["gmm"]()
    resources = Resources.from_dask(dask_client)
    handle, _, plan = open_backend(dask_client, rows, est,
                                   plan=PlanRequest(resources, "auto", None))
    try:
        names = [a.name for a in plan.assignments]
        assert names == sorted(dask_client.scheduler_info()["workers"])
        assert [handle.placed[i] for i in range(len(names))] == names
        holders = dask_client.who_has([f for shard in handle.shards for f in shard])
        for name, shard in zip(names, handle.shards):
            assert all(list(holders[f.key]) == [name] for f in shard)
    finally:
        handle.close()


@pytest.mark.slow
def test_a_plan_of_ray_nodes_stores_and_folds_each_shard_on_its_node(ray_started):
    import ray

    from mixfold.dispatch import open_backend
    from mixfold.parallel.heterogeneous import PlanRequest
    from mixfold.parallel.resources import Resources

    node = ray.get_runtime_context().get_node_id()
    resources = Resources.from_ray()
    assert [(d.name, d.kind, d.throughput) for d in resources.devices] == [
        (f"ray:{node}", "cpu", 2.0)]
    assert resources.devices[0].memory_bytes == int(ray.cluster_resources()["memory"])
    rng = np.random.default_rng(0)  # shards over Ray's inline limit, so they live in a store
    rows = np.concatenate([rng.normal(-3, 1, (10_000, 2)), rng.normal(3, 1, (10_000, 2))])
    est = mixfold.MixtureEstimator([mixfold.MultivariateGaussianEstimator()] * 2)
    handle, _, plan = open_backend("ray", rows, est, plan=PlanRequest(resources, "auto", None))
    try:
        assert [a.name for a in plan.assignments] == [f"ray:{node}"]
        assert handle.placed == {0: node}
        ray.wait(handle.shards, num_returns=len(handle.shards), fetch_local=False)
        where = ray.experimental.get_object_locations(handle.shards)
        assert [where[ref]["node_ids"] for ref in handle.shards] == [[node]]
    finally:
        handle.close()
    options = {"max_iter": 6, "tol": 0.0, "seed": 0, "progress": False}
    planned = mixfold.fit(rows, est, resources=resources, precision="auto", backend="ray",
                          **options)
    local = mixfold.fit(rows, est, resources=resources, precision="auto", **options)
    assert [a.name for a in planned.plan.assignments] == [f"ray:{node}"]
    np.testing.assert_allclose(planned.log_likelihood, local.log_likelihood, rtol=1e-12)
