"""The latent precision scale of a multivariate t's rows (a Gaussian ``N(mu, scale / u)`` with
``u`` Gamma(``nu / 2``, rate ``nu / 2``)): what each row's posterior needs under a model, and the
statistics its E-step sums, weighted by the posterior mean of ``u``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.families._centred import VectorMoments
from mixfold.families._missing import (MissingPatterns, add_weighted_outer, fill_for_points,
                                       has_missing, require_native)
from mixfold.families._protocol import Encoded
from mixfold.families._scipy import digamma, gammaln
from mixfold.families.contract import LeafAccumulator
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["RowScales", "MultivariateStudentTAccumulator"]


class RowScales:
    """What the latent precision scale ``u`` of each row is under a model: ``observed`` (n,)
    the coordinates seen, ``distance`` (n,) the squared Mahalanobis distance ``delta^2`` of
    the seen coordinates, ``half_log_det`` (n,) half the log-determinant of their scale block,
    and for rows that miss entries the rows ``filled`` with their conditional means and the
    conditional scales ``covs`` of the missing blocks (per group of patterns)."""

    def __init__(self, dist: Any, enc: Encoded):
        g = dist.gaussian
        self.covs: list[np.ndarray] = []
        if not has_missing(enc):
            self.filled = enc.values
            y = (enc.values - g.mu) @ g.precision_cholesky
            self.distance = np.einsum("ij,ij->i", y, y)
            self.observed = np.full(enc.n_rows, float(g.dim))
            self.half_log_det = np.full(enc.n_rows, -g.log_det_precision_cholesky)
            self.patterns: MissingPatterns | None = None
            return
        p = self.patterns = enc.patterns
        cond = g.conditionals(p)
        self.covs = cond.covs
        self.filled = cond.filled(g.mu, p)
        # the conditional term vanishes at the filled row: its distance is the observed one's
        y = (self.filled - g.mu) @ g.precision_cholesky
        self.distance = np.einsum("ij,ij->i", y, y)
        self.observed = p.observed.sum(axis=1)
        # log det scale_oo = log det scale + log det (scale^-1)_mm, one per pattern
        self.half_log_det = np.full(enc.n_rows, -g.log_det_precision_cholesky)
        lam = g.precision_cholesky @ g.precision_cholesky.T
        for group in p.groups:
            lam_mm = lam[group.index[:, :, None], group.index[:, None, :]]
            half = np.log(np.diagonal(np.linalg.cholesky(lam_mm), axis1=1, axis2=2)).sum(axis=1)
            self.half_log_det[group.rows] += half[group.local]

    def log_density(self, nu: float) -> np.ndarray:
        """``log t_{p}(x_o)`` with ``p`` the coordinates seen (0 for a row with none)."""
        half = 0.5 * (nu + self.observed)
        return (gammaln(half) - gammaln(0.5 * nu) - 0.5 * self.observed * np.log(nu * np.pi)
                - self.half_log_det - half * np.log1p(self.distance / nu))

    def posterior_scale(self, nu: float) -> tuple[np.ndarray, np.ndarray]:
        """``E[u]`` and ``E[log u]`` per row: ``u`` is Gamma((nu + p) / 2, rate (nu + delta^2)
        / 2) given the row."""
        shape, rate = 0.5 * (nu + self.observed), 0.5 * (nu + self.distance)
        return shape / rate, digamma(shape) - np.log(rate)


class MultivariateStudentTAccumulator(VectorMoments, LeafAccumulator):
    """Statistics: the moments of :class:`~mixfold.families._centred.CentredMoments` with row
    weights ``w u`` (``u`` the posterior mean of each row's precision scale) — ``sum w u``,
    ``sum w u (x-c)`` (D), ``sum w u (x-c)(x-c)^T`` (D x D), ``sum w u c`` (D) — and
    ``scale_sums`` = ``[sum w, sum w (E[log u] - u), model weight]``, whose middle sum is what
    the equation of ``nu`` needs: every entry adds across shards. A missing block enters by its
    conditional mean, its outer products gaining the conditional scale (weight ``w``, since
    ``E[u (scale / u)] = scale``). The start (no model) has ``u = 1``."""

    outer_products = True

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(dim, keys)
        self.scale_sums = np.zeros(3)

    def own_arrays(self) -> list[np.ndarray]:
        return [*super().own_arrays(), self.scale_sums]

    @staticmethod
    def stack_reference(components: Sequence[Any]) -> np.ndarray:
        """Each component's own location (components are updated one at a time)."""
        return np.array([c.mu for c in components])

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        self._add_moments(x, w, w)
        self.scale_sums[0] += w.sum()

    def seq_update(self, enc: Encoded, weights: np.ndarray,
                   model: Any,
                   precision: Precision = FLOAT64) -> np.ndarray:
        if precision.compensated:
            self.seq_update_dd(enc, weights, np.zeros_like(weights), model)  # raises: no dd sums
        if has_missing(enc):
            require_native(precision, "MultivariateStudentT")
        rows = model.row_scales(enc)
        w = weights if rows.patterns is None else np.where(rows.observed > 0, weights, 0.0)
        u, log_u = rows.posterior_scale(model.nu)
        if not self.has_point():
            self.set_reference(model.mu)
        self._add_moments(rows.filled, w, w * u)
        if rows.patterns is not None:
            for g, cov in zip(rows.patterns.groups, rows.covs):
                mass = np.bincount(g.local, weights=w[g.rows], minlength=cov.shape[0])
                np.add.at(self.sum_xx, (g.index[:, :, None], g.index[:, None, :]),
                          mass[:, None, None] * cov)
        s0 = w.sum()
        self.scale_sums += (s0, np.einsum("i,i->", w, log_u - u), s0)
        return rows.log_density(model.nu)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: Any) -> None:
        self._add(fill_for_points(enc), weights)

    def _add_moments(self, x: np.ndarray, w: np.ndarray, wu: np.ndarray) -> None:
        c = self.point_for(x, w)
        s = wu.sum()
        self.weight += s
        self.ref_mass += s * c
        add_weighted_outer(self.sum_x, self.sum_xx, x - c if np.any(c) else x, wu)
