"""The bands on a torch device (``precision="<band>@<device>"``, e.g. ``"bfloat16@cuda"``).

float16, bfloat16, float32 and float64 run in torch's own dtypes on the device (a GPU computes
them natively). fp8 (e4m3) has no arithmetic in torch: each operation runs in float32 and its
result is cast to ``float8_e4m3fn`` and back (saturating at +-448), as fp8 kernels round their
outputs. ``dd`` runs the double-double functions of :mod:`mixfold.precision.doubledouble` on
float64 tensors. torch is imported when a device precision is first used (extra ``gpu``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.precision.doubledouble import (DD, LOG_2PI, dd_add, dd_div, dd_exp, dd_log,
                                            dd_maximum, dd_mul, dd_sub)
from mixfold.precision.emulation import BandOps

__all__ = ["TorchOps", "torch_device_available"]

_FP8_MAX = 448.0


def _torch() -> Any:
    try:
        import torch
    except ImportError as err:
        raise ImportError(f"device precisions run through torch: pip install 'mixfold[gpu]' "
                          f"({err})") from None
    return torch


def torch_device_available(device: str) -> bool:
    """Whether torch is installed and ``device`` ("cpu", "cuda", "cuda:1") can be used."""
    try:
        torch = _torch()
    except ImportError:
        return False
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return False
        index = int(device.partition(":")[2] or 0)
        return index < torch.cuda.device_count()
    return device == "cpu"


class TorchOps(BandOps):
    """One band's arithmetic on a torch device."""

    def __init__(self, band: str, device: str):
        torch = _torch()
        if not torch_device_available(device):
            raise RuntimeError(f"precision '{band}@{device}' runs through torch on {device!r}, "
                               f"which this machine does not have (torch {torch.__version__}, "
                               f"CUDA available: {torch.cuda.is_available()})")
        self.torch = torch
        self.band = band
        self.device = torch.device(device)
        self.dtype = {"fp8": torch.float32, "bfloat16": torch.bfloat16,
                      "float16": torch.float16, "float32": torch.float32,
                      "float64": torch.float64, "dd": torch.float64}[band]
        self.log_2pi = self.array(LOG_2PI.hi) if band != "dd" else \
            DD(self._tensor(LOG_2PI.hi), self._tensor(LOG_2PI.lo))

    def __repr__(self) -> str:
        return f"TorchOps({self.band!r}, {str(self.device)!r})"

    def _tensor(self, x: Any) -> Any:
        return self.torch.as_tensor(np.asarray(x, dtype=np.float64), device=self.device)

    def _round(self, t: Any) -> Any:
        if self.band != "fp8":
            return t
        t = self.torch.clamp(t, -_FP8_MAX, _FP8_MAX)
        return t.to(self.torch.float8_e4m3fn).to(self.torch.float32)

    def array(self, x: Any) -> Any:
        if self.band == "dd":
            if isinstance(x, DD):
                return x
            hi = self._tensor(x)
            return DD(hi, self.torch.zeros_like(hi))
        return self._round(self._tensor(x).to(self.dtype))

    def to_float64(self, a: Any) -> np.ndarray:
        if self.band == "dd":
            return (a.hi + a.lo).cpu().numpy()
        return a.to(self.torch.float64).cpu().numpy()

    def pair(self, a: Any) -> tuple[np.ndarray, np.ndarray]:
        if self.band == "dd":
            return a.hi.cpu().numpy(), a.lo.cpu().numpy()
        return super().pair(a)

    def add(self, a: Any, b: Any) -> Any:
        return dd_add(a, b) if self.band == "dd" else self._round(a + b)

    def sub(self, a: Any, b: Any) -> Any:
        return dd_sub(a, b) if self.band == "dd" else self._round(a - b)

    def mul(self, a: Any, b: Any) -> Any:
        return dd_mul(a, b) if self.band == "dd" else self._round(a * b)

    def div(self, a: Any, b: Any) -> Any:
        return dd_div(a, b) if self.band == "dd" else self._round(a / b)

    def exp(self, a: Any) -> Any:
        return dd_exp(a) if self.band == "dd" else self._round(self.torch.exp(a))

    def log(self, a: Any) -> Any:
        return dd_log(a) if self.band == "dd" else self._round(self.torch.log(a))

    def maximum(self, a: Any, b: Any) -> Any:
        return dd_maximum(a, b) if self.band == "dd" else self.torch.maximum(a, b)
