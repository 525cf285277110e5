"""Which raw values mean "missing" for :class:`~mixfold.OptionalDistribution`: the markers, a
batch's missing mask, their JSON form and the value the sampler writes for a missing row."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.families._levels import level_from_json, level_to_json
from mixfold.families._protocol import is_na

__all__ = ["MissingMarkers", "DEFAULT_MISSING"]

#: where the markers are public (and were defined before this module): pickles, reprs and a
#: checkpoint's fingerprint name them there
PUBLIC_HOME = "mixfold.families.optional"

DEFAULT_MISSING: tuple = (None, math.nan)


class MissingMarkers:
    """Which raw values mean "missing": ``None``, any float NaN, and/or other hashable values.
    pandas' ``NA`` and ``NaT`` (and NumPy's ``NaT``) are missing wherever ``None`` or NaN is.

    >>> m = MissingMarkers((None, float("nan"), "NA"))
    >>> m.mask([1.0, None, float("nan"), "NA", "x"]).tolist()
    [False, True, True, True, False]
    """

    __module__ = PUBLIC_HOME
    __slots__ = ("none", "nan", "values")

    def __init__(self, missing: Sequence[Any] = DEFAULT_MISSING):
        if isinstance(missing, (str, bytes)) or not isinstance(missing, (tuple, list)):
            raise ValueError(f"missing must be a tuple of marker values, got {missing!r}")
        self.none = any(m is None for m in missing)
        self.nan = any(_is_nan(m) for m in missing)
        others = [m for m in missing if m is not None and not _is_nan(m)]
        for m in others:
            try:
                hash(m)
            except TypeError:
                raise ValueError(f"missing markers must be hashable, got {m!r}") from None
        self.values = frozenset(others)

    def is_missing(self, v: Any) -> bool:
        """Whether one raw value is missing."""
        if v is None:
            return self.none
        if _is_nan(v):
            return self.nan
        if is_na(v):  # pandas' NA and NaT: missing wherever None or NaN is
            return self.none or self.nan
        if not self.values:
            return False
        try:
            return v in self.values
        except TypeError:  # unhashable values (a list, an array) are never markers
            return False

    def mask(self, values: Any) -> np.ndarray:
        """Boolean array of shape (n_rows,), True where the row's value is missing."""
        if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "fiub":
            missing = np.isnan(values) if self.nan and values.dtype.kind == "f" else \
                np.zeros(values.shape[0], dtype=bool)
            for m in self.values:
                if isinstance(m, numbers.Real):
                    missing |= values == m
            return missing
        if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "mM":
            return np.isnat(values) if self.none or self.nan else \
                np.zeros(values.shape[0], dtype=bool)
        return np.fromiter((self.is_missing(v) for v in values), dtype=bool, count=len(values))

    def to_json(self) -> dict[str, Any]:
        return {"none": self.none, "nan": self.nan,
                "values": sorted((level_to_json(v) for v in self.values), key=repr)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MissingMarkers:
        markers = [level_from_json(v) for v in d["values"]]
        return cls(([None] if d["none"] else []) + ([math.nan] if d["nan"] else []) + markers)

    def sample_marker(self) -> Any:
        """The value written for a missing row by the sampler."""
        if self.none:
            return None
        if self.nan:
            return math.nan
        return sorted(self.values, key=repr)[0]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MissingMarkers) and (self.none, self.nan, self.values) == \
            (other.none, other.nan, other.values)

    def __hash__(self) -> int:
        return hash((self.none, self.nan, self.values))

    def __repr__(self) -> str:
        parts = (["None"] if self.none else []) + (["nan"] if self.nan else []) + \
            sorted(repr(v) for v in self.values)
        return f"MissingMarkers(({', '.join(parts)}{',' if len(parts) == 1 else ''}))"


def _is_nan(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) and v != v
