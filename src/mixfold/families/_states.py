"""What a model of hidden states over a sequence's items shares, whatever its chain (a hidden
Markov model's geometric stays, a semi-Markov model's durations): one emission per state
scoring every item, one column per state (the model-parallel executor cuts those columns), and
the per-sequence conveniences over the chain's own ``seq_posterior`` and ``seq_viterbi``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.families._hooks import ChildScore, ScoreChildren
from mixfold.families._protocol import Encoded
from mixfold.families.mixture import _slots, child_encoding, shared_encoder, unit_log_densities
from mixfold.families.sequence import SequenceEncoded, SequenceEncoder

__all__ = ["EmissionStates", "emissions_encoder", "bind_emissions"]


class EmissionStates:
    """A mixin over ``emissions`` (one distribution per state), ``_stack`` and ``_slots`` (how
    they score together: :func:`~mixfold.families.mixture.unit_log_densities`) and ``_encoder``
    (the items' encoder)."""

    emissions: tuple[Any, ...]
    _stack: Any
    _slots: Any
    _encoder: Any

    @property
    def num_states(self) -> int:
        return len(self.emissions)

    def emission_columns(self, items: Encoded, precision: str, start: int, stop: int,
                         scores: np.ndarray) -> None:
        """Write log e_s(x) of states ``[start, stop)`` into their columns of ``scores``
        (n_items, S); any range gets the bits the full set gets."""
        unit_log_densities(self.emissions, self._stack, self._slots, items, precision, start,
                           stop, scores)

    def unit_rows(self, enc: SequenceEncoded) -> Encoded:
        return enc.items

    def score_columns(self, rows: Encoded, precision: str, start: int, stop: int,
                      out: np.ndarray, score: ScoreChildren | None = None) -> None:
        """:meth:`emission_columns`; with ``score``, the emissions' log-densities come from
        it."""
        if score is None:
            self.emission_columns(rows, precision, start, stop, out)
            return
        units = [ChildScore(k, self.emissions[k], child_encoding(rows, k, self._slots))
                 for k in range(start, stop)]
        for k, ll in zip(range(start, stop), score(units, precision)):
            out[:, k] = ll

    def posterior(self, x: Any) -> np.ndarray:
        """Posterior state probabilities of each step of one sequence, array of shape (T, S)."""
        return self.seq_posterior(self.encoder().encode([x]))  # type: ignore[attr-defined]

    def viterbi(self, x: Any) -> np.ndarray:
        """The most probable state path of one sequence, int64 array of shape (T,)."""
        return self.seq_viterbi(self.encoder().encode([x]))  # type: ignore[attr-defined]

    def encoder(self) -> SequenceEncoder:
        return SequenceEncoder(self._encoder)


def emissions_encoder(emissions: Any) -> SequenceEncoder:
    """The encoder of sequences whose items every state's emission scores."""
    return SequenceEncoder(shared_encoder([e.encoder() for e in emissions]))


def bind_emissions(emissions: Any, encoder: Any, model: str) -> list[Any]:
    """The emission estimators bound to a fitted sequence ``encoder`` (each to its share of a
    shared item encoding); one clear error for any other encoder, naming the ``model``."""
    if not isinstance(encoder, SequenceEncoder) or encoder.length is not None:
        raise ValueError(f"a {model} estimator needs a SequenceEncoder without a length "
                         f"encoder, got {encoder!r}")
    slots = _slots(encoder.item)
    return [e.bind(encoder.item if slots is None else encoder.item.child_encoder(k))
            for k, e in enumerate(emissions)]
