"""What a model of hidden states over a sequence's items shares, whatever its chain (a hidden
Markov model's geometric stays, a semi-Markov model's durations): one emission per state
scoring every item -- the states' emissions are its units (:mod:`mixfold.families.units`), one
column per state (the model-parallel executor cuts those columns) --, the per-sequence
conveniences over the chain's own ``seq_posterior`` and ``seq_viterbi``, sampling sequences of
a fixed length (:class:`FixedLength`), and the estimator's emissions
(:class:`EmissionEstimators`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.compute.labelled import Labelled
from mixfold.families._protocol import Encoded, Estimator, Sampler
from mixfold.families.sequence import SequenceEncoded, SequenceEncoder
from mixfold.families.units import UnitColumns, Units, UnitsFold, bind_units, shared_encoder
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["EmissionStates", "StatesFold", "EmissionEstimators", "FixedLength",
           "emissions_encoder", "bind_emissions"]


class EmissionStates(UnitColumns):
    """A mixin over ``emissions`` (one distribution per state) and ``units``, the emissions as
    :class:`~mixfold.families.units.Units` (how they read and score the items; their columns
    carry no offsets)."""

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

    def emission_log_densities(self, items: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        """log e_s(x) of every flat item under every state, array of shape (n_items, S).

        The per-state step of the E-step (one column per state, independent of the others);
        the recursion over time only reads this matrix.
        """
        return self.units.scores(items, precision)

    def labelled_scores(self, enc: SequenceEncoded | Labelled,
                        precision: Precision) -> tuple[SequenceEncoded, np.ndarray]:
        """(the sequences, :meth:`emission_log_densities` of their items): with state labels
        riding along, each item's log prior added to its scores."""
        if not isinstance(enc, Labelled):
            return enc, self.emission_log_densities(enc.items, precision)
        scores = self.emission_log_densities(enc.inner.items, precision)
        scores += enc.log_prior()
        return enc.inner, scores

    def unit_rows(self, enc: SequenceEncoded) -> Encoded:
        return enc.items

    def posterior(self, x: Any) -> np.ndarray:
        """Posterior state probabilities of each step of one sequence, array of shape (T, S)."""
        return self.seq_posterior(self.encoder().encode([x]))  # type: ignore[attr-defined]

    def viterbi(self, x: Any) -> np.ndarray:
        """The most probable state path of one sequence, int64 array of shape (T,)."""
        return self.seq_viterbi(self.encoder().encode([x]))  # type: ignore[attr-defined]

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(self.units.encoder)

    def sampler(self, seed: int | np.random.Generator | None = None, *,
                sample_length: int | None = None) -> Sampler:
        """A seeded sampler; ``sample_length`` runs the chain for exactly that many steps.

        Without a terminal law the sequence length is not modelled, so ``sample_length`` is
        required; with one, ``sample_length`` overrides it (the chain then moves by
        ``transitions`` at every step and never stops early).
        """
        if sample_length is None:
            return Sampler(self, seed)  # type: ignore[arg-type]
        if not isinstance(sample_length, (int, np.integer)) or sample_length < 0:
            raise ValueError(f"sample_length must be an integer >= 0, got {sample_length!r}")
        return Sampler(FixedLength(self, int(sample_length)), seed)  # type: ignore[arg-type]

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        raise ValueError(f"a {type(self).__name__} does not model the length: use "
                         f"sampler(seed, sample_length=L)")

    def draw_items(self, state_of: np.ndarray, rng: np.random.Generator) -> list[Any]:
        """One item for each entry of ``state_of`` (its state), drawn state by state: rows of
        Python values, as a user would write them."""
        items = self.units.draw(state_of, rng)
        return items.tolist() if isinstance(items, np.ndarray) else items


class StatesFold(UnitsFold):
    """A mixin of a hidden-state model's accumulator: its E-step scores the states' emissions
    (with the labels riding along), runs its chain's ``posteriors_from_columns`` over them and
    hands the posteriors down to the emissions' accumulators."""

    def seq_update(self, enc: SequenceEncoded | Labelled, weights: np.ndarray, model: Any,
                   precision: Precision = FLOAT64) -> np.ndarray:
        enc, scores = model.labelled_scores(enc, precision)
        resp, ll = self.posteriors_from_columns(enc, weights, model, scores)
        self.units.add(enc.items, resp, model.units, precision)
        return ll


class FixedLength:
    """What a :class:`~mixfold.families._protocol.Sampler` draws from for
    ``sampler(seed, sample_length=L)``: the model's ``_draw`` of rows of ``length`` items."""

    def __init__(self, dist: Any, length: int):
        self.dist = dist
        self.length = length

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        return self.dist._draw(n, rng, self.length)


class EmissionEstimators:
    """A mixin over an estimator's ``emissions`` (one estimator per state): its parts, and the
    encoder of sequences whose items they all score."""

    emissions: tuple[Estimator, ...]

    @property
    def num_states(self) -> int:
        return len(self.emissions)

    def parts(self) -> tuple[Estimator, ...]:
        return self.emissions

    def encoder(self) -> SequenceEncoder:
        return emissions_encoder(self.emissions)


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
