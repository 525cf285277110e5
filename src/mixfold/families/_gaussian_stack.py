"""K univariate Gaussians scored at once (a mixture's components, the hidden states'
emissions): the stacked scoring a :class:`~mixfold.GaussianDistribution` inherits, and its
relative scores far from the origin, where ``x - mu`` no longer tells the means apart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import RelativeScoring, StackedScoring
from mixfold.compute.logspace import LOG_2PI, far_rows
from mixfold.families._protocol import Encoded
from mixfold.precision import native_dtype
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["GaussianStack"]


class GaussianStack(StackedScoring, RelativeScoring):
    """What K univariate Gaussians (``mu``, ``sigma2`` each) do at once."""

    @classmethod
    def stack_log_density(cls, components: Sequence[Any], enc: Encoded,
                          precision: Precision = FLOAT64) -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K)."""
        dt = native_dtype(precision)
        mu = np.array([c.mu for c in components], dtype=dt)
        s2 = np.array([c.sigma2 for c in components])
        x = enc.values.astype(dt, copy=False)
        out = np.subtract.outer(mu, x)  # (K, n): returned transposed, Fortran-ordered (n, K)
        with np.errstate(over="ignore"):  # far rows score -inf here; posteriors rank them apart
            out *= out
        out *= (-0.5 / s2).astype(dt)[:, None]
        out += (-0.5 * (LOG_2PI + np.log(s2))).astype(dt)[:, None]
        return out.T

    @classmethod
    def stack_relative_log_density(cls, components: Sequence[Any],
                                   enc: Encoded) -> np.ndarray:
        """Log-densities less a per-row constant, (n_rows, K), finite for any finite row.

        Far out (:meth:`stack_far_rows`) ``(x - mu_k)^2 / s2_k - (x - mu_b)^2 / s2_b`` (b the
        row's best component) is taken as ``x^2`` times the gap of the coefficients of
        ``1, 1/x, 1/x^2``, each a difference of parameters: two components of one variance
        still differ by their means at x = 1e200 (or 1e20), where ``x - mu`` no longer does.

        >>> from mixfold import GaussianDistribution
        >>> comps = [GaussianDistribution(0.0, 1.0), GaussianDistribution(1.0, 1.0)]
        >>> enc = GaussianDistribution(0, 1).encoder().encode([1e200, 0.25])
        >>> GaussianDistribution.stack_relative_log_density(comps, enc).round(4).tolist()
        [[-1e+200, -0.9189], [-0.9502, -1.2002]]
        """
        mu = np.array([c.mu for c in components])
        p = 1.0 / np.array([c.sigma2 for c in components])
        const = -0.5 * (LOG_2PI - np.log(p))
        x = enc.values[:, None]
        near = ~cls.stack_far_rows(components, enc)[:, None]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = -0.5 * (x - mu) ** 2 * p + const
            inv = np.where(near, 0.0, 1.0 / x)
            coef = (p, -2.0 * mu * p, mu * mu * p)  # of x^2 (x^0, x^-1, x^-2)

            def gap(best: np.ndarray) -> np.ndarray:
                return sum((c - c[best][:, None]) * inv ** i for i, c in enumerate(coef))

            first = gap(np.zeros(len(x), dtype=int))
            g = gap(np.argmin(first, axis=1))
            far = np.where(g > 0, -0.5 * np.abs(x) * (np.abs(x) * g), 0.0) + const
        return np.where(near, out, far)

    @classmethod
    def stack_far_rows(cls, components: Sequence[Any],
                       enc: Encoded) -> np.ndarray:
        """Rows :data:`~mixfold.compute.logspace.FAR_OUT` times the components' scale from the
        origin (:func:`~mixfold.compute.logspace.far_rows`)."""
        return far_rows(enc.values[:, None], np.array([c.mu for c in components]),
                        np.sqrt([c.sigma2 for c in components]))
