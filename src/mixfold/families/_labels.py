"""Partial and soft labels (``optimize(labels=...)``): what a user knows of the top latent
node's label, as the prior that rides with the encoded rows (:mod:`mixfold.compute.labelled`).

For a mixture, one entry per row: a component index, ``-1`` for unknown, or a row of K prior
probabilities. For a hidden Markov model, one entry per sequence: per item a state index or
``-1`` (or a row of S probabilities). A known label holds through EM; a soft one multiplies the
row's posterior (pomegranate's ``priors=``). With every row labelled the fit is the supervised
maximum-likelihood estimate.

>>> label_prior([1, -1, 0], 2, 3, "row").tolist()
[[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.compute.encoded import Encoded
from mixfold.compute.labelled import Labelled
from mixfold.errors import DataError
from mixfold.families._protocol import Estimator
from mixfold.families.hidden_markov import HiddenMarkovEstimator
from mixfold.families.mixture import MixtureEstimator
from mixfold.families.sequence import SequenceEncoded

__all__ = ["with_labels", "label_prior"]


def with_labels(enc: Encoded, estimator: Estimator, labels: Any) -> Labelled:
    """``enc`` with the prior ``labels`` give the top node's latent label riding along."""
    if isinstance(estimator, MixtureEstimator):
        k = estimator.num_components
        return Labelled(enc, label_prior(_as_array(labels, "labels"), k, enc.n_rows, "row"))
    if isinstance(estimator, HiddenMarkovEstimator) and isinstance(enc, SequenceEncoded):
        return Labelled(enc, _state_prior(labels, estimator.num_states, enc), per_item=True)
    raise ValueError(f"labels= label the components of a MixtureEstimator or the states of a "
                     f"HiddenMarkovEstimator; the model being fitted is a "
                     f"{type(estimator).__name__}")


def _as_array(values: Any, what: str) -> np.ndarray:
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as err:
        raise DataError(f"{what} must be an array of component indices or of probabilities: "
                        f"{err}") from None


def label_prior(labels: np.ndarray | list, k: int, n: int, unit: str,
                row: int | None = None) -> np.ndarray:
    """The prior of shape (n, k) of ``labels``: indices in [-1, k) (shape (n,)), or
    probabilities (shape (n, k)); ``unit`` names an entry in errors ("row", "item")."""
    arr = np.asarray(labels)
    where = "" if row is None else f" of sequence {row}"
    if arr.ndim == 1 and arr.shape[0] == n and (arr.dtype.kind in "iu" or n == 0):
        bad = np.flatnonzero((arr < -1) | (arr >= k))
        if bad.size:
            raise DataError(f"label of {unit} {int(bad[0])}{where} must be -1 (unknown) or a "
                            f"component in [0, {k}), got {arr[bad[0]].item()!r}", row=row)
        prior = np.ones((n, k))
        known = np.flatnonzero(arr >= 0)
        prior[known] = 0.0
        prior[known, arr[known]] = 1.0
        return prior
    if arr.ndim == 2 and arr.shape == (n, k) and arr.dtype.kind in "iuf":
        prior = arr.astype(np.float64)
        bad = np.flatnonzero(~np.isfinite(prior).all(axis=1) | (prior < 0).any(axis=1)
                             | (prior.sum(axis=1) <= 0))
        if bad.size:
            raise DataError(f"label probabilities of {unit} {int(bad[0])}{where} must be finite, "
                            f">= 0 and not all 0, got {prior[bad[0]].tolist()}", row=row)
        return prior
    raise DataError(f"labels{where} must have shape ({n},) (integer labels, -1 unknown) or "
                    f"({n}, {k}) (probabilities), got shape {arr.shape} of {arr.dtype}", row=row)


def _state_prior(labels: Any, s: int, enc: SequenceEncoded) -> np.ndarray:
    counts = enc.counts()
    if len(labels) != enc.n_rows:
        raise DataError(f"labels must hold one entry per sequence ({enc.n_rows}), got "
                        f"{len(labels)}")
    priors = [label_prior(np.asarray(seq), s, int(c), "item", row=i)
              for i, (seq, c) in enumerate(zip(labels, counts))]
    return np.concatenate(priors) if priors else np.ones((0, s))
