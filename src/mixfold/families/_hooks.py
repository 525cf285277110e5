"""How a combinator's children are scored and folded: the hooks an executor drives.

A combinator's ``seq_update`` (and ``seq_log_density``) is the serial order of its children's
work plus its own arithmetic around it. Two shapes cover every combinator:

- :class:`FoldsChildren` / :class:`ScoresChildren` (Composite, Record, Sequence, Optional):
  each child is folded (scored) once, and the node combines the children's log-densities
  centrally. The node hands the list of its children's folds to a callback; the serial
  callbacks :func:`fold_serially` / :func:`score_serially` run them in order, a model-parallel
  executor runs them over workers or recurses into one, and the node's own arithmetic is the
  same either way.
- :class:`ScoresColumns` / :class:`FoldsColumns` (Mixture, HiddenMarkov): the units score the
  rows into columns of one (rows x K) matrix (any range of columns with the bits of the whole),
  the node turns the matrix into posteriors centrally, and each unit adds the rows with its
  column of posteriors (again any range of units apart).
- :class:`ScoresRanges` / :class:`FoldsRanges` (LDA): the units (topics) are not distributions
  of their own; the node's E-step alternates steps over ranges of units with central steps
  (a topic model's normalisation over topics per word), and hands each range step to a
  :data:`RunRanges` callback: :func:`whole_range` runs it once over every unit, an executor runs
  it on each worker's range.

>>> import numpy as np
>>> from mixfold import GaussianDistribution, CompositeDistribution
>>> d = CompositeDistribution([GaussianDistribution(0, 1), GaussianDistribution(1, 1)])
>>> enc = d.encoder().encode([(0.0, 1.0), (1.0, 2.0)])
>>> from mixfold.precision import FLOAT64
>>> bool(np.array_equal(d.score_children(enc, FLOAT64, score_serially),
...                     d.seq_log_density(enc)))
True
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.families._protocol import Accumulator, Distribution, Encoded
from mixfold.precision.bands import Precision


class ChildFold(NamedTuple):
    """One child's part of a fold: ``acc.seq_update(rows, weights, dist, precision)``."""

    index: int
    acc: Accumulator
    rows: Encoded
    weights: np.ndarray
    dist: Distribution


class ChildScore(NamedTuple):
    """One child's part of a score: ``dist.seq_log_density(rows, precision)``."""

    index: int
    dist: Distribution
    rows: Encoded


#: ``run(task) -> [task(start, stop) for each range of units]``, in the ranges' order
RunRanges = Callable[[Callable[[int, int], Any]], list[Any]]
#: ``fold(children, precision) -> [log-densities or None per child]``, in the children's order
FoldChildren = Callable[[Sequence[ChildFold], str], list["np.ndarray | None"]]
#: ``score(children, precision) -> [log-densities per child]``, in the children's order
ScoreChildren = Callable[[Sequence[ChildScore], str], list[np.ndarray]]


def fold_serially(children: Sequence[ChildFold], precision: Precision) -> list[np.ndarray | None]:
    """The serial :data:`FoldChildren`: every child's ``seq_update``, in order."""
    return [c.acc.seq_update(c.rows, c.weights, c.dist, precision) for c in children]


def score_serially(children: Sequence[ChildScore], precision: Precision) -> list[np.ndarray]:
    """The serial :data:`ScoreChildren`: every child's ``seq_log_density``, in order."""
    return [c.dist.seq_log_density(c.rows, precision) for c in children]


class WholeRange:
    """The serial :data:`RunRanges`: one task over units ``[0, num_units)``. A node may tell it
    from an executor's ranges and take a path over every unit at once (LDA solves each document
    in one compiled call)."""

    __slots__ = ("num_units",)

    def __init__(self, num_units: int):
        self.num_units = num_units

    def __call__(self, task: Callable[[int, int], Any]) -> list[Any]:
        return [task(0, self.num_units)]


def whole_range(num_units: int) -> RunRanges:
    """The serial :data:`RunRanges` (a :class:`WholeRange`)."""
    return WholeRange(num_units)


class FoldsChildren(ABC):
    """An accumulator whose ``seq_update`` folds each child once and combines their results."""

    @abstractmethod
    def fold_children(self, enc: Encoded, weights: np.ndarray, model: Any, precision: Precision,
                      fold: FoldChildren) -> np.ndarray | None:
        """``seq_update``, the children's folds run by ``fold`` (``seq_update`` passes
        :func:`fold_serially`)."""


class ScoresChildren(ABC):
    """A distribution whose ``seq_log_density`` scores each child once and combines them."""

    @abstractmethod
    def score_children(self, enc: Encoded, precision: Precision,
                       score: ScoreChildren) -> np.ndarray:
        """``seq_log_density``, the children's scores run by ``score``."""


class ScoresColumns(ABC):
    """A distribution whose units score its rows into the columns of one (rows x K) matrix."""

    @abstractmethod
    def unit_rows(self, enc: Encoded) -> Encoded:
        """The rows the units read (the node's rows, or a sequence's flat items)."""

    @abstractmethod
    def score_columns(self, rows: Encoded, precision: Precision, start: int, stop: int,
                      out: np.ndarray, score: ScoreChildren | None = None) -> None:
        """Write the columns of units ``[start, stop)`` into ``out`` (rows.n_rows, K) with the
        bits the whole range gets; with ``score``, the units' log-densities come from it."""

    @abstractmethod
    def log_density_from_columns(self, enc: Encoded, scores: np.ndarray) -> np.ndarray:
        """``seq_log_density`` from the gathered columns (the serial calls, the serial
        blocks)."""


class FoldsColumns(ABC):
    """An accumulator that turns a :class:`ScoresColumns` matrix into posteriors centrally and
    adds the rows to each unit with its column."""

    @abstractmethod
    def posteriors_from_columns(self, enc: Encoded, weights: np.ndarray, model: Any,
                                scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Add the node's own statistics; return (row-weighted posteriors (rows, K),
        per-row log-density), as ``seq_update`` computes them. ``scores`` is the fold's own:
        it may be turned into the posteriors in place and returned."""

    @abstractmethod
    def add_columns(self, rows: Encoded, resp: np.ndarray, model: Any, precision: Precision,
                    start: int, stop: int, fold: FoldChildren | None = None) -> None:
        """Add ``rows`` to units ``[start, stop)`` with posteriors ``resp``; any range gets the
        bits the whole gets; with ``fold``, the units' folds run through it."""


class ScoresRanges(ABC):
    """A distribution whose ``seq_log_density`` works on ranges of its units between central
    steps (a topic model's topics)."""

    @abstractmethod
    def score_ranges(self, enc: Encoded, precision: Precision, run: RunRanges) -> np.ndarray:
        """``seq_log_density``, each step over units run by ``run`` (``seq_log_density`` passes
        :func:`whole_range`)."""


class FoldsRanges(ABC):
    """An accumulator whose ``seq_update`` works on ranges of the model's units between
    central steps, each range adding to its own units' statistics."""

    @abstractmethod
    def fold_ranges(self, enc: Encoded, weights: np.ndarray, model: Any, precision: Precision,
                    run: RunRanges) -> np.ndarray | None:
        """``seq_update``, each step over units run by ``run``."""
