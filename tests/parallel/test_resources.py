"""Devices and resources: validation, JSON files, this machine, and measured calibration."""

import os

import numpy as np
import pytest

from mixfold import DiagonalGaussianDistribution, MixtureDistribution
from mixfold.parallel.model_decomposition import decompose_model, subtree_work
from mixfold.parallel.resources import DeviceSpec, Resources, _parse_memory
from mixfold.precision import BANDS


def small_model():
    comps = [DiagonalGaussianDistribution(np.full(3, float(i)), np.ones(3)) for i in range(4)]
    return MixtureDistribution(comps, [0.25] * 4)


@pytest.mark.parametrize("kwargs, message", [
    (dict(name=""), "non-empty name"),
    (dict(name="x", kind="tpu"), r"kind must be one of \['cpu', 'gpu'\], got 'tpu'"),
    (dict(name="x", throughput=0.0), "throughput must be a finite number > 0, got 0.0"),
    (dict(name="x", throughput=float("inf")), "throughput must be a finite number > 0"),
    (dict(name="x", memory_bytes=0), "memory_bytes must be None or an integer > 0, got 0"),
    (dict(name="x", memory_bytes=1.5), "memory_bytes must be None or an integer > 0"),
    (dict(name="x", precisions=("float128",)), "precisions must be a non-empty subset"),
    (dict(name="x", precisions=()), "precisions must be a non-empty subset"),
    (dict(name="x", precisions=("float32",), band_throughput={"float64": 1.0}),
     "names band 'float64', which x does not run"),
    (dict(name="x", band_throughput={"float32": -1.0}),
     r"band_throughput\['float32'\] must be a finite number > 0, got -1.0"),
])
def test_device_fields_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeviceSpec(**kwargs)


def test_resources_need_distinct_devices():
    with pytest.raises(ValueError, match="at least one DeviceSpec"):
        Resources(())
    with pytest.raises(ValueError, match=r"\['a'\] more than once"):
        Resources((DeviceSpec("a"), DeviceSpec("b"), DeviceSpec("a")))
    with pytest.raises(ValueError, match="calibrated_work must be a finite number > 0"):
        Resources((DeviceSpec("a"),), calibrated_work=0.0)


def test_json_round_trip_is_exact():
    gpu = DeviceSpec("gpu:0", "gpu", 1234.5678901234567, 2**34, ("float16", "float32"),
                     {"float32": 0.1 + 0.2, "float16": 1e300})
    res = Resources((DeviceSpec("cpu:0", throughput=1 / 3), gpu), calibrated_work=17.25)
    back = Resources.from_json(res.to_json())
    assert back == res
    assert back.devices[1].band_throughput["float32"] == 0.1 + 0.2
    # bands are kept in accuracy order whatever order they were given in
    assert list(back.devices[1].band_throughput) == ["float16", "float32"]
    with pytest.raises(ValueError, match=r"unknown resources fields \['gpus'\]"):
        Resources.from_dict({"devices": [], "gpus": 1})
    with pytest.raises(ValueError, match=r"unknown device fields \['speed'\]"):
        DeviceSpec.from_dict({"name": "a", "speed": 2})


def test_local_resources_are_the_cores_this_process_may_use():
    res = Resources.local()
    cores = sorted(os.sched_getaffinity(0))
    assert [d.name for d in res.devices] == [f"cpu:{c}" for c in cores]
    with open("/proc/meminfo") as fh:
        total = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemTotal"))
    assert all(d.memory_bytes <= total // len(cores) for d in res.devices)
    assert res.total_throughput == len(cores)


@pytest.mark.parametrize("text, expected", [
    ("512m", 512 * 2**20), ("2g", 2 * 2**30), ("1024", 1024 * 2**20), ("1.5GB", 3 * 2**29),
    ("64k", 64 * 1024),
])
def test_spark_memory_strings(text, expected):
    assert _parse_memory(text) == expected


def test_calibrate_measures_the_real_e_step_on_every_core():
    model = small_model()
    rows = model.sampler(0).sample(2000)
    res = Resources.local().calibrate(model, rows, min_seconds=0.01)
    assert res.calibrated_work == subtree_work(model) == 4 + 4 * 3
    for d in res.devices:
        # every band a real engine runs here is measured (bf16/fp16 torch, dd double-double);
        # fp8's only CPU engine is the emulator, the accuracy reference: never timed
        assert set(d.band_throughput) == set(BANDS) - {"fp8"}
        assert d.throughput == d.band_throughput["float64"]
        assert 1e3 < d.throughput < 1e9  # rows per second of a 4 x 3 diagonal mixture
    whole = Resources((DeviceSpec("cpu", precisions=("float64",)),)).calibrate(
        model, model.encoder().encode(rows), min_seconds=0.01)
    assert list(whole.devices[0].band_throughput) == ["float64"]
    # measured speeds turn the planner's work into seconds
    first = res.devices[0]
    two = Resources((first, DeviceSpec("twin", throughput=first.throughput)),
                    calibrated_work=res.calibrated_work)
    plan = decompose_model(model, two, n_data=2000, prefer_data_parallel=False)
    # each twin runs half the components: about half the measured time of the whole model
    whole_seconds = 2000 / first.throughput
    assert plan.cut_seconds is not None
    assert sum(plan.cut_seconds) * 2000 == pytest.approx(whole_seconds * 12 / 16)


def test_calibrate_refuses_devices_it_cannot_reach_and_bad_samples():
    model = small_model()
    rows = model.sampler(0).sample(10)
    with pytest.raises(ValueError, match=r"could not reach devices \['gpu:0'\]"):
        Resources((DeviceSpec("gpu:0", "gpu"),)).calibrate(model, rows, min_seconds=0.001)
    with pytest.raises(ValueError, match="at least one row"):
        Resources.local().calibrate(model, rows[:0], min_seconds=0.001)
    with pytest.raises(ValueError, match="min_seconds must be a finite number > 0, got 0"):
        Resources.local().calibrate(model, rows, min_seconds=0)
    # "ray" names Ray (tests/backends/test_resources_engines.py); other names are no engine
    with pytest.raises(ValueError, match=r"calibrate runs on this machine.*or 'ray', got 'dask'"):
        Resources.local().calibrate(model, rows, engine="dask", min_seconds=0.001)
    with pytest.raises(ValueError, match=r"calibrate runs on this machine.*or 'ray', got 3"):
        Resources.local().calibrate(model, rows, engine=3, min_seconds=0.001)
