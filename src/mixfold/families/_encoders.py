"""The leaf families' encoders: one validated number or fixed-length vector per row, each bad
row refused with its number (what :class:`~mixfold.families.contract.LeafDistribution`'s
``domain`` names)."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from mixfold.errors import DataError, DataTypeError, MissingEntriesWarning, warn_at_caller
from mixfold.families._protocol import ArrayEncoded, Encoder
from mixfold.families._missing import MaskedRows

__all__ = ["NumericEncoder", "VectorEncoder", "VectorFamily", "vector_encoder", "bound_vector",
           "DOMAINS", "to_float_array", "SimplexEncoder", "SUM_TOLERANCE"]

#: A composition's parts may sum to 1 within this (rounded shares); they are rescaled to 1.
SUM_TOLERANCE = 1e-6


def _is_integral(x: np.ndarray) -> np.ndarray:
    return np.isfinite(x) & (np.floor(x) == x)


# domain -> (test of the valid values, what was expected)
DOMAINS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "real": (np.isfinite, "a finite number"),
    "positive": (lambda x: np.isfinite(x) & (x > 0), "a finite number > 0"),
    "nonnegative": (lambda x: np.isfinite(x) & (x >= 0), "a finite number >= 0"),
    "count": (lambda x: _is_integral(x) & (x >= 0), "an integer >= 0"),
    "positive_count": (lambda x: _is_integral(x) & (x >= 1), "an integer >= 1"),
    "binary": (lambda x: (x == 0) | (x == 1), "0 or 1 (or a bool)"),
    "unit_interval": (lambda x: (x > 0) & (x < 1), "a number in (0, 1)"),
}


def _first_non_numeric(values: Any, allow_bool: bool) -> tuple[int, Any] | None:
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)):
            if not allow_bool:
                return i, v
        elif not isinstance(v, (numbers.Real, np.floating, np.integer)):
            return i, v
    return None


def to_float_array(values: Any, *, allow_bool: bool = False, what: str = "a number") -> np.ndarray:
    """``values`` as a float64 array; a string, None or other non-number raises DataTypeError."""
    try:
        arr = values if isinstance(values, np.ndarray) else np.asarray(values)
    except (ValueError, TypeError, OverflowError):  # ragged rows: name the first non-scalar
        bad = _first_non_numeric(values, allow_bool)
        row, value = bad if bad is not None else (None, values)
        raise DataTypeError(f"expected {what}, got {value!r:.80} ({type(value).__name__})",
                            row=row) from None
    kind = arr.dtype.kind
    if kind in "iuf" or (kind == "b" and allow_bool):
        return arr.astype(np.float64, copy=False)
    if arr.ndim > 1:
        return _reject_ndim(arr)
    source = values if not isinstance(values, np.ndarray) and arr.ndim == 1 else arr.reshape(-1)
    bad = _first_non_numeric(source, allow_bool)
    if bad is None:  # an object array of numbers (Python ints may be too large for a float)
        try:
            return arr.astype(np.float64)
        except OverflowError:
            row = next(i for i, v in enumerate(arr.reshape(-1)) if abs(v) > 1e308)
            raise DataError(f"expected {what}, got a number too large for float64",
                            row=row) from None
    row, value = bad
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, str):  # a text column (a CSV read one bad cell): name that cell
        row, value = _first_non_number_text(source, row, value)
    raise DataTypeError(f"expected {what}, got {value!r} ({type(value).__name__})", row=row)


def _first_non_number_text(values: Any, row: int, value: str) -> tuple[int, Any]:
    """The first of ``values`` from ``row`` on that is not a number nor text of one."""
    for i in range(row, len(values)):
        v = values[i]
        if not isinstance(v, str):
            if not isinstance(v, (numbers.Real, np.floating, np.integer)):
                return i, v
            continue
        try:
            float(v)
        except ValueError:
            return i, v
    return row, value


def _reject_ndim(arr: np.ndarray) -> np.ndarray:
    raise DataTypeError(f"expected one scalar per row, got an array of shape {arr.shape}")


class NumericEncoder(Encoder):
    """Encodes one scalar per row into a float64 array, checking the family's domain.

    >>> NumericEncoder("count").encode([0, 3, 2]).values
    array([0., 3., 2.])
    >>> NumericEncoder("count").encode([1, 2.5])
    Traceback (most recent call last):
    ...
    mixfold.errors.DataError: row 1: expected an integer >= 0, got 2.5
    """

    def __init__(self, domain: str, upper: float | None = None):
        if domain not in DOMAINS:
            raise ValueError(f"domain must be one of {sorted(DOMAINS)}, got {domain!r}")
        self.domain = domain
        self.upper = upper

    def encode(self, values: Any) -> ArrayEncoded:
        test, expected = DOMAINS[self.domain]
        x = to_float_array(values, allow_bool=self.domain == "binary", what=expected)
        if x.ndim != 1:
            raise DataTypeError(f"expected one scalar per row, got an array of shape {x.shape}")
        with np.errstate(invalid="ignore"):
            ok = test(x)
            if self.upper is not None:
                ok &= x <= self.upper
                expected = f"{expected} and <= {self.upper:g}"
        if not ok.all():
            row = int(np.flatnonzero(~ok)[0])
            raise DataError(f"expected {expected}, got {_raw(values, row, x)!r}", row=row)
        return ArrayEncoded(np.ascontiguousarray(x))

    def __repr__(self) -> str:
        upper = "" if self.upper is None else f", upper={self.upper!r}"
        return f"NumericEncoder({self.domain!r}{upper})"


def _raw(values: Any, row: int, fallback: np.ndarray) -> Any:
    try:
        v = values[row]
    except Exception:  # noqa: BLE001 - only used to quote the value in a message
        v = fallback[row]
    return v.item() if isinstance(v, np.generic) else v


class VectorEncoder(Encoder):
    """Encodes a fixed-length vector of finite floats per row into an array (n_rows, dim).

    With ``missing=True`` an entry may also be NaN (missing at random): the rows are encoded
    as :class:`~mixfold.families._missing.MaskedRows`, and rows with every entry missing are
    counted in a :class:`~mixfold.MissingEntriesWarning`.

    >>> VectorEncoder(2, missing=True).encode([[1.0, float("nan")], [2.0, 3.0]])
    MaskedRows(shape=(2, 2))
    """

    def __init__(self, dim: int, missing: bool = False):
        self.dim = int(dim)
        self.missing = bool(missing)

    def encode(self, values: Any) -> ArrayEncoded:
        if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
            x = values.astype(np.float64, copy=False)
        elif len(values) == 0:
            x = np.zeros((0, self.dim))
        else:
            rows = list(values)  # (an object column of arrays -- pandas', Arrow's -- stacks)
            for i, r in enumerate(rows):
                if _ndim(r) != 1 or len(r) != self.dim:
                    raise DataTypeError(f"expected a vector of length {self.dim}, got "
                                        f"{_describe(r)}", row=i)
            try:
                x = np.asarray(rows)
            except (TypeError, ValueError):
                x = np.asarray(rows, dtype=object)
            if x.dtype.kind not in "iuf":  # strings, None, bools: name the first one
                for i, r in enumerate(rows):
                    bad = _first_non_numeric(r, allow_bool=False)
                    if bad is not None:
                        raise DataTypeError(f"expected a number, got {bad[1]!r}",
                                            row=i, path=(bad[0],)) from None
            x = x.astype(np.float64)
        if x.ndim == 1 and self.dim == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise DataTypeError(f"expected rows of length {self.dim}, got an array of shape "
                                f"{x.shape}")
        finite = np.isfinite(x)
        if self.missing:
            finite |= np.isnan(x)
        if not finite.all():
            row, col = map(int, np.argwhere(~finite)[0])
            expected = "a finite number or NaN (missing)" if self.missing else "a finite number"
            hint = "" if self.missing or not np.isnan(x[row, col]) else \
                " (NaN is a missing entry only with missing=True: on the estimator, and on the " \
                "starting model when one is given)"
            raise DataError(f"expected {expected}, got {float(x[row, col])!r}{hint}", row=row,
                            path=(col,))
        if not self.missing:
            return ArrayEncoded(np.ascontiguousarray(x))
        empty = int(np.isnan(x).all(axis=1).sum()) if x.shape[1] else 0
        if empty:
            warn_at_caller(f"{empty} of {x.shape[0]} rows have every entry of the vector "
                           f"missing: they add nothing to its statistics", MissingEntriesWarning)
        return MaskedRows(np.ascontiguousarray(x))

    def merge(self, other: Encoder) -> VectorEncoder:
        if isinstance(other, _VectorEncoder):  # a shard that had no rows to learn from
            return self
        return super().merge(other)

    def __repr__(self) -> str:
        return f"VectorEncoder({self.dim}{', missing=True' if self.missing else ''})"


class _VectorEncoder(VectorEncoder):
    """A :class:`VectorEncoder` whose length is not known yet: ``fit`` learns it from the first row.

    What a vector estimator made with ``dim=None`` hands out; the fitted encoder is a plain
    ``VectorEncoder`` (as ``CategoricalEncoder().fit`` fixes the levels).

    >>> _VectorEncoder().fit([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    VectorEncoder(3)
    """

    def __init__(self, missing: bool = False) -> None:
        self.dim = None
        self.missing = bool(missing)

    def fit(self, values: Any) -> VectorEncoder:
        if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
            if values.ndim == 1:
                return VectorEncoder(1, self.missing)
            if values.ndim == 2 and values.shape[1] > 0:
                return VectorEncoder(values.shape[1], self.missing)
            raise DataTypeError(f"expected rows of vectors, got an array of shape {values.shape}")
        rows = iter(values)
        try:
            first = next(rows)
        except StopIteration:  # nothing to learn here; merging with other shards' fits does
            return self
        if _ndim(first) != 1 or len(first) == 0:
            raise DataTypeError(f"expected a non-empty vector, got {_describe(first)}", row=0)
        return VectorEncoder(len(first), self.missing)

    def encode(self, values: Any) -> ArrayEncoded:
        raise ValueError("this VectorEncoder has no length yet: call fit(values) first")

    def merge(self, other: Encoder) -> VectorEncoder:
        if isinstance(other, VectorEncoder):
            return other
        return super().merge(other)

    def __repr__(self) -> str:
        return f"VectorEncoder(None{', missing=True' if self.missing else ''})"


def vector_encoder(dim: int | None, missing: bool) -> VectorEncoder:
    """A vector family's encoder: of length ``dim``, or learning it from the first row."""
    return _VectorEncoder(missing) if dim is None else VectorEncoder(dim, missing)


def bound_vector(estimator: Any, encoder: Encoder) -> tuple[int, bool]:
    """(length, whether rows may miss entries) of a vector estimator (its ``dim`` and
    ``missing``) bound to a fitted ``encoder``; one clear error for any other encoder. Rows
    encoded for a start made with ``missing=True`` may miss entries: so may the statistics."""
    dim = getattr(encoder, "dim", None)
    if not isinstance(encoder, VectorEncoder) or dim is None or estimator.dim not in (None, dim):
        raise ValueError(f"{type(estimator).__name__}(dim={estimator.dim}) needs a fitted "
                         f"VectorEncoder of that length, got {encoder!r}")
    return dim, estimator.missing or encoder.missing


def _ndim(r: Any) -> int:
    """Dimensions of one row's value; -1 for a ragged nest of lists NumPy cannot shape."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return int(np.ndim(r))
    except (ValueError, TypeError):
        return -1


def _describe(r: Any) -> str:
    dims = _ndim(r)
    if dims == 0:
        return f"a scalar {r!r:.80}"
    if dims < 0:
        return f"a ragged value {r!r:.80}"
    return f"a value of shape {np.shape(r)}"


class VectorFamily:
    """What a distribution over vectors of ``dim`` entries (``missing``: entries may be NaN)
    derives: its encoder, and its estimator (the registered ``estimator_class``) of the same
    shape."""

    dim: int
    missing: bool
    estimator_class: type

    def encoder(self) -> Encoder:
        return VectorEncoder(self.dim, self.missing)

    def estimator(self, **options: Any) -> Any:
        options.setdefault("dim", self.dim)
        options.setdefault("missing", self.missing)
        return type(self).estimator_class(**options)


class SimplexEncoder(Encoder):
    """Encodes compositions: vectors of ``dim`` parts > 0 summing to 1 within
    :data:`SUM_TOLERANCE` (rescaled to sum to 1), as an array (n_rows, dim); ``dim=None``
    learns the length from the first row.

    >>> SimplexEncoder(3).encode([[0.2, 0.3, 0.5]]).values.tolist()
    [[0.2, 0.3, 0.5]]
    >>> SimplexEncoder(2).encode([[0.5, 0.5], [0.5, 0.6]])
    Traceback (most recent call last):
    ...
    mixfold.errors.DataError: row 1: expected parts that sum to 1, got a sum of 1.1
    """

    def __init__(self, dim: int | None = None):
        self.dim = None if dim is None else int(dim)

    def fit(self, values: Any) -> SimplexEncoder:
        if self.dim is not None:
            return self
        fitted = _VectorEncoder().fit(values)
        return self if fitted.dim is None else SimplexEncoder(fitted.dim)

    def merge(self, other: Encoder) -> SimplexEncoder:
        if isinstance(other, SimplexEncoder) and (self.dim is None or other.dim is None):
            return self if other.dim is None else other
        return super().merge(other)

    def encode(self, values: Any) -> ArrayEncoded:
        if self.dim is None:
            raise ValueError("this SimplexEncoder has no length yet: call fit(values) first")
        x = VectorEncoder(self.dim).encode(values).values
        if self.dim < 2:
            raise DataError(f"a composition needs at least 2 parts, got {self.dim}")
        bad = x <= 0
        if bad.any():
            row, col = map(int, np.argwhere(bad)[0])
            raise DataError(f"expected a part > 0, got {float(x[row, col])!r}", row=row,
                            path=(col,))
        total = x.sum(axis=1)
        off = np.abs(total - 1.0) > SUM_TOLERANCE
        if off.any():
            row = int(np.flatnonzero(off)[0])
            raise DataError(f"expected parts that sum to 1, got a sum of {total[row]:.6g}",
                            row=row)
        return ArrayEncoded(np.ascontiguousarray(x / total[:, None]))

    def __repr__(self) -> str:
        return f"SimplexEncoder({self.dim!r})"
