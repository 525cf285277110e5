"""Finite mixture of any component family: sum_k w_k p_k(x)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import warnings

import numpy as np

from mixfold.capabilities import (
    FoldsOnTorch,
    CentredStatistics,
    FusedFold,
    LinearInFeatures,
    LinearInFeaturesInBands,
    RelativeScoring,
    RunsInBands,
    SeedsFromPoints,
    StackedScoring,
    StackedUpdate,
)
from mixfold.compute.labelled import Labelled
from mixfold.compute.logspace import log_normalize_rows, logsumexp_rows
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS, fold_rows
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp, decomposition_for
from mixfold.errors import DegenerateFitWarning, NumericalError, ParameterError
from mixfold.compute.band_engines import fused_linear_mixture
from mixfold.compute.linear_torch import GPU_CHUNK_ROWS
from mixfold.precision import resolve_precision, band_ops, log_density_in_band, require_band
from mixfold.precision.compensated import add_into, low_parts
from mixfold.precision.doubledouble import DD, dd_mul, dd_sum_rows
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsColumns,
                                     ScoreChildren, ScoresColumns)
from mixfold.families._centred import weighted_centre
from mixfold.families._missing import has_missing, require_native
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families._shared_covariance import estimate_children
from mixfold.families._protocol import (
    Accumulator,
    AccumulatorFactory,
    Distribution,
    Encoded,
    Encoder,
    Estimator,
    InitRandom,
    family,
)
from mixfold.options import number

#: Rows per block when stacked components are scored on all cores. Large enough that each of
#: a block's many short NumPy calls does real work outside the GIL.
STACK_BLOCK_ROWS = 32768
#: Rows per chunk a fused E-step takes (its temporaries are per row block, so a chunk costs
#: 8 bytes a row): fewer chunks, less waiting for the last row block of each.
FUSED_CHUNK_ROWS = 1 << 20

__all__ = ["MixtureDistribution", "MixtureEstimator", "MixtureAccumulator", "SharedEncoder",
           "SharedEncoded", "stack_columns", "unit_log_densities", "add_unit_range"]


# ---------------------------------------------------------------------------------------------
# Encoding: components that read the data the same way share one encoding


class SharedEncoded(Encoded):
    """One encoding per distinct component encoder (only when the components' encoders differ)."""

    __slots__ = ("parts", "n_rows", "start")

    def __init__(self, parts: Sequence[Encoded]):
        self.parts = tuple(parts)
        self.n_rows = self.parts[0].n_rows
        self.start = self.parts[0].start

    def rows(self, begin: int, end: int) -> SharedEncoded:
        return SharedEncoded([p.rows(begin, end) for p in self.parts])

    def take(self, indices: np.ndarray) -> SharedEncoded:
        return SharedEncoded([p.take(indices) for p in self.parts])

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def node_sizes(self) -> list[int]:
        return [s for p in self.parts for s in p.node_sizes()]

    def with_starts(self, starts: Iterator[int]) -> SharedEncoded:
        return SharedEncoded([p.with_starts(starts) for p in self.parts])

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> SharedEncoded:
        return SharedEncoded([type(ps[0]).concat(ps) for ps in zip(*(p.parts for p in parts))])


class SharedEncoder(Encoder):
    """Encodes rows once per distinct encoder among several children that read the same rows.

    ``slot[k]`` is the part child ``k`` reads. When all children encode alike, use the plain
    child encoder instead (``shared_encoder`` does this).
    """

    def __init__(self, encoders: Sequence[Encoder], slot: Sequence[int]):
        self.encoders = tuple(encoders)
        self.slot = tuple(slot)

    def fit(self, values: Any) -> SharedEncoder:
        return SharedEncoder([e.fit(values) for e in self.encoders], self.slot)

    def encode(self, values: Any) -> SharedEncoded:
        return SharedEncoded([e.encode(values) for e in self.encoders])

    def merge(self, other: Encoder) -> SharedEncoder:
        if not isinstance(other, SharedEncoder) or other.slot != self.slot:
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return SharedEncoder([a.merge(b) for a, b in zip(self.encoders, other.encoders)], self.slot)

    def child_encoder(self, k: int) -> Encoder:
        return self.encoders[self.slot[k]]

    def __repr__(self) -> str:
        return f"SharedEncoder({list(self.encoders)!r})"


def shared_encoder(encoders: Sequence[Encoder]) -> Encoder:
    """The one encoder all children use, or a :class:`SharedEncoder` over the distinct ones."""
    distinct: list[Encoder] = []
    slot = []
    for e in encoders:
        for i, d in enumerate(distinct):
            if d == e:
                slot.append(i)
                break
        else:
            slot.append(len(distinct))
            distinct.append(e)
    return distinct[0] if len(distinct) == 1 else SharedEncoder(distinct, slot)


def child_encoding(enc: Encoded, k: int, slots: tuple[int, ...] | None) -> Encoded:
    """The encoding component ``k`` reads."""
    return enc if slots is None else enc.parts[slots[k]]


def _slots(encoder: Encoder) -> tuple[int, ...] | None:
    return encoder.slot if isinstance(encoder, SharedEncoder) else None


def _stackable(components: Sequence[Any]) -> type | None:
    """The common class of the components when it scores all of them in one call."""
    cls = type(components[0])
    if not issubclass(cls, StackedScoring) or any(type(c) is not cls for c in components):
        return None
    return cls if cls.can_stack(components) else None


def stack_columns(cls: type, components: Sequence[Any], enc: Encoded, precision: str,
                  units: tuple[int, int] | None = None) -> np.ndarray:
    """Columns ``units=(start, stop)`` of ``cls.stack_log_density(components, enc)`` (all when
    ``None``), (n_rows, stop - start), with the same bits as in the full call.

    A :class:`StackedScoring` family whose stack shares something across components (a
    centre) declares ``stack_units = True`` and takes ``units``; any other scores each column
    on its own, so the range of components is scored alone.
    """
    if units is None:
        return cls.stack_log_density(components, enc, precision)
    if cls.stack_units:
        return cls.stack_log_density(components, enc, precision, units=units)
    return cls.stack_log_density(components[units[0]:units[1]], enc, precision)


def unit_log_densities(units: Sequence[Distribution], stack: type | None,
                       slots: tuple[int, ...] | None, enc: Encoded, precision: str,
                       start: int, stop: int, out: np.ndarray) -> None:
    """Write log p_k(x) of units ``[start, stop)`` into ``out[:, start:stop]`` (float64).

    Each column gets the same bits whatever range it is scored in (the serial E-step scores
    the range ``[0, K)``), so a model-parallel executor can score ranges apart.
    """
    if stack is not None:
        out[:, start:stop] = stack_columns(stack, units, enc, precision, (start, stop))
        return
    for k in range(start, stop):
        out[:, k] = units[k].seq_log_density(child_encoding(enc, k, slots), precision)


# ---------------------------------------------------------------------------------------------
# Distribution


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
        if not (np.isfinite(w).all() and (w >= 0).all() and abs(w.sum() - 1.0) < 1e-9):
            raise ParameterError(f"weights must be >= 0 and sum to 1, got {w.tolist()}")
        self.weights = w  # kept as given (sums to 1 within 1e-9): exact JSON round trips
        with np.errstate(divide="ignore"):
            self.log_weights = np.log(self.weights)
        self._encoder = shared_encoder([c.encoder() for c in self.components])
        self._slots = _slots(self._encoder)
        self._stack = _stackable(self.components) if self._slots is None else None

    @property
    def num_components(self) -> int:
        return len(self.components)

    def component_log_densities(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        """log w_k + log p_k(x) for every row and component, array of shape (n_rows, K)."""
        if not resolve_precision(precision).native:
            require_band(self, precision)
            ops = band_ops(precision)
            scores = self.band_scores(enc, ops)
            out = np.full((enc.n_rows, self.num_components), -np.inf, order="F")
            for k, score in enumerate(scores):
                if score is not None:
                    out[:, k] = ops.to_float64(score)
            return out
        # Fortran order: each component's column is contiguous, so the per-row max and sum of
        # the log-sum-exp reduce runs over contiguous memory
        if self._stack is not None:  # the stack's own (n, K) block, no copy
            scores = np.asfortranarray(self._stack.stack_log_density(self.components, enc,
                                                                     precision), dtype=np.float64)
            scores += self.log_weights
            return scores
        scores = np.empty((enc.n_rows, self.num_components), order="F")
        self.add_weighted_columns(enc, precision, 0, self.num_components, scores)
        return scores

    def add_weighted_columns(self, enc: Encoded, precision: str, start: int, stop: int,
                             scores: np.ndarray) -> None:
        """Write log w_k + log p_k(x) of components ``[start, stop)`` into their columns of
        ``scores`` (n_rows, K); any range gets the bits the full set gets."""
        unit_log_densities(self.components, self._stack, self._slots, enc, precision, start,
                           stop, scores)
        scores[:, start:stop] += self.log_weights[start:stop]

    def unit_rows(self, enc: Encoded) -> Encoded:
        return enc

    def score_columns(self, rows: Encoded, precision: str, start: int, stop: int,
                      out: np.ndarray, score: ScoreChildren | None = None) -> None:
        """:meth:`add_weighted_columns`, a stacked mixture's block by block of the rows its
        E-step scores; with ``score``, the components' log-densities come from it."""
        if score is not None:
            units = [ChildScore(k, self.components[k], child_encoding(rows, k, self._slots))
                     for k in range(start, stop)]
            for k, ll in zip(range(start, stop), score(units, precision)):
                out[:, k] = ll
            out[:, start:stop] += self.log_weights[start:stop]
            return
        if self._stack is None:
            self.add_weighted_columns(rows, precision, start, stop, out)
            return
        for lo in range(0, rows.n_rows, STACK_BLOCK_ROWS):
            hi = min(rows.n_rows, lo + STACK_BLOCK_ROWS)
            self.add_weighted_columns(rows.rows(lo, hi), precision, start, stop, out[lo:hi])

    def each_block(self, n: int, each: Callable[[int, int], None]) -> None:
        """Run ``each(lo, hi)`` over the row blocks the serial E-step normalises: a stacked
        mixture's blocks on this process's cores, or the whole chunk."""
        if self._stack is None:
            each(0, n)
        else:
            map_row_blocks(n, STACK_BLOCK_ROWS, each)

    def log_density_from_columns(self, enc: Encoded, scores: np.ndarray) -> np.ndarray:
        lse = np.empty(scores.shape[0])

        def log_sum_exp(lo: int, hi: int) -> None:
            lse[lo:hi] = logsumexp_rows(np.array(scores[lo:hi], order="F"))

        self.each_block(scores.shape[0], log_sum_exp)
        return lse

    def seq_log_density(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        if isinstance(enc, Labelled):  # the log-density of the rows and their labels
            return logsumexp_rows(self.component_log_densities(enc.inner, precision)
                                  + enc.log_prior())
        if not resolve_precision(precision).native:
            return log_density_in_band(self, enc, precision)
        if self._stack is None:
            return logsumexp_rows(self.component_log_densities(enc, precision))
        lse = np.empty(enc.n_rows)

        def score_block(lo: int, hi: int) -> None:
            lse[lo:hi] = logsumexp_rows(self.component_log_densities(enc.rows(lo, hi),
                                                                     precision))

        map_row_blocks(enc.n_rows, STACK_BLOCK_ROWS, score_block)
        return lse

    def weighted_posteriors(self, enc: Encoded, weights: np.ndarray,
                            precision: str = "float64") -> tuple[np.ndarray, np.ndarray]:
        """(posteriors times row weights, shape (n_rows, K) in Fortran order; log-density).

        Stacked components are scored and normalised block by block of rows on all cores
        (:func:`~mixfold.compute.row_blocks.map_row_blocks`); every row's arithmetic is the same
        however the rows are split, so the result is too.
        """
        if self._stack is None:
            return log_normalize_rows(self.component_log_densities(enc, precision), weights)
        resp, lse = np.empty((enc.n_rows, self.num_components), order="F"), np.empty(enc.n_rows)

        def normalise_block(lo: int, hi: int) -> None:
            resp[lo:hi], lse[lo:hi] = log_normalize_rows(
                self.component_log_densities(enc.rows(lo, hi), precision), weights[lo:hi])

        map_row_blocks(enc.n_rows, STACK_BLOCK_ROWS, normalise_block)
        return resp, lse

    def seq_posterior(self, enc: Encoded, precision: str = "float64") -> np.ndarray:
        """Posterior component probabilities of every row, array of shape (n_rows, K)."""
        if isinstance(enc, Labelled):  # given each row's labels too
            return log_normalize_rows(self.component_log_densities(enc.inner, precision)
                                      + enc.log_prior())[0]
        if not resolve_precision(precision).native:
            require_band(self, precision)
            return self.band_posterior_matrix(enc, band_ops(precision))[0]
        post, lse = log_normalize_rows(self.component_log_densities(enc, precision))
        if self._stack is None or not issubclass(self._stack, RelativeScoring):
            return post
        # rows so far out that x - mu lost the means' digits (x = 1e20 under unit Gaussians
        # ties components of one variance) or every log-density fell below -1e308 (x = 1e200)
        far = np.flatnonzero((lse == -np.inf) | self._stack.stack_far_rows(self.components, enc))
        if far.size:
            with np.errstate(divide="ignore"):
                scores = self._stack.stack_relative_log_density(self.components, enc.take(far)) \
                    + self.log_weights
            post[far] = log_normalize_rows(scores)[0]
        return post

    # -- the E-step in a precision band (see mixfold.precision.emulation) ---------------------

    def band_scores(self, enc: Encoded, ops: Any) -> list[Any]:
        """``log w_k + log p_k(x)`` of every row in the band of ``ops``, one band array per
        component (``None`` for a component of weight 0: it takes no responsibility)."""
        return [None if w <= 0 else
                ops.add(comp.band_log_density(child_encoding(enc, k, self._slots), ops),
                        ops.log(ops.array(w)))
                for k, (comp, w) in enumerate(zip(self.components, self.weights))]

    def band_posterior(self, enc: Encoded, ops: Any) -> tuple[list[Any], Any]:
        """(responsibilities, log-density) of every row with every step in the band of ``ops``:
        ``r_k = exp(s_k - max s) / sum_j exp(s_j - max s)``, ``log p = max s + log(sum)``.
        Responsibilities are band arrays per component (``None`` for a zero weight)."""
        scores = self.band_scores(enc, ops)
        live = [s for s in scores if s is not None]
        top = live[0]
        for s in live[1:]:
            top = ops.maximum(top, s)
        shifted = [None if s is None else ops.exp(ops.sub(s, top)) for s in scores]
        total = ops.total([e for e in shifted if e is not None])
        resp = [None if e is None else ops.div(e, total) for e in shifted]
        return resp, ops.add(top, ops.log(total))

    def band_log_density(self, enc: Encoded, ops: Any) -> Any:
        """The per-row log-density in the band of ``ops`` (the log-sum-exp of the scores)."""
        return self.band_posterior(enc, ops)[1]

    def band_posterior_matrix(self, enc: Encoded, ops: Any) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`band_posterior` handed to float64: ((n_rows, K) Fortran-ordered, (n_rows,))."""
        resp, lse = self.band_posterior(enc, ops)
        out = np.zeros((enc.n_rows, self.num_components), order="F")
        for k, r in enumerate(resp):
            if r is not None:
                out[:, k] = ops.to_float64(r)
        return out, ops.to_float64(lse)

    def predict(self, rows: Any) -> np.ndarray:
        """The most probable component of each row (raw or encoded), int array of shape
        (n_rows,)."""
        return self.seq_posterior(rows).argmax(axis=1)

    def posterior(self, x: Any) -> np.ndarray:
        """Posterior component probabilities of one value, array of shape (K,)."""
        return self.seq_posterior(self.encoder().encode([x]))[0]

    def encoder(self) -> Encoder:
        return self._encoder

    def estimator(self, **options: Any) -> MixtureEstimator:
        return MixtureEstimator([c.estimator() for c in self.components], **options)

    def _sample(self, n: int, rng: np.random.Generator) -> Any:
        z = rng.choice(self.num_components, size=n, p=self.weights)
        parts = [(np.flatnonzero(z == k), comp._sample(int((z == k).sum()), rng))
                 for k, comp in enumerate(self.components)]
        return scatter_samples(parts, n)

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
                             fused=self._stack is not None,
                             row_work=float(k),
                             param_bytes=self.weights.nbytes + self.log_weights.nbytes)


def scatter_samples(parts: Sequence[tuple[np.ndarray, Any]], n: int) -> Any:
    """Put the values drawn for each group of row positions back in row order."""
    arrays = [v for _, v in parts if len(v)]
    if arrays and all(isinstance(v, np.ndarray) for v in arrays):
        shapes = {v.shape[1:] for v in arrays}
        if len(shapes) == 1:
            out = np.empty((n,) + arrays[0].shape[1:], dtype=np.result_type(*arrays))
            for idx, v in parts:
                if len(idx):
                    out[idx] = v
            return out
    rows: list[Any] = [None] * n
    for idx, v in parts:
        for i, value in zip(idx, v):
            rows[i] = value
    return rows


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


class MixtureAccumulator(FoldsColumns, Accumulator, FoldsOnTorch):
    """Statistics: the posterior mass of each component, and each component's accumulator."""

    def __init__(self, components: Sequence[Accumulator], slots: tuple[int, ...] | None,
                 keys: str | None = None):
        self.components = list(components)
        self.slots = slots
        self.keys = keys
        self.counts = np.zeros(len(self.components))
        cls = type(self.components[0])
        same = all(type(c) is cls for c in self.components)
        stackable = same and slots is None
        self._stack_update = cls.stack_update if stackable and issubclass(cls, StackedUpdate) \
            else None
        # a family may fuse scoring, normalisation and accumulation of a chunk (one pass): a
        # combinator through its own stack_fold, a family linear in its features through the
        # fused fold of its linear_terms
        self._unfused_rows = 1 << 62  # set by rows_per_chunk when a fold chunks the rows
        self._stack_fold = None
        # a family whose exact native path is faster fuses only in the bands below float32
        self._fuses_natively = not (stackable and issubclass(cls, LinearInFeaturesInBands))
        if stackable and issubclass(cls, FusedFold):
            self._stack_fold = cls.stack_fold
        elif stackable and issubclass(cls, LinearInFeatures):
            self._stack_fold = fused_linear_mixture

    def own_arrays(self) -> list[np.ndarray]:
        return [self.counts]

    def children(self) -> Sequence[Accumulator]:
        return self.components

    def sums_about_stack(self, model: MixtureDistribution) -> bool:
        """Whether the native and band folds sum the components' centred statistics about the
        points of the whole stack (:func:`set_stack_references`): a stacked or fused update."""
        return model._stack is not None and (self._stack_update is not None
                                             or self._stack_fold is not None)

    def folds_on_torch(self, model: MixtureDistribution) -> bool:
        return self._stack_fold is not None and model._stack is not None

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: MixtureDistribution,
                   precision: str = "float64") -> np.ndarray:
        if isinstance(enc, Labelled):
            return self._labelled_update(enc, weights, model, precision)
        p = resolve_precision(precision)
        fused = self.folds_on_torch(model)
        if not p.native and not (fused and p.engine == "torch"):
            return self._band_update(enc, weights, model, precision)
        if fused and (self._fuses_natively or not p.native):
            folded = self._stack_fold(self.components, model.components, model.log_weights,
                                      enc, weights, precision)
            if folded is not None:  # None: the family's fused pass does not cover this model
                mass, lse = folded
                self.counts += mass
                return lse
        if not p.native:  # the torch engine, parameters outside the fused form
            return self._band_update(enc, weights, model, precision)
        if enc.n_rows <= self._unfused_rows:
            return self._update_in_three_steps(enc, weights, model, precision)
        # a chunk sized for the fused pass: the three steps take the rows the fold asked for
        lse = np.empty(enc.n_rows)
        for lo in range(0, enc.n_rows, self._unfused_rows):
            hi = min(enc.n_rows, lo + self._unfused_rows)
            lse[lo:hi] = self._update_in_three_steps(enc.rows(lo, hi), weights[lo:hi], model,
                                                     precision)
        return lse

    def _update_in_three_steps(self, enc: Encoded, weights: np.ndarray,
                               model: MixtureDistribution, precision: str) -> np.ndarray:
        """Score, normalise, add: a (rows, K) responsibility matrix."""
        resp, lse = model.weighted_posteriors(enc, weights, precision)
        self.counts += resp.sum(axis=0)
        self._add_components(enc, resp, model, precision)
        return lse

    def _labelled_update(self, enc: Labelled, weights: np.ndarray, model: MixtureDistribution,
                         precision: str) -> np.ndarray:
        """Rows with label priors: each row's posterior times its prior, normalised (a known
        label keeps its row in its component)."""
        scores = model.component_log_densities(enc.inner, precision) + enc.log_prior()
        resp, lse = log_normalize_rows(scores, weights)
        self.counts += resp.sum(axis=0)
        self._add_components(enc.inner, resp, model, precision)
        return lse

    def rows_per_chunk(self, model: MixtureDistribution, precision: str,
                       chunk_rows: int) -> int:
        """:data:`FUSED_CHUNK_ROWS` (at least) when the E-step may run fused; should the fused
        pass decline (a Poisson of rate 0), the rows go through the three steps
        ``chunk_rows`` at a time."""
        self._unfused_rows = chunk_rows
        p = resolve_precision(precision)
        if self.folds_on_torch(model) and p.engine == "torch" and p.device.startswith("cuda"):
            return max(chunk_rows, GPU_CHUNK_ROWS)
        if self.folds_on_torch(model) and (p.native or p.engine == "torch"):
            return max(chunk_rows, FUSED_CHUNK_ROWS)
        return chunk_rows

    def _band_update(self, enc: Encoded, weights: np.ndarray, model: MixtureDistribution,
                     precision: str) -> np.ndarray:
        """Responsibilities in the band; statistics in float64 (double-double for ``dd``). A
        band below float32 without the fused E-step has no bound on its scores' error to screen
        with (:mod:`mixfold.compute.screened`): every component is a candidate, so its rows are
        scored in float64; only ``<band>@emulated`` runs every step in the band."""
        require_band(model, precision)
        p = resolve_precision(precision)
        if p.band != "dd" and p.engine != "emulated":
            if has_missing(enc):  # (as every band path: their rows are float64's alone)
                require_native(precision, model.components[0].family_name)
            return self._update_in_three_steps(enc, weights, model, "float64")
        ops = band_ops(precision)
        if ops.band == "dd":
            return self.seq_update_dd(enc, weights, np.zeros_like(weights), model, ops)
        resp, lse = model.band_posterior_matrix(enc, ops)
        resp *= weights[:, None]
        self.counts += resp.sum(axis=0)
        self._add_components(enc, resp, model, precision)
        return lse

    def seq_update_dd(self, enc: Encoded, w_hi: np.ndarray, w_lo: np.ndarray,
                      model: MixtureDistribution, ops: Any = None) -> np.ndarray:
        """The ``dd`` band: responsibilities in double-double times the double-double row
        weights, posterior masses and every component's statistics summed in double-double.
        Returns the per-row log-density (float64)."""
        ops = band_ops("dd") if ops is None else ops
        if self.sums_about_stack(model):  # the points every other band's fold sums about, so
            set_stack_references(self.components, model.components)  # mixed plans' payloads add
        resp, lse = model.band_posterior(enc, ops)
        n, k_all = enc.n_rows, len(self.components)
        mass = DD(np.zeros((n, k_all)), np.zeros((n, k_all)))
        weighted = []
        for k, r in enumerate(resp):
            rw = DD(np.zeros(n), np.zeros(n)) if r is None else dd_mul(DD(*ops.pair(r)),
                                                                      DD(w_hi, w_lo))
            mass.hi[:, k], mass.lo[:, k] = rw.hi, rw.lo
            weighted.append(rw)
        add_into(self.counts, low_parts(self)[0], dd_sum_rows(mass))
        for k, (acc, rw) in enumerate(zip(self.components, weighted)):
            acc.seq_update_dd(child_encoding(enc, k, self.slots), rw.hi, rw.lo,
                              model.components[k], ops)
        return ops.to_float64(lse)

    def _add_components(self, enc: Encoded, resp: np.ndarray, model: MixtureDistribution,
                        precision: str) -> None:
        self.add_component_range(enc, resp, model, precision, 0, len(self.components))

    def add_component_range(self, enc: Encoded, resp: np.ndarray, model: MixtureDistribution,
                            precision: str, start: int, stop: int) -> None:
        """Add the rows to components ``[start, stop)`` with responsibilities ``resp`` (n_rows,
        K); any range gets the bits the full set gets (stacked updates go column by column)."""
        add_unit_range(self.components, self._stack_update if model._stack is not None else None,
                       self.slots, enc, resp, model.components, precision, start, stop)

    def posteriors_from_columns(self, enc: Encoded, weights: np.ndarray,
                                model: MixtureDistribution,
                                scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`MixtureDistribution.weighted_posteriors` from gathered ``scores`` (the same
        calls on the same blocks), the posterior masses added to ``counts``. The scores (rows,
        K) in Fortran order become the posteriors in place: a block of their rows has the
        serial block's layout but for its column stride, which leaves every reduction over
        the components in the same order, so the same bits."""
        lse = np.empty(scores.shape[0])

        def normalise(lo: int, hi: int) -> None:
            lse[lo:hi] = log_normalize_rows(scores[lo:hi], weights[lo:hi])[1]

        model.each_block(scores.shape[0], normalise)
        self.counts += scores.sum(axis=0)
        return scores, lse

    def add_columns(self, rows: Encoded, resp: np.ndarray, model: MixtureDistribution,
                    precision: str, start: int, stop: int,
                    fold: FoldChildren | None = None) -> None:
        if fold is None:
            self.add_component_range(rows, resp, model, precision, start, stop)
            return
        fold([ChildFold(k, self.components[k], child_encoding(rows, k, self.slots),
                        np.ascontiguousarray(resp[:, k]), model.components[k])
              for k in range(start, stop)], precision)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: InitRandom) -> None:
        # Dirichlet(1) posteriors from per-row hashes: independent of chunking and sharding.
        resp = -np.log1p(-rng.row_uniform(enc, len(self.components)))
        resp /= resp.sum(axis=1, keepdims=True)
        resp *= weights[:, None]
        self.counts += resp.sum(axis=0)
        for k, acc in enumerate(self.components):
            acc.seq_initialize(child_encoding(enc, k, self.slots), np.ascontiguousarray(resp[:, k]),
                               rng.child(k))


def set_stack_references(accs: Sequence[Accumulator], units: Sequence[Distribution],
                         start: int = 0, stop: int | None = None) -> None:
    """Give the centred statistics of accumulators ``[start, stop)`` -- and of their children,
    down the tree (a record's fields) -- the points the whole stack of ``units`` gives them: a
    function of the model alone, so every shard and every unit range sums about the same point
    and their payloads add."""
    stop = len(accs) if stop is None else stop
    if isinstance(accs[0], CentredStatistics):
        for acc, point in zip(accs[start:stop], accs[0].stack_reference(units)[start:stop]):
            acc.set_reference(point)
        return
    width = len(accs[0].children())
    below = [decomposition_for(u).units for u in units]
    if width == 0 or any(len(b) != width for b in below):
        return
    for i in range(width):
        set_stack_references([a.children()[i] for a in accs], [b[i] for b in below], start, stop)


def add_unit_range(accs: Sequence[Accumulator], stack_update: Any, slots: tuple[int, ...] | None,
                   enc: Encoded, resp: np.ndarray, units: Sequence[Distribution], precision: str,
                   start: int, stop: int) -> None:
    """Add rows weighted by ``resp[:, k]`` to the accumulators of units ``[start, stop)``
    (a stacked update sums centred statistics about the points the units give them)."""
    if stack_update is not None:
        set_stack_references(accs, units, start, stop)
        stack_update(accs[start:stop], enc, resp[:, start:stop])
        return
    for k in range(start, stop):
        accs[k].seq_update(child_encoding(enc, k, slots), np.ascontiguousarray(resp[:, k]),
                           units[k], precision)


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
        slots = _slots(encoder)
        comps = [c.bind(encoder if slots is None else encoder.child_encoder(k))
                 for k, c in enumerate(self.components)]
        return MixtureEstimator(comps, self.pseudo_count, self.keys,
                                weights_prior=self.weights_prior)

    def _make(self) -> MixtureAccumulator:
        return MixtureAccumulator([c.accumulator_factory().make() for c in self.components],
                                  self._encoding_slots(), self.keys)

    def _encoding_slots(self) -> tuple[int, ...] | None:
        """Which shared encoding each component reads (``None``: one encoding for all): found
        once, as the component estimators (and so their encoders) do not change."""
        if "_slots_found" not in self.__dict__:
            self._slots_found = _slots(self.encoder())
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
        convergence), each component started from its cluster (scikit-learn's k-means
        initialisation, which runs one). Other families: each component starts from a few seeded
        random rows, then a few EM iterations on the sample separate them. Components are
        finally guessed from their rows with every other sample row at a small weight, so that
        no component starts blind to a value the sample contains.
        """
        if isinstance(sample, Labelled):  # the unlabelled guess, its posteriors times the labels
            guess = self.initial_guess(sample.inner, weights, rng)
            return self._guess_from(sample.inner, weights, guess.seq_posterior(sample), rng)
        k, n = self.num_components, sample.n_rows
        gen = rng.generator()
        family = self._component_family()
        if isinstance(family, type) and issubclass(family, SeedsFromPoints) \
                and _slots(self.encoder()) is None and n >= k:
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
                fold_rows(acc, sample, weights, guess, "float64", DEFAULT_CHUNK_ROWS)
                acc.tie_keys()
                guess = self.estimate(total_weight, acc.value())
            except (NumericalError, ParameterError):
                break
        return self._guess_from(sample, weights, guess.seq_posterior(sample), rng)

    def _guess_from(self, sample: Encoded, weights: np.ndarray, resp: np.ndarray,
                    rng: InitRandom) -> MixtureDistribution:
        """Components guessed from posterior-weighted sample rows, plus a 5% background."""
        slots = _slots(self.encoder())
        mass = resp.T @ weights
        comps = []
        for j, est in enumerate(self.components):
            background = 0.05 * mass[j] / max(float(weights.sum()), 1e-300)
            w = weights * (resp[:, j] + background)
            comps.append(est.initial_guess(child_encoding(sample, j, slots), w, rng.child(j)))
        mass = mass + 0.01 * weights.sum() / len(mass) + 1e-12
        return MixtureDistribution(comps, mass / mass.sum())

    def _component_family(self) -> type | None:
        classes = {type(c) for c in self.components}
        return classes.pop().distribution_class if len(classes) == 1 else None

    def __repr__(self) -> str:
        return f"MixtureEstimator({list(self.components)!r})"


def kmeans_labels(points: np.ndarray, weights: np.ndarray, k: int, gen: np.random.Generator,
                  iterations: int, runs: int = 1) -> np.ndarray:
    """Cluster labels of ``points`` (n, D): the lowest-inertia of ``runs`` k-means runs, each
    greedy k-means++ seeding then Lloyd's iterations, on the points centred first (the
    expanded distances cancel nothing far from the origin)."""
    points = points - weighted_centre(points, weights)
    sq = np.einsum("ij,ij->i", points, points)
    best, best_inertia = None, np.inf
    for _ in range(runs):
        labels, inertia = _lloyd(points, sq, weights, _greedy_seeds(points, sq, weights, k, gen),
                                 iterations)
        if best is None or inertia < best_inertia:
            best, best_inertia = labels, inertia
    return best


def _greedy_seeds(points: np.ndarray, sq: np.ndarray, weights: np.ndarray, k: int,
                  gen: np.random.Generator) -> np.ndarray:
    """Greedy weighted k-means++: each new centre is the best (lowest potential) of
    2 + log(k) candidates drawn in proportion to the squared distance (scikit-learn's)."""
    n = points.shape[0]
    trials = 2 + int(np.log(k))
    p = weights / weights.sum()
    first = points[gen.choice(n, p=p)]
    centers = [first]
    d2 = np.maximum(sq - 2 * points @ first + first @ first, 0.0)
    for _ in range(1, k):
        score = d2 * weights
        if not 0 < score.sum() < np.inf:  # all points on the centres, or distances overflowed
            candidates = gen.choice(n, size=trials, p=p)
        else:
            candidates = gen.choice(n, size=trials, p=score / score.sum())
        c = points[candidates]
        to_each = np.maximum(sq[:, None] - 2 * points @ c.T + np.einsum("ij,ij->i", c, c), 0.0)
        closer = np.minimum(d2[:, None], to_each)
        pick = int(np.argmin(weights @ closer))
        centers.append(c[pick])
        d2 = closer[:, pick]
    return np.array(centers)


def _lloyd(points: np.ndarray, sq: np.ndarray, weights: np.ndarray, c: np.ndarray,
           iterations: int) -> tuple[np.ndarray, float]:
    """Lloyd's iterations from the centres ``c`` until no label changes (or ``iterations``):
    the labels and their weighted inertia."""
    k = c.shape[0]
    labels = np.full(points.shape[0], -1, dtype=np.int64)
    dist = np.zeros((points.shape[0], k))
    for _ in range(iterations):
        dist = sq[:, None] - 2 * points @ c.T + np.einsum("ij,ij->i", c, c)[None, :]
        new = dist.argmin(axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        mass = np.bincount(labels, weights=weights, minlength=k)
        sums = np.zeros_like(c)
        np.add.at(sums, labels, points * weights[:, None])
        filled = mass > 0
        c[filled] = sums[filled] / mass[filled, None]
    inertia = float(weights @ np.maximum(dist[np.arange(len(labels)), labels], 0.0))
    return labels, inertia
