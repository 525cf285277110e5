"""A precision is resolved once into a value whose attributes the code asks."""

import importlib.util
import pickle
import sys
from dataclasses import replace

import numpy as np
import pytest

from mixfold import GaussianDistribution, GaussianEstimator, MixtureEstimator
from mixfold.backends import local
from mixfold.compute.fold import fold_rows
from mixfold.fit import fit as fit_em
from mixfold.parallel.heterogeneous import (HeterogeneousPlan, PlannedLocalEncodedData, Worker,
                                            WorkerAssignment, plan_heterogeneous)
from mixfold.precision import (BANDS, FLOAT64, UNIT_ROUNDOFF, Precision, bands,
                               resolve_precision)


@pytest.mark.parametrize("band", BANDS)
def test_every_band_resolves_to_its_attributes(band):
    p = resolve_precision(band)
    assert isinstance(p, Precision) and p == band and p.band == band
    # a bare band runs on the fastest real engine here: torch on this CPU for bf16/fp16
    assert p.device == ("cpu" if p.engine == "torch" else None)
    assert p.native == (band in ("float32", "float64"))
    assert p.dtype == (np.dtype(band) if p.native else None)
    assert p.compensated == (band == "dd")
    assert p.unit_roundoff == UNIT_ROUNDOFF[band]


def test_each_name_resolves_to_its_engine():
    torch_here = importlib.util.find_spec("torch") is not None
    want = {"float64": ("numpy", None), "float32": ("numpy", None), "dd": ("numpy", None),
            "fp8": ("emulated", None),
            "bfloat16": ("torch", "cpu") if torch_here else ("emulated", None),
            "float16": ("torch", "cpu") if torch_here else ("emulated", None),
            "bfloat16@emulated": ("emulated", None), "fp8@emulated": ("emulated", None),
            "float32@cpu": ("torch", "cpu"), "bfloat16@cuda:1": ("torch", "cuda:1")}
    for name, (engine, device) in want.items():
        p = resolve_precision(name)
        assert (p.engine, p.device, p.native) == (engine, device, engine == "numpy"
                                                  and p.band != "dd"), name
    with pytest.raises(ValueError, match="the emulator runs bands"):
        resolve_precision("float32@emulated")


def test_a_device_precision_is_never_native_and_names_its_device():
    p = resolve_precision("float32@cuda:1")
    assert (p.band, p.device, p.native, p.dtype) == ("float32", "cuda:1", False, None)


def test_resolving_is_done_once_and_survives_pickling():
    p = resolve_precision("dd")
    assert resolve_precision(p) is p and resolve_precision("dd") is p
    assert pickle.loads(pickle.dumps(p)) is p  # re-resolved where it is unpickled
    assert resolve_precision(None) == "float64"


@pytest.mark.parametrize("bad", ["float128", "float16@", 16, "auto"])
def test_unknown_names_are_refused(bad):
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision(bad)


def _counting_resolver(monkeypatch):
    """Every module's ``resolve_precision`` replaced by one that counts its calls."""
    calls = []
    real = bands.resolve_precision

    def counted(name):
        calls.append(str(name))
        return real(name)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("mixfold") and \
                getattr(module, "resolve_precision", None) is real:
            monkeypatch.setattr(module, "resolve_precision", counted)
    return calls


@pytest.mark.parametrize("name", ["float32", "bfloat16", "dd"])
def test_a_fit_resolves_its_precision_once_and_hands_the_value_down(monkeypatch, name):
    x = np.concatenate([np.random.default_rng(0).normal(-3, 1, 300),
                        np.random.default_rng(1).normal(3, 1, 300)])
    est = MixtureEstimator([GaussianEstimator()] * 2)
    seen = []
    real_fold = local.fold_rows

    def fold_rows(acc, enc, weights, model, precision, chunk_rows):
        seen.append(precision)
        return real_fold(acc, enc, weights, model, precision, chunk_rows)

    monkeypatch.setattr(local, "fold_rows", fold_rows)
    calls = _counting_resolver(monkeypatch)
    result = fit_em(x, est, precision=name, max_iter=5, seed=0, progress=False)
    assert calls == [name]  # the fit's one resolution: nothing below it resolves again
    assert seen and all(p is resolve_precision(name) for p in seen[1:])
    assert result.precision is resolve_precision(name)


def test_a_name_handed_below_the_entry_points_is_refused():
    model = GaussianDistribution(0.0, 1.0)
    enc = model.encoder().encode([0.0, 1.0])
    with pytest.raises(TypeError, match=r"resolve_precision\('float32'\)\), got the name"):
        fold_rows(None, enc, np.ones(2), model, "float32", 10)
    assert fold_rows(None, enc, np.ones(2), model, FLOAT64, 10) == pytest.approx(
        float(model.seq_log_density(enc).sum()), rel=1e-15)


def test_a_plans_workers_run_values_resolved_as_the_plan_is_built():
    a = WorkerAssignment("gpu0", rows=10, precision="bfloat16", effective_throughput=1.0,
                         device="cuda:0")
    b = WorkerAssignment("cpu", rows=10, precision="float32", effective_throughput=1.0)
    plan = HeterogeneousPlan((a, b), reduce_depth=1)
    got = plan.execution_precisions()
    assert got == ["bfloat16@cuda:0", "float32"]
    assert all(isinstance(p, Precision) for p in got) and got[1] is resolve_precision("float32")
    again = pickle.loads(pickle.dumps(plan))  # a plan travels to remote workers
    assert again == plan and again.execution_precisions()[1] is got[1]
    assert replace(b, precision="float64").execution_precision is FLOAT64


def test_a_sharded_handle_refuses_a_name_before_any_shard_runs():
    model = GaussianDistribution(0.0, 1.0)
    enc = model.encoder().encode([0.0, 1.0, 2.0, 3.0])
    plan = plan_heterogeneous([Worker("a"), Worker("b")], enc.n_rows)
    with PlannedLocalEncodedData(enc, None, 1000, plan) as handle:
        with pytest.raises(TypeError, match="got the name 'float64'"):
            handle.fold(model.estimator(), model, "float64")
        got = handle.fold(model.estimator(), model, FLOAT64)
    assert got.n_rows == 4
    assert got.log_density == pytest.approx(float(model.seq_log_density(enc).sum()), rel=1e-14)
