"""A sequence family's optional law of its rows' lengths (``length``: any family over integers
>= 0, or ``None``: the law of the items given the length): drawing the lengths of sampled rows
from it, or fixing them (``sampler(seed, sample_length=L)``), its expected value (the planner's
items per row), and the encoder and bound estimator of the lengths.

>>> from mixfold import CategoricalDistribution, PoissonEstimator
>>> expected_length(CategoricalDistribution({0: 0.5, 4: 0.5}))
2.0
>>> length_encoder(None) is None, length_encoder(PoissonEstimator())
(True, NumericEncoder('count'))
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from mixfold.families._protocol import Distribution, Encoder, Estimator, Sampler
from mixfold.families.categorical import CategoricalDistribution

__all__ = ["LengthLaw", "drawn_lengths", "expected_length", "length_encoder", "bound_length"]


class LengthLaw:
    """A mixin of a sequence distribution with an optional ``length`` law: its samples' lengths
    are drawn from it (or fixed by ``sample_length``); the family writes ``_rows``, the rows of
    given lengths."""

    length: Distribution | None

    @abstractmethod
    def _rows(self, counts: np.ndarray, rng: np.random.Generator) -> list[list]:
        """Rows of ``counts[i]`` items each (int64 (n,)), drawn with ``rng``."""

    def sampler(self, seed: int | np.random.Generator | None = None, *,
                sample_length: int | None = None) -> Sampler:
        """A seeded sampler; ``sample_length`` fixes every row's length (overriding the law)."""
        if sample_length is None:
            return Sampler(self, seed)  # type: ignore[arg-type]
        if not isinstance(sample_length, (int, np.integer)) or sample_length < 0:
            raise ValueError(f"sample_length must be an integer >= 0, got {sample_length!r}")
        fixed = CategoricalDistribution([1.0], levels=[int(sample_length)])
        return Sampler(_OfLengths(self, fixed), seed)  # type: ignore[arg-type]

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        if self.length is None:
            raise ValueError(f"this {type(self).__name__} has no length law to draw lengths "
                             f"from: give it one (e.g. a CategoricalDistribution over lengths) "
                             f"or use sampler(seed, sample_length=L)")
        return self._rows(drawn_lengths(self.length, n, rng), rng)


class _OfLengths:
    """What a :class:`~mixfold.families._protocol.Sampler` draws from for
    ``sampler(seed, sample_length=L)``: the family's rows, their lengths drawn from ``law``."""

    def __init__(self, dist: LengthLaw, law: Distribution):
        self.dist = dist
        self.law = law

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        return self.dist._rows(drawn_lengths(self.law, n, rng), rng)


def drawn_lengths(law: Distribution, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` lengths drawn from ``law``, int64 (n,); a law that draws anything but integers
    >= 0 raises ``ValueError`` naming it."""
    drawn = np.asarray(law._sample(n, rng))
    counts = drawn.astype(np.int64) if drawn.dtype.kind in "iuf" else None
    if counts is None or drawn.shape != (n,) or not (counts == drawn).all() or \
            (counts < 0).any():
        raise ValueError(f"the length law {law!r} must draw integers >= 0, got "
                         f"{drawn[:5].tolist()}")
    return counts


def expected_length(law: Distribution | None) -> float:
    """The mean number of items per row under ``law`` (1 without one): exact for a Categorical
    over numbers, else the mean of 1024 seeded draws."""
    if law is None:
        return 1.0
    if isinstance(law, CategoricalDistribution) and \
            all(isinstance(v, (int, float)) for v in law.levels):
        return float(law.probs @ np.asarray(law.levels, dtype=np.float64))
    return float(np.mean(np.asarray(law._sample(1024, np.random.default_rng(0)),
                                    dtype=np.float64)))


def length_encoder(length: Distribution | Estimator | None) -> Encoder | None:
    """The encoder of the lengths for the law (or its estimator) ``length``; ``None`` without."""
    return None if length is None else length.encoder()


def bound_length(length: Estimator | None, encoder: Encoder | None) -> Estimator | None:
    """The length estimator bound to the fitted lengths' ``encoder``; ``ValueError`` when one
    of the two is missing."""
    if (length is None) != (encoder is None):
        raise ValueError("the encoder and the estimator disagree on whether the sequence "
                         "length is modelled")
    return None if length is None else length.bind(encoder)
