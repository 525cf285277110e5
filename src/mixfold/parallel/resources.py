"""What the work runs on: devices with their speed, memory and precision bands.

A device is one stream of E-step work: a core of this machine (:meth:`Resources.local`), a Spark
task slot (:meth:`Resources.from_spark`), a Dask worker (:meth:`Resources.from_dask`), a Ray node
(:meth:`Resources.from_ray`), an MPI rank
(:meth:`Resources.from_mpi`), or a GPU described by hand. Throughputs are relative speeds until
:meth:`Resources.calibrate` replaces them with *measured* rows per second of the real E-step of a
model on each device, per precision band. Resource descriptions round-trip through JSON exactly.

>>> r = Resources((DeviceSpec("cpu:0", throughput=1.0, memory_bytes=2**30),
...                DeviceSpec("gpu:0", kind="gpu", throughput=8.0, memory_bytes=2**34,
...                           precisions=("float16", "float32"))))
>>> Resources.from_json(r.to_json()) == r
True
>>> r.total_throughput
9.0
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mixfold.backends import backend_name
from mixfold.backends._shard import require
from mixfold.backends.dask import DaskCalls, worker_of
from mixfold.backends.ray import WAIT_SECONDS, node_of
from mixfold.backends.worker_gpus import dask_cuda_device, gpu_index, ray_cuda_device
from mixfold.compute.accuracy import step_error
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, fold_rows
from mixfold.decomposition import subtree_work
from mixfold.families._protocol import Distribution, Encoded
from mixfold.precision import BANDS, Engine, check_bands, resolve_precision
from mixfold.precision.gpu import torch_device_available

__all__ = ["DeviceSpec", "Resources", "DEVICE_KINDS", "measure_rows_per_second",
           "spark_gpu_devices"]

DEVICE_KINDS = ("cpu", "gpu")


@dataclass(frozen=True)
class DeviceSpec:
    """One device: ``name``, ``kind`` ("cpu" or "gpu"), ``throughput`` (rows per second of the
    calibrated model, or a relative speed before calibration: units must agree across the devices
    of one :class:`Resources`), ``memory_bytes`` it may hold (``None``: unknown, not checked),
    ``precisions`` (the bands it can run), ``band_throughput`` (measured rows per second per
    band; empty until calibrated) and ``band_error`` (each band's measured error of one EM step
    against float64 on the calibration sample, :func:`~mixfold.compute.accuracy.step_error`;
    empty until calibrated).

    >>> d = DeviceSpec("cpu:0", throughput=2.0, band_throughput={"float32": 3.0, "float64": 2.0})
    >>> d.throughput_for("float32"), d.throughput_for("float16")
    (3.0, 2.0)
    """

    name: str
    kind: str = "cpu"
    throughput: float = 1.0
    memory_bytes: int | None = None
    precisions: tuple[str, ...] = BANDS
    band_throughput: Mapping[str, float] = field(default_factory=dict)
    band_error: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a device needs a non-empty name, got {self.name!r}")
        if self.kind not in DEVICE_KINDS:
            raise ValueError(f"kind must be one of {list(DEVICE_KINDS)}, got {self.kind!r}")
        _check_rate("throughput", self.throughput)
        object.__setattr__(self, "throughput", float(self.throughput))
        if self.memory_bytes is not None:
            if not (isinstance(self.memory_bytes, (int, np.integer)) and self.memory_bytes > 0):
                raise ValueError(f"memory_bytes must be None or an integer > 0, got "
                                 f"{self.memory_bytes!r}")
            object.__setattr__(self, "memory_bytes", int(self.memory_bytes))
        precisions = check_bands(self.precisions)
        object.__setattr__(self, "precisions", precisions)
        rates = dict(self.band_throughput)
        for band, rate in rates.items():
            if band not in precisions:
                raise ValueError(f"band_throughput names band {band!r}, which {self.name} does "
                                 f"not run (precisions {list(precisions)})")
            _check_rate(f"band_throughput[{band!r}]", rate)
        object.__setattr__(self, "band_throughput", {b: float(rates[b]) for b in BANDS
                                                     if b in rates})
        errors = dict(self.band_error)
        for band, error in errors.items():
            if band not in precisions or not (math.isfinite(error) and error >= 0):
                raise ValueError(f"band_error[{band!r}] = {error!r}: expected a band of "
                                 f"{list(precisions)} with a finite error >= 0")
        object.__setattr__(self, "band_error", {b: float(errors[b]) for b in BANDS
                                                if b in errors})

    def throughput_for(self, band: str) -> float:
        """Rows per second in ``band`` when measured, else :attr:`throughput`."""
        return self.band_throughput.get(band, self.throughput)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "throughput": self.throughput,
                "memory_bytes": self.memory_bytes, "precisions": list(self.precisions),
                "band_throughput": dict(self.band_throughput),
                "band_error": dict(self.band_error)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeviceSpec:
        extra = set(d) - {"name", "kind", "throughput", "memory_bytes", "precisions",
                          "band_throughput", "band_error"}
        if extra:
            raise ValueError(f"unknown device fields {sorted(extra)}")
        return cls(d["name"], d.get("kind", "cpu"), d.get("throughput", 1.0),
                   d.get("memory_bytes"), tuple(d.get("precisions", BANDS)),
                   dict(d.get("band_throughput", {})), dict(d.get("band_error", {})))


def _check_rate(name: str, value: Any) -> None:
    if not (isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)
            and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class Resources:
    """The devices a fit may use, in order (cut ranges are placed on them in this order).

    ``calibrated_work`` is the planner's work estimate per row
    (:func:`~mixfold.parallel.model_decomposition.subtree_work`) of the model that
    :meth:`calibrate` timed; with it the planner turns work into estimated seconds.
    """

    devices: tuple[DeviceSpec, ...]
    calibrated_work: float | None = None

    def __post_init__(self) -> None:
        devices = tuple(self.devices)
        if not devices or not all(isinstance(d, DeviceSpec) for d in devices):
            raise ValueError("Resources needs at least one DeviceSpec")
        names = [d.name for d in devices]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"device names must be distinct, got {dup} more than once")
        object.__setattr__(self, "devices", devices)
        if self.calibrated_work is not None:
            _check_rate("calibrated_work", self.calibrated_work)
            object.__setattr__(self, "calibrated_work", float(self.calibrated_work))

    @property
    def total_throughput(self) -> float:
        """The devices' throughputs added up."""
        return float(sum(d.throughput for d in self.devices))

    # -- discovery ------------------------------------------------------------------------------

    @classmethod
    def local(cls) -> Resources:
        """This machine: one CPU device per core this process may run on (``cpu:<core id>``).

        Each core is one device because the model-parallel executor and the ``mp`` backend run
        one worker per core; each holds an equal share of the machine's memory (the smaller of
        the physical memory and the cgroup limit), since each worker may hold a replica.

        >>> r = Resources.local()
        >>> all(d.kind == "cpu" and d.name.startswith("cpu:") for d in r.devices)
        True
        """
        cores = _local_cores()
        share = max(1, _machine_memory() // len(cores))
        return cls(tuple(DeviceSpec(f"cpu:{c}", "cpu", 1.0, share) for c in cores))

    @classmethod
    def from_spark(cls, sc: Any) -> Resources:
        """One device per task slot of a SparkContext (or SparkSession), ``spark:<slot>``, and
        one ``spark:<executor id>:gpu<k>`` per GPU an executor offers
        (:func:`spark_gpu_devices`: in local mode the driver's discovered ``gpu`` addresses,
        ``sc.resources``; on a cluster ``spark.executor.resource.gpu.amount`` per executor).

        Slots are ``defaultParallelism``, spread over the executors Spark reports (the driver
        in local mode). Memory per slot: the Python worker limit
        (``spark.executor.pyspark.memory``) when set, else the executor's JVM memory, shared by
        the executor's slots.
        """
        sc = getattr(sc, "sparkContext", sc)
        slots = int(sc.defaultParallelism)
        infos = list(sc._jsc.sc().statusTracker().getExecutorInfos())
        executors = max(1, len(infos) - 1) if len(infos) > 1 else 1  # the driver is listed too
        pyspark_mem = sc.getConf().get("spark.executor.pyspark.memory")
        per_executor = _parse_memory(pyspark_mem) if pyspark_mem else \
            int(sc._jsc.sc().executorMemory()) * 2**20
        per_slot = max(1, per_executor // max(1, math.ceil(slots / executors)))
        gpu = sc.resources.get("gpu")
        ids = sc._jsc.sc().getExecutorIds()  # a Scala Seq
        return cls(tuple(DeviceSpec(f"spark:{i}", "cpu", 1.0, per_slot) for i in range(slots))
                   + spark_gpu_devices(sc.master, dict(sc.getConf().getAll()),
                                       list(gpu.addresses) if gpu is not None else [],
                                       [str(ids.apply(i)) for i in range(ids.size())]))

    @classmethod
    def from_dask(cls, client: Any) -> Resources:
        """One device per worker of a Dask ``Client``, named by the worker's address (its
        throughput is its thread count and its memory the worker's ``memory_limit``), and one
        ``dask:<address>:gpu<k>`` per ``GPU`` resource the worker declares
        (``resources={"GPU": n}``). A Dask handle built from a plan of these devices folds each
        worker's shard on the worker its device names (a GPU device's fold holding one of that
        worker's ``GPU`` resources)."""
        try:
            info = client.scheduler_info(n_workers=-1)
        except TypeError:  # versions without the argument list every worker
            info = client.scheduler_info()
        devices = []
        for address, w in sorted(info["workers"].items()):
            limit = int(w.get("memory_limit") or 0)
            devices.append(DeviceSpec(address, "cpu", float(w.get("nthreads", 1)),
                                      limit if limit > 0 else None))
            devices += [DeviceSpec(f"dask:{address}:gpu{k}", "gpu")
                        for k in range(int((w.get("resources") or {}).get("GPU", 0)))]
        return cls(tuple(devices))

    @classmethod
    def from_ray(cls) -> Resources:
        """The nodes of the running Ray cluster (``ray.init`` first): per alive node one CPU
        device ``ray:<node id>`` (throughput its CPU count, memory its ``memory`` resource) and
        one device ``ray:<node id>:gpu<k>`` per GPU it offers. A Ray handle built from a plan
        of these devices runs each worker's shard on the node its device names."""
        ray = require("ray", "ray", "ray")
        if not ray.is_initialized():
            raise ValueError("Resources.from_ray() reads a running Ray cluster: call "
                             "ray.init() first")
        devices = []
        for node in sorted((n for n in ray.nodes() if n.get("Alive")),
                           key=lambda n: n["NodeID"]):
            offered = node.get("Resources", {})
            memory = int(offered.get("memory", 0))
            devices.append(DeviceSpec(f"ray:{node['NodeID']}", "cpu",
                                      float(offered.get("CPU", 1.0)) or 1.0,
                                      memory if memory > 0 else None))
            devices += [DeviceSpec(f"ray:{node['NodeID']}:gpu{k}", "gpu")
                        for k in range(int(offered.get("GPU", 0)))]
        return cls(tuple(devices))

    @classmethod
    def from_mpi(cls, comm: Any = None) -> Resources:
        """One device per rank of an MPI communicator (``COMM_WORLD`` by default), ``mpi:<rank>``.

        Collective: call it on every rank. Each rank holds an equal share of its host's memory
        among the ranks on that host.
        """
        if comm is None:
            comm = require("mpi4py.MPI", "mpi", "mpi").COMM_WORLD
        hosts = comm.allgather((socket.gethostname(), _machine_memory()))
        per_host = {h: sum(1 for g, _ in hosts if g == h) for h, _ in hosts}
        return cls(tuple(DeviceSpec(f"mpi:{r}", "cpu", 1.0, max(1, mem // per_host[h]))
                         for r, (h, mem) in enumerate(hosts)))

    # -- calibration ----------------------------------------------------------------------------

    def calibrate(self, model: Distribution, data_sample: Any, *, engine: Any = None,
                  min_seconds: float = 0.05) -> Resources:
        """These resources with every device's throughput *measured* on ``model``'s E-step.

        ``data_sample``: raw rows the model's encoder reads, or an :class:`Encoded`. On each
        device, and for each band it lists that the E-step can run, the real fold
        (``seq_update`` of the model's accumulator over the encoded sample, chunk by chunk) is
        timed for at least ``min_seconds`` and the best rate kept, in rows per second: it goes to
        ``band_throughput``, and ``throughput`` becomes the float64 rate (else the most accurate
        band measured). Each band measured is also judged on what a user gets of it: one EM
        step of ``model`` over (up to ``ERROR_SAMPLE_ROWS``, 20,000, of) the sample in the band
        against float64 -- the log-likelihood it reports and the model it makes
        (:func:`~mixfold.compute.accuracy.step_error`) -- in ``band_error``, which the planner
        holds against its accuracy budget. Each band is timed on the real engine that runs it on
        that device (:func:`measure_rows_per_second`): on a CPU, NumPy for float32/float64/dd
        and torch for bfloat16/float16; on a GPU, torch. Bands no real engine runs there (fp8
        on a CPU, whose only engine is the emulator) and bands the E-step cannot run stay
        unmeasured, so the planner never gives them rows on their nominal speed alone.

        Where the timing runs: without ``engine``, devices of this machine (``cpu:<core>``, each
        timed pinned to its core; ``cpu`` for the whole machine; ``gpu:<i>`` on ``cuda:<i>``
        when torch sees it); with a Dask ``Client``, on every worker (a
        ``dask:<worker>:gpu<k>`` device in a task on its worker holding one of its ``GPU``
        resources, on its k-th CUDA device); with an MPI communicator, on every rank (call it
        on all ranks); with a SparkSession or SparkContext, in one barrier task per slot; with
        ``"ray"`` (the name ``backend="ray"`` takes, or the ``ray`` module itself; Ray
        running), in one task per device of :meth:`from_ray` pinned to its node, a GPU
        device's task given ``num_gpus=1`` and timed on the CUDA device of the GPU Ray gave it.
        A GPU reached through an engine has its bands' errors measured on it too. A device
        that cannot be reached raises, since measured and declared speeds do not mix.
        """
        enc = data_sample if isinstance(data_sample, Encoded) else \
            model.encoder().encode(data_sample)
        if enc.n_rows == 0:
            raise ValueError("calibrate needs a data sample with at least one row")
        if not (math.isfinite(min_seconds) and min_seconds > 0):
            raise ValueError(f"min_seconds must be a finite number > 0, got {min_seconds!r}")
        bands = tuple(b for b in BANDS if any(b in d.precisions for d in self.devices))
        measured, errors_there = self._measure(model, enc, bands, float(min_seconds), engine)
        missing = [d.name for d in self.devices if d.name not in measured]
        if missing:
            where = "this machine" if engine is None else f"the {_engine_kind(engine)} engine"
            raise ValueError(f"calibrate could not reach devices {missing} from {where}; pass "
                             f"the engine they run on (engine=) or describe them separately")
        errors = _band_errors(model, enc, measured,
                              tuple(d for d in self.devices if d.name not in errors_there))
        return Resources(tuple(_with_rates(d, measured[d.name], errors_there[d.name]
                                           if d.name in errors_there else errors[_error_key(d)])
                               for d in self.devices), calibrated_work=subtree_work(model))

    def _measure(self, model: Distribution, enc: Encoded, bands: tuple[str, ...],
                 min_seconds: float, engine: Any) -> tuple[dict[str, dict[str, float]],
                                                           dict[str, dict[str, float]]]:
        """Each device's rows per second per band, and the band errors of the devices whose
        errors were measured on the device itself (a GPU reached through Dask or Ray)."""
        if engine is None:
            return self._measure_here(model, enc, bands, min_seconds), {}
        kind = _engine_kind(engine)
        if kind == "ray":
            return _measure_ray(self.devices, model, enc, bands, min_seconds)
        if kind == "dask":
            return _measure_dask(engine, self.devices, model, enc, bands, min_seconds)
        if kind == "mpi":
            rates = engine.allgather(measure_rows_per_second(model, enc, bands, min_seconds))
            return {f"mpi:{r}": v for r, v in enumerate(rates)}, {}
        return _measure_spark(engine, model, enc, bands, min_seconds), {}

    def _measure_here(self, model: Distribution, enc: Encoded, bands: tuple[str, ...],
                      min_seconds: float) -> dict[str, dict[str, float]]:
        measure_rows_per_second(model, enc, bands, min_seconds / 10)  # warm-up: JIT, pools
        cores = set(_local_cores())
        out = {}
        for d in self.devices:
            core = _core_of(d.name)
            gpu = _cuda_of(d)
            if d.name == "cpu":
                out[d.name] = measure_rows_per_second(model, enc, bands, min_seconds)
            elif core is not None and core in cores:
                with _pinned(core):
                    out[d.name] = measure_rows_per_second(model, enc, bands, min_seconds)
            elif gpu is not None and torch_device_available(gpu):
                measure_rows_per_second(model, enc, bands, min_seconds / 10, gpu)
                out[d.name] = measure_rows_per_second(model, enc, bands, min_seconds, gpu)
        return out

    # -- files ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"devices": [d.to_dict() for d in self.devices],
                "calibrated_work": self.calibrated_work}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Resources:
        extra = set(d) - {"devices", "calibrated_work"}
        if extra:
            raise ValueError(f"unknown resources fields {sorted(extra)}")
        return cls(tuple(DeviceSpec.from_dict(x) for x in d["devices"]), d.get("calibrated_work"))

    def to_json(self) -> str:
        """JSON text; :meth:`from_json` gives back an equal object (floats round-trip exactly)."""
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Resources:
        return cls.from_dict(json.loads(text))


def _with_rates(d: DeviceSpec, rates: Mapping[str, float],
                errors: Mapping[str, float]) -> DeviceSpec:
    mine = {b: r for b, r in rates.items() if b in d.precisions}
    if not mine:
        raise ValueError(f"calibrate measured none of {d.name}'s bands {list(d.precisions)}")
    main = mine.get("float64", mine[max(mine, key=BANDS.index)])
    return DeviceSpec(d.name, d.kind, main, d.memory_bytes, d.precisions, mine,
                      {b: e for b, e in errors.items() if b in mine})


#: Rows of the calibration sample one EM step is measured on per band (against float64).
ERROR_SAMPLE_ROWS = 20_000


def _error_key(d: DeviceSpec) -> str:
    """Where a device's bands run the same arithmetic: each GPU on its own, every CPU alike."""
    gpu = _cuda_of(d)
    return gpu if gpu is not None and torch_device_available(gpu) else "cpu"


def _band_errors(model: Distribution, enc: Encoded, measured: Mapping[str, Mapping[str, float]],
                 devices: tuple[DeviceSpec, ...]) -> dict[str, dict[str, float]]:
    """Each band's :func:`~mixfold.compute.accuracy.step_error` per kind of engine (the CPU's;
    each local GPU's), measured once on the first rows of the sample for every band that was
    timed on a device of that kind."""
    sample = _error_sample(enc)
    out: dict[str, dict[str, float]] = {}
    for d in devices:
        key = _error_key(d)
        errors = out.setdefault(key, {})
        new = [b for b in measured.get(d.name, {}) if b not in errors]
        errors.update(_step_errors(model, sample, new, None if key == "cpu" else key))
    return out


def _error_sample(enc: Encoded) -> Encoded:
    return enc.rows(0, min(enc.n_rows, ERROR_SAMPLE_ROWS))


def _step_errors(model: Distribution, sample: Encoded, bands: list[str],
                 device: str | None) -> dict[str, float]:
    """Each band's :func:`~mixfold.compute.accuracy.step_error` on ``device`` (None: this CPU's
    engines); float64 is the reference, so its error is 0."""
    return {b: 0.0 if b == "float64" else
            step_error(model, sample, b if device is None else f"{b}@{device}").error
            for b in bands}


def measure_rows_per_second(model: Distribution, enc: Encoded, bands: tuple[str, ...],
                            min_seconds: float, device: str | None = None) -> dict[str, float]:
    """Rows per second of ``model``'s E-step over ``enc`` here, per band it can run, each on
    the real engine that runs it: NumPy or torch on this CPU (``device=None``; a bare band
    names the fastest engine here), torch on ``device`` (``"cuda:0"``: ``"<band>@cuda:0"``).

    Each band's fold over all of ``enc`` is repeated for at least ``min_seconds``, its features
    kept as a fit keeps them; the fastest repetition counts (the least disturbed by other work).
    A band the E-step rejects with a ``ValueError``, or that only the element-by-element
    emulator runs (the accuracy reference, never planned), is left out; float64 must run.
    """
    factory = model.estimator().accumulator_factory()
    weights = np.ones(enc.n_rows)
    cache = FeatureCache.for_rows(enc.nbytes)
    out = {}
    for band in bands:
        precision = resolve_precision(band if device is None else f"{band}@{device}")
        if precision.engine is Engine.EMULATED:
            continue
        probe = min(enc.n_rows, 64)
        try:
            fold_rows(factory.make(), enc.rows(0, probe), weights[:probe], model, precision,
                      DEFAULT_CHUNK_ROWS)
        except ValueError:
            if band == "float64":
                raise
            continue  # not runnable in this band yet
        best, spent = math.inf, 0.0
        while spent < min_seconds:
            acc = factory.make()
            with cache.active():
                t = time.perf_counter()
                fold_rows(acc, enc, weights, model, precision, DEFAULT_CHUNK_ROWS)
                elapsed = time.perf_counter() - t
            best, spent = min(best, elapsed), spent + elapsed
        out[band] = enc.n_rows / max(best, 1e-9)
    return out


def _engine_kind(engine: Any) -> str:
    """The engine ``calibrate`` times on: "ray" for the name or the ``ray`` module, else a
    Dask Client's, MPI communicator's or Spark session's backend name."""
    if isinstance(engine, str) or isinstance(engine, types.ModuleType):
        name = engine if isinstance(engine, str) else engine.__name__
        if name == "ray":
            return "ray"
    else:
        try:
            return backend_name(engine)
        except ValueError:
            pass
    raise ValueError(f"calibrate runs on this machine (engine=None), a Dask Client, an MPI "
                     f"communicator, a Spark session or 'ray', got {engine!r}")


def _measure_dask(client: Any, devices: tuple[DeviceSpec, ...], model: Distribution,
                  enc: Encoded, bands: tuple[str, ...], min_seconds: float
                  ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Every worker timed where it is, all at once; then each ``dask:<worker>:gpu<k>`` in a task
    pinned to its worker holding one of its ``GPU`` resources (its bands' errors measured
    there too); a GPU torch cannot use there is left out."""
    rates = dict(client.run(measure_rows_per_second, model, enc, bands, min_seconds))
    gpus = {d.name: worker_of(d.name, list(rates)) for d in devices if d.kind == "gpu"}
    futures = {name: client.submit(_measured_on_dask_gpu, model, enc, bands, min_seconds,
                                   gpu_index(name), workers=[named[0]], pure=False,
                                   allow_other_workers=False, resources={"GPU": 1})
               for name, named in gpus.items() if named is not None}
    got = dict(zip(futures, DaskCalls(client).gather(list(futures.values()))))
    rates.update({name: r for name, (r, _) in got.items() if r is not None})
    return rates, {name: e for name, (_, e) in got.items() if e is not None}


def _measured_on_dask_gpu(model: Distribution, enc: Encoded, bands: tuple[str, ...],
                          min_seconds: float, k: int
                          ) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """Dask task: :func:`_measured_on_cuda` on this worker's ``k``-th GPU."""
    device = dask_cuda_device(k, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return _measured_on_cuda(model, enc, bands, min_seconds, device)


def _measured_on_cuda(model: Distribution, enc: Encoded, bands: tuple[str, ...],
                      min_seconds: float, device: str
                      ) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """(rates, band errors) on ``device``, or (None, None) when torch cannot use it here."""
    if not torch_device_available(device):
        return None, None
    measure_rows_per_second(model, enc, bands, min_seconds / 10, device)  # warm-up: CUDA context
    rates = measure_rows_per_second(model, enc, bands, min_seconds, device)
    return rates, _step_errors(model, _error_sample(enc), list(rates), device)


def _measure_ray(devices: tuple[DeviceSpec, ...], model: Distribution, enc: Encoded,
                 bands: tuple[str, ...], min_seconds: float
                 ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Each ``ray:<node>`` device timed in a one-CPU task pinned to its node, each
    ``ray:<node>:gpu<k>`` in one given a GPU there (its bands' errors measured there too), all
    at once as a fit's folds run; devices of no live node are left out."""
    ray = require("ray", "ray", "ray")
    if not ray.is_initialized():
        raise ValueError("calibrate(engine='ray') times on a running Ray cluster: call "
                         "ray.init() first")
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    shipped = ray.put((model, enc, bands, min_seconds))
    remote = ray.remote(_measured_on_ray_node)
    refs = {}
    for d in devices:
        named = node_of(d.name)
        if named is not None and named[0] in alive:
            refs[d.name] = remote.options(
                num_cpus=1, num_gpus=1 if named[1] else 0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(named[0], soft=False)
            ).remote(shipped, named[1])
    try:
        got = dict(zip(refs, ray.get(list(refs.values()), timeout=WAIT_SECONDS)))
    except ray.exceptions.GetTimeoutError:
        raise TimeoutError(f"ray: calibrating {sorted(refs)} gave no result within "
                           f"{WAIT_SECONDS:g} s") from None
    rates = {name: r for name, (r, _) in got.items() if r is not None}
    return rates, {name: e for name, (_, e) in got.items() if e is not None}


def _measured_on_ray_node(shipped: tuple, gpu: bool
                          ) -> tuple[dict[str, float] | None, dict[str, float] | None]:
    """Ray task: (rates, None) on this node's CPU; on a GPU task, :func:`_measured_on_cuda` on
    the CUDA device of the GPU Ray gave it."""
    model, enc, bands, min_seconds = shipped
    if not gpu:
        return measure_rows_per_second(model, enc, bands, min_seconds), None
    import ray

    device = ray_cuda_device(ray.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    return _measured_on_cuda(model, enc, bands, min_seconds, device)


def _measure_spark(engine: Any, model: Distribution, enc: Encoded, bands: tuple[str, ...],
                   min_seconds: float) -> dict[str, dict[str, float]]:
    sc = getattr(engine, "sparkContext", engine)
    slots = int(sc.defaultParallelism)
    shipped = sc.broadcast((model, enc, bands, min_seconds))

    def run(index: int, _: Iterator[Any]) -> Iterator[tuple[int, dict[str, float]]]:
        from pyspark import BarrierTaskContext

        BarrierTaskContext.get().barrier()  # all slots start together, as in a fit
        yield index, measure_rows_per_second(*shipped.value)

    try:
        rows = sc.parallelize(range(slots), slots).barrier() \
            .mapPartitionsWithIndex(run).collect()
    finally:
        shipped.unpersist()
    return {f"spark:{i}": rates for i, rates in rows}


def spark_gpu_devices(master: str, conf: Mapping[str, str], driver_gpus: list[str],
                      executor_ids: list[str]) -> tuple[DeviceSpec, ...]:
    """The GPU devices of a Spark application, from what Spark reports: in local mode (the
    driver is the one executor) one ``spark:driver:gpu<address>`` per address the driver
    discovered; on a cluster ``spark.executor.resource.gpu.amount`` devices per executor id,
    ``spark:<executor id>:gpu<k>``.

    >>> [d.name for d in spark_gpu_devices("local[2]", {}, ["0", "1"], [])]
    ['spark:driver:gpu0', 'spark:driver:gpu1']
    >>> conf = {"spark.executor.resource.gpu.amount": "2"}
    >>> [d.name for d in spark_gpu_devices("spark://h:7077", conf, [], ["1", "2"])]
    ['spark:1:gpu0', 'spark:1:gpu1', 'spark:2:gpu0', 'spark:2:gpu1']
    """
    if master.startswith("local"):
        return tuple(DeviceSpec(f"spark:driver:gpu{a}", "gpu") for a in driver_gpus)
    amount = int(float(conf.get("spark.executor.resource.gpu.amount", "0")))
    return tuple(DeviceSpec(f"spark:{e}:gpu{k}", "gpu") for e in executor_ids
                 for k in range(amount))


# -- this machine ---------------------------------------------------------------------------------


def _local_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _cuda_of(d: DeviceSpec) -> str | None:
    """The torch device of a GPU device of this machine (``gpu:<i>`` or ``cuda:<i>``)."""
    prefix, _, rest = d.name.partition(":")
    if d.kind != "gpu" or prefix not in ("gpu", "cuda") or not (rest.isdigit() or not rest):
        return None
    return f"cuda:{rest or 0}"


def _core_of(name: str) -> int | None:
    prefix, _, rest = name.partition(":")
    return int(rest) if prefix == "cpu" and rest.isdigit() else None


def _machine_memory() -> int:
    """Physical memory in bytes, or the cgroup's limit when it is lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = _meminfo_total()
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return int(total)


def _meminfo_total() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemTotal in /proc/meminfo")


_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def _parse_memory(text: str) -> int:
    """A JVM-style memory string ("512m", "2g", "1024") in bytes (no suffix: MiB, as Spark)."""
    s = text.strip().lower().removesuffix("b")
    if s and s[-1] in _UNITS:
        return int(float(s[:-1]) * _UNITS[s[-1]])
    return int(float(s)) * 2**20


@contextmanager
def _pinned(core: int) -> Iterator[None]:
    """Run every thread of this process on ``core`` only, then put every thread back.

    Threads started meanwhile (BLAS or numba pools) inherit the pin, so they get the process's
    original affinity afterwards rather than staying on one core.
    """
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    original = os.sched_getaffinity(0)
    saved: dict[int, set[int]] = {}
    for tid in _threads():
        try:
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, {core})
        except OSError:  # a thread that ended, or one we may not move
            continue
    try:
        yield
    finally:
        for tid in _threads():
            try:
                os.sched_setaffinity(tid, saved.get(tid, original))
            except OSError:
                continue


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]
