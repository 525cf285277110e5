"""Which models a band can run, and running a distribution's log-density in a band.

A family runs the reduced bands and ``dd`` when its distribution is a
:class:`~mixfold.capabilities.RunsInBands` (its E-step written against a
:class:`~mixfold.precision.emulation.BandOps` namespace);
a mixture runs them when every component does. Anything else is refused up front with the
family and the band named -- never silently computed in float64.

>>> from mixfold import GaussianDistribution, PoissonDistribution, MixtureDistribution
>>> require_band(MixtureDistribution([GaussianDistribution(0, 1)] * 2, [0.5, 0.5]), "float16")
>>> require_band(PoissonDistribution(2.0), "bfloat16")
Traceback (most recent call last):
...
mixfold.precision.support.BandSupportError: precision 'bfloat16' cannot run the Poisson family: \
its E-step runs in float32/float64 only (bands fp8, bfloat16, float16 and dd run Gaussian, \
DiagonalGaussian, MultivariateGaussian and mixtures of them; torch precisions also fold (fit) \
mixtures of families linear in their features)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.capabilities import RunsInBands
from mixfold.decomposition import decomposition_for
from mixfold.precision.bands import is_native
from mixfold.precision.bands import Precision
from mixfold.precision.engines import band_ops

__all__ = ["BandSupportError", "require_band", "unsupported_families",
           "log_density_in_band"]


class BandSupportError(ValueError):
    """A model (or family) asked to run in a band it has no E-step for."""


def unsupported_families(model: Any) -> list[str]:
    """Family names in ``model``'s tree without a band E-step (empty: the whole tree has one)."""
    if not isinstance(model, RunsInBands):
        return [getattr(model, "family_name", "") or type(model).__name__]
    dc = decomposition_for(model)
    out: list[str] = []
    for child in (*dc.units, *dc.shared_children):
        out.extend(n for n in unsupported_families(child) if n not in out)
    return out


def require_band(model: Any, precision: Precision) -> None:
    """Raise :class:`BandSupportError` unless every node of ``model`` can run ``precision``.

    Native CPU precisions (float32, float64) are run by every family's own path and pass.
    """
    if is_native(precision):
        return
    missing = unsupported_families(model)
    if missing:
        which = "family" if len(missing) == 1 else "families"
        raise BandSupportError(
            f"precision {precision!r} cannot run the {', '.join(missing)} {which}: its E-step "
            f"runs in float32/float64 only (bands fp8, bfloat16, float16 and dd run Gaussian, "
            f"DiagonalGaussian, MultivariateGaussian and mixtures of them; torch precisions also "
            f"fold (fit) mixtures of families linear in their features)")


def log_density_in_band(dist: Any, enc: Any, precision: Precision) -> np.ndarray:
    """``dist``'s per-row log-density computed in ``precision``, as float64 (n_rows,)."""
    require_band(dist, precision)
    ops = band_ops(precision)
    return ops.to_float64(dist.band_log_density(enc, ops))
