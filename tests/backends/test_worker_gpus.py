"""Which CUDA device an engine's ``...:gpu<k>`` shard runs on, decided where the shard runs."""

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mixfold
from mixfold import (DiagonalGaussianDistribution, DiagonalGaussianEstimator,
                     MixtureDistribution, MixtureEstimator)
from mixfold.backends.dask import _fold_shard_task
from mixfold.backends.worker_gpus import (dask_cuda_device, gpu_index, on_cuda_device,
                                          ray_cuda_device, spark_cuda_device,
                                          visible_cuda_devices)
from mixfold.compute.payload import shard_task_args
from mixfold.parallel.resources import Resources
from mixfold.precision import resolve_precision
from mixfold.precision.gpu import torch_device_available

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_index_is_read_off_the_device_name():
    assert gpu_index("dask:tcp://10.0.0.7:36111:gpu3") == 3
    assert gpu_index("ray:8f2e:gpu12") == 12
    assert [gpu_index(n) for n in ("ray:8f2e", "tcp://10.0.0.7:36111", "gpu:1")] == [None] * 3


@pytest.mark.parametrize("visible, entries", [
    (None, None), ("", []), ("0", ["0"]), ("3, 1", ["3", "1"]), ("2,-1,0", ["2"]),
    ("GPU-5d1c,GPU-77aa", ["GPU-5d1c", "GPU-77aa"]),
])
def test_visible_devices_are_cuda_visible_devices_up_to_a_negative_entry(visible, entries):
    assert visible_cuda_devices(visible) == entries


def test_a_dask_worker_gpu_k_is_the_kth_device_it_sees():
    assert [dask_cuda_device(k, None) for k in range(3)] == ["cuda:0", "cuda:1", "cuda:2"]
    # dask-cuda style: each worker sees its own GPU first
    assert dask_cuda_device(0, "2,3,0,1") == "cuda:0"
    assert dask_cuda_device(1, "2,3,0,1") == "cuda:1"
    with pytest.raises(RuntimeError, match=r"declares GPU 2 but sees 2 CUDA devices "
                                           r"\(CUDA_VISIBLE_DEVICES='4,5'\)"):
        dask_cuda_device(2, "4,5")
    with pytest.raises(RuntimeError, match="sees 0 CUDA devices"):
        dask_cuda_device(0, "")


def test_a_ray_task_runs_on_the_gpu_ray_gave_it():
    # Ray restricts CUDA_VISIBLE_DEVICES to the task's GPUs: its GPU is cuda:0 there
    assert ray_cuda_device([3], "3") == "cuda:0"
    assert ray_cuda_device(["1"], "1") == "cuda:0"
    # a list Ray did not narrow: the GPU's place in it
    assert ray_cuda_device([5], "4,5,6") == "cuda:1"
    # Ray told not to set it (RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES): the GPU's own index
    assert ray_cuda_device([2], None) == "cuda:2"
    with pytest.raises(RuntimeError, match="holds no GPU"):
        ray_cuda_device([], None)
    with pytest.raises(RuntimeError, match="GPU 7 is not among its visible CUDA devices"):
        ray_cuda_device([7], "0,1")


def test_only_cuda_precisions_move_and_they_survive_pickling_to_a_worker():
    cuda, cpu = resolve_precision("bfloat16@cuda"), resolve_precision("float32")
    args = shard_task_args("fold", [cuda, cpu], ("estimator", "model", 512), False)
    moved = [on_cuda_device(a, "cuda:2") for a in args]
    assert [m[2] for m in moved] == ["bfloat16@cuda:2", "float32"]
    assert [m[2].device for m in moved] == ["cuda:2", None]
    assert [m[:2] + m[3:] for m in moved] == [a[:2] + a[3:] for a in args]
    back = pickle.loads(pickle.dumps(moved[0][2]))
    assert (back.band, back.device) == ("bfloat16", "cuda:2")


def fold_args(precision="float32@cuda"):
    model = MixtureDistribution([DiagonalGaussianDistribution(np.zeros(2), np.ones(2))] * 2,
                                [0.5, 0.5])
    est = MixtureEstimator([DiagonalGaussianEstimator()] * 2).bind(model.encoder())
    enc = model.encoder().encode(np.zeros((8, 2)))
    (args,) = shard_task_args("fold", [resolve_precision(precision)], (est, model, 64), False)
    return (enc, np.ones(8)), args


@pytest.mark.skipif(torch_device_available("cuda:1"), reason="checks the device named where "
                    "CUDA is missing")
def test_a_dask_gpu_shard_folds_on_its_worker_cuda_device(monkeypatch):
    shard, args = fold_args()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # the fold reaches torch on the worker's GPU 1 (absent here, so torch names it)
    with pytest.raises(RuntimeError, match=r"'float32@cuda:1' runs through torch on 'cuda:1'"):
        _fold_shard_task(shard, "fold", args, 0, 1, 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6")
    with pytest.raises(RuntimeError, match="declares GPU 1 but sees 1 CUDA device"):
        _fold_shard_task(shard, "fold", args, 0, 1, 1)


def test_a_gpu_shard_whose_band_runs_on_the_cpu_asks_no_cuda_device(monkeypatch):
    # a plan may give a declared GPU's rows a CPU band (no "@cuda"): nothing to map, and a
    # worker that sees no CUDA device folds them as the local fold does
    shard, args = fold_args("float32")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    on_gpu0 = _fold_shard_task(shard, "fold", args, 0, 1, 0)
    unplanned = _fold_shard_task(shard, "fold", args, 0, 1, None)
    assert on_gpu0[:-1].tolist() == unplanned[:-1].tolist()  # the last entry: its seconds


@pytest.mark.slow
@pytest.mark.skipif(torch_device_available("cuda"), reason="declares GPUs this machine lacks")
def test_a_planned_dask_gpu1_shard_folds_on_cuda_1_of_its_worker_and_is_timed_there():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                       resources={"GPU": 2})
    try:
        with distributed.Client(cluster) as client:
            (worker,) = client.scheduler_info()["workers"]
            devices = Resources.from_dask(client).devices
            assert [d.name for d in devices] == [worker, f"dask:{worker}:gpu0",
                                                 f"dask:{worker}:gpu1"]
            rows = np.random.default_rng(0).normal(size=(2000, 2))
            est = MixtureEstimator([DiagonalGaussianEstimator()] * 2)
            # the fold reaches torch on the worker's second GPU (absent here: torch names it)
            with pytest.raises(RuntimeError, match=r"@cuda:1' runs through torch on 'cuda:1'"):
                mixfold.fit(rows, est, backend=client, resources=Resources(devices[2:]),
                            precision="auto", max_iter=2, progress=False)
            # calibration times each GPU in a task holding it on its worker: torch sees none
            comps = [DiagonalGaussianDistribution(np.zeros(2), np.ones(2))] * 2
            with pytest.raises(ValueError, match=re.escape(
                    f"could not reach devices ['dask:{worker}:gpu0', 'dask:{worker}:gpu1'] "
                    f"from the dask engine")):
                Resources(devices).calibrate(MixtureDistribution(comps, [0.5, 0.5]), rows,
                                             engine=client, min_seconds=0.01)
    finally:
        cluster.close()


RAY_GPUS_SCRIPT = """
import json, os, sys, time
import numpy as np
import ray
import mixfold
from mixfold.backends.worker_gpus import ray_cuda_device
from mixfold.parallel.resources import Resources

ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False,
         object_store_memory=128 * 1024 * 1024, _node_ip_address="127.0.0.1",
         configure_logging=False)
out = {}
try:
    @ray.remote(num_gpus=1)
    def where():
        time.sleep(1)  # both tasks hold their GPU at once
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return [str(i) for i in ray.get_gpu_ids()], visible, ray_cuda_device(ray.get_gpu_ids(),
                                                                             visible)
    out["tasks"] = ray.get([where.remote(), where.remote()])
    res = Resources.from_ray()
    out["node"] = ray.get_runtime_context().get_node_id()
    out["devices"] = [[d.name, d.kind] for d in res.devices]
    rows = np.random.default_rng(0).normal(size=(2000, 2))
    est = mixfold.MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 2)
    try:
        mixfold.fit(rows, est, backend="ray", resources=Resources(res.devices[1:]),
                    precision="auto", max_iter=2, progress=False)
    except Exception as err:
        out["fit_error"] = str(err)
    comps = [mixfold.DiagonalGaussianDistribution(np.zeros(2), np.ones(2))] * 2
    try:
        res.calibrate(mixfold.MixtureDistribution(comps, [0.5, 0.5]), rows, engine="ray",
                      min_seconds=0.01)
    except ValueError as err:
        out["calibrate_error"] = str(err)
finally:
    ray.shutdown()
with open(sys.argv[1], "w") as fh:
    json.dump(out, fh)
"""


@pytest.mark.slow
@pytest.mark.skipif(torch_device_available("cuda"), reason="declares GPUs this machine lacks")
def test_ray_gpu_tasks_each_run_on_their_own_gpu_as_cuda_0(tmp_path):
    # a Ray of its own (declared GPUs, no CUDA): Ray gives each task its GPU and restricts
    # CUDA_VISIBLE_DEVICES to it, so a planned GPU shard's fold and calibration reach cuda:0
    out = tmp_path / "ray_gpus.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    subprocess.run([sys.executable, "-c", RAY_GPUS_SCRIPT, str(out)], check=True, env=env,
                   timeout=300, capture_output=True)
    got = json.loads(out.read_text())
    assert sorted(got["tasks"]) == [[["0"], "0", "cuda:0"], [["1"], "1", "cuda:0"]]
    node = got["node"]
    assert got["devices"] == [[f"ray:{node}", "cpu"], [f"ray:{node}:gpu0", "gpu"],
                              [f"ray:{node}:gpu1", "gpu"]]
    assert "@cuda:0' runs through torch on 'cuda:0'" in got["fit_error"]
    assert got["calibrate_error"].startswith(
        f"calibrate could not reach devices ['ray:{node}:gpu0', 'ray:{node}:gpu1'] from the "
        f"ray engine")


def test_a_spark_task_runs_on_the_gpu_address_spark_gave_it():
    # physical addresses: the address itself when every device is visible, else its place
    assert spark_cuda_device(["1"], None) == "cuda:1"
    assert spark_cuda_device(["3"], "2,3") == "cuda:1"
    assert spark_cuda_device(["0", "1"], "0,1") == "cuda:0"  # the first of several
    with pytest.raises(RuntimeError, match="spark: the task holds no GPU"):
        spark_cuda_device([], "0")
    with pytest.raises(RuntimeError, match="spark: the task's GPU 4 is not among"):
        spark_cuda_device(["4"], "0,1")
