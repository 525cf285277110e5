"""Resources discovered from real engines, and calibrated where the work runs on them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mixfold import DiagonalGaussianDistribution, MixtureDistribution
from mixfold.compute.accuracy import step_error
from mixfold.parallel.model_decomposition import subtree_work
from mixfold.parallel.resources import Resources
from mixfold.precision import BANDS
from tests.backends.mpirun import run_mpiexec

ROOT = Path(__file__).resolve().parents[2]


def small_model():
    comps = [DiagonalGaussianDistribution(np.full(3, float(i)), np.ones(3)) for i in range(4)]
    return MixtureDistribution(comps, [0.25] * 4)


def check_measured(res, names, model, rows):
    """Every device measured in every CPU band, each band's error of one EM step against
    float64 on the sample as ``step_error`` gives it here (a CPU's arithmetic is the same on
    every node)."""
    assert [d.name for d in res.devices] == names
    assert res.calibrated_work == subtree_work(model)
    sample = model.encoder().encode(rows)
    expected = {b: step_error(model, sample, b).error for b in set(BANDS) - {"fp8", "float64"}}
    for d in res.devices:
        # every band a real engine runs on a CPU (fp8's only CPU engine is the emulator)
        assert set(d.band_throughput) == set(d.band_error) == set(BANDS) - {"fp8"}
        assert d.throughput == d.band_throughput["float64"] > 1e3
        assert d.band_error["float64"] == 0.0
        for band, error in expected.items():
            assert d.band_error[band] == pytest.approx(error, rel=1e-6)
            assert 0 < error < 1e-2


@pytest.mark.slow
def test_dask_workers_are_devices_measured_on_the_workers(dask_client):
    res = Resources.from_dask(dask_client)
    workers = dask_client.scheduler_info()["workers"]
    assert [d.name for d in res.devices] == sorted(workers)
    for d in res.devices:
        assert d.throughput == workers[d.name]["nthreads"] == 1
        assert d.memory_bytes == workers[d.name]["memory_limit"]
    model = small_model()
    rows = model.sampler(0).sample(2000)
    measured = res.calibrate(model, rows, engine=dask_client, min_seconds=0.01)
    check_measured(measured, sorted(workers), model, rows)


@pytest.mark.slow
def test_spark_slots_are_devices_measured_in_barrier_tasks(spark_session):
    res = Resources.from_spark(spark_session)
    sc = spark_session.sparkContext
    assert [d.name for d in res.devices] == ["spark:0", "spark:1"]
    executor_mb = int(sc._jsc.sc().executorMemory())
    assert all(d.memory_bytes == executor_mb * 2**20 // 2 for d in res.devices)
    model = small_model()
    rows = model.sampler(0).sample(2000)
    measured = res.calibrate(model, rows, engine=spark_session, min_seconds=0.01)
    check_measured(measured, ["spark:0", "spark:1"], model, rows)


MPI_SCRIPT = """
import json, sys
import numpy as np
from mpi4py import MPI
from mixfold import DiagonalGaussianDistribution, MixtureDistribution
from mixfold.compute.accuracy import step_error
from mixfold.parallel.resources import Resources
comps = [DiagonalGaussianDistribution(np.full(3, float(i)), np.ones(3)) for i in range(4)]
model = MixtureDistribution(comps, [0.25] * 4)
res = Resources.from_mpi()
measured = res.calibrate(model, model.sampler(0).sample(2000), engine=MPI.COMM_WORLD,
                         min_seconds=0.01)
if MPI.COMM_WORLD.rank == 0:
    with open(sys.argv[1], "w") as fh:
        json.dump({"declared": res.to_dict(), "measured": measured.to_dict()}, fh)
"""


@pytest.mark.slow
def test_mpi_ranks_are_devices_measured_on_every_rank(tmp_path):
    out = tmp_path / "resources.json"
    run_mpiexec(2, ["-c", MPI_SCRIPT, str(out)])
    got = json.loads(out.read_text())
    declared = Resources.from_dict(got["declared"])
    assert [d.name for d in declared.devices] == ["mpi:0", "mpi:1"]
    with open("/proc/meminfo") as fh:
        total = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemTotal"))
    assert all(d.memory_bytes <= total // 2 for d in declared.devices)  # two ranks, one host
    model = small_model()
    check_measured(Resources.from_dict(got["measured"]), ["mpi:0", "mpi:1"], model,
                   model.sampler(0).sample(2000))


@pytest.mark.slow
def test_spark_gpus_discovered_by_the_driver_are_devices(tmp_path):
    # local mode: the driver is the executor, its GPUs found by Spark's discovery script (a
    # task asking for a GPU resource is never scheduled in local mode, so none is asked here)
    script = tmp_path / "gpus.sh"
    script.write_text('#!/bin/sh\necho \'{"name": "gpu", "addresses": ["0", "1"]}\'\n')
    script.chmod(0o755)
    out = tmp_path / "gpus.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    subprocess.run([sys.executable, str(ROOT / "tests/backends/spark_gpus.py"), str(script),
                    str(out)], check=True, env=env, timeout=300, capture_output=True)
    got = json.loads(out.read_text())
    assert got["reported"] == ["0", "1"]
    assert got["devices"] == [[f"spark:{i}", "cpu"] for i in range(got["slots"])] + [
        ["spark:driver:gpu0", "gpu"], ["spark:driver:gpu1", "gpu"]]


def test_spark_gpus_on_a_cluster_are_read_from_the_executor_resource_amount():
    from mixfold.parallel.resources import spark_gpu_devices

    conf = {"spark.executor.resource.gpu.amount": "1", "spark.task.resource.gpu.amount": "1"}
    devices = spark_gpu_devices("yarn", conf, [], ["3", "7"])
    assert [(d.name, d.kind) for d in devices] == [("spark:3:gpu0", "gpu"), ("spark:7:gpu0", "gpu")]
    assert spark_gpu_devices("yarn", {}, [], ["3"]) == ()


@pytest.mark.slow
def test_ray_nodes_are_measured_in_tasks_pinned_to_them_and_their_plan_runs(ray_started):
    import ray

    import mixfold

    node = ray.get_runtime_context().get_node_id()
    model = small_model()
    rows = model.sampler(0).sample(4000)
    declared = Resources.from_ray()
    for engine in ("ray", ray):  # the name backend= takes, or the module itself
        measured = declared.calibrate(model, rows[:2000], engine=engine, min_seconds=0.01)
        check_measured(measured, [f"ray:{node}"], model, rows[:2000])
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 4)
    options = {"max_iter": 5, "tol": 0.0, "seed": 0, "progress": False, "precision": "auto",
               "resources": measured}
    planned = mixfold.fit(rows, est, backend="ray", **options)
    local = mixfold.fit(rows, est, **options)
    assert [a.name for a in planned.plan.assignments] == [f"ray:{node}"]
    assert planned.precision == local.precision
    assert [w.executor for w in planned.workers] == [node]
    np.testing.assert_allclose(planned.log_likelihood, local.log_likelihood, rtol=1e-12)

