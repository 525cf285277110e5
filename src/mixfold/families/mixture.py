"""Finite mixture of any component family: sum_k w_k p_k(x).

The components are the mixture's units, competing for each row
(:mod:`mixfold.families.competing_units`: scored, normalised into posteriors in every
precision, the posteriors handed down along the fold's E-step plan); its seeded start is
:func:`mixfold.compute.seeding.seeded_start` (k-means for point families).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.seeding import seeded_start
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import ParameterError
from mixfold.families._dirichlet_prior import CONCENTRATION
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, family)
from mixfold.families._shared_covariance import estimate_children
from mixfold.families.competing_units import (EMPTY_MASS, CompetingUnits, CompetingUnitsFold,
                                              UnitsChunkStatistics, unit_weights)
from mixfold.families.units import (UnitAccumulators, Units, bind_units, child_rows,
                                    encoding_slots, shared_encoder)
from mixfold.options import number

__all__ = ["MixtureDistribution", "MixtureEstimator", "MixtureAccumulator"]


@family("Mixture")
class MixtureDistribution(CompetingUnits):
    """Mixture of ``components`` with mixing ``weights`` (summing to one).

    >>> from mixfold import GaussianDistribution
    >>> m = MixtureDistribution([GaussianDistribution(-2, 1), GaussianDistribution(2, 1)],
    ...                         [0.3, 0.7])
    >>> round(m.log_density(0.0), 6)
    -2.918939
    >>> m.posterior(2.0).round(4).tolist()
    [0.0001, 0.9999]
    """

    parameter_coordinates = {"weights": "simplex", "components": "parts"}

    def __init__(self, components: Sequence[Distribution], weights: Sequence[float]):
        self.components = tuple(components)
        w = np.asarray(weights, dtype=np.float64)
        if len(self.components) == 0:
            raise ParameterError("a mixture needs at least one component")
        if w.shape != (len(self.components),):
            raise ParameterError(f"need one weight per component, got {w.size} weights for "
                                 f"{len(self.components)} components")
        least = w.min()  # (a NaN weight fails it, an infinite one the sum)
        if not (least >= 0 and abs(w.sum() - 1.0) < 1e-9):
            raise ParameterError(f"weights must be >= 0 and sum to 1, got {w.tolist()}")
        self.weights = w  # kept as given (sums to 1 within 1e-9): exact JSON round trips
        # log 0 = -inf for a weight of 0, written there (no divide-by-zero state to set)
        self.log_weights = np.log(w) if least > 0 else np.log(
            w, out=np.full(w.shape, -np.inf), where=w > 0)
        self.units = Units(self.components, row_normalised=True)

    @property
    def num_components(self) -> int:
        return len(self.components)

    def predict(self, rows: Any) -> np.ndarray:
        """The most probable component of each row (raw or encoded), int array of shape
        (n_rows,)."""
        return self.seq_posterior(rows).argmax(axis=1)

    def posterior(self, x: Any) -> np.ndarray:
        """Posterior component probabilities of one value, array of shape (K,)."""
        return self.seq_posterior(self.encoder().encode([x]))[0]

    def estimator(self, **options: Any) -> MixtureEstimator:
        return MixtureEstimator([c.estimator() for c in self.components], **options)

    def _sample(self, n: int, rng: np.random.Generator) -> Any:
        return self.units.draw(rng.choice(self.num_components, size=n, p=self.weights), rng)

    def n_parameters(self) -> int:
        return len(self.weights) - 1 + sum(d.n_parameters() for d in self.parts())

    def _params(self) -> dict[str, Any]:
        return {"weights": self.weights.tolist(),
                "components": [c.to_dict() for c in self.components]}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> MixtureDistribution:
        return cls([Distribution.from_dict(c) for c in p["components"]], p["weights"])

    def decomposition(self) -> Decomposition:
        """Components are the units; their scores meet in one log-sum-exp per row, normalised
        centrally into responsibilities (the mixture's own work, about K per row). Components
        of one stackable family are scored together (fused)."""
        k = self.num_components
        return Decomposition(DecompAxis.COMPONENT, ReductionOp.LOGSUMEXP_RESPONSIBILITY,
                             units=self.components,
                             child_roles=tuple(f"component_{i}" for i in range(k)),
                             fused=self.units.stack is not None,
                             row_work=float(k),
                             param_bytes=self.weights.nbytes + self.log_weights.nbytes)


class MixtureAccumulator(CompetingUnitsFold):
    """Statistics: the posterior mass of each component, and each component's accumulator;
    the E-step is :class:`~mixfold.families.competing_units.CompetingUnitsFold`'s."""

    def __init__(self, components: Sequence[Accumulator], slots: tuple[int, ...] | None,
                 keys: str | None = None):
        self.components = list(components)
        self.keys = keys
        self.counts = np.zeros(len(self.components))
        self.units = UnitAccumulators(self.components, slots)

    def own_arrays(self) -> list[np.ndarray]:
        return [self.counts]


class MixtureEstimator(Estimator, UnitsChunkStatistics):
    """Estimator of a mixture of ``components`` (one estimator per component).

    ``pseudo_count`` is added to every component's posterior mass before the weights are
    normalised (a symmetric Dirichlet prior), so a component that loses its rows keeps a
    positive weight. ``weights_prior`` (a number or one per component): a Dirichlet
    concentration instead, the weights its maximum a posteriori ``max(mass + prior - 1, 0)``
    normalised (:mod:`mixfold.families._dirichlet_prior`).

    A component whose posterior mass falls below :attr:`empty_mass` of the total has lost its
    rows: it is kept, with the weight its pseudo-count gives it (zero without one, so it no longer
    takes part in the fit) and the parameters its estimator makes from what little mass it has
    (its family's default with none at all); a :class:`~mixfold.DegenerateFitWarning` names it
    and the fit records it in ``FitResult.warnings``.

    >>> import mixfold
    >>> from mixfold import GaussianDistribution, GaussianEstimator
    >>> truth = MixtureDistribution([GaussianDistribution(-3, 1), GaussianDistribution(3, 1)],
    ...                             [0.4, 0.6])
    >>> x = truth.sampler(0).sample(5000)
    >>> fit = mixfold.optimize(x, MixtureEstimator([GaussianEstimator()] * 2), seed=1,
    ...                        progress=False)
    >>> sorted(round(c.mu) for c in fit.components)
    [-3, 3]
    """

    #: A component with less than this fraction of the total posterior mass is empty.
    empty_mass = EMPTY_MASS

    option_rules = {"pseudo_count": number(0), "weights_prior": CONCENTRATION}

    def __init__(self, components: Sequence[Estimator], pseudo_count: float = 0.0,
                 keys: str | None = None, *, weights_prior: Any = None):
        self.components = tuple(components)
        if not self.components:
            raise ValueError("a mixture needs at least one component estimator")
        self.check_options(pseudo_count=pseudo_count, weights_prior=weights_prior)
        self.pseudo_count = float(pseudo_count)
        self.keys = keys
        self.weights_prior = weights_prior

    @property
    def num_components(self) -> int:
        return len(self.components)

    def parts(self) -> tuple[Estimator, ...]:
        return self.components

    def encoder(self) -> Encoder:
        return shared_encoder([c.encoder() for c in self.components])

    def bind(self, encoder: Encoder) -> MixtureEstimator:
        return MixtureEstimator(bind_units(self.components, encoder), self.pseudo_count,
                                self.keys, weights_prior=self.weights_prior)

    @functools.cached_property
    def slots(self) -> tuple[int, ...] | None:
        """Which shared encoding each component reads (``None``: one encoding for all): found
        once, as the component estimators (and so their encoders) do not change."""
        return encoding_slots(self.encoder())

    def accumulator_factory(self) -> AccumulatorFactory:
        return AccumulatorFactory(self._make)

    def _make(self) -> MixtureAccumulator:
        return MixtureAccumulator([c.accumulator_factory().make() for c in self.components],
                                  self.slots, self.keys)

    def estimate(self, nobs: float, stats: Any) -> MixtureDistribution:
        (counts,), comp_stats = stats
        weights = unit_weights(counts, self.weights_prior, self.pseudo_count, self.empty_mass)
        comps = estimate_children(self.components, counts, comp_stats)
        return MixtureDistribution(comps, weights)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> MixtureDistribution:
        """Seed the components from the initialisation sample
        (:func:`~mixfold.compute.seeding.seeded_start`): k-means clusters for components with
        points (Gaussian families, Gamma on log x), else a few seeded random rows each and a
        few EM iterations on the sample."""
        return seeded_start(self, sample, weights, rng)

    def guess_from(self, sample: Encoded, weights: np.ndarray, resp: np.ndarray,
                   rng: InitRandom) -> MixtureDistribution:
        """Components guessed from the sample rows weighted by the posteriors ``resp``
        (n_rows, K) plus a 5% background of every other row, so that no component starts
        blind to a value the sample contains."""
        mass = resp.T @ weights
        comps = []
        for j, est in enumerate(self.components):
            background = 0.05 * mass[j] / max(float(weights.sum()), 1e-300)
            w = weights * (resp[:, j] + background)
            comps.append(est.initial_guess(child_rows(sample, j, self.slots), w, rng.child(j)))
        mass = mass + 0.01 * weights.sum() / len(mass) + 1e-12
        return MixtureDistribution(comps, mass / mass.sum())

    def __repr__(self) -> str:
        return f"MixtureEstimator({list(self.components)!r})"
