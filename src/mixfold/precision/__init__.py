"""Precision bands: the arithmetic an E-step's log-densities and responsibilities run in.

Sufficient statistics are always accumulated in float64 whatever the band; the M-step always runs in
float64. The core families run ``float64`` and ``float32`` natively; the reduced bands (fp8,
bfloat16, float16) and double-double are executed by the precision layer, which plugs in through
the ``precision=`` argument every ``seq_log_density``/``seq_update`` already takes.

>>> UNIT_ROUNDOFF["float32"] == 2.0 ** -24
True
>>> native_dtype("float32")
dtype('float32')
"""

from __future__ import annotations

import numpy as np

__all__ = ["BANDS", "UNIT_ROUNDOFF", "DEFAULT_PRECISION", "check_precision", "native_dtype"]

#: Bands from least to most accurate.
BANDS: tuple[str, ...] = ("fp8", "bfloat16", "float16", "float32", "float64", "dd")

UNIT_ROUNDOFF: dict[str, float] = {
    "fp8": 2.0 ** -4,       # e4m3: 3 mantissa bits
    "bfloat16": 2.0 ** -8,
    "float16": 2.0 ** -11,
    "float32": 2.0 ** -24,
    "float64": 2.0 ** -53,
    "dd": 2.0 ** -106,
}

DEFAULT_PRECISION = "float64"

_NATIVE = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


def check_precision(precision: str | None) -> str:
    """Return the band name for ``precision`` (``None`` means float64); reject unknown names."""
    if precision is None:
        return DEFAULT_PRECISION
    if precision not in UNIT_ROUNDOFF:
        raise ValueError(f"precision must be one of {list(BANDS)}, got {precision!r}")
    return precision


def native_dtype(precision: str | None) -> np.dtype:
    """The NumPy dtype a CPU E-step computes in for ``precision``.

    Bands without a native CPU dtype raise rather than silently running in float64.
    """
    band = check_precision(precision)
    try:
        return _NATIVE[band]
    except KeyError:
        raise ValueError(
            f"precision {band!r} has no native CPU arithmetic; the core families run "
            f"{sorted(_NATIVE)} (reduced bands are executed by mixfold's precision layer)"
        ) from None
