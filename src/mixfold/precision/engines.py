"""Which engine runs a band: the arithmetic namespace
(:class:`~mixfold.precision.emulation.BandOps`) a band's E-step is written against -- rounded
NumPy emulation, double-double, or torch on a device."""

from __future__ import annotations

import functools

from mixfold.precision.bands import Engine
from mixfold.precision.bands import Precision
from mixfold.precision.emulation import BandOps, DoubleDoubleOps, RoundedOps
from mixfold.precision.gpu import TorchOps

__all__ = ["band_ops"]


@functools.cache
def band_ops(precision: Precision) -> BandOps:
    """The arithmetic namespace that runs ``precision`` (a band, ``"<band>@<device>"`` or
    ``"<band>@emulated"``), element by element: the torch engine's dtypes on its device, the
    emulator's rounding, or double-double.

    Plain ``float32``/``float64`` run natively in the families' own NumPy paths and have no
    namespace here on a CPU; with a device (``"float32@cuda"``) they run through torch.
    """
    p = precision
    band = p.band
    if p.engine is Engine.TORCH:
        return TorchOps(band, p.device)
    if band == "dd":
        return DoubleDoubleOps()
    if band in ("float32", "float64"):
        raise ValueError(f"precision {band!r} runs natively on a CPU: the families' NumPy "
                         f"paths compute it; band_ops serves fp8, bfloat16, float16, dd and "
                         f"'<band>@<device>'")
    return RoundedOps(band)
