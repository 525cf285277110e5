"""A hidden semi-Markov state's duration law: any family over integers, read as the law of the
durations 1..D (a Categorical's levels are the durations; a count family's values are the
steps after the first, d - 1), truncated to that range and renormalised; the values its family
is fitted to and its estimator bound to them.

>>> from mixfold import CategoricalEstimator, PoissonEstimator
>>> [duration_values(est, 3).tolist() for est in (CategoricalEstimator(), PoissonEstimator())]
[[1, 2, 3], [0, 1, 2]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mixfold.errors import ParameterError
from mixfold.families._protocol import Distribution, Encoded, Estimator
from mixfold.families.categorical import CategoricalDistribution, CategoricalEstimator

__all__ = ["DEFAULT_MAX_DURATION", "LARGEST_MAX_DURATION", "duration_log_probabilities",
           "duration_values", "encoded_durations", "bound_durations"]

#: the default longest duration: long enough for most segmentations, O(T * S * 64) per fold
DEFAULT_MAX_DURATION = 64
#: the largest accepted: tables of S x D are held whole, and a model file must not ask for more
LARGEST_MAX_DURATION = 1_000_000


def duration_log_probabilities(law: Distribution, max_duration: int) -> np.ndarray:
    """log P(duration = d) for d = 1..``max_duration``, array of shape (max_duration,): a
    Categorical's probability of the level d, any other law's of d - 1, truncated to the range
    and renormalised.

    >>> from mixfold import PoissonDistribution
    >>> p = np.exp(duration_log_probabilities(PoissonDistribution(1.0), 4))
    >>> p.round(3).tolist(), round(float(p.sum()), 12)
    ([0.375, 0.375, 0.188, 0.062], 1.0)
    """
    if isinstance(law, CategoricalDistribution):  # levels outside 1..D have no say
        table = dict(zip(law.levels, law.probs))
        with np.errstate(divide="ignore"):
            logs = np.log([float(table.get(d, 0.0)) for d in range(1, max_duration + 1)])
    else:
        values = np.arange(max_duration)
        logs = law.seq_log_density(law.encoder().fit(values).encode(values))
    top = logs.max()
    if not np.isfinite(top):
        raise ParameterError(f"the duration law {law!r} gives no probability to 1..{max_duration}")
    return logs - (top + np.log(np.exp(logs - top).sum()))


def duration_values(est: Estimator, max_duration: int) -> np.ndarray:
    """The values ``est``'s family reads for the durations 1..D: the durations for a
    Categorical, the steps after the first (0..D-1) for a count family."""
    return np.arange(max_duration) + (1 if isinstance(est, CategoricalEstimator) else 0)


def encoded_durations(est: Estimator, max_duration: int) -> Encoded:
    """:func:`duration_values` encoded for ``est`` (what its accumulator adds, weighted by the
    expected count of each duration)."""
    values = duration_values(est, max_duration)
    return est.encoder().fit(values).encode(values)


def bound_durations(durations: Sequence[Estimator], max_duration: int) -> list[Estimator]:
    """Each duration estimator bound to the encoder of its :func:`duration_values`."""
    return [d.bind(d.encoder().fit(duration_values(d, max_duration))) for d in durations]
