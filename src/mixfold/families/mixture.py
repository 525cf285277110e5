"""Finite mixture of any component family: sum_k w_k p_k(x).

The components are the mixture's units (:mod:`mixfold.families.units`: scored into the columns
of one matrix, normalised, the posteriors handed down); the fold's E-step path is planned once
per fold by :func:`mixfold.compute.estep_plan.plan_estep`; the seeded start clusters with
:mod:`mixfold.compute.kmeans`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import FoldsOnTorch, RunsInBands, SeedsFromPoints
from mixfold.compute.estep_plan import (EStep, EStepPlan, Fusion, fused_pass_of, fusion_of,
                                        plan_estep)
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, fold_rows
from mixfold.compute.kmeans import kmeans_labels
from mixfold.compute.labelled import Labelled
from mixfold.compute.logspace import log_normalize_rows, logsumexp_rows
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import DegenerateFitWarning, NumericalError, ParameterError
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families._hooks import FoldChildren, FoldsColumns, ScoreChildren, ScoresColumns
from mixfold.families._missing import has_missing, require_native
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoded,
                                        Encoder, Estimator, InitRandom, family)
from mixfold.families._shared_covariance import estimate_children
from mixfold.families.units import (UnitAccumulators, Units, band_matrix, band_posteriors,
                                    bind_units, child_rows, encoding_slots, seeded_posteriors,
                                    shared_encoder)
from mixfold.options import number
from mixfold.precision import band_ops, log_density_in_band, require_band
from mixfold.precision.bands import DOUBLE_DOUBLE, FLOAT64, Precision
from mixfold.precision.compensated import add_into, low_parts
from mixfold.precision.doubledouble import DD

__all__ = ["MixtureDistribution", "MixtureEstimator", "MixtureAccumulator"]


@family("Mixture")
class MixtureDistribution(ScoresColumns, Distribution, RunsInBands):
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
        # (an infinite weight fails the sum: no separate finiteness test)
        if not ((w >= 0).all() and abs(w.sum() - 1.0) < 1e-9):
            raise ParameterError(f"weights must be >= 0 and sum to 1, got {w.tolist()}")
        self.weights = w  # kept as given (sums to 1 within 1e-9): exact JSON round trips
        with np.errstate(divide="ignore"):
            self.log_weights = np.log(self.weights)
        self.units = Units(self.components, row_normalised=True)

    @property
    def num_components(self) -> int:
        return len(self.components)

    def component_log_densities(self, enc: Encoded, precision: Precision = FLOAT64) -> np.ndarray:
        """log w_k + log p_k(x) for every row and component, array of shape (n_rows, K) in
        Fortran order."""
        if not precision.native:
            require_band(self, precision)
            ops = band_ops(precision)
            return band_matrix(self.band_scores(enc, ops), ops, enc.n_rows, -np.inf)
        return self.units.scores(enc, precision, self.log_weights)

    def unit_rows(self, enc: Encoded) -> Encoded:
        return enc

    def score_columns(self, rows: Encoded, precision: Precision, start: int, stop: int,
                      out: np.ndarray, score: ScoreChildren | None = None) -> None:
        """Write log w_k + log p_k(x) of components ``[start, stop)`` into their columns of
        ``out`` (n_rows, K) with the bits the E-step gives them; with ``score``, the
        components' log-densities come from it."""
        self.units.score_columns(rows, precision, start, stop, out, score, self.log_weights)

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
            return self.band_posterior_matrix(enc, band_ops(precision))[0]
        post, lse = log_normalize_rows(self.component_log_densities(enc, precision))
        return self.units.rank_far_rows(post, lse, enc, self.log_weights)

    # -- the E-step in a precision band (see mixfold.precision.emulation) ---------------------

    def band_scores(self, enc: Encoded, ops: Any) -> list[Any]:
        """``log w_k + log p_k(x)`` of every row in the band of ``ops``, one band array per
        component (``None`` for a component of weight 0: it takes no responsibility)."""
        return [None if w <= 0 else
                ops.add(comp.band_log_density(self.units.rows(enc, k), ops),
                        ops.log(ops.array(w)))
                for k, (comp, w) in enumerate(zip(self.components, self.weights))]

    def band_posterior(self, enc: Encoded, ops: Any) -> tuple[list[Any], Any]:
        """(responsibilities, log-density) of every row with every step in the band of ``ops``
        (:func:`~mixfold.families.units.band_posteriors` of :meth:`band_scores`)."""
        return band_posteriors(self.band_scores(enc, ops), ops)

    def band_log_density(self, enc: Encoded, ops: Any) -> Any:
        """The per-row log-density in the band of ``ops`` (the log-sum-exp of the scores)."""
        return self.band_posterior(enc, ops)[1]

    def band_posterior_matrix(self, enc: Encoded, ops: Any) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`band_posterior` handed to float64: ((n_rows, K) Fortran-ordered, (n_rows,))."""
        resp, lse = self.band_posterior(enc, ops)
        return band_matrix(resp, ops, enc.n_rows, 0.0), ops.to_float64(lse)

    def predict(self, rows: Any) -> np.ndarray:
        """The most probable component of each row (raw or encoded), int array of shape
        (n_rows,)."""
        return self.seq_posterior(rows).argmax(axis=1)

    def posterior(self, x: Any) -> np.ndarray:
        """Posterior component probabilities of one value, array of shape (K,)."""
        return self.seq_posterior(self.encoder().encode([x]))[0]

    def encoder(self) -> Encoder:
        return self.units.encoder

    def estimator(self, **options: Any) -> MixtureEstimator:
        return MixtureEstimator([c.estimator() for c in self.components], **options)

    def _sample(self, n: int, rng: np.random.Generator) -> Any:
        return self.units.draw(rng.choice(self.num_components, size=n, p=self.weights), rng)

    def parts(self) -> tuple[Distribution, ...]:
        return self.components

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


class MixtureAccumulator(FoldsColumns, Accumulator, FoldsOnTorch):
    """Statistics: the posterior mass of each component, and each component's accumulator.

    The E-step runs the path :func:`~mixfold.compute.estep_plan.plan_estep` plans from the
    components' declared fusion and the precision: once per fold (:meth:`rows_per_chunk`), or
    for the chunk given where no fold planned it (a nested mixture).
    """

    def __init__(self, components: Sequence[Accumulator], slots: tuple[int, ...] | None,
                 keys: str | None = None):
        self.components = list(components)
        self.keys = keys
        self.counts = np.zeros(len(self.components))
        self.units = UnitAccumulators(self.components, slots)
        stack = self.units.stack_class
        # a stack may fuse scoring, normalisation and accumulation of a chunk in one pass
        self._stack_fold = None if stack is None else fused_pass_of(stack)
        self._fusion = Fusion.NONE if stack is None else fusion_of(stack)
        self._plan: EStepPlan | None = None  # the fold's, made by rows_per_chunk

    def own_arrays(self) -> list[np.ndarray]:
        return [self.counts]

    def children(self) -> Sequence[Accumulator]:
        return self.components

    def fusion(self, model: MixtureDistribution) -> Fusion:
        """Where the fold of ``model`` may fuse (nowhere unless its components stack)."""
        return self._fusion if model.units.stack is not None else Fusion.NONE

    def folds_on_torch(self, model: MixtureDistribution) -> bool:
        return self.fusion(model) is not Fusion.NONE

    def rows_per_chunk(self, model: MixtureDistribution, precision: Precision,
                       chunk_rows: int) -> int:
        """Plan the fold's E-step (:func:`~mixfold.compute.estep_plan.plan_estep`): a fused
        pass takes large chunks; should it decline (a Poisson of rate 0), the rows go through
        the three steps ``chunk_rows`` at a time."""
        self._plan = plan_estep(self.fusion(model), precision, chunk_rows)
        return self._plan.chunk_rows

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: MixtureDistribution,
                   precision: Precision = FLOAT64) -> np.ndarray:
        if isinstance(enc, Labelled):  # each row's posterior times its labels' prior
            return self._three_steps(enc, weights, model, precision)
        plan = self._plan
        if plan is None or not plan.made_for(self.fusion(model), precision):
            plan = plan_estep(self.fusion(model), precision)
        if plan.path is EStep.FUSED:
            folded = self._stack_fold(self.components, model.components, model.log_weights,
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
            resp, lse = model.band_posterior_matrix(enc, band_ops(precision))
            resp *= weights[:, None]
            self._add(enc, resp, model, precision)
            return lse
        return self._three_step_passes(plan, enc, weights, model)

    def _three_step_passes(self, plan: EStepPlan, enc: Encoded, weights: np.ndarray,
                           model: MixtureDistribution) -> np.ndarray:
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

    def _three_steps(self, enc: Encoded, weights: np.ndarray, model: MixtureDistribution,
                     precision: Precision) -> np.ndarray:
        """Score, normalise, add: a (rows, K) posterior matrix."""
        resp, lse = model.weighted_posteriors(enc, weights, precision)
        self._add(enc.inner if isinstance(enc, Labelled) else enc, resp, model, precision)
        return lse

    def _add(self, enc: Encoded, resp: np.ndarray, model: MixtureDistribution,
             precision: Precision) -> None:
        self.counts += resp.sum(axis=0)
        self.units.add(enc, resp, model.units, precision)

    def seq_update_dd(self, enc: Encoded, w_hi: np.ndarray, w_lo: np.ndarray,
                      model: MixtureDistribution, ops: Any = None) -> np.ndarray:
        """The ``dd`` band: responsibilities in double-double times the double-double row
        weights, posterior masses and every component's statistics summed in double-double,
        about the points a stacked or fused fold sums about. Returns the per-row log-density
        (float64)."""
        ops = band_ops(DOUBLE_DOUBLE) if ops is None else ops
        about_stack = model.units.stack is not None and (self.units.stack_update is not None
                                                          or self._stack_fold is not None)
        resp, lse = model.band_posterior(enc, ops)
        mass = self.units.add_dd(enc, resp, DD(w_hi, w_lo), model.units, ops, about_stack)
        add_into(self.counts, low_parts(self)[0], mass)
        return ops.to_float64(lse)

    def posteriors_from_columns(self, enc: Encoded, weights: np.ndarray,
                                model: MixtureDistribution,
                                scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`MixtureDistribution.weighted_posteriors` from gathered ``scores`` (turned
        into the posteriors in place, with the serial blocks' bits), the posterior masses
        added to ``counts``."""
        lse = model.units.normalise(scores, weights)
        self.counts += scores.sum(axis=0)
        return scores, lse

    def add_columns(self, rows: Encoded, resp: np.ndarray, model: MixtureDistribution,
                    precision: Precision, start: int, stop: int,
                    fold: FoldChildren | None = None) -> None:
        self.units.add(rows, resp, model.units, precision, start, stop, fold)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        resp = seeded_posteriors(enc, len(self.components), rng)
        resp *= weights[:, None]
        self.counts += resp.sum(axis=0)
        self.units.initialize(enc, resp, rng)


class MixtureEstimator(Estimator):
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
    empty_mass = 1e-12
    #: Lloyd's iterations of each k-means run on the initialisation sample (to convergence,
    #: as scikit-learn's KMeans, unless this many come first).
    lloyd_iterations = 100
    #: k-means runs from independent greedy k-means++ seedings; the lowest inertia is kept: one
    #: run can merge two clusters and split another, the best of a few rarely does.
    kmeans_runs = 3
    #: Without points to cluster: seed rows per component, then EM iterations on the sample.
    init_seed_rows = 5
    init_em_iterations = 10

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

    def _make(self) -> MixtureAccumulator:
        return MixtureAccumulator([c.accumulator_factory().make() for c in self.components],
                                  self._encoding_slots(), self.keys)

    def _encoding_slots(self) -> tuple[int, ...] | None:
        """Which shared encoding each component reads (``None``: one encoding for all): found
        once, as the component estimators (and so their encoders) do not change."""
        if "_slots_found" not in self.__dict__:
            self._slots_found = encoding_slots(self.encoder())
        return self._slots_found

    def accumulator_factory(self) -> AccumulatorFactory:
        return AccumulatorFactory(self._make)

    def estimate(self, nobs: float, stats: Any) -> MixtureDistribution:
        (counts,), comp_stats = stats
        weights = self.mixing_weights(counts)
        comps = estimate_children(self.components, counts, comp_stats)
        return MixtureDistribution(comps, weights)

    def mixing_weights(self, counts: np.ndarray) -> np.ndarray:
        """The weights (K,) of the components' posterior masses ``counts`` (with the
        pseudo-count and the Dirichlet prior, their mode), each component that lost its rows
        reported."""
        mass = dirichlet_mode(counts, self.weights_prior, self.pseudo_count)
        total = mass.sum()
        weights = mass / total if total > 0 else np.full(len(mass), 1.0 / len(mass))
        self._report_empty(counts)
        return weights

    def _report_empty(self, counts: np.ndarray) -> None:
        total = float(counts.sum())
        if total <= 0 or not (counts <= self.empty_mass * total).any():
            return
        kept = ("with the weight its pseudo-count gives it" if self.pseudo_count > 0 else
                "with weight 0 (give pseudo_count > 0 to keep such components in play)")
        for k in np.flatnonzero(counts <= self.empty_mass * total):
            warnings.warn(f"mixture component {k} of {len(counts)} lost its rows; posterior "
                          f"mass {counts[k]:.3g} of {total:.6g}, kept {kept}",
                          DegenerateFitWarning, stacklevel=2)

    def initial_guess(self, sample: Encoded, weights: np.ndarray,
                      rng: InitRandom) -> MixtureDistribution:
        """Seed the components from the initialisation sample.

        Components with points (Gaussian families, Gamma on log x): the best of
        ``kmeans_runs`` k-means runs (greedy k-means++ centres refined by Lloyd's iterations to
        convergence, :func:`~mixfold.compute.kmeans.kmeans_labels`), each component started
        from its cluster (scikit-learn's k-means initialisation, which runs one). Other
        families: each component starts from a few seeded random rows, then a few EM
        iterations on the sample separate them. Components are finally guessed from their
        rows with every other sample row at a small weight, so that no component starts blind
        to a value the sample contains.
        """
        if isinstance(sample, Labelled):  # the unlabelled guess, its posteriors times the labels
            guess = self.initial_guess(sample.inner, weights, rng)
            return self._guess_from(sample.inner, weights, guess.seq_posterior(sample), rng)
        k, n = self.num_components, sample.n_rows
        gen = rng.generator()
        family = self._component_family()
        if isinstance(family, type) and issubclass(family, SeedsFromPoints) \
                and self._encoding_slots() is None and n >= k:
            labels = kmeans_labels(family.stack_points(sample), weights, k, gen,
                                   self.lloyd_iterations, self.kmeans_runs)
            return self._guess_from(sample, weights, np.eye(k)[labels], rng)
        seeds = np.zeros((n, k))
        per_component = max(1, min(self.init_seed_rows, n // k))
        order = gen.permutation(n)[:per_component * k]
        seeds[order, np.arange(order.size) % k] = 1.0
        guess = self._guess_from(sample, weights, seeds, rng)
        total_weight = float(weights.sum())
        for _ in range(self.init_em_iterations):
            acc = self.accumulator_factory().make()
            try:
                fold_rows(acc, sample, weights, guess, FLOAT64, DEFAULT_CHUNK_ROWS)
                acc.tie_keys()
                guess = self.estimate(total_weight, acc.value())
            except (NumericalError, ParameterError):
                break
        return self._guess_from(sample, weights, guess.seq_posterior(sample), rng)

    def _guess_from(self, sample: Encoded, weights: np.ndarray, resp: np.ndarray,
                    rng: InitRandom) -> MixtureDistribution:
        """Components guessed from posterior-weighted sample rows, plus a 5% background."""
        mass = resp.T @ weights
        comps = []
        for j, est in enumerate(self.components):
            background = 0.05 * mass[j] / max(float(weights.sum()), 1e-300)
            w = weights * (resp[:, j] + background)
            comps.append(est.initial_guess(child_rows(sample, j, self._encoding_slots()), w,
                                           rng.child(j)))
        mass = mass + 0.01 * weights.sum() / len(mass) + 1e-12
        return MixtureDistribution(comps, mass / mass.sum())

    def _component_family(self) -> type | None:
        classes = {type(c) for c in self.components}
        return classes.pop().distribution_class if len(classes) == 1 else None

    def __repr__(self) -> str:
        return f"MixtureEstimator({list(self.components)!r})"
