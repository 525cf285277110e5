"""Options checked once, up front, against a declared table (as scikit-learn's
``_parameter_constraints``): every estimator, ``fit``, ``OnlineEM`` and the scikit-learn wrappers
declare ``option -> Rule`` and call :func:`check_options`; the error says what was expected and
what was given.

>>> rules = {"pseudo_count": number(low=0), "k": integer(low=1), "mode": one_of("a", "b")}
>>> check_options("Example", rules, {"pseudo_count": 0.5, "k": 3, "mode": "a"})
>>> check_options("Example", rules, {"pseudo_count": float("nan")})
Traceback (most recent call last):
...
ValueError: Example: pseudo_count must be a finite number >= 0, got nan
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Rule", "check_options", "integer", "number", "one_of", "flag", "none_or",
           "instance_of", "path_like", "rule"]


@dataclass(frozen=True)
class Rule:
    """What one option accepts: ``test(value)`` and the words for it ("an integer >= 1")."""

    test: Callable[[Any], bool]
    expected: str

    def accepts(self, value: Any) -> bool:
        try:
            return bool(self.test(value))
        except (TypeError, ValueError, OverflowError):  # a value of another kind entirely
            return False


def rule(test: Callable[[Any], bool], expected: str) -> Rule:
    """A rule of its own (a test no constructor below states)."""
    return Rule(test, expected)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def integer(low: int | None = None, high: int | None = None) -> Rule:
    """An integer (Python or NumPy, not a bool) in ``[low, high]``.

    >>> integer(1).accepts(3), integer(1).accepts(0), integer(1).accepts(2.0), integer(1).expected
    (True, False, False, 'an integer >= 1')
    """
    words = "an integer" + _bounds(low, high, False, False)
    return Rule(lambda v: _is_int(v) and (low is None or v >= low) and
                (high is None or v <= high), words)


def number(low: float | None = None, high: float | None = None, *, above: bool = False,
           below: bool = False, finite: bool = True) -> Rule:
    """A real number (not a bool; NaN never) from ``low`` (``above``: excluded) to ``high``
    (``below``: excluded); ``finite=False`` lets infinity through.

    >>> number(0, above=True).expected, number(0.5, 1, above=True).expected
    ('a finite number > 0', 'a finite number in (0.5, 1]')
    >>> number(0).accepts(float("inf")), number(0, finite=False).accepts(float("inf"))
    (False, True)
    """
    words = ("a finite number" if finite else "a number") + _bounds(low, high, above, below)

    def test(v: Any) -> bool:
        if not _is_real(v) or math.isnan(v) or (finite and math.isinf(v)):
            return False
        if low is not None and (v <= low if above else v < low):
            return False
        return high is None or (v < high if below else v <= high)

    return Rule(test, words)


def _bounds(low: Any, high: Any, above: bool, below: bool) -> str:
    if low is not None and high is not None:
        return f" in {'(' if above else '['}{low}, {high}{')' if below else ']'}"
    if low is not None:
        return f" {'>' if above else '>='} {low}"
    if high is not None:
        return f" {'<' if below else '<='} {high}"
    return ""


def one_of(*choices: Any) -> Rule:
    """One of ``choices`` (compared with ``==``, never a bool for a number)."""
    return Rule(lambda v: any(type(v) is type(c) and v == c for c in choices),
                f"one of {list(choices)}")


def flag() -> Rule:
    """True or False (a NumPy bool too)."""
    return Rule(lambda v: isinstance(v, (bool, np.bool_)), "True or False")


def none_or(inner: Rule) -> Rule:
    """None, or what ``inner`` accepts."""
    return Rule(lambda v: v is None or inner.accepts(v), f"None or {inner.expected}")


def instance_of(*types: type, what: str) -> Rule:
    """An instance of one of ``types``, ``what`` naming them."""
    return Rule(lambda v: isinstance(v, types), what)


def path_like() -> Rule:
    """A file path (a string or an ``os.PathLike``)."""
    return Rule(lambda v: isinstance(v, (str, os.PathLike)), "a file path")


def check_options(owner: str | None, rules: Mapping[str, Rule], values: Mapping[str, Any],
                  error: type[Exception] = ValueError) -> None:
    """Raise ``error`` for the first of ``values`` its rule refuses, naming ``owner`` (when
    given), the option, what is expected and what was given."""
    for name, value in values.items():
        found = rules[name]
        if not found.accepts(value):
            prefix = f"{owner}: " if owner else ""
            raise error(f"{prefix}{name} must be {found.expected}, got {value!r:.80}")
