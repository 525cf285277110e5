"""How censored and truncated rows are read: each row an interval ``(low, high)`` known to hold
the value (a number: ``low == high``), cut to the truncation window and the family's support
(:class:`CensoredEncoder`), and the window itself (``truncate``: checked, as floats, as model
files write it).

>>> from mixfold.families._encoders import NumericEncoder
>>> CensoredEncoder(NumericEncoder("positive"), as_window((None, 4))).encode(
...     [1.0, (2.0, None), (None, 3.0)]).values.tolist()
[[1.0, 1.0], [2.0, 4.0], [0.0, 3.0]]
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError, ParameterError
from mixfold.families._encoders import NumericEncoder
from mixfold.families._protocol import ArrayEncoded, Encoder
from mixfold.options import rule

__all__ = ["CensoredEncoder", "SUPPORT_LOW", "WINDOW", "as_window", "window_json"]

#: where the encoder is public (and was defined before this module): pickles, reprs and a
#: checkpoint's fingerprint name it there
PUBLIC_HOME = "mixfold.families.censored"

#: Where the encoders of the families with a CDF place the lower end of their support.
SUPPORT_LOW = {"real": -np.inf, "positive": 0.0, "nonnegative": 0.0}


def _is_window(truncate: Any) -> bool:
    """Whether ``truncate`` is a pair (low, high) of numbers or None with low < high."""
    if not isinstance(truncate, (tuple, list)) or len(truncate) != 2:
        return False
    ends = [v for v in truncate if v is not None]
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) or np.isnan(v) for v in ends):
        return False
    low = -np.inf if truncate[0] is None else float(truncate[0])
    high = np.inf if truncate[1] is None else float(truncate[1])
    return low < high


#: What ``truncate`` accepts.
WINDOW = rule(_is_window, "a pair (low, high) of numbers or None (open) with low < high")


def as_window(truncate: Any) -> tuple[float, float]:
    """``truncate`` as ``(low, high)`` floats, open ends infinite."""
    if not WINDOW.accepts(truncate):
        raise ParameterError(f"truncate must be {WINDOW.expected}, got {truncate!r}")
    low, high = truncate
    return (-np.inf if low is None else float(low), np.inf if high is None else float(high))


def window_json(window: tuple[float, float]) -> list[float | None]:
    """A window as model files write it: open ends ``None``."""
    return [None if np.isinf(v) else v for v in window]


def _bound(v: Any, row: int) -> float:
    if v is None:
        return np.nan
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.floating,
                                                             np.integer)):
        raise DataTypeError(f"expected a number or None as an end of an interval, got {v!r}",
                            row=row)
    return float(v)


def _pairs(values: Any) -> np.ndarray:
    """Rows as an (n, 2) float array of ``(low, high)``, NaN for an open end."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        x = values.astype(np.float64)
        if x.ndim == 1:
            return np.column_stack([x, x])
        if x.ndim == 2 and x.shape[1] == 2:
            return x
        raise DataTypeError(f"expected values (n_rows,) or intervals (n_rows, 2), got an "
                            f"array of shape {x.shape}")
    out = np.empty((len(values), 2))
    for i, v in enumerate(values):
        if isinstance(v, (tuple, list, np.ndarray)):
            if len(v) != 2:
                raise DataTypeError(f"expected a number or a pair (low, high), got {v!r:.80}",
                                    row=i)
            out[i] = _bound(v[0], i), _bound(v[1], i)
        else:
            out[i] = _bound(v, i)
            if np.isnan(out[i, 0]):
                raise DataError("expected a number or a pair (low, high), got NaN (an unknown "
                                "value is the pair (None, None))", row=i)
    return out


class CensoredEncoder(Encoder):
    """Encodes rows (numbers or ``(low, high)`` pairs, see :mod:`mixfold.families.censored`)
    into an (n_rows, 2) array of intervals cut to the truncation window and the family's
    support; exact values are checked by the family's own encoder."""

    __module__ = PUBLIC_HOME

    def __init__(self, base: NumericEncoder, truncate: tuple[float, float]):
        self.base = base
        self.truncate = truncate

    @property
    def window(self) -> tuple[float, float]:
        """Where values can lie: the truncation window cut to the family's support."""
        return max(SUPPORT_LOW[self.base.domain], self.truncate[0]), self.truncate[1]

    def encode(self, values: Any) -> ArrayEncoded:
        x = _pairs(values)
        exact = x[:, 0] == x[:, 1]
        if exact.any():
            try:
                self.base.encode(x[exact, 0])
            except DataError as err:
                row = int(np.flatnonzero(exact)[err.row]) if err.row is not None else None
                raise DataError(str(err).split(": ", 1)[-1], row=row) from None
        lowest = self.window[0]
        low = np.fmax(np.where(np.isnan(x[:, 0]), -np.inf, x[:, 0]), lowest)
        high = np.fmin(np.where(np.isnan(x[:, 1]), np.inf, x[:, 1]), self.truncate[1])
        bad = (low > high) | (exact & ((x[:, 0] < lowest) | (x[:, 0] > self.truncate[1])))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"expected a value or an interval inside the support and the "
                            f"window [{lowest:g}, {self.truncate[1]:g}], got "
                            f"{tuple(x[i].tolist()) if not exact[i] else x[i, 0]!r}", row=i)
        return ArrayEncoded(np.column_stack([low, high]))

    def __repr__(self) -> str:
        return f"CensoredEncoder({self.base!r}, truncate={self.truncate!r})"
