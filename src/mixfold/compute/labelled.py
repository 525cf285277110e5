"""Encoded rows with known or soft labels riding along: the prior of the top latent node's
label for every row (a mixture's component) or every item of a sequence (a hidden Markov
model's state).

The prior is a float64 array of shape (n_units, K): a row of ones for a unit whose label is
unknown, a one-hot row for a known label, given probabilities for a soft one. The latent node
multiplies its posterior by it before normalising, so a known label holds through EM. It is
sliced, taken and concatenated with the rows, so every backend's shards carry their own.

>>> import numpy as np
>>> from mixfold.compute.encoded import ArrayEncoded
>>> enc = Labelled(ArrayEncoded(np.arange(4.0)), np.array([[1, 1], [1, 0], [0, 1], [1, 1.]]))
>>> part = enc.rows(1, 3)
>>> part.inner.values.tolist(), part.prior.tolist(), part.start
([1.0, 2.0], [[1.0, 0.0], [0.0, 1.0]], 1)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from mixfold.compute.encoded import Encoded

__all__ = ["Labelled"]


class Labelled(Encoded):
    """``inner`` encoded rows and ``prior`` (n_units, K), one row per row of ``inner`` or,
    with ``per_item``, per item of its sequences (``inner.offsets``)."""

    __slots__ = ("inner", "prior", "per_item", "n_rows", "start")

    def __init__(self, inner: Encoded, prior: np.ndarray, per_item: bool = False):
        self.inner, self.prior, self.per_item = inner, prior, per_item
        self.n_rows, self.start = inner.n_rows, inner.start

    def log_prior(self) -> np.ndarray:
        """The log of the prior (-inf where a label rules a component or state out)."""
        with np.errstate(divide="ignore"):
            return np.log(self.prior)

    def _units(self, begin: int, end: int) -> slice:
        if not self.per_item:
            return slice(begin, end)
        offsets = self.inner.offsets  # type: ignore[attr-defined]
        return slice(int(offsets[begin]), int(offsets[min(end, self.n_rows)]))

    def rows(self, begin: int, end: int) -> Labelled:
        return Labelled(self.inner.rows(begin, end), self.prior[self._units(begin, end)],
                        self.per_item)

    def take(self, indices: np.ndarray) -> Labelled:
        indices = np.asarray(indices, dtype=np.int64)
        units = indices
        if self.per_item:
            offsets = self.inner.offsets  # type: ignore[attr-defined]
            counts = np.diff(offsets)[indices]
            starts = np.repeat(offsets[indices] - np.cumsum(counts) + counts, counts)
            units = np.arange(int(counts.sum()), dtype=np.int64) + starts
        return Labelled(self.inner.take(indices), self.prior[units], self.per_item)

    @property
    def nbytes(self) -> int:
        return self.inner.nbytes + int(self.prior.nbytes)

    def node_sizes(self) -> list[int]:
        return self.inner.node_sizes()

    def with_starts(self, starts: Iterator[int]) -> Labelled:
        return Labelled(self.inner.with_starts(starts), self.prior, self.per_item)

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> Labelled:
        inner = [p.inner for p in parts]  # type: ignore[attr-defined]
        return Labelled(type(inner[0]).concat(inner),
                        np.concatenate([p.prior for p in parts]),  # type: ignore[attr-defined]
                        parts[0].per_item)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"Labelled({self.inner!r}, prior of shape {self.prior.shape})"
