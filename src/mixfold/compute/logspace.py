"""Numerical kernels shared by the latent-variable families: stable log-sum-exp, normalisation."""

from __future__ import annotations

import numpy as np

from mixfold.compute.kernels import full_gaussian_kernels

__all__ = ["log_normalize_rows", "normalise_live_rows", "normalise_rows_compiled", "logsumexp_rows",
           "relative_quadratic_scores", "relative_affine_scores", "far_rows", "affine_far_rows",
           "FAR_OUT", "LOG_2PI"]

#: log(2 pi) in float64, the constant of every Gaussian log-density.
LOG_2PI = float(np.log(2.0 * np.pi))

#: A row more than this many times the components' own scale (largest |mean| plus largest
#: spread) from the origin is "far out": there ``x - mu_k`` keeps too few of the means' digits
#: (at 1e16 times the scale, none) for the plain scores to rank components of one spread.
FAR_OUT = 1e8


def far_rows(x: np.ndarray, mu: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Which rows of ``x`` (n, D) lie :data:`FAR_OUT` times the components' scale from the
    origin, the scale taken from their means ``mu`` and spreads (standard deviations) ``spread``.

    >>> far_rows(np.array([[1.0], [1e9], [-1e300]]), np.array([[0.0], [2.0]]), np.ones(2))
    array([False,  True,  True])
    """
    top = np.abs(x).max(axis=1) if x.shape[1] else np.zeros(len(x))
    scale = (np.abs(mu).max() if mu.size else 0.0) + (np.max(spread) if spread.size else 0.0)
    return top > FAR_OUT * scale


def log_normalize_rows(scores: np.ndarray, weights: np.ndarray | None = None,
                       top: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Turn per-row log-scores (n, K) into posteriors in place; return (posteriors, log-sum-exp).

    With ``weights`` (n,), the posteriors come out multiplied by the row weights (one pass);
    ``top``: the rows' maxima, where the caller has them already.

    Stable (the row maximum is subtracted before exponentiating). A row whose scores are all
    -inf gets a log-sum-exp of -inf and a posterior of zeros, never NaN; the caller reports it.

    >>> p, lse = log_normalize_rows(np.log(np.array([[1.0, 3.0]])))
    >>> p.round(2).tolist(), round(float(lse[0]), 6)
    ([[0.25, 0.75]], 1.386294)
    """
    raw_top = scores.max(axis=1) if top is None else top
    finite = np.isfinite(raw_top)
    if finite.all():  # every row has its maximum's term exp(0) = 1: a total >= 1
        return normalise_live_rows(scores, weights, raw_top)
    dead = ~finite
    top = np.where(dead, 0.0, raw_top)
    scores -= top[:, None]
    np.exp(scores, out=scores)
    scores[dead] = 0.0
    total = np.where(dead, 1.0, scores.sum(axis=1))
    scores *= (1.0 / total if weights is None else weights / total)[:, None]
    lse = top + np.log(total)
    lse[dead] = np.where(np.isnan(raw_top[dead]), np.nan, -np.inf)
    return scores, lse


def normalise_live_rows(scores: np.ndarray, weights: np.ndarray | None,
                        top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`log_normalize_rows` of rows that each have a finite maximum ``top`` (n,), which
    the caller has checked.

    >>> p, lse = normalise_live_rows(np.log(np.array([[1.0, 3.0]])), None, np.log([3.0]))
    >>> p.round(2).tolist(), round(float(lse[0]), 6)
    ([[0.25, 0.75]], 1.386294)
    """
    scores -= top[:, None]
    np.exp(scores, out=scores)
    total = scores.sum(axis=1)
    scores *= (1.0 / total if weights is None else weights / total)[:, None]
    return scores, top + np.log(total)


def normalise_rows_compiled(scores: np.ndarray,
                            weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`log_normalize_rows` of ``scores`` (n, K), times the row ``weights`` (n,), in one
    compiled pass over the rows (``normalise_scores`` of ``compute/numba_gaussian.py``, its
    exp the vectorised ``exp64`` of ``compute/numba_math.py``: within a few ulps of NumPy's):
    the normalisation a full-covariance mixture's fused fold makes, so that every other path
    of that fold gives its bits. NumPy's where the kernels are not there or a row has no
    finite largest score.

    >>> p, lse = normalise_rows_compiled(np.log(np.array([[1.0, 3.0]])), np.ones(1))
    >>> p.round(2).tolist(), round(float(lse[0]), 6)
    ([[0.25, 0.75]], 1.386294)
    """
    kernels = full_gaussian_kernels()
    if kernels is None or scores.dtype != np.float64:
        return log_normalize_rows(scores, weights)
    copied = not scores.flags.f_contiguous
    cols = np.ascontiguousarray(scores.T) if copied else scores.T
    top, total = np.empty(len(scores)), np.empty(len(scores))
    if not kernels["normalise_scores"](cols, np.ascontiguousarray(weights, dtype=np.float64),
                                       top, total):
        return log_normalize_rows(scores, weights)
    if copied:  # (a row-major matrix's transposed copy was normalised)
        scores[...] = cols.T
    return scores, top + np.log(total)


def logsumexp_rows(scores: np.ndarray) -> np.ndarray:
    """log(sum(exp(scores), axis=1)) for an (n, K) array, stable; does not modify ``scores``."""
    top = scores.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = safe + np.log(np.exp(scores - safe[:, None]).sum(axis=1))
    return np.where(np.isfinite(top), out, top)


def relative_quadratic_scores(z: np.ndarray, const: np.ndarray) -> np.ndarray:
    """``-|z_k|^2 / 2 + const_k`` less its row's largest quadratic part, shape (n, K), from the
    whitened deviations ``z`` (n, K, D): finite wherever ``z`` is, even when ``|z_k|^2``
    overflows (|z| > 1e154): the squares are taken of ``z`` over its row's largest entry M and
    their differences scaled back by M^2. Posteriors normalised from these are those of the
    log-densities, for rows every component scores -inf too.

    >>> relative_quadratic_scores(np.array([[[1e200], [2e200]]]), np.zeros(2)).tolist()
    [[0.0, -inf]]
    """
    top = np.abs(z).max(axis=(1, 2))
    top = np.where(top > 0, top, 1.0)
    q = np.einsum("nkd,nkd->nk", z / top[:, None, None], z / top[:, None, None])
    gap = q - q.min(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        quad = np.where(gap > 0, -0.5 * top[:, None] * (top[:, None] * gap), 0.0)
    return quad + const


def relative_affine_scores(x: np.ndarray, mu: np.ndarray, factor: np.ndarray,
                           const: np.ndarray) -> np.ndarray:
    """``-|z_k|^2 / 2 + const_k`` less a per-row constant, (n, K), for ``z_k = (x - mu_k) F_k``
    (``factor`` F: (K, D) scales each coordinate, (K, D, D) multiplies on the right); finite for
    any finite row, and exact in the means far out.

    A row near the origin goes through :func:`relative_quadratic_scores`. Far out
    (:func:`far_rows`, the spread read from ``F``'s diagonal) ``x - mu_k`` keeps few or none of
    the means' digits and components of one ``F`` would tie, so with ``S`` the row's
    largest ``|x|``, ``u = x / S`` and ``v_k = mu_k F_k``, each gap to the row's best component b
    is taken by its powers of S, ``|z_k|^2 - |z_b|^2 = S^2 A + S B + C`` with
    ``A = (u F_k - u F_b) . (u F_k + u F_b)`` (exactly 0 when ``F_k = F_b``),
    ``B = -2 (u F_k . v_k - u F_b . v_b)`` and ``C = |v_k|^2 - |v_b|^2``; the first nonzero of
    A, B, C leads, so even a tie in the linear term is settled by C.

    >>> f = np.ones((2, 1))
    >>> relative_affine_scores(np.array([[1e200]]), np.array([[0.0], [1.0]]), f,
    ...                        np.zeros(2)).tolist()
    [[-1e+200, 0.0]]
    """
    def apply(a: np.ndarray, k: int) -> np.ndarray:
        return a * factor[k] if factor.ndim == 2 else a @ factor[k]

    K = len(mu)
    with np.errstate(invalid="ignore", over="ignore"):
        z = np.stack([apply(x - mu[k], k) for k in range(K)], axis=1)
    far = affine_far_rows(x, mu, factor)
    out = np.empty((len(x), K))
    out[~far] = relative_quadratic_scores(z[~far], const)
    if not far.any():
        return out
    scale = np.abs(x[far]).max(axis=1)[:, None]  # far rows have at least one coordinate
    uf = np.stack([apply(x[far] / scale, k) for k in range(K)], axis=1)  # u F_k, (m, K, D)
    v = np.stack([apply(mu[k], k) for k in range(K)])                   # v_k, (K, D)
    lin = np.einsum("nkd,kd->nk", uf, v)
    sq = np.einsum("kd,kd->k", v, v)
    rows = np.arange(len(uf))

    def gap(best: np.ndarray, over_s2: bool = False) -> np.ndarray:
        ub = uf[rows, best][:, None]
        a = np.einsum("nkd,nkd->nk", uf - ub, uf + ub)
        b = -2.0 * (lin - lin[rows, best][:, None])
        c = sq - sq[best][:, None]
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            if over_s2:  # the gap / S^2: finite, so it ranks where gaps overflow to -inf
                return a + b / scale + c / scale / scale
            return np.where(a != 0, scale * (scale * (a + b / scale + c / scale / scale)),
                            np.where(b != 0, scale * (b + c / scale), c))

    first = np.zeros(len(uf), dtype=int)  # the best: least gap / S^2, ties settled by the gap
    g = gap(np.lexsort((gap(first), gap(first, over_s2=True)))[:, 0])
    out[far] = np.where(g > 0, -0.5 * g, 0.0) + const
    return out


def affine_far_rows(x: np.ndarray, mu: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """:func:`far_rows` for components whitened by ``factor`` (K, D) or (K, D, D), as
    :func:`relative_affine_scores` takes them: the spreads are 1 / the factor's diagonal (for a
    Cholesky factor of the precision, the conditional standard deviations)."""
    diag = np.abs(factor if factor.ndim == 2 else np.diagonal(factor, axis1=1, axis2=2))
    spread = 1.0 / np.where(diag > 0, diag, np.inf)
    return far_rows(x, mu, spread)
