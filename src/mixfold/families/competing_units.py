"""Units that compete for each row -- a mixture's components: every row's K scores
``log w_k + log p_k(x)`` normalised into posteriors (responsibilities) that sum to one, in
every precision a fold runs, and the fold's E-step that hands them down.

- :class:`CompetingUnits` (a distribution): the scores, the log-density (their log-sum-exp per
  row) and the posteriors in float64 (the stack block by block of rows on all cores:
  :class:`~mixfold.families.units.Units`), in a band's own operations (emulated bands, ``dd``),
  and with labels riding along (each row's posterior times its labels' prior,
  :class:`~mixfold.compute.labelled.Labelled`).
- :class:`CompetingUnitsFold` (an accumulator): the E-step along the path
  :func:`~mixfold.compute.estep_plan.plan_estep` planned for the fold -- the units' fused pass,
  the three steps (score, normalise, add), every step in the band, or double-double -- adding
  each unit's posterior mass to ``counts``.
- :func:`unit_weights`: the units' weights from their posterior masses (the Dirichlet prior's
  mode), a unit that lost its rows reported.

>>> from mixfold import GaussianDistribution, MixtureDistribution
>>> m = MixtureDistribution([GaussianDistribution(-2, 1), GaussianDistribution(2, 1)], [0.5, 0.5])
>>> isinstance(m, CompetingUnits), m.seq_posterior([0.0]).tolist()
(True, [[0.5, 0.5]])
>>> unit_weights(np.array([3.0, 1.0]), None, 0.0).tolist()
[0.75, 0.25]
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from mixfold.capabilities import ChunkStatistics, FoldsOnTorch, RunsInBands, StackedStatistics
from mixfold.compute.estep_plan import EStep, EStepPlan, Fusion, plan_estep
from mixfold.compute.labelled import Labelled
from mixfold.compute.logspace import log_normalize_rows, logsumexp_rows
from mixfold.errors import DegenerateFitWarning
from mixfold.families._dirichlet_prior import dirichlet_mode
from mixfold.families._missing import has_missing, require_native
from mixfold.families._protocol import (Accumulator, Distribution, Encoded, InitRandom,
                                        NodeStatistics)
from mixfold.families.units import (UnitColumns, UnitsFold, band_matrix, band_posterior_matrix,
                                    band_posteriors, seeded_posteriors)
from mixfold.precision import band_ops, log_density_in_band, require_band
from mixfold.precision.compensated import add_into, low_parts
from mixfold.precision.doubledouble import DD
from mixfold.precision.bands import DOUBLE_DOUBLE, FLOAT64, Precision

__all__ = ["CompetingUnits", "CompetingUnitsFold", "UnitsChunkStatistics", "unit_weights",
           "one_chunk_statistics", "EMPTY_MASS"]

#: A unit with less than this fraction of the total posterior mass has lost its rows.
EMPTY_MASS = 1e-12


class CompetingUnits(UnitColumns, Distribution, RunsInBands):
    """A distribution choosing one of its ``components`` (its ``units``, row-normalised) per
    row with probabilities ``weights`` (log: ``log_weights``, what each unit's score is offset
    by)."""

    components: tuple[Distribution, ...]
    weights: np.ndarray

    def component_log_densities(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        """log w_k + log p_k(x) for every row and component, array of shape (n_rows, K) in
        Fortran order."""
        if not precision.native:
            require_band(self, precision)
            ops = band_ops(precision)
            return band_matrix(self.band_scores(enc, ops), ops, enc.n_rows, -np.inf)
        return self.units.scores(enc, precision, self.log_weights)

    def log_density_from_columns(self, enc: Encoded, scores: np.ndarray) -> np.ndarray:
        return self.units.log_sum_exp(scores)

    def seq_log_density(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        if isinstance(enc, Labelled):  # the log-density of the rows and their labels
            return logsumexp_rows(self.component_log_densities(enc.inner, precision)
                                  + enc.log_prior())
        if not precision.native:
            return log_density_in_band(self, enc, precision)
        return self.units.log_density(enc, precision, self.log_weights)

    def weighted_posteriors(self, enc: Encoded, weights: np.ndarray,
                            precision: Precision = FLOAT64) -> tuple[np.ndarray, np.ndarray]:
        """(posteriors times row weights, shape (n_rows, K) in Fortran order; log-density):
        with labels riding along, each row's posterior times its labels' prior. Stacked
        components are scored and normalised block by block of rows on all cores, with the
        bits of one call (:meth:`~mixfold.families.units.Units.posteriors`)."""
        if isinstance(enc, Labelled):
            return log_normalize_rows(self.component_log_densities(enc.inner, precision)
                                      + enc.log_prior(), weights)
        return self.units.posteriors(enc, precision, self.log_weights, weights)

    def seq_posterior(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        """Posterior component probabilities of every row, array of shape (n_rows, K)."""
        if isinstance(enc, Labelled):  # given each row's labels too
            return log_normalize_rows(self.component_log_densities(enc.inner, precision)
                                      + enc.log_prior())[0]
        if not precision.native:
            require_band(self, precision)
            ops = band_ops(precision)
            return band_posterior_matrix(self.band_scores(enc, ops), ops, enc.n_rows)[0]
        post, lse = log_normalize_rows(self.component_log_densities(enc, precision))
        return self.units.rank_far_rows(post, lse, enc, self.log_weights)

    def band_scores(self, enc: Encoded, ops: Any) -> list[Any]:
        """``log w_k + log p_k(x)`` of every row in the band of ``ops``, one band array per
        component (``None`` for a component of weight 0: it takes no responsibility)."""
        return [None if w <= 0 else
                ops.add(comp.band_log_density(self.units.rows(enc, k), ops),
                        ops.log(ops.array(w)))
                for k, (comp, w) in enumerate(zip(self.components, self.weights))]

    def band_log_density(self, enc: Encoded, ops: Any) -> Any:
        """The per-row log-density in the band of ``ops`` (the log-sum-exp of the scores)."""
        return band_posteriors(self.band_scores(enc, ops), ops)[1]


class CompetingUnitsFold(UnitsFold, Accumulator, FoldsOnTorch):
    """The accumulator of :class:`CompetingUnits`: ``counts`` (K,), each unit's posterior
    mass, and the units' accumulators (``units``). The E-step runs the path
    :func:`~mixfold.compute.estep_plan.plan_estep` plans from the units' declared fusion and
    the precision: once per fold (:meth:`rows_per_chunk`), or for the chunk given where no fold
    planned it (a nested mixture)."""

    counts: np.ndarray
    _plan: EStepPlan | None = None  # the fold's, made by rows_per_chunk

    def _fusion(self, model: CompetingUnits) -> Fusion:
        """Where the fold of ``model`` may fuse (nowhere unless its components stack)."""
        return self.units.fusion if model.units.stack is not None else Fusion.NONE

    def folds_on_torch(self, model: CompetingUnits) -> bool:
        return self._fusion(model) is not Fusion.NONE

    def rows_per_chunk(self, model: CompetingUnits, precision: Precision, chunk_rows: int) -> int:
        """Plan the fold's E-step (:func:`~mixfold.compute.estep_plan.plan_estep`): a fused
        pass takes large chunks; should it decline (a Poisson of rate 0), the rows go through
        the three steps ``chunk_rows`` at a time."""
        self._plan = plan_estep(self._fusion(model), precision, chunk_rows)
        return self._plan.chunk_rows

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: CompetingUnits,
                   precision: Precision = FLOAT64) -> np.ndarray:
        if isinstance(enc, Labelled):  # each row's posterior times its labels' prior
            return self._three_steps(enc, weights, model, precision)
        plan = self._plan
        if plan is None or not plan.made_for(self._fusion(model), precision):
            plan = plan_estep(self._fusion(model), precision)
        if plan.path is EStep.FUSED:
            folded = self.units.fused_pass(self.units.accs, model.components, model.log_weights,
                                           enc, weights, precision)
            if folded is not None:  # None: the fused pass does not cover these parameters
                self.counts += folded[0]
                return folded[1]
        elif plan.path is EStep.DOUBLE_DOUBLE:
            require_band(model, precision)
            return self.seq_update_dd(enc, weights, np.zeros_like(weights), model,
                                      band_ops(precision))
        elif plan.path is EStep.IN_BAND:
            require_band(model, precision)
            ops = band_ops(precision)
            resp, lse = band_posterior_matrix(model.band_scores(enc, ops), ops, enc.n_rows)
            resp *= weights[:, None]
            self._add(enc, resp, model, precision)
            return lse
        return self._three_step_passes(plan, enc, weights, model)

    def _three_step_passes(self, plan: EStepPlan, enc: Encoded, weights: np.ndarray,
                           model: CompetingUnits) -> np.ndarray:
        """The three steps in ``plan.scores_in``, the plan's rows at a time (a chunk sized for
        a fused pass that declined). A band scored in float64 has its rows in float64 alone."""
        if not plan.precision.native:
            require_band(model, plan.precision)
            if has_missing(enc):
                require_native(plan.precision, model.components[0].family_name)
        step = plan.three_step_rows
        if step is None or enc.n_rows <= step:
            return self._three_steps(enc, weights, model, plan.scores_in)
        lse = np.empty(enc.n_rows)
        for lo in range(0, enc.n_rows, step):
            hi = min(enc.n_rows, lo + step)
            lse[lo:hi] = self._three_steps(enc.rows(lo, hi), weights[lo:hi], model,
                                           plan.scores_in)
        return lse

    def _three_steps(self, enc: Encoded, weights: np.ndarray, model: CompetingUnits,
                     precision: Precision) -> np.ndarray:
        """Score, normalise, add: a (rows, K) posterior matrix."""
        resp, lse = model.weighted_posteriors(enc, weights, precision)
        self._add(enc.inner if isinstance(enc, Labelled) else enc, resp, model, precision)
        return lse

    def _add(self, enc: Encoded, resp: np.ndarray, model: CompetingUnits,
             precision: Precision) -> None:
        self.counts += resp.sum(axis=0)
        self.units.add(enc, resp, model.units, precision)

    def seq_update_dd(self, enc: Encoded, w_hi: np.ndarray, w_lo: np.ndarray,
                      model: CompetingUnits, ops: Any = None) -> np.ndarray:
        """The ``dd`` band: responsibilities in double-double times the double-double row
        weights, posterior masses and every component's statistics summed in double-double,
        about the points a stacked or fused fold sums about. Returns the per-row log-density
        (float64)."""
        ops = band_ops(DOUBLE_DOUBLE) if ops is None else ops
        about_stack = model.units.stack is not None and (self.units.stack_update is not None
                                                          or self.units.fused_pass is not None)
        resp, lse = band_posteriors(model.band_scores(enc, ops), ops)
        mass = self.units.add_dd(enc, resp, DD(w_hi, w_lo), model.units, ops, about_stack)
        add_into(self.counts, low_parts(self)[0], mass)
        return ops.to_float64(lse)

    def posteriors_from_columns(self, enc: Encoded, weights: np.ndarray, model: CompetingUnits,
                                scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`CompetingUnits.weighted_posteriors` from gathered ``scores`` (turned into
        the posteriors in place, with the serial blocks' bits), the posterior masses added to
        ``counts``."""
        lse = model.units.normalise(scores, weights)
        self.counts += scores.sum(axis=0)
        return scores, lse

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        resp = seeded_posteriors(enc, len(self.units.accs), rng)
        resp *= weights[:, None]
        self.counts += resp.sum(axis=0)
        self.units.initialize(enc, resp, rng)


def one_chunk_statistics(estimator: Any, model: CompetingUnits, enc: Encoded,
                         weights: np.ndarray, precision: Precision = FLOAT64
                         ) -> tuple[NodeStatistics, np.ndarray] | None:
    """The statistics a fresh accumulator of ``estimator`` (its units ``parts()``, one
    encoding, no ``keys`` on it or them, ``slots`` none) holds after folding one chunk under
    ``model``, as its ``value()``, and the per-row log-density, made with no accumulator: the
    fused pass's numbers, where the children's one estimator class gives them
    (:class:`~mixfold.capabilities.StackedStatistics`); ``None`` otherwise (fold into
    accumulators)."""
    children = estimator.parts()
    cls = type(children[0])
    if any(e.keys is not None for e in (estimator, *children)) or estimator.slots is not None \
            or isinstance(enc, Labelled) or model.units.stack is None \
            or not issubclass(cls, StackedStatistics) or any(type(e) is not cls for e in children):
        return None  # (keys tie statistics across the tree; components that do not stack: the
        # fold's three steps)
    found = cls.stack_statistics(children, model.components, model.log_weights, enc, weights,
                                 precision)
    if found is None:
        return None
    mass, stats, lse = found
    return NodeStatistics((mass + 0.0,), tuple(stats)), lse


class UnitsChunkStatistics(ChunkStatistics):
    """An estimator of units (a mixture's) whose statistics over one chunk come without
    accumulators where its children's one class makes them (:func:`one_chunk_statistics`)."""

    chunk_statistics = one_chunk_statistics


def unit_weights(counts: np.ndarray, prior: Any, pseudo_count: float,
                 empty_mass: float = EMPTY_MASS) -> np.ndarray:
    """The weights (K,) of units of posterior masses ``counts`` (K,): their mode under the
    Dirichlet ``prior`` and ``pseudo_count`` (:mod:`mixfold.families._dirichlet_prior`),
    normalised (uniform where it is all zero); each unit below ``empty_mass`` of the total
    mass reported by a :class:`~mixfold.DegenerateFitWarning`."""
    mass = dirichlet_mode(counts, prior, pseudo_count)
    total = mass.sum()
    weights = mass / total if total > 0 else np.full(len(mass), 1.0 / len(mass))
    total = float(counts.sum())
    if total <= 0 or not (counts <= empty_mass * total).any():
        return weights
    kept = ("with the weight its pseudo-count gives it" if pseudo_count > 0 else
            "with weight 0 (give pseudo_count > 0 to keep such components in play)")
    for k in np.flatnonzero(counts <= empty_mass * total):
        warnings.warn(f"mixture component {k} of {len(counts)} lost its rows; posterior "
                      f"mass {counts[k]:.3g} of {total:.6g}, kept {kept}",
                      DegenerateFitWarning, stacklevel=2)
    return weights
