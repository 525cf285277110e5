"""Band arithmetic: the array operations an E-step runs, with every result rounded to its band.

A covered family writes its band E-step once against a :class:`BandOps` namespace (``array``,
``add``, ``sub``, ``mul``, ``div``, ``exp``, ``log``, ``maximum``); the namespace decides the
arithmetic:

- :class:`RoundedOps` (``fp8``, ``bfloat16``, ``float16`` on a CPU): each operation is computed in
  float64 and its result rounded to the band through ``ml_dtypes`` -- the band's own arithmetic,
  one correctly rounded step at a time (fp8 saturates at +-448 instead of overflowing to NaN, as
  saturating fp8 conversions on GPUs do). Slow, but exact emulation: what an accuracy check needs.
- :class:`DoubleDoubleOps` (``dd``): every operation in double-double.
- :class:`~mixfold.precision.gpu.TorchOps` (``"<band>@<device>"``, e.g. ``"float16@cuda"``):
  the same operations as torch tensors on that device.

Values stay in the band between operations; :meth:`BandOps.to_float64` hands per-row results
back to the float64 statistics.

>>> ops = RoundedOps("fp8")
>>> float(ops.add(ops.array(1.0), ops.array(0.0625)))  # 1 + 2^-4 is a tie: rounds to even
1.0
>>> float(ops.array(1000.0))                             # saturates at the largest fp8
448.0
>>> dd = DoubleDoubleOps()
>>> x = dd.add(dd.array(1.0), dd.array(2.0 ** -70))
>>> float(dd.to_float64(dd.sub(x, dd.array(1.0))))
8.470329472543003e-22
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.precision.doubledouble import (DD, LOG_2PI, dd_add, dd_div, dd_exp, dd_log,
                                            dd_maximum, dd_mul, dd_sub)

__all__ = ["BandOps", "RoundedOps", "DoubleDoubleOps", "round_to_band"]


def _ml_dtype(band: str) -> np.dtype:
    try:
        import ml_dtypes
    except ImportError as err:
        raise ImportError(f"precision {band!r} is emulated through ml_dtypes: pip install "
                          f"'mixfold[precision]' ({err})") from None

    return np.dtype({"fp8": ml_dtypes.float8_e4m3fn, "bfloat16": ml_dtypes.bfloat16,
                     "float16": np.float16}[band])


def round_to_band(x: Any, band: str) -> np.ndarray:
    """``x`` rounded to ``band`` (to nearest, ties to even), returned as float64 values.

    >>> round_to_band(np.array([1.0 / 3.0, 500.0]), "bfloat16").tolist()
    [0.333984375, 500.0]
    """
    x = np.asarray(x, dtype=np.float64)
    if band == "float64":
        return x
    if band == "float32":
        return x.astype(np.float32).astype(np.float64)
    dt = _ml_dtype(band)
    top = float(np.finfo(dt).max) if dt == np.float16 else float(_finfo_max(dt))
    with np.errstate(invalid="ignore"):
        clipped = np.clip(x, -top, top)  # saturate: e4m3 has no infinity (overflow would be NaN)
    return clipped.astype(dt).astype(np.float64)


def _finfo_max(dt: np.dtype) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(dt).max)


class BandOps:
    """The arithmetic of one band. Subclasses implement the operations; see the module doc."""

    band: str = "float64"
    #: log(2 pi) as a value of the band.
    log_2pi: Any = None

    def array(self, x: Any) -> Any:
        """Float64 values (array or scalar) entering the band (rounded to it)."""
        raise NotImplementedError

    def to_float64(self, a: Any) -> np.ndarray:
        """A band value as a float64 NumPy array (its exact value, or for ``dd`` its rounding)."""
        raise NotImplementedError

    def add(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def sub(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def mul(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def div(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def exp(self, a: Any) -> Any:
        raise NotImplementedError

    def log(self, a: Any) -> Any:
        raise NotImplementedError

    def maximum(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def total(self, terms: list[Any]) -> Any:
        """``terms[0] + terms[1] + ...`` left to right, each partial sum rounded."""
        out = terms[0]
        for t in terms[1:]:
            out = self.add(out, t)
        return out

    def pair(self, a: Any) -> tuple[np.ndarray, np.ndarray]:
        """A band value as float64 (hi, lo) arrays; lo is zero except for ``dd``."""
        hi = self.to_float64(a)
        return hi, np.zeros_like(hi)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.band!r})"


class RoundedOps(BandOps):
    """fp8 / bfloat16 / float16 on a CPU: float64 storage of band values, every result rounded."""

    def __init__(self, band: str):
        if band not in ("fp8", "bfloat16", "float16"):
            raise ValueError(f"RoundedOps runs fp8, bfloat16 or float16, got {band!r}")
        self.band = band
        self.log_2pi = self.array(LOG_2PI.hi)

    def _round(self, x: Any) -> np.ndarray:
        return round_to_band(x, self.band)

    def array(self, x: Any) -> np.ndarray:
        return self._round(x)

    def to_float64(self, a: Any) -> np.ndarray:
        return np.asarray(a, dtype=np.float64)

    def add(self, a: Any, b: Any) -> np.ndarray:
        return self._round(np.add(a, b))

    def sub(self, a: Any, b: Any) -> np.ndarray:
        return self._round(np.subtract(a, b))

    def mul(self, a: Any, b: Any) -> np.ndarray:
        return self._round(np.multiply(a, b))

    def div(self, a: Any, b: Any) -> np.ndarray:
        return self._round(np.divide(a, b))

    def exp(self, a: Any) -> np.ndarray:
        return self._round(np.exp(a))

    def log(self, a: Any) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return self._round(np.log(a))

    def maximum(self, a: Any, b: Any) -> np.ndarray:
        return np.maximum(a, b)  # exact in every band


class DoubleDoubleOps(BandOps):
    """The ``dd`` band: every value a double-double pair, every operation in double-double."""

    band = "dd"

    def __init__(self) -> None:
        self.log_2pi = LOG_2PI

    def array(self, x: Any) -> DD:
        if isinstance(x, DD):
            return x
        hi = np.asarray(x, dtype=np.float64)
        return DD(hi, np.zeros_like(hi))

    def to_float64(self, a: Any) -> np.ndarray:
        a = self.array(a)
        return np.asarray(a.hi + a.lo, dtype=np.float64)

    def pair(self, a: Any) -> tuple[np.ndarray, np.ndarray]:
        a = self.array(a)
        return np.asarray(a.hi, dtype=np.float64), np.asarray(a.lo, dtype=np.float64)

    def add(self, a: Any, b: Any) -> DD:
        return dd_add(a, b)

    def sub(self, a: Any, b: Any) -> DD:
        return dd_sub(a, b)

    def mul(self, a: Any, b: Any) -> DD:
        return dd_mul(a, b)

    def div(self, a: Any, b: Any) -> DD:
        return dd_div(a, b)

    def exp(self, a: Any) -> DD:
        with np.errstate(over="ignore", invalid="ignore"):
            return dd_exp(self.array(a))

    def log(self, a: Any) -> DD:
        return dd_log(self.array(a))

    def maximum(self, a: Any, b: Any) -> DD:
        return dd_maximum(self.array(a), self.array(b))
