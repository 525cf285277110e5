"""The statistics of full-covariance Gaussians: moments about a reference point (outer products
summed), added row by row, for K components at once (block by block of rows), by the fused
linear E-step in the bands (features ``[y_i y_j (i <= j), y_i]``) and in double-double; and from
rows that miss entries, by exact EM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import (CompensatedAccumulation, FusedFold, LinearInFeaturesInBands,
                                  StackedUpdate)
from mixfold.compute.feature_cache import cache_for
from mixfold.compute.linear import LinearTerms, gaussian_centre
from mixfold.compute.logspace import LOG_2PI
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.compute.scratch import scratch
from mixfold.families._centred import VectorMoments
from mixfold.families._full_gaussian_moments import (add_block_moments, block_moments,
                                                     compiled_rows)
from mixfold.families._missing import add_weighted_outer, has_missing, require_native
from mixfold.families._protocol import Encoded
from mixfold.families.contract import LeafAccumulator
from mixfold.families.stacked_gaussian import add_outer_sums, full_fold, update_block_rows
from mixfold.precision.bands import FLOAT64, Precision
from mixfold.precision.compensated import add_weighted_moments

__all__ = ["MultivariateGaussianAccumulator", "MissingMultivariateGaussianAccumulator",
           "MAX_LINEAR_FEATURES"]


#: The most features (``D (D + 3) / 2``: the products, the coordinates) the fused band E-step takes
#: from a full covariance; beyond it (D > 30) the band's rows are scored in float64.
MAX_LINEAR_FEATURES = 512


class MultivariateGaussianAccumulator(VectorMoments, LeafAccumulator, StackedUpdate,
                                      CompensatedAccumulation, LinearInFeaturesInBands,
                                      FusedFold):
    """Statistics about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`): the sum of weights, of ``w (x-c)``
    (D), of the outer products ``w (x-c)(x-c)^T`` (D x D)
    and of ``w c`` (D)."""

    # a mixture's E-step of all K at once on small data (families/stacked_gaussian.py)
    stack_fold = staticmethod(full_fold)

    outer_products = True

    @staticmethod
    def stack_reference(components: Sequence[Any]) -> np.ndarray:
        """The mean of the components' means on a grid no finer than their spread
        (:func:`~mixfold.compute.linear.gaussian_centre`; in float64 one compiled call with its
        bits), for each."""
        mu = np.array([c.mu for c in components])
        s2 = np.array([np.diagonal(c.cov) for c in components])
        kernels = compiled_rows()
        if kernels is None or mu.dtype != np.float64 or s2.dtype != np.float64:
            centre = gaussian_centre(mu, s2)
        else:
            centre = np.empty(mu.shape[1])
            kernels["reference_point"](mu, s2, centre)
        return np.repeat(centre[None], len(components), axis=0)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        c = self.point_for(x, w)
        d = x - c
        s0 = w.sum()
        self.weight += s0
        self.sum_x += w @ d
        self.sum_xx += d.T @ (w[:, None] * d)
        self.ref_mass += s0 * c

    @staticmethod
    def linear_terms(accs: Sequence[MultivariateGaussianAccumulator],
                     components: Sequence[Any],
                     enc: Encoded) -> LinearTerms | None:
        """The scores as :class:`~mixfold.compute.linear.LinearTerms` on the centred features
        ``[y_i y_j (i <= j), y_i]``, ``y = x - c`` (c the stack's centre); the sums stay about
        c. ``None`` beyond :data:`MAX_LINEAR_FEATURES` or where rows miss entries."""
        x = enc.values
        d = x.shape[1]
        if d * (d + 3) // 2 > MAX_LINEAR_FEATURES or has_missing(enc):
            return None
        center = MultivariateGaussianAccumulator.stack_reference(components)[0]
        upper = np.triu_indices(d)
        twice = np.where(upper[0] == upper[1], 1.0, 2.0)  # an off-diagonal product counts twice
        prec = np.array([c.precision_cholesky @ c.precision_cholesky.T for c in components])
        m = np.array([c.mu for c in components]) - center
        pm = np.einsum("kij,kj->ki", prec, m)
        norm = np.array([c.log_det_precision_cholesky for c in components]) - 0.5 * d * LOG_2PI
        coef = np.concatenate([-0.5 * twice * prec[:, upper[0], upper[1]], pm], axis=1)
        const = norm - 0.5 * np.einsum("ki,ki->k", m, pm)
        n_pairs = len(upper[0])

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            s, _, w = out.shape
            y = (x[lo:hi] - center).reshape(s, w, d).transpose(0, 2, 1)  # (s, D, w)
            out[:, n_pairs:] = y
            np.multiply(y[:, upper[0]], y[:, upper[1]], out=out[:, :n_pairs])

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, w, sx, sxx in zip(accs, mass, sums[:, n_pairs:], sums[:, :n_pairs]):
                acc.set_reference(center)
                acc.weight += w
                acc.sum_x += sx
                acc.sum_xx[upper] += sxx
                acc.sum_xx[upper[1], upper[0]] = acc.sum_xx[upper]
                acc.ref_mass += w * center

        return LinearTerms(coef, const, features, add_sums, peak=norm, source=x,
                           key=("multivariate-gaussian", center.tobytes()))

    def _add_dd(self, x: np.ndarray, w_hi: np.ndarray, w_lo: np.ndarray) -> None:
        add_weighted_moments(self, x, w_hi, w_lo, cross=True,
                             reference=self.point_for(x, w_hi))

    @staticmethod
    def stack_update(accs: Sequence[MultivariateGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights.

        Block by block of rows (``update_block_rows``; the blocks on this process's cores, their
        sums added in block order), every component of the block at once
        (``families/_full_gaussian_moments.py``). A component's sums do not depend on the others
        in the call, so any range of components can be added apart with the same bits (a GEMM
        over K columns would sum the rows in a K-dependent order).
        """
        x = np.ascontiguousarray(enc.values, dtype=np.float64)
        points = [acc.point_for(x, resp[:, k]) for k, acc in enumerate(accs)]
        step = update_block_rows(x.shape[1])
        if all(c is points[0] or (c == points[0]).all() for c in points):
            point = points[0]
            about = point if np.any(point) else None  # about the origin: nothing to subtract
            if about is not None and compiled_rows() is None:
                x, about = _centred_rows(x, point), None  # NumPy's passes read centred rows
            resp_t = np.ascontiguousarray(resp.T)  # (K, n): no copy of a Fortran-order resp
            for part in map_row_blocks(x.shape[0], step, lambda lo, hi: block_moments(
                    x, about, resp_t, lo, hi)):
                add_block_moments(accs, part, point)
            return
        for lo in range(0, x.shape[0], step):
            rb = resp[lo:lo + step]
            rx = scratch("mvg.rx", (len(rb), x.shape[1]))
            xb = x[lo:lo + step]
            xc = scratch("mvg.xc_block", xb.shape)
            at = None
            for k, (acc, c) in enumerate(zip(accs, points)):
                if at is None or (c is not at and not (c == at).all()):
                    at = c
                    np.subtract(xb, c, out=xc)
                add_outer_sums([acc], xc, rb[:, k:k + 1], c, rx)


def _centred_rows(x: np.ndarray, point: np.ndarray) -> np.ndarray:
    """``x - point`` (n_rows, D), kept with the rows between EM iterations when the feature
    cache has room (the point, a snapped centre, stays put from one iteration to the next)."""
    store = cache_for(("mvg.centred", point.tobytes()), [x], x.nbytes, x.nbytes)
    got = None if store is None else store.get(0)
    if got is None:
        got = x - point
        if store is not None:
            store[0] = got
    return got


class MissingMultivariateGaussianAccumulator(MultivariateGaussianAccumulator):
    """The statistics of :class:`MultivariateGaussianAccumulator` (same payload) from rows that
    may miss entries, by exact EM (Ghahramani and Jordan, 1994): a missing block enters the
    sums by its conditional mean given the row's observed entries under the current
    component, and its outer products gain the conditional covariance. Rows with every entry
    missing add nothing."""

    def seq_update(self, enc: Encoded, weights: np.ndarray,
                   model: Any,
                   precision: Precision = FLOAT64) -> np.ndarray | None:
        if not has_missing(enc):
            return super().seq_update(enc, weights, model, precision)
        require_native(precision, "MultivariateGaussian")
        p = enc.patterns
        cond = model.conditionals(p)
        w = np.where(p.n_missing < p.dim, weights, 0.0)
        self.set_reference(self.stack_reference([model])[0])
        filled = cond.filled(model.mu, p)
        c = self.point_for(filled, w)
        s0 = w.sum()
        self.weight += s0
        self.ref_mass += s0 * c
        # about the reference point: the conditional covariances do not move with it
        add_weighted_outer(self.sum_x, self.sum_xx, filled - c if np.any(c) else filled, w)
        for g, cov in zip(p.groups, cond.covs):
            mass = np.bincount(g.local, weights=w[g.rows], minlength=cov.shape[0])
            np.add.at(self.sum_xx, (g.index[:, :, None], g.index[:, None, :]),
                      mass[:, None, None] * cov)
        return cond.log_density

    def seq_update_dd(self, enc: Encoded, w_hi: np.ndarray, w_lo: np.ndarray, model: Any,
                      ops: Any = None) -> None:
        if has_missing(enc):
            require_native("dd", "MultivariateGaussian")
        super().seq_update_dd(enc, w_hi, w_lo, model, ops)

    def seq_initialize(self, enc: Encoded, weights: np.ndarray, rng: Any) -> None:
        """Seeded starts (no model yet): a missing entry takes its column's weighted mean over
        the rows that have it, and its square that column's variance besides."""
        if not has_missing(enc):
            super().seq_initialize(enc, weights, rng)
            return
        p = enc.patterns
        seen = weights @ p.observed
        mean = np.divide(weights @ p.zero_filled, seen, out=np.zeros_like(seen),
                         where=seen > 0)
        spread = (p.zero_filled - mean) ** 2 * p.observed
        var = np.divide(weights @ spread, seen, out=np.zeros_like(seen), where=seen > 0)
        w = np.where(p.n_missing < p.dim, weights, 0.0)
        self._add(np.where(p.observed > 0, p.zero_filled, mean), w)
        self.sum_xx.flat[::p.dim + 1] += w @ ((1.0 - p.observed) * var)

    @staticmethod
    def stack_update(accs: Sequence[MultivariateGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Complete rows only: rows that miss entries need each component's parameters, which
        a stacked update does not see (a start made with ``missing=True`` never stacks)."""
        if has_missing(enc):
            raise ValueError("rows with missing entries reached a stacked update of "
                             "MultivariateGaussian components made with missing=False: give "
                             "the starting model missing=True")
        MultivariateGaussianAccumulator.stack_update(accs, enc, resp)
