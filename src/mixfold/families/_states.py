"""What a model of hidden states over a sequence's items shares, whatever its chain (a hidden
Markov model's geometric stays, a semi-Markov model's durations): one emission per state
scoring every item -- the states' emissions are its units (:mod:`mixfold.families.units`), one
column per state (the model-parallel executor cuts those columns) --, and the per-sequence
conveniences over the chain's own ``seq_posterior`` and ``seq_viterbi``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.families._hooks import ScoreChildren
from mixfold.families._protocol import Encoded
from mixfold.families.sequence import SequenceEncoded, SequenceEncoder
from mixfold.families.units import Units, bind_units, shared_encoder
from mixfold.precision.bands import Precision

__all__ = ["EmissionStates", "emissions_encoder", "bind_emissions"]


class EmissionStates:
    """A mixin over ``emissions`` (one distribution per state) and ``units``, the emissions as
    :class:`~mixfold.families.units.Units` (how they read and score the items)."""

    emissions: tuple[Any, ...]
    units: Units

    @property
    def num_states(self) -> int:
        return len(self.emissions)

    def emission_columns(self, items: Encoded, precision: Precision, start: int, stop: int,
                         scores: np.ndarray) -> None:
        """Write log e_s(x) of states ``[start, stop)`` into their columns of ``scores``
        (n_items, S); any range gets the bits the full set gets."""
        self.units.score_range(items, precision, start, stop, scores)

    def unit_rows(self, enc: SequenceEncoded) -> Encoded:
        return enc.items

    def score_columns(self, rows: Encoded, precision: Precision, start: int, stop: int,
                      out: np.ndarray, score: ScoreChildren | None = None) -> None:
        """:meth:`emission_columns`; with ``score``, the emissions' log-densities come from
        it."""
        self.units.score_columns(rows, precision, start, stop, out, score)

    def posterior(self, x: Any) -> np.ndarray:
        """Posterior state probabilities of each step of one sequence, array of shape (T, S)."""
        return self.seq_posterior(self.encoder().encode([x]))  # type: ignore[attr-defined]

    def viterbi(self, x: Any) -> np.ndarray:
        """The most probable state path of one sequence, int64 array of shape (T,)."""
        return self.seq_viterbi(self.encoder().encode([x]))  # type: ignore[attr-defined]

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(self.units.encoder)

    def draw_items(self, state_of: np.ndarray, rng: np.random.Generator) -> list[Any]:
        """One item for each entry of ``state_of`` (its state), drawn state by state: rows of
        Python values, as a user would write them."""
        items = self.units.draw(state_of, rng)
        return items.tolist() if isinstance(items, np.ndarray) else items


def emissions_encoder(emissions: Any) -> SequenceEncoder:
    """The encoder of sequences whose items every state's emission scores."""
    return SequenceEncoder(shared_encoder([e.encoder() for e in emissions]))


def bind_emissions(emissions: Any, encoder: Any, model: str) -> list[Any]:
    """The emission estimators bound to a fitted sequence ``encoder`` (each to its share of a
    shared item encoding); one clear error for any other encoder, naming the ``model``."""
    if not isinstance(encoder, SequenceEncoder) or encoder.length is not None:
        raise ValueError(f"a {model} estimator needs a SequenceEncoder without a length "
                         f"encoder, got {encoder!r}")
    return bind_units(emissions, encoder.item)
