"""K diagonal Gaussians scored at once (a mixture's components, the hidden states' emissions):
the stacked scoring a :class:`~mixfold.DiagonalGaussianDistribution` inherits, on the rows
centred on the mean of the component means, and the K distributions of an M-step's (K, D)
arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import RelativeScoring, StackedScoring
from mixfold.compute.linear import centred_gaussian
from mixfold.compute.logspace import LOG_2PI, affine_far_rows, relative_affine_scores
from mixfold.families._missing import has_missing, require_native
from mixfold.families._protocol import Encoded
from mixfold.precision import native_dtype
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["DiagonalStack", "centred_terms"]


class DiagonalStack(StackedScoring, RelativeScoring):
    """What K diagonal Gaussians (``mu``, ``sigma2`` of length D each) do at once."""

    @classmethod
    def stack_of(cls, mu: np.ndarray, sigma2: np.ndarray) -> list[Any]:
        """The K distributions of the rows of an M-step's own float64 arrays ``mu`` (K, D) and
        ``sigma2`` (K, D) or (1, D) (one row: shared by all), validated once for the stack; the
        arrays become read-only, each distribution holding its rows as views. Parameters the
        constructor refuses raise its error, naming the component's field."""
        if not (np.isfinite(mu).all() and np.isfinite(sigma2).all() and (sigma2 > 0).all()):
            return [cls(m, v) for m, v in zip(mu, np.broadcast_to(sigma2, mu.shape))]
        mu.setflags(write=False)
        sigma2.setflags(write=False)
        out = []
        for k, m in enumerate(mu):
            d = cls.__new__(cls)  # the checks of __init__, made above for the whole stack
            d.mu, d.sigma2, d.missing = m, sigma2[k if len(sigma2) > 1 else 0], False
            out.append(d)
        return out

    #: ``stack_log_density`` takes ``units=(start, stop)`` (the centre is shared by the stack)
    stack_units = True

    @classmethod
    def stack_log_density(cls, components: Sequence[Any], enc: Encoded,
                          precision: Precision = FLOAT64,
                          units: tuple[int, int] | None = None) -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K).

        ``log p_k(x) = [(x-c)^2, x-c] @ [-1/(2 s2_k); (mu_k-c)/s2_k] + c_k``, no (n_rows, K, D)
        temporary. Rows are centred on the mean of the component means ``c`` first, so the
        expansion cancels little even far from the origin or in float32. Each column is its
        own matrix-vector product, so ``units=(start, stop)`` computes only those columns with
        the bits of the full call (model-parallel workers score ranges apart).
        """
        start, stop = (0, len(components)) if units is None else units
        if has_missing(enc):
            require_native(precision, "DiagonalGaussian")
            return np.stack([c.observed_log_density(enc.patterns)
                             for c in components[start:stop]], axis=1)
        out = np.empty((stop - start, enc.n_rows), dtype=native_dtype(precision))
        _centred_scores(components, np.zeros(len(components)), enc.values, precision, start,
                        stop, out)
        return out.T  # (n, K) in Fortran order: the log-sum-exp reduces contiguous columns

    @classmethod
    def stack_relative_log_density(cls, components: Sequence[Any],
                                   enc: Encoded) -> np.ndarray:
        """Log-densities less each row's largest quadratic part, (n_rows, K), finite for any
        finite row (:func:`~mixfold.compute.logspace.relative_affine_scores`)."""
        mu = np.array([c.mu for c in components])
        s2 = np.array([c.sigma2 for c in components])
        const = -0.5 * (mu.shape[1] * LOG_2PI + np.log(s2).sum(axis=1))
        return relative_affine_scores(enc.values, mu, 1.0 / np.sqrt(s2), const)

    @classmethod
    def stack_far_rows(cls, components: Sequence[Any],
                       enc: Encoded) -> np.ndarray:
        """Rows the plain scores cannot rank
        (:func:`~mixfold.compute.logspace.affine_far_rows`)."""
        return affine_far_rows(enc.values, np.array([c.mu for c in components]),
                               1.0 / np.sqrt([c.sigma2 for c in components]))


def centred_terms(components: Sequence[Any]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~mixfold.compute.linear.centred_gaussian` of the components: (centre,
    coefficients (K, 2D) on ``[(x-c)^2, x-c]``, constants (K,), peaks (K,))."""
    return centred_gaussian(np.array([c.mu for c in components]),
                            np.array([c.sigma2 for c in components]))


def _centred_features(x: np.ndarray, center: np.ndarray,
                      dt: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """``((x - c)^2, x - c)``, two contiguous arrays (n_rows, D) in ``dt``."""
    xc = np.subtract(x, center, dtype=dt)
    with np.errstate(over="ignore"):  # far rows score -inf here; posteriors rank them apart
        return xc * xc, xc


def _centred_scores(components: Sequence[Any], log_weights: np.ndarray,
                    x: np.ndarray, precision: Precision, start: int, stop: int,
                    out: np.ndarray) -> None:
    """Weighted log-densities of components ``[start, stop)`` into the rows of ``out``
    ((stop - start, n_rows)), one matrix-vector product per component and feature block."""
    dt = native_dtype(precision)
    center, coef, const, _ = centred_terms(components)
    sq, xc = _centred_features(x, center, dt)
    d = xc.shape[1]
    bias = (const + log_weights).astype(dt)
    for j, c in enumerate(range(start, stop)):
        np.matmul(sq, coef[c, :d].astype(dt), out=out[j])
        out[j] += xc @ coef[c, d:].astype(dt)
        out[j] += bias[c]
