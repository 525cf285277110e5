"""What a family may promise beyond the protocol: one mixin per optional capability.

A distribution or accumulator class says what it can do by the mixins it inherits; combinators,
the precision bands and the compute layer ask ``isinstance`` / ``issubclass``, never for a method
by name. Each mixin names the methods that implementing it promises (abstract, so a class that
declares a capability without its methods cannot be instantiated). The family contract
(:mod:`mixfold.families.contract`) exports them beside the roles, so a family imports its whole
contract from one module; they live here, below the compute layer, because it asks for them.

A capability that depends on how a class reads its rows (linear terms, double-double sums) is
not inherited silently: a subclass that reads its rows otherwise (overrides ``_add``) without
defining the promised methods again (itself or below) does not have it (LogGaussian's
accumulator reads ``log x`` and defines its own ``linear_terms`` but no ``_add_dd``).

>>> from mixfold import GaussianDistribution, PoissonDistribution
>>> issubclass(GaussianDistribution, RunsInBands), issubclass(PoissonDistribution, RunsInBands)
(True, False)
>>> from mixfold.families.gaussian import GaussianAccumulator
>>> from mixfold.families.log_gaussian import LogGaussianAccumulator
>>> [issubclass(a, CompensatedAccumulation) for a in (GaussianAccumulator, LogGaussianAccumulator)]
[True, False]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:  # the precision package imports these capabilities
    from mixfold.precision.bands import Precision

__all__ = ["StackedScoring", "SeedsFromPoints", "RunsInBands", "StackedUpdate", "FusedFold",
           "LinearInFeatures", "LinearInFeaturesInBands", "CompensatedAccumulation",
           "FoldsOnTorch", "CentredStatistics", "RelativeScoring", "SharesCovariance",
           "VariationalBound", "StackedEstimate", "NormalisesStack", "StackedStatistics",
           "ChunkStatistics"]


class _ReadsRows(ABC):  # noqa: B024 -- its subclasses name the abstract methods
    """Base of the capabilities tied to how a class reads its rows (``_promises``)."""

    _promises: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __subclasshook__(cls, sub: type) -> bool:
        if "_promises" not in vars(cls) or cls not in sub.__mro__:
            return NotImplemented
        # the promise must be kept by the class that reads the rows, or by one below it
        reader = _defined_at(sub, "_add")
        return reader is None or all(_defined_at(sub, m) <= reader for m in cls._promises)


def _defined_at(cls: type, name: str) -> int | None:
    """Position in ``cls``'s MRO of the class that defines ``name`` (``None``: none does)."""
    return next((i for i, c in enumerate(cls.__mro__) if name in vars(c)), None)


# ---------------------------------------------------------------------------------------------
# Distributions


class StackedScoring(ABC):
    """Scores K components of this one class in one call (a mixture's E-step without a loop).

    ``stack_units = True`` says the stack shares something across components (a centre), so a
    range of components is scored through ``units=(start, stop)`` for the same bits as in the
    full call; otherwise each column is scored on its own and a range is scored alone.
    """

    stack_units: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def stack_log_density(cls, components: Sequence[Any], enc: Any,
                          precision: Precision = ...) -> np.ndarray:
        """log p_k(x) of every row under every component, array of shape (n_rows, K) (with
        ``stack_units``, also a keyword ``units=(start, stop)``: those columns only)."""

    @classmethod
    def can_stack(cls, components: Sequence[Any]) -> bool:
        """Whether these components stack (a combinator stacks when its children do)."""
        return True


class RelativeScoring(ABC):
    """Scores K components relative to each row's best without overflow: the posterior of a
    row whose every log-density lies below the smallest float (x = 1e200 under Gaussians) is
    still a distribution."""

    @classmethod
    @abstractmethod
    def stack_relative_log_density(cls, components: Sequence[Any], enc: Any) -> np.ndarray:
        """``log p_k(x) - a(x)`` of every row under every component, (n_rows, K), for some
        per-row ``a(x)`` that keeps the values finite."""

    @classmethod
    @abstractmethod
    def stack_far_rows(cls, components: Sequence[Any], enc: Any) -> np.ndarray:
        """Which rows (bool, n_rows) the plain log-densities cannot rank: so far from the
        components that ``x - mu`` has lost the means' digits (or every log-density is below
        the smallest float). A mixture's posterior scores these rows relatively."""


class NormalisesStack(ABC):
    """Its stack's scores are normalised by the stack's own row normalisation in every path a
    mixture's fold takes (its fused pass, the three steps, the model-parallel column fold), so
    that they all give the same bits."""

    @staticmethod
    @abstractmethod
    def stack_normalise(scores: np.ndarray, weights: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """Turn (n_rows, K) scores into posteriors times the row ``weights`` (n_rows,) in
        place; return (posteriors, log-sum-exp per row)."""


class SeedsFromPoints(ABC):
    """Rows are points of a space k-means can cluster: a mixture seeds its components by
    k-means++ on :meth:`stack_points`."""

    @staticmethod
    @abstractmethod
    def stack_points(enc: Any) -> np.ndarray:
        """The rows as points, float64 array of shape (n_rows, dim)."""


class RunsInBands(ABC):
    """Scores its rows in every precision band (fp8, bfloat16, float16, dd) through the band's
    operations, never silently in float64."""

    @abstractmethod
    def band_log_density(self, enc: Any, ops: Any) -> Any:
        """Per-row log-density computed with ``ops`` (a ``BandOps``); values stay in the band."""


# ---------------------------------------------------------------------------------------------
# Accumulators


class StackedUpdate(ABC):
    """Adds rows to K accumulators of this class at once from a responsibility matrix."""

    @staticmethod
    @abstractmethod
    def stack_update(accs: Sequence[Any], enc: Any, resp: np.ndarray) -> None:
        """Add rows; ``resp`` (n_rows, K) already includes row weights. Column by column, so a
        range of components added apart gets the same bits."""


class FusedFold(ABC):
    """Scores, normalises and accumulates a mixture's chunk of rows in one fused pass."""

    @staticmethod
    @abstractmethod
    def stack_fold(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                   enc: Any, weights: np.ndarray, precision: Precision = ...
                   ) -> tuple[np.ndarray, np.ndarray] | None:
        """(posterior mass per component, per-row log-density), or ``None`` when these
        parameters fall outside the fused form (the mixture then runs its three steps)."""


class StackedStatistics(ABC):
    """Gives K estimators of this one class (a mixture's children) their statistics over one
    chunk of rows directly, as their accumulators' ``value()`` would after that chunk alone: a
    small fit's iteration makes no accumulator."""

    @staticmethod
    @abstractmethod
    def stack_statistics(estimators: Sequence[Any], components: Sequence[Any],
                         log_weights: np.ndarray, enc: Any, weights: np.ndarray,
                         precision: Precision = ...
                         ) -> tuple[np.ndarray, list[Any], np.ndarray] | None:
        """(posterior mass per component, each component's statistics, per-row log-density),
        or ``None`` outside the form (the caller folds into accumulators)."""


class ChunkStatistics(ABC):
    """An estimator whose statistics over one chunk of rows come without accumulators (its
    children :class:`StackedStatistics`): the local backend's iteration over resident rows
    that fit one chunk asks it first."""

    @abstractmethod
    def chunk_statistics(self, model: Any, enc: Any, weights: np.ndarray,
                         precision: Precision = ...) -> tuple[Any, np.ndarray] | None:
        """(what ``accumulator_factory().make()`` gives as ``value()`` after folding ``enc``
        under ``model``, the per-row log-density), or ``None``: fold into accumulators."""


class FoldsOnTorch(ABC):
    """Folds a model on the torch band engine (the fused linear E-step,
    :mod:`mixfold.compute.linear_torch`) when the model's form allows: asked before any row is
    folded, so a model neither it nor the element-by-element path runs is refused up front."""

    @abstractmethod
    def folds_on_torch(self, model: Any) -> bool:
        """Whether this accumulator's fold of ``model`` goes through the torch engine."""


class LinearInFeatures(_ReadsRows):
    """Its log-density is linear in features of the rows: the fused linear E-step
    (:func:`mixfold.compute.linear.linear_fold`) scores and accumulates it."""

    _promises = ("linear_terms",)

    @staticmethod
    @abstractmethod
    def linear_terms(accs: Sequence[Any], components: Sequence[Any], enc: Any) -> Any:
        """The ``LinearTerms`` of K components on ``enc``, or ``None`` outside the form."""


class LinearInFeaturesInBands(LinearInFeatures):
    """Linear in features too, but its own native path is the faster exact one (its features
    grow as D^2): the fused E-step runs it in the bands below float32 only."""


class CompensatedAccumulation(_ReadsRows):
    """Adds rows with double-double weights into double-double statistics (the ``dd`` band)."""

    _promises = ("_add_dd",)

    @abstractmethod
    def _add_dd(self, x: np.ndarray, w_hi: np.ndarray, w_lo: np.ndarray) -> None:
        """Add the rows ``x`` with weights ``w_hi + w_lo``, mirroring ``_add``."""


class CentredStatistics(ABC):
    """Sums its rows about a reference point carried in its payload (as ``sum w * c``, so the
    additive reduce keeps it): the statistics do not depend on where the data sits. Rows added
    without their model (a stacked update) are summed about the point :meth:`set_reference`
    gave; statistics about two points are added only after :meth:`recentre`."""

    @staticmethod
    @abstractmethod
    def stack_reference(components: Sequence[Any]) -> np.ndarray:
        """The reference points (one per component, array of shape (K, D)) of accumulators
        whose rows are added under ``components`` together: the same whatever range of them is
        added (a Gaussian stack shares one point, its centre)."""

    @abstractmethod
    def set_reference(self, point: np.ndarray) -> None:
        """Sum the rows added from now on about ``point``."""

    @abstractmethod
    def has_point(self) -> bool:
        """Whether the point rows are summed about is fixed already (set, or taken by earlier
        rows): a family's own model then does not move it."""

    @abstractmethod
    def reference(self) -> np.ndarray | None:
        """The point the statistics are summed about (``None`` while they hold no weight)."""

    @abstractmethod
    def recentre(self, point: np.ndarray) -> None:
        """Move the statistics to be about ``point`` (the same rows, another reference)."""


# ---------------------------------------------------------------------------------------------
# Estimators


class SharesCovariance(ABC):
    """A Gaussian estimator whose covariance may be shared (``covariance_keys``) with the other
    children of its mixture or hidden Markov model that name the same key: the combinator pools
    what :meth:`covariance_scatter` gives and hands the sums to :meth:`estimate_shared`
    (:func:`mixfold.families._shared_covariance.estimate_children`)."""

    covariance_keys: str | None = None

    @abstractmethod
    def covariance_scatter(self, nobs: float, stats: Any) -> tuple[float, np.ndarray,
                                                                     np.ndarray]:
        """(weight, mean, scatter about the mean): this component's share of the pooled
        covariance, its mean as its own ``estimate`` would make it."""

    @abstractmethod
    def estimate_shared(self, mu: np.ndarray, weight: float, scatter: np.ndarray,
                        made: list[Any]) -> Any:
        """The component of mean ``mu`` and the covariance of the pooled ``weight`` and
        ``scatter``; ``made`` holds the group's components made so far (their factors may be
        shared)."""


class VariationalBound(ABC):
    """A model fitted by variational EM: its log-density is ``log sum_k exp(E_q[log w_k] +
    E_q[log p_k(x)])``, so the fit loop's fold gives the data term of the evidence lower
    bound, and the model gives the rest (``FitResult.lower_bound``)."""

    @abstractmethod
    def kl_to_prior(self) -> float:
        """``KL(q || prior)`` of the model's parameters (weights and components)."""


class StackedEstimate(ABC):
    """Makes the M-step of K estimators of this one class at once (a mixture's or hidden
    Markov model's children), their statistics read as stacked arrays."""

    @staticmethod
    @abstractmethod
    def stack_estimate(estimators: Sequence[Any], masses: np.ndarray,
                       stats: Sequence[Any]) -> list[Any] | None:
        """The K distributions ``estimators[k].estimate(masses[k], stats[k])`` would make (the
        covariance keys honoured), or ``None`` where these estimators or statistics fall
        outside the stacked form (the caller then estimates each child)."""
