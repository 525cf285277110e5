"""Adding a family: a Rayleigh leaf written outside the package, fitted on its own, inside a
mixture and as a field of a record, saved and loaded back (``python -m
mixfold.examples.custom_family``; the docs' "Adding a family" page walks through this file).

A leaf family is two short classes written against :mod:`mixfold.families.contract`: the
distribution (its parameters, the log-density of a batch, its features, a sampler) and the
estimator (its options, statistics -> parameters). The Rayleigh density on x >= 0 is
``x / s^2 * exp(-x^2 / (2 s^2))``; its statistics are the weights' sum and the weighted sum of
its one feature ``x^2``, and the maximum-likelihood scale is ``s^2 = sum(w x^2) / (2 sum(w))``.
Its log-density, ``-1/(2 s^2) x^2 - log s^2 + log x``, is linear in that feature, so declaring
the natural parameters gives its mixtures the fused E-step.

>>> import numpy as np
>>> rows = RayleighDistribution(2.0).sampler(0).sample(20000)
>>> fitted = mixfold.optimize(rows, RayleighEstimator(), progress=False)
>>> abs(fitted.scale - 2.0) < 0.05
True
>>> mixfold.Distribution.from_dict(fitted.to_dict()) == fitted  # registered by name
True
>>> from mixfold.spec import estimator_from_spec
>>> estimator_from_spec({"mixture": "rayleigh", "k": 2})  # and by kind in specs
MixtureEstimator([RayleighEstimator(), RayleighEstimator()])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import mixfold
from mixfold.errors import ParameterError
from mixfold.families.contract import LeafEstimator, LinearForm, LinearLeafDistribution, family

__all__ = ["RayleighDistribution", "RayleighStatistics", "RayleighEstimator", "main"]


class RayleighStatistics(NamedTuple):
    """What the fit sums over the rows: sums, so that the payloads of shards add up."""

    weight: float  # the sum of the weights
    squares: float  # the weighted sum of the feature x^2


@family("Rayleigh")  # its name in model files, its kind ("rayleigh") in specs: the one place
class RayleighDistribution(LinearLeafDistribution):
    """Rayleigh on x >= 0 with scale ``scale`` (``scipy.stats.rayleigh(scale=scale)``)."""

    domain = "nonnegative"  # one number >= 0 a row; anything else is refused, naming its row
    # its parameters, in its constructor's order, and how accelerated EM moves each: by its log
    parameter_coordinates = {"scale": "positive"}
    Statistics = RayleighStatistics

    def __init__(self, scale: float):
        self.scale = float(scale)
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ParameterError(f"scale must be finite and > 0, got {scale!r}")

    def log_densities(self, x: np.ndarray, dt: np.dtype) -> np.ndarray:
        """The log-density of every value, computed in ``dt`` (float64, or float32)."""
        x = x.astype(dt, copy=False)
        s2 = dt.type(self.scale * self.scale)
        with np.errstate(divide="ignore"):  # x = 0 has density 0: log-density -inf
            return np.log(x) - np.log(s2) - x * x / (dt.type(2) * s2)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.rayleigh(self.scale, size=n)

    @staticmethod
    def features(x: np.ndarray) -> tuple[np.ndarray, ...]:
        """Its statistics are the weights' sum and the weighted sum of these."""
        return (np.square(x),)

    def natural(self) -> LinearForm:
        """``log p(x) = -1/(2 s^2) x^2 - log s^2 + log x``: linear in its feature."""
        s2 = self.scale * self.scale
        return LinearForm((-0.5 / s2,), -np.log(s2))

    @staticmethod
    def base(x: np.ndarray) -> np.ndarray:
        """``log x``, the same for every component."""
        with np.errstate(divide="ignore"):
            return np.log(x)


class RayleighEstimator(LeafEstimator):
    """M-step: ``scale^2 = sum(w x^2) / (2 sum(w))``; with no weight, ``Rayleigh(1)``."""

    distribution_class = RayleighDistribution

    def from_statistics(self, stats: RayleighStatistics) -> RayleighDistribution:
        if not (stats.weight > 0 and stats.squares > 0):
            return RayleighDistribution(1.0)
        return RayleighDistribution(float(np.sqrt(stats.squares / (2 * stats.weight))))


def main() -> dict[str, float]:
    """Fit the family alone, in a mixture, and as a record's field; compare with scipy."""
    from scipy import stats  # (an example's dependency, not the family's)

    rng = np.random.default_rng(0)
    alone = RayleighDistribution(3.0).sampler(1).sample(50000)
    fitted = mixfold.optimize(alone, RayleighEstimator(), progress=False)
    reference = stats.rayleigh.fit(alone, floc=0)[1]
    two = np.concatenate([rng.rayleigh(1.0, 30000), rng.rayleigh(8.0, 20000)])
    mixture = mixfold.optimize(two, mixfold.MixtureEstimator([RayleighEstimator()] * 2),
                               progress=False, seed=0)
    records = [(float(v), "big" if v > 4 else "small") for v in two]
    record = mixfold.optimize(records, mixfold.CompositeEstimator(
        [RayleighEstimator(), mixfold.CategoricalEstimator()]), progress=False)
    out = {"scale": fitted.scale, "scipy_scale": float(reference),
           "mixture_scales": sorted(c.scale for c in mixture.components),
           "record_scale": record.factors[0].scale}
    print(out)
    return out


if __name__ == "__main__":
    main()
