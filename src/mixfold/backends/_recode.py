"""Rows encoded with their own batch's vocabularies, mapped onto the merged vocabularies.

An engine that encodes each batch where it lives, in the same pass that learns the
vocabularies, cannot know the final levels while it encodes: each batch encodes with the
levels it holds (:func:`batch_encoder`), the fitted encoders merge into one, and every batch
whose levels differ gets a :func:`code_map` — an integer array per categorical field — that
:func:`recoded` applies to its codes (one ``take``). This holds for encoders whose only learnt
state is a categorical's levels or a vector's length (:func:`learns_in_pass`); the others are
encoded with a vocabulary known before the pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.compute.encoded import ArrayEncoded
from mixfold.families._encoders import SimplexEncoder, VectorEncoder
from mixfold.families._levels import CategoricalEncoder
from mixfold.families._optional_encoding import OptionalEncoded, OptionalEncoder
from mixfold.families._protocol import Encoded, Encoder
from mixfold.families._record_encoding import CompositeEncoder, FactorEncoded, RecordEncoder

__all__ = ["learns_in_pass", "batch_encoder", "code_map", "recoded", "Unmappable"]


class Unmappable(Exception):
    """Two fitted encoders differ in more than a categorical's levels."""


def _children(encoder: Encoder) -> list[Encoder] | None:
    """The child encoders of a container encoder (None for a leaf)."""
    if type(encoder) is RecordEncoder:
        return list(encoder.encoders.values())
    if type(encoder) is CompositeEncoder:
        return list(encoder.encoders)
    if type(encoder) is OptionalEncoder:
        return [encoder.inner]
    return None


def learns_in_pass(encoder: Encoder, optional: bool = False) -> bool:
    """Whether every batch can encode with its own fit and be mapped onto the merge: each
    leaf learns nothing, is a categorical, or learns a vector's length from any row (not
    under an optional field: a batch with every value missing would have none).

    >>> learns_in_pass(RecordEncoder({"a": CategoricalEncoder(), "b": VectorEncoder(2)}))
    True
    >>> learns_in_pass(OptionalEncoder(SimplexEncoder()))  # its length comes from a value
    False
    """
    children = _children(encoder)
    if children is not None:
        return all(learns_in_pass(c, optional or type(encoder) is OptionalEncoder)
                   for c in children)
    kind = type(encoder)
    if kind is CategoricalEncoder or kind is VectorEncoder or kind.fit is Encoder.fit:
        return True
    if isinstance(encoder, (VectorEncoder, SimplexEncoder)):
        return not optional or encoder.dim is not None
    return False


def batch_encoder(fitted: Encoder) -> Encoder:
    """``fitted`` able to encode its own batch: a categorical that saw no value (every row
    missing) gets no levels instead of failing for want of them.

    >>> batch_encoder(OptionalEncoder(CategoricalEncoder())).inner.levels
    ()
    """
    if type(fitted) is CategoricalEncoder:
        return CategoricalEncoder(()) if fitted.levels is None else fitted
    if type(fitted) is RecordEncoder:
        return RecordEncoder({n: batch_encoder(e) for n, e in fitted.encoders.items()})
    if type(fitted) is CompositeEncoder:
        return CompositeEncoder([batch_encoder(e) for e in fitted.encoders])
    if type(fitted) is OptionalEncoder:
        return OptionalEncoder(batch_encoder(fitted.inner), fitted.missing)
    return fitted


def code_map(own: Encoder, merged: Encoder, indices: dict[int, dict] | None = None) -> Any:
    """What turns codes of ``own``'s levels into codes of ``merged``'s: None where they are
    the same, an integer array for a categorical, a list of children's maps for a container;
    :class:`Unmappable` where the encoders differ otherwise. ``indices`` keeps each merged
    categorical's level index between calls (many batches map onto one merge).

    >>> code_map(CategoricalEncoder(["b"]), CategoricalEncoder(["a", "b"]))
    array([1])
    """
    if own == merged:
        return None
    indices = {} if indices is None else indices
    if type(own) is CategoricalEncoder and type(merged) is CategoricalEncoder:
        index = indices.get(id(merged))
        if index is None:
            index = indices[id(merged)] = {v: i for i, v in enumerate(merged.levels)}
        return np.array([index[v] for v in own.levels or ()], dtype=np.int64)
    mine, theirs = _children(own), _children(merged)
    if mine is None or theirs is None or type(own) is not type(merged) \
            or len(mine) != len(theirs):
        raise Unmappable(f"{own!r} and {merged!r}")
    return [code_map(a, b, indices) for a, b in zip(mine, theirs)]


def recoded(enc: Encoded, mapping: Any) -> Encoded:
    """``enc`` with its codes mapped by a :func:`code_map` (itself where the map is None).

    >>> recoded(ArrayEncoded(np.array([0, 0])), np.array([1])).values
    array([1, 1])
    """
    if mapping is None:
        return enc
    if isinstance(enc, FactorEncoded):
        return FactorEncoded([recoded(c, m) for c, m in zip(enc.children, mapping)],
                             enc.n_rows, enc.start)
    if isinstance(enc, OptionalEncoded):
        return OptionalEncoded(enc.present, recoded(enc.inner, mapping[0]), enc.before,
                               enc.start)
    return ArrayEncoded(mapping[enc.values], enc.start)
