"""A precision is resolved once into a value whose attributes the code asks."""

import importlib.util
import pickle

import numpy as np
import pytest

from mixfold.precision import BANDS, UNIT_ROUNDOFF, Precision, resolve_precision


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
