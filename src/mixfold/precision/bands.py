"""The precision bands, their unit roundoff, and how a precision is named.

A precision is a band name (``"float16"``), a band on a torch device (``"float16@cuda"``,
``"bfloat16@cpu"``) or a band on the element-by-element emulator, the accuracy reference
(``"bfloat16@emulated"``). :func:`resolve_precision` turns the name into a :class:`Precision`
once -- its band, its device, the engine that runs it, whether the families' NumPy paths run it
and whether statistics accumulate compensated -- and code below asks those attributes instead of
comparing names. A bare reduced band means the fastest real engine this machine has for it:
torch on this CPU for ``bfloat16`` and ``float16`` (the emulator when torch is not installed);
``fp8`` has no CPU unit and runs on the emulator unless a device is named.

>>> parse_precision("bfloat16@cuda:1")
('bfloat16', 'cuda:1')
>>> is_native("float32"), is_native("float16"), is_native("float32@cuda")
(True, False, False)
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from enum import Enum

import numpy as np

__all__ = ["BANDS", "UNIT_ROUNDOFF", "DEFAULT_PRECISION", "Precision", "FLOAT64", "DOUBLE_DOUBLE",
           "resolve_precision", "require_resolved", "check_precision",
           "native_dtype", "parse_precision", "band_of", "is_native", "most_accurate",
           "check_bands", "Engine", "ENGINES", "EMULATED", "FIT_DISTANCE",
           "PARAMETER_DISTANCE", "promoted", "log_likelihood_resolution"]

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

#: Each band's promise for a whole fit: the relative distance of its final mean log-likelihood
#: from float64's fit from the same start. The bands below float32 screen the components and
#: rescore them in float64 from float32 features (:mod:`mixfold.compute.screened`), so they keep
#: float32's; measured by the battery of :mod:`mixfold.examples.band_battery`.
FIT_DISTANCE: dict[str, float] = {"fp8": 1e-5, "bfloat16": 1e-5, "float16": 1e-5,
                                  "float32": 1e-5, "float64": 1e-10, "dd": 1e-10}
#: ... and for its model: the mean per-row difference of the fitted log-densities from
#: float64's fit (:func:`~mixfold.compute.accuracy.density_distance`), relative to the
#: log-likelihood.
PARAMETER_DISTANCE: dict[str, float] = {"fp8": 1e-2, "bfloat16": 1e-2, "float16": 1e-2,
                                        "float32": 1e-2, "float64": 1e-6, "dd": 1e-6}

#: How a float32 fold accumulates statistics: partial sums of this many rows in float32 (one GEMM
#: each, a size OpenBLAS's small-matrix kernels run fastest), then added in float64. Their rounding
#: is at most ``(FLOAT32_PARTIAL_ROWS - 1) * 2**-24`` relative to the sums of absolute terms.
FLOAT32_PARTIAL_ROWS = 2048

_NATIVE = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}

class Engine(str, Enum):
    """What runs a band: NumPy (float32/float64 and double-double on this CPU), torch
    (``"<band>@<device>"``, and bare bfloat16/float16: on a CPU the screened engine), the
    element-by-element emulator. Compared as values (``p.engine is Engine.TORCH``); each is
    also equal to its name.

    >>> Engine.TORCH == "torch", Engine("emulated") is Engine.EMULATED
    (True, True)
    """

    NUMPY = "numpy"
    TORCH = "torch"
    EMULATED = "emulated"

    def __str__(self) -> str:  # its name in messages, as a plain string would print
        return self.value


#: The engines, in the order above.
ENGINES = tuple(Engine)

#: The device name of the emulator (``"bfloat16@emulated"``): every operation rounded to the
#: band through ``ml_dtypes``; the accuracy reference, never a fast path.
EMULATED = "emulated"

#: The bands the emulator runs (float32, float64 and dd run exactly in NumPy).
_EMULATED_BANDS = ("fp8", "bfloat16", "float16")


def parse_precision(precision: str) -> tuple[str, str | None]:
    """(band, torch device or None) of a precision name; rejects unknown bands."""
    if not isinstance(precision, str):
        raise ValueError(f"precision must be one of {list(BANDS)} (optionally '@<device>'), got "
                         f"{precision!r}")
    band, sep, device = precision.partition("@")
    if band not in UNIT_ROUNDOFF or (sep and not device):
        raise ValueError(f"precision must be one of {list(BANDS)} (optionally '@<device>', e.g. "
                         f"'float16@cuda', or '@emulated'), got {precision!r}")
    if device == EMULATED and band not in _EMULATED_BANDS:
        raise ValueError(f"the emulator runs bands {list(_EMULATED_BANDS)} ({band!r} runs "
                         f"exactly in NumPy: precision {band!r}), got {precision!r}")
    return band, (device or None)


def check_precision(precision: str | None) -> str:
    """The precision name for ``precision`` (``None`` means float64); rejects unknown names."""
    if precision is None:
        return DEFAULT_PRECISION
    parse_precision(precision)
    return precision


def check_bands(precisions: Sequence[str]) -> tuple[str, ...]:
    """``precisions`` as a tuple of band names: non-empty, every name one of :data:`BANDS`.

    >>> check_bands(["float32", "float64"])
    ('float32', 'float64')
    """
    bands = tuple(precisions)
    if not bands or any(b not in UNIT_ROUNDOFF for b in bands):
        raise ValueError(f"precisions must be a non-empty subset of {list(BANDS)}, got "
                         f"{list(bands)}")
    return bands


def band_of(precision: str) -> str:
    """The band of a precision name (``"float16@cuda"`` -> ``"float16"``)."""
    return parse_precision(precision)[0]


def is_native(precision: str) -> bool:
    """Whether the families' own NumPy paths run ``precision`` (float32/float64 on a CPU)."""
    return precision in _NATIVE


def most_accurate(bands: tuple[str, ...] | list[str]) -> str:
    """The band of ``bands`` with the smallest unit roundoff.

    >>> most_accurate(["fp8", "float32", "bfloat16"])
    'float32'
    """
    return min(bands, key=lambda b: UNIT_ROUNDOFF[b])


def native_dtype(precision: str | None) -> np.dtype:
    """The NumPy dtype a CPU E-step computes in for ``precision``.

    Bands without a native CPU dtype raise rather than silently running in float64.
    """
    if isinstance(precision, Precision) and precision.native:  # resolved: its dtype, no parse
        return precision.dtype
    band = check_precision(precision)
    try:
        return _NATIVE[band]
    except KeyError:
        raise ValueError(
            f"precision {band!r} has no native CPU arithmetic; the core families run "
            f"{sorted(_NATIVE)} (reduced bands are executed by mixfold's precision layer)"
        ) from None


class Precision(str):
    """A precision resolved once: what the E-step runs in and how its statistics accumulate.

    It is still the name the user wrote (a ``str`` equal to it, so options, messages and model
    files keep the spelling), with the decisions the code needs as attributes:

    - ``band``: one of :data:`BANDS`; ``device``: a torch device or ``None`` (this CPU in NumPy,
      or the emulator);
    - ``engine``: what runs it, an :class:`Engine`;
    - ``native``: the families' own NumPy paths run it (float32/float64 on the CPU);
    - ``dtype``: their NumPy dtype (``None`` when not native);
    - ``compensated``: statistics and the log-likelihood accumulate in double-double (``dd``),
      so shard payloads carry their low parts and reduce by exact two-sum.

    >>> p = resolve_precision("float32")
    >>> p == "float32", p.band, p.native, p.dtype, p.compensated
    (True, 'float32', True, dtype('float32'), False)
    >>> q = resolve_precision("bfloat16@cuda")
    >>> q.band, q.device, q.engine, q.native, q.dtype
    ('bfloat16', 'cuda', <Engine.TORCH: 'torch'>, False, None)
    >>> e = resolve_precision("bfloat16@emulated")
    >>> e.band, e.device, e.engine is Engine.EMULATED
    ('bfloat16', None, True)
    >>> resolve_precision("dd").compensated
    True
    """

    band: str
    device: str | None
    engine: Engine
    native: bool
    dtype: np.dtype | None
    compensated: bool
    unit_roundoff: float

    def __reduce__(self) -> tuple:  # re-resolved where it is unpickled (a remote worker)
        return resolve_precision, (str(self),)

    def promoted(self) -> Precision | None:
        """The precision this band is promoted to when it drifts (:func:`promoted`), resolved;
        ``None`` when nothing is more accurate.

        >>> resolve_precision("bfloat16@cuda").promoted(), resolve_precision("dd").promoted()
        ('float32@cuda', None)
        """
        up = promoted(self)
        return None if up is None else resolve_precision(up)


_RESOLVED: dict[str, Precision] = {}


def resolve_precision(precision: str | None) -> Precision:
    """The :class:`Precision` a name stands for (``None``: float64); unknown names raise.

    Resolving an already resolved value returns it as it is, so a value can be passed down and
    re-resolved by any entry point for free.
    """
    if isinstance(precision, Precision):
        return precision
    name = DEFAULT_PRECISION if precision is None else precision
    found = _RESOLVED.get(name) if isinstance(name, str) else None
    if found is not None:
        return found
    band, device = parse_precision(name)
    value = Precision(name)
    engine = _engine_for(band, device)
    if device == EMULATED:
        device = None
    elif device is None and engine is Engine.TORCH:
        device = "cpu"
    value.band, value.device, value.engine = band, device, engine
    value.native = engine is Engine.NUMPY and band in _NATIVE
    value.dtype = _NATIVE[band] if value.native else None
    value.compensated = band == "dd"
    value.unit_roundoff = UNIT_ROUNDOFF[band]
    _RESOLVED[name] = value
    return value


def require_resolved(precision: object) -> None:
    """Raise unless ``precision`` is a :class:`Precision`: a name is resolved where a call
    enters the library (the fit, the CLI, a plan), never again below it.

    >>> require_resolved(resolve_precision("float32"))
    >>> require_resolved("float32")
    Traceback (most recent call last):
    ...
    TypeError: precision must be resolved where the call enters mixfold \
(mixfold.precision.resolve_precision('float32')), got the name 'float32'
    """
    if not isinstance(precision, Precision):
        raise TypeError(f"precision must be resolved where the call enters mixfold "
                        f"(mixfold.precision.resolve_precision({str(precision)!r})), got the "
                        f"name {precision!r}")



def _engine_for(band: str, device: str | None) -> Engine:
    """The engine of ``band`` named with ``device``."""
    if device == EMULATED:
        return Engine.EMULATED
    if device is not None:
        return Engine.TORCH
    if band in ("float32", "float64", "dd"):
        return Engine.NUMPY
    if band == "fp8" or importlib.util.find_spec("torch") is None:
        return Engine.EMULATED
    return Engine.TORCH


def promoted(precision: str) -> str | None:
    """The precision a band that drifts is promoted to, on the same device: the bands below
    float32 to float32, float32 to float64; ``None`` for float64 and dd (nothing above to go).

    >>> promoted("bfloat16@cuda"), promoted("float32"), promoted("float64")
    ('float32@cuda', 'float64', None)
    """
    band, sep, device = str(precision).partition("@")
    up = {"fp8": "float32", "bfloat16": "float32", "float16": "float32", "float32": "float64"}
    if band not in up:
        return None
    if device == EMULATED:  # the emulator runs no float32: the native band does
        return up[band]
    return up[band] + sep + device


def log_likelihood_resolution(precision: Precision) -> float:
    """The relative resolution of the log-likelihood a fold in ``precision`` reports: the
    band's unit roundoff where every step runs in it (the emulator), float32's for the bands
    below it (their rows are rescored from float32 features), the band's own above.

    >>> log_likelihood_resolution(resolve_precision("bfloat16")) == UNIT_ROUNDOFF["float32"]
    True
    """
    if precision.engine is Engine.EMULATED:
        return precision.unit_roundoff
    return min(precision.unit_roundoff, UNIT_ROUNDOFF["float32"])


#: float64 resolved: the default of every method below the fit that takes a ``precision``.
FLOAT64 = resolve_precision(DEFAULT_PRECISION)
#: dd resolved: the reference the accuracy measurements compare a band's statistics with.
DOUBLE_DOUBLE = resolve_precision("dd")
