"""Adding a family: a Rayleigh leaf written outside the package, fitted on its own, inside a
mixture and as a field of a record, saved and loaded back (``python -m
mixfold.examples.custom_family``; the docs' "Adding a family" page walks through this file).

A leaf family is four small classes: the distribution (parameters, log-density of a batch,
sampler, JSON), an accumulator (the weighted sufficient statistics of a batch as fixed-size
float64 arrays, which add across shards), an estimator (statistics -> parameters) and an
encoder (rows -> arrays, validated). The Rayleigh density on x >= 0 is
``x / s^2 * exp(-x^2 / (2 s^2))``; its statistics are the weights' sum and the weighted sum of
``x^2``, and the maximum-likelihood scale is ``s^2 = sum(w x^2) / (2 sum(w))``.

>>> import numpy as np
>>> rows = RayleighDistribution(2.0).sampler(0).sample(20000)
>>> fitted = mixfold.optimize(rows, RayleighEstimator(), progress=False)
>>> abs(fitted.scale - 2.0) < 0.05
True
>>> mixfold.Distribution.from_dict(fitted.to_dict()) == fitted  # registered by name
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

import mixfold
from mixfold.errors import ParameterError
from mixfold.families._encoders import NumericEncoder
from mixfold.families.contract import LeafAccumulator, LeafEstimator
from mixfold.families._protocol import Distribution, Encoded, Encoder, family
from mixfold.precision import native_dtype

__all__ = ["RayleighDistribution", "RayleighAccumulator", "RayleighEstimator", "main"]


@family("Rayleigh")  # the name its model files carry; registered when this module is imported
class RayleighDistribution(Distribution):
    """Rayleigh on x >= 0 with scale ``scale`` (``scipy.stats.rayleigh(scale=scale)``)."""

    # how accelerated EM moves each parameter: the scale by its log (mixfold.families._flat)
    parameter_coordinates = {"scale": "positive"}

    def __init__(self, scale: float):
        self.scale = float(scale)
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ParameterError(f"scale must be finite and > 0, got {scale!r}")

    def seq_log_density(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        """The log-density of every encoded row (an array of values, float64 out)."""
        dt = native_dtype(precision)
        x = enc.values.astype(dt, copy=False)
        s2 = dt.type(self.scale * self.scale)
        with np.errstate(divide="ignore"):  # x = 0 has density 0: log-density -inf
            out = np.log(x) - np.log(s2) - x * x / (dt.type(2) * s2)
        return out.astype(np.float64, copy=False)

    def encoder(self) -> Encoder:
        return NumericEncoder("nonnegative")  # one number >= 0 a row; anything else is refused

    def estimator(self, **options: Any) -> RayleighEstimator:
        return RayleighEstimator(**options)

    def _sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.rayleigh(self.scale, size=n)

    def n_parameters(self) -> int:
        return 1  # (BIC and AIC count it)

    def _params(self) -> dict[str, Any]:
        return {"scale": self.scale}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> RayleighDistribution:
        return cls(p["scale"])


class RayleighAccumulator(LeafAccumulator):
    """The statistics: the sum of the weights and the weighted sum of x^2. They are plain sums,
    so the payloads of shards add up element by element (a family whose values may be huge
    keeps its sums about a reference point instead: see ``ExponentialAccumulator``)."""

    def __init__(self, keys: str | None = None):
        super().__init__(keys)
        self.sums = np.zeros(2)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.sums]  # fixed size, whatever the number of rows

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        self.sums += (w.sum(), w @ np.square(x))


class RayleighEstimator(LeafEstimator):
    """M-step: ``scale^2 = sum(w x^2) / (2 sum(w))``; with no weight, ``Rayleigh(1)``."""

    accumulator_class = RayleighAccumulator
    distribution_class = RayleighDistribution

    def encoder(self) -> Encoder:
        return NumericEncoder("nonnegative")

    def estimate(self, nobs: float, stats: Any) -> RayleighDistribution:
        (sums,), _ = stats  # the accumulator's arrays, in the order of own_arrays
        mass, squares = sums
        if not (mass > 0 and squares > 0):
            return RayleighDistribution(1.0)
        return RayleighDistribution(float(np.sqrt(squares / (2 * mass))))


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
