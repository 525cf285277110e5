"""A covariance matrix held with its Cholesky factors: checked (finite, symmetric, positive
definite), factored once -- up to :data:`COMPILED_FACTOR_MAX_DIM` coordinates by one compiled
call for a whole stack (:func:`~mixfold.compute.numba_gaussian.factor_covariances`), wider by
LAPACK -- and shared read-only by the components of a tied covariance; and the floor an
estimated covariance's diagonal gets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.kernels import full_gaussian_kernels
from mixfold.errors import ParameterError
from mixfold.families._centred import ROUNDOFF_FLOOR, variance_floor
from mixfold.families._scipy import dpotrf, dtrtrs

__all__ = ["FactoredCovariance", "SYMMETRY_TOLERANCE", "COMPILED_FACTOR_MAX_DIM",
           "checked_array", "covariance_floor"]


#: How far from symmetric (relative to the largest entry) a given covariance may be.
SYMMETRY_TOLERANCE = 1e-10
#: The widest covariance the compiled factorisation takes: its unblocked loops grow as D^3,
#: LAPACK's calls cost a fixed few microseconds more; past about here LAPACK's blocked
#: factorisation wins (benchmarks/full_gaussian_factor.py)
COMPILED_FACTOR_MAX_DIM = 32


def checked_array(name: str, value: Any, ndim: int) -> np.ndarray:
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be an array of numbers, got {value!r}") from None
    if a.ndim != ndim or a.size == 0:
        raise ParameterError(f"{name} must be a non-empty {ndim}-d array, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ParameterError(f"{name} must be finite, got {a.tolist()}")
    return a


def covariance_floor(diag: np.ndarray, reg_covar: float, mode: str) -> np.ndarray:
    """What an estimated covariance's diagonal ``diag`` gets added: ``reg_covar`` (``mode``
    ``"relative"``: times each entry, a collapsed column the component's own scale), at least
    :data:`~mixfold.families._centred.ROUNDOFF_FLOOR` of each entry.

    >>> covariance_floor(np.array([4.0, 0.0]), 0.5, "relative").tolist()
    [2.0, 2.0]
    """
    floor = variance_floor(diag, reg_covar, mode)
    if mode == "relative":  # a collapsed column: the component's own scale
        floor = np.where(diag > 0, floor, reg_covar * max(float(diag.max()), 1.0))
    return np.maximum(floor, ROUNDOFF_FLOOR * np.maximum(diag, 0.0))


class FactoredCovariance:
    """A distribution holding a covariance ``cov`` (D, D) with its factors: ``cov_cholesky``
    (L, ``L L^T = cov``), ``precision_cholesky`` (U, upper triangular, ``U U^T = cov^-1``) and
    ``log_det_precision_cholesky``; its location ``mu`` (D,). Components may share one
    covariance's factors (a tied mixture)."""

    mu: np.ndarray

    def _factor(self, cov: np.ndarray, eye: np.ndarray) -> None:
        """Hold the symmetric ``cov`` (D, D) and its factors, read-only: L (LAPACK directly, as
        scipy.linalg's cholesky and solve_triangular call it; their checks cost more than a
        small factorisation), then U = (L^-1)^T from ``eye``, the identity (D, D); at small D
        the compiled factorisation's (:func:`_compiled_factors`)."""
        factored = _compiled_factors(cov[None])
        if factored is not None:
            self._hold(*(a[0] for a in factored))
            return
        cov_chol, info = dpotrf(cov, lower=1, clean=1)
        if info != 0:
            raise ParameterError(f"cov must be positive definite, got {cov.tolist()}")
        self.cov = cov
        self.cov_cholesky = cov_chol
        self.precision_cholesky = dtrtrs(cov_chol, eye, lower=1)[0].T
        self.log_det_precision_cholesky = float(np.log(self.precision_cholesky.diagonal()).sum())
        for a in (self.cov, self.cov_cholesky, self.precision_cholesky):
            a.setflags(write=False)

    def _hold(self, cov: np.ndarray, cov_chol: np.ndarray, prec_chol: np.ndarray,
              log_det: float) -> None:
        """Hold a compiled factorisation's read-only arrays."""
        self.cov, self.cov_cholesky, self.precision_cholesky = cov, cov_chol, prec_chol
        self.log_det_precision_cholesky = float(log_det)

    @classmethod
    def stack_of(cls, mu: np.ndarray, cov: np.ndarray) -> list[Any]:
        """The K distributions of an M-step's own float64 arrays ``mu`` (K, D) and ``cov``
        (K, D, D), or (1, D, D): one covariance shared by all, factored once (a tied mixture's
        components, as :meth:`tied` makes them). Validated once for the stack (finite; each
        covariance symmetrised as the constructor does, then factored); each distribution holds
        its row of ``mu``, made read-only. Parameters the constructor refuses raise its error.

        >>> from mixfold import MultivariateGaussianDistribution
        >>> a, b = MultivariateGaussianDistribution.stack_of(np.array([[0.0], [1.0]]),
        ...                                                  np.array([[[4.0]]]))
        >>> b.mu.tolist(), b.precision_cholesky is a.precision_cholesky
        ([1.0], True)
        """
        if not (np.isfinite(mu).all() and np.isfinite(cov).all()):
            if len(cov) == 1:
                return cls(mu[0], cov[0]).sharing_covariance(mu)
            return [cls(m, c) for m, c in zip(mu, cov)]
        factors = _compiled_factors(cov)
        factored = []
        if factors is not None:
            for arrays in zip(*factors):
                one = cls.__new__(cls)  # the checks of __init__, made above for the whole stack
                one._hold(*arrays)
                one.missing = False
                factored.append(one)
        else:
            eye = np.eye(mu.shape[1])
            for c in 0.5 * (cov + cov.transpose(0, 2, 1)):
                one = cls.__new__(cls)
                one._factor(c, eye)
                one.missing = False
                factored.append(one)
        mu.setflags(write=False)
        return [factored[k if len(factored) > 1 else 0]._moved(m) for k, m in enumerate(mu)]

    @classmethod
    def tied(cls, means: Sequence[Sequence[float]] | np.ndarray,
             cov: Sequence[Sequence[float]] | np.ndarray,
             missing: bool = False) -> list[Any]:
        """Distributions with these means (array of shape (K, D)) and one covariance (D, D), as
        a tied mixture's components: the covariance is factored once and its factors shared,
        so the stacked scoring whitens each block of rows once for all of them.

        >>> from mixfold import MultivariateGaussianDistribution
        >>> a, b = MultivariateGaussianDistribution.tied([[0.0, 0.0], [1.0, 2.0]], np.eye(2))
        >>> a.precision_cholesky is b.precision_cholesky, b.mu.tolist()
        (True, [1.0, 2.0])
        """
        means_arr = checked_array("means", means, 2)
        return cls(means_arr[0], cov, missing).sharing_covariance(means_arr)

    def sharing_covariance(self, means: Sequence[Sequence[float]] | np.ndarray
                           ) -> list[Any]:
        """Distributions with these means (array of shape (K, D)), each sharing this one's
        covariance and its (read-only) factors: a tied mixture's components from one
        factorisation.

        >>> from mixfold import MultivariateGaussianDistribution
        >>> d = MultivariateGaussianDistribution([0.0, 0.0], [[2.0, 0.5], [0.5, 1.0]])
        >>> a, b = d.sharing_covariance([[1.0, 2.0], [3.0, 4.0]])
        >>> b.mu.tolist(), b.cov is d.cov
        ([3.0, 4.0], True)
        """
        means_arr = checked_array("means", means, 2)
        if means_arr.shape[1] != self.dim:
            raise ParameterError(f"means must have shape (K, {self.dim}) for a ({self.dim}, "
                                 f"{self.dim}) cov, got {means_arr.shape}")
        means_arr.setflags(write=False)  # checked once: each component holds its row (a view)
        return [self._moved(mu) for mu in means_arr]

    def with_mean(self, mu: Sequence[float] | np.ndarray) -> Any:
        """This distribution moved to the mean ``mu`` (length D), its covariance's factors
        shared, not recomputed (a tied covariance's components).

        >>> from mixfold import MultivariateGaussianDistribution
        >>> a = MultivariateGaussianDistribution([0.0, 0.0], np.eye(2))
        >>> b = a.with_mean([1.0, 2.0])
        >>> b.precision_cholesky is a.precision_cholesky, b.mu.tolist()
        (True, [1.0, 2.0])
        """
        mu_arr = checked_array("mu", mu, 1)
        if mu_arr.size != self.dim:
            raise ParameterError(f"mu must have length {self.dim}, got {mu_arr.size}")
        mu_arr.setflags(write=False)
        return self._moved(mu_arr)

    def _moved(self, mu: np.ndarray) -> Any:
        """A shallow copy at the checked, read-only mean ``mu`` (as ``copy.copy`` makes it, a
        plain instance dict, without its protocol's cost: a tied M-step makes K each
        iteration)."""
        moved = object.__new__(type(self))
        moved.__dict__.update(self.__dict__)
        moved.mu = mu
        return moved


def _compiled_factors(cov: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(symmetrised covariances, L, U = (L^-1)^T, each (K, D, D) and read-only; log|U| (K,)) of
    the finite stack ``cov`` (K, D, D) in one compiled call, or ``None`` past
    :data:`COMPILED_FACTOR_MAX_DIM` or without numba (LAPACK's, one covariance at a time). A
    covariance that is not positive definite raises the constructor's error."""
    kernels = full_gaussian_kernels() if cov.shape[-1] <= COMPILED_FACTOR_MAX_DIM else None
    if kernels is None:
        return None
    sym, low, up = (np.empty(cov.shape) for _ in range(3))
    log_det = np.empty(len(cov))
    failed = kernels["factor_covariances"](np.ascontiguousarray(cov, dtype=np.float64), sym, low,
                                           up, log_det)
    if failed >= 0:
        raise ParameterError(f"cov must be positive definite, got {sym[failed].tolist()}")
    for a in (sym, low, up):
        a.setflags(write=False)
    return sym, low, up, log_det
