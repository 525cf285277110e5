"""A mixture of K composites (or records) at once: every factor's family scores, updates or
fuses its K components in one call, and the combinator adds the factors up. These are the
capabilities Composite and Record declare by inheriting :class:`StackedFactorScoring` (the
distribution) and :class:`StackedFactorFolds` (the accumulator); a mixture asks for them by
``isinstance``, as of any family.

>>> import numpy as np
>>> from mixfold import CompositeDistribution, GaussianDistribution, PoissonDistribution
>>> ks = [CompositeDistribution([GaussianDistribution(m, 1), PoissonDistribution(1.0 + m)])
...       for m in (0.0, 2.0)]
>>> enc = ks[0].encoder().encode([(0.5, 1), (2.5, 3)])
>>> bool(np.allclose(type(ks[0]).stack_log_density(ks, enc),
...                  np.column_stack([k.seq_log_density(enc) for k in ks])))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import FusedFold, LinearInFeatures, StackedScoring, StackedUpdate
from mixfold.compute.band_engines import fused_linear_fold
from mixfold.compute.row_blocks import run_each
from mixfold.families._protocol import Encoded
from mixfold.families.units import stack_columns, stackable
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["StackedFactorScoring", "StackedFactorFolds"]


class StackedFactorScoring(StackedScoring):
    """K components with ``factors`` scored at once: each factor's family stacks its K."""

    #: ``stack_log_density`` takes ``units=(start, stop)`` (passed on to every factor's stack)
    stack_units = True

    @classmethod
    def can_stack(cls, components: Sequence[Any]) -> bool:
        """Whether every factor can be scored for all components at once (same stackable family)."""
        if any(len(c.factors) != len(components[0].factors) for c in components):
            return False
        return all(stackable([c.factors[i] for c in components]) is not None
                   for i in range(len(components[0].factors)))

    @classmethod
    def stack_log_density(cls, components: Sequence[Any], enc: Encoded,
                          precision: Precision = FLOAT64,
                          units: tuple[int, int] | None = None) -> np.ndarray:
        """Sum over factors of each factor family's stacked scores, (n_rows, K) in F order
        (only the columns ``units=(start, stop)`` when given, with the same bits)."""
        out = None
        for i, part in enumerate(enc.children):
            factors = [c.factors[i] for c in components]
            scores = stack_columns(type(factors[0]), factors, part, precision, units)
            if out is None:
                out = np.array(scores, dtype=np.float64, order="F")
            else:
                out += scores
        return out


class StackedFactorFolds(StackedUpdate, FusedFold):
    """K accumulators with ``factors`` updated at once, or the whole E-step fused when every
    factor is linear in its features."""

    @staticmethod
    def stack_fold(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                   enc: Encoded, weights: np.ndarray,
                   precision: Precision = FLOAT64) -> tuple[np.ndarray, np.ndarray] | None:
        """The whole E-step of a mixture of K records (or composites) in one fused pass when
        every field's family is linear in its features (Gaussian, Poisson, categorical,
        diagonal Gaussian): :func:`~mixfold.compute.linear.linear_fold` on the fields'
        features side by side. ``None`` when a field is not (or its parameters fall outside
        the form): the mixture then scores, normalises and adds in three steps.

        Returns (posterior mass per component, per-row log-density)."""
        terms = []
        for i, part in enumerate(enc.children):
            field_accs = [a.factors[i] for a in accs]
            family = type(field_accs[0])
            if not issubclass(family, LinearInFeatures) or \
                    any(type(a) is not family for a in field_accs):
                return None
            field_terms = family.linear_terms(field_accs, [c.factors[i] for c in components], part)
            if field_terms is None:
                return None
            terms.append(field_terms)
        return fused_linear_fold(terms, log_weights, enc, weights, precision)

    @staticmethod
    def stack_update(accs: Sequence[Any], enc: Encoded, resp: np.ndarray) -> None:
        """Add rows to K factor accumulators, each factor through its family's stacked update;
        the factors' updates run concurrently (each writes only its own accumulators)."""
        def update(i: int, part: Encoded) -> Callable[[], None]:
            factor_accs = [a.factors[i] for a in accs]
            return lambda: type(factor_accs[0]).stack_update(factor_accs, part, resp)

        run_each([update(i, part) for i, part in enumerate(enc.children)])
