"""The errors mixfold raises, each naming what was expected and where it went wrong."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["DataError", "DataTypeError", "NumericalError", "ModelFileError", "EMDecreaseWarning",
           "ParameterError", "CheckpointError", "DegenerateFitWarning", "MissingEntriesWarning",
           "BandPromotionWarning", "warn_at_caller"]


def _format_path(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part!r}]" if isinstance(part, str) else f"[{part}]"
    return out


class DataError(ValueError):
    """A value in the data that the model cannot accept.

    ``row`` is the index of the offending row in the data passed to mixfold (``None`` when the
    problem is not tied to one row, e.g. empty data) and ``path`` the route from the row to the
    field: ``("age",)`` for a record field, ``(2,)`` for a tuple position, ``("visits", 5)`` for the
    sixth item of a sequence field.

    >>> str(DataError("expected a finite float, got nan", row=3, path=("age",)))
    "row 3, field ['age']: expected a finite float, got nan"
    """

    def __init__(self, message: str, *, row: int | None = None, path: tuple = ()):
        self.message = message
        self.row = row
        self.path = tuple(path)
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.path:
            where.append(f"field {_format_path(self.path)}")
        return (", ".join(where) + ": " if where else "") + self.message

    def __str__(self) -> str:
        return self._render()

    def within(self, *, path_prefix: tuple = (), row: int | None = None) -> DataError:
        """The same error seen from an enclosing node: a longer path, the enclosing row index."""
        err = type(self)(self.message, row=self.row if row is None else row,
                         path=tuple(path_prefix) + self.path)
        return err


class DataTypeError(DataError, TypeError):
    """A value of the wrong type (a string where a number is expected, a ragged tuple row...)."""


class NumericalError(ArithmeticError, ValueError):
    """A fit produced a non-finite log-likelihood or parameter; nothing half-fitted is returned."""


class ModelFileError(ValueError):
    """A model file that is not a valid mixfold JSON model."""


class CheckpointError(ValueError):
    """A checkpoint file that cannot be resumed: malformed, or written by a different fit."""


class EMDecreaseWarning(RuntimeWarning):
    """An EM step lowered the log-likelihood by more than round-off; the step was not accepted."""


class BandPromotionWarning(RuntimeWarning):
    """A precision band drifted (the fit's log-likelihood fell beyond its resolution): the fit
    promoted it to a more accurate band and repeated the step."""


class MissingEntriesWarning(RuntimeWarning):
    """Rows of a vector with missing entries (``missing=True``) miss every entry: they add
    nothing to the vector's statistics (a mixture still counts them by its weights)."""


class ParameterError(ValueError):
    """Parameters a distribution cannot take (a negative variance, weights that do not sum to 1)."""


class DegenerateFitWarning(RuntimeWarning):
    """A fit reached a degenerate state that a floor resolved (a mixture component that lost all
    its rows, a variance that collapsed onto one value); the fit goes on and records it in
    ``FitResult.warnings``."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """Warn at the first frame outside mixfold: the user's line, however deep the warning is
    found (a fixed ``stacklevel`` points into mixfold from some paths)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
