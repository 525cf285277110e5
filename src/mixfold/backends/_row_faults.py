"""A bad row met where a piece of the data is encoded (a Spark task's Arrow batch, a Dask
partition, a Ray block) comes back to the driver as a value, and the driver raises it once with
the row's index in the whole data: not a worker's traceback, not the row's place in its own
piece, and no engine retrying a task whose data will not change.

>>> fault = caught(lambda: (_ for _ in ()).throw(DataError("expected a number", row=2)))
>>> try:
...     raise_at(fault, rows_before=100)
... except DataError as err:
...     print(err)
row 102: expected a number
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

from mixfold.errors import DataError

__all__ = ["RowFault", "caught", "raise_at"]


class RowFault(NamedTuple):
    """The :class:`~mixfold.errors.DataError` one piece's rows raised, its row counted within
    the piece."""

    error: DataError


def caught(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or the :class:`RowFault` of the data error it raised."""
    try:
        return fn(*args)
    except DataError as err:
        return RowFault(err)


def raise_at(fault: RowFault, rows_before: int) -> NoReturn:
    """Raise ``fault``'s error with its row counted from the start of the data, given the rows
    of every piece before its own."""
    err = fault.error
    raise (err if err.row is None else err.within(row=rows_before + err.row)) from None
