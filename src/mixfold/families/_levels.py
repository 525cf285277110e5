"""A vocabulary: levels (strings, finite numbers, bools and tuples of them: what a model file
can hold) checked, ordered and saved, and the encoder of values to their codes 0..L-1, fixed at
encode time (a categorical's, a multinomial's tokens', a Markov chain's states')."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError
from mixfold.families._protocol import ArrayEncoded, Encoder, is_na

__all__ = ["CategoricalEncoder", "ordered_levels", "level_to_json", "level_from_json",
           "checked_levels", "first_repeat"]


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _savable_level(v: Any) -> bool:
    if isinstance(v, tuple):
        return all(_savable_level(_plain(x)) for x in v)
    if isinstance(v, float):
        return v - v == 0.0  # finite
    return isinstance(v, (str, int, bool))


def _check_level(v: Any, row: int | None = None) -> Hashable:
    v = _plain(v)
    if v is None or (isinstance(v, float) and v != v) or is_na(v):
        raise DataError("missing value in a categorical field; wrap the field in "
                        "OptionalEstimator to model missing values", row=row)
    if not _savable_level(v):  # a model whose levels cannot be saved would be lost at save
        raise DataTypeError(f"a categorical level must be a string, a finite number, a bool or "
                            f"a tuple of them (what a model file holds), got {v!r:.60} "
                            f"({type(v).__name__})", row=row)
    try:
        hash(v)
    except TypeError:
        raise DataTypeError(f"categorical levels must be hashable, got {type(v).__name__}",
                            row=row) from None
    return v


def checked_levels(levels: Sequence[Any]) -> tuple:
    """``levels`` as a tuple of checked levels (strings and ints, the common case, need no
    per-level check: a model's levels are re-read every M-step)."""
    if all(type(v) is str or type(v) is int for v in levels):
        return tuple(levels)
    return tuple(_check_level(v) for v in levels)


def first_repeat(levels: Sequence[Hashable]) -> Hashable:
    """The first level given twice (both spellings where they differ: ``1`` and ``True``)."""
    seen: dict[Hashable, Hashable] = {}
    for v in levels:
        if v in seen:
            return (seen[v], v) if repr(seen[v]) != repr(v) else v
        seen[v] = v
    return None


def ordered_levels(found: Sequence[Hashable]) -> tuple:
    try:
        return tuple(sorted(found))
    except TypeError:  # mixed types that do not order: keep first-seen order
        return tuple(found)


def _as_array(values: Any) -> np.ndarray | None:
    """``values`` as a NumPy array when that keeps every value as it is (one int or str type)."""
    if isinstance(values, np.ndarray):
        return values
    kinds = set(map(type, values))
    if len(kinds) == 1 and (kinds <= {int, str} or issubclass(kinds.pop(), (np.integer, np.str_))):
        return np.asarray(values)
    return None


class CategoricalEncoder(Encoder):
    """Maps values to integer codes 0..L-1 for a fixed tuple of levels.

    >>> enc = CategoricalEncoder().fit(["b", "a", "b"])
    >>> enc.levels
    ('a', 'b')
    >>> enc.encode(["b", "a"]).values
    array([1, 0])
    """

    def __init__(self, levels: Sequence[Hashable] | None = None):
        self.levels = None if levels is None else checked_levels(levels)
        if self.levels is not None and len(set(self.levels)) != len(self.levels):
            raise ValueError(f"categorical levels must be distinct, got {self.levels!r}")

    def fit(self, values: Any) -> CategoricalEncoder:
        if self.levels is not None:
            return self
        arr = _as_array(values)
        if arr is not None and arr.dtype.kind in "iuUS" and arr.ndim == 1:
            found = [_plain(v) for v in np.unique(arr)]
        else:
            found = list(dict.fromkeys(_check_level(v, i) for i, v in enumerate(values)))
        if not found:  # nothing to learn here; merging with other shards' fits supplies levels
            return self
        return CategoricalEncoder(ordered_levels(found))

    def merge(self, other: Encoder) -> CategoricalEncoder:
        """The union of both level sets (re-ordered as ``fit`` orders them)."""
        if not isinstance(other, CategoricalEncoder):
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        if self.levels is None or other.levels is None:
            return self if other.levels is None else other
        if self.levels == other.levels:
            return self
        return CategoricalEncoder(ordered_levels(list(dict.fromkeys(self.levels + other.levels))))

    def encode(self, values: Any) -> ArrayEncoded:
        if self.levels is None:  # fitted on no values at all (all missing, empty sequences)
            raise DataError("no values to learn the categorical levels from: give the levels "
                            "(CategoricalEstimator(levels=...)) or data with values")
        codes = self._fast_codes(_as_array(values))
        if codes is None:
            index = {v: i for i, v in enumerate(self.levels)}
            codes = np.empty(len(values), dtype=np.int64)
            for i, v in enumerate(values):
                v = _check_level(v, i)
                try:
                    codes[i] = index[v]
                except KeyError:
                    raise self._unseen(v, i) from None
        return ArrayEncoded(codes)

    def _fast_codes(self, arr: np.ndarray | None) -> np.ndarray | None:
        if arr is None or arr.ndim != 1 or arr.dtype.kind not in "iuUS":
            return None
        kinds = {type(v) for v in self.levels}
        if arr.dtype.kind in "iu" and kinds != {int}:
            return None
        if arr.dtype.kind in "US" and kinds != {str}:
            return None
        levels = np.asarray(self.levels)
        order = np.argsort(levels)
        pos = np.searchsorted(levels[order], arr)
        pos = np.minimum(pos, len(levels) - 1)
        hit = levels[order][pos] == arr
        if not hit.all():
            row = int(np.flatnonzero(~hit)[0])
            raise self._unseen(_plain(arr[row]), row)
        return order[pos].astype(np.int64)

    def _unseen(self, v: Any, row: int) -> DataError:
        shown = list(self.levels[:10]) + (["..."] if len(self.levels) > 10 else [])
        kinds = {type(level).__name__ for level in self.levels}
        note = ""
        if type(v).__name__ not in kinds:  # 3.5 against '3.5': say the types differ
            note = (f"; the value is a {type(v).__name__}, the levels are "
                    f"{' / '.join(sorted(kinds))}")
        return DataError(f"level {v!r} is not among the {len(self.levels)} levels fixed at "
                         f"encode time {shown}{note}", row=row)

    def __repr__(self) -> str:
        return f"CategoricalEncoder({self.levels!r})"


def level_to_json(v: Any) -> Any:
    """A level as a JSON value; tuples are tagged so they load back as tuples."""
    v = _plain(v)
    if isinstance(v, tuple):
        return {"tuple": [level_to_json(x) for x in v]}
    if isinstance(v, (str, int, float, bool)):
        return v
    raise TypeError(f"a categorical level of type {type(v).__name__} cannot be saved as JSON")


def level_from_json(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) != {"tuple"} or not isinstance(v["tuple"], list):
            raise ValueError(f"bad categorical level {v!r}")
        return tuple(level_from_json(x) for x in v["tuple"])
    if isinstance(v, list):
        raise ValueError(f"bad categorical level {v!r}")
    return v
