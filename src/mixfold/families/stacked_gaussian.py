"""A mixture of K Gaussians of one family as stacked arrays: the E-step and the M-step of all K
components in a few array operations, no Python per component.

Diagonal (and spherical) components: the log-densities of every row under all K are one GEMM on
the centred features ``[(x-c)^2, x-c]`` (``c`` the stack's centre, the point the fused E-step
sums about), normalised by a stable log-sum-exp; the statistics are one GEMM of the posteriors
by the same features, handed to the K accumulators as the fused path's sums (about the same
point, so payloads of any path add). Where numba is available that E-step is one compiled call
(:func:`~mixfold.compute.numba_mixture.diagonal_estep`: the same terms, row by row, its sums
differing from the GEMMs' by round-off). The M-step -- diagonal, spherical, full and tied (one
covariance key) -- reads the K payloads as (K, D) or (K, D, D) arrays and makes the K estimates
at once. Both are what small data spends its time on: per-component Python, not arithmetic.

A full covariance's fold keeps the generic three steps' bits (at small D in one compiled pass,
:mod:`mixfold.families._full_gaussian_fold`): the model-parallel executor scores a mixture's
components by column ranges and must give the serial fold's bits
(``tests/parallel/test_model_parallel.py``), which a batched GEMM over K does not. A tied one
(one covariance for all K, their accumulators of one covariance key) is a documented exception:
the rows are whitened once by one GEMM, a compiled call
(:func:`~mixfold.compute.numba_mixture.tied_estep`) scores, normalises and makes the masses and
first sums, and the second sums -- only their pooled sum counts, ``sum w (x-c)(x-c)^T``, which
the posteriors do not change -- are made once per chunk and kept between iterations.

The diagonal, tied and compiled full E-steps are also given as the K components' statistics
themselves (:func:`diagonal_statistics`, :func:`tied_statistics`, :func:`full_statistics`: what
the K fresh accumulators' ``value()``
would be after the hand-over, the same numbers), for the local backend's iteration over rows
that fit one chunk: a small fit makes no accumulator per iteration.

Outside its form -- rows that miss entries, a precision other than float64, a chunk large enough
for the threaded fused E-step (:mod:`mixfold.compute.linear`), rows no component can score,
estimators with different options, a prior, a component with no weight -- each function gives
way to the generic path (the fold to the fused E-step, the M-step to
:func:`~mixfold.families._shared_covariance.estimate_children`'s per-component loop).

>>> import mixfold
>>> from mixfold import MixtureEstimator, DiagonalGaussianEstimator
>>> rng = np.random.default_rng(0)
>>> x = np.vstack([rng.normal(-3, 1, (200, 2)), rng.normal(3, 1, (200, 2))])
>>> fit = mixfold.optimize(x, MixtureEstimator([DiagonalGaussianEstimator()] * 2), seed=0,
...                        progress=False)
>>> sorted(round(float(c.mu[0])) for c in fit.components)
[-3, 3]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.band_engines import fused_linear_mixture
from mixfold.compute.feature_cache import cache_for
from mixfold.compute.kernels import mixture_kernels
from mixfold.compute.linear import gaussian_centre
from mixfold.compute.logspace import LOG_2PI, normalise_live_rows
from mixfold.families._centred import ROUNDOFF_FLOOR, variance_floor
from mixfold.families._full_gaussian_fold import (fused_full_fold, fused_full_parts,
                                                  whitened_full_fold, whitened_full_parts)
from mixfold.families._full_gaussian_moments import add_block_moments, block_moments
from mixfold.families._missing import has_missing
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.families.gaussian import warn_collapsed_variance
from mixfold.families.units import STACK_BLOCK_ROWS
from mixfold.precision import Engine
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["diagonal_fold", "diagonal_statistics", "full_fold", "full_statistics", "tied_fold",
           "tied_statistics",
           "pooled_scatter",
           "diagonal_estimate", "full_estimate",
           "update_block_rows", "add_outer_sums",
           "STACKED_ROWS", "STACKED_VALUES"]

#: The most rows a chunk may have for the stacked fold (small data: one thread, per-component
#: Python is the cost); larger chunks go to the fused E-step's row blocks on every core, whose
#: features are kept between iterations (:mod:`mixfold.compute.feature_cache`), or the three
#: steps ...
STACKED_ROWS = 8192
#: ... and the most ``rows * K * D``: the stacked fold's temporaries are whole-chunk arrays,
#: not row blocks.
STACKED_VALUES = 1 << 21


def _small_float64(enc: Any, precision: Any, width: int) -> bool:
    """Whether the stacked fold takes this chunk: complete rows, float64, few enough rows and
    values."""
    p = precision
    return (p.native and p.dtype == np.float64 and not has_missing(enc)
            and enc.n_rows <= STACKED_ROWS and enc.n_rows * width <= STACKED_VALUES)


def _hand_over(accs: Sequence[Any], center: np.ndarray, mass: np.ndarray, sum_x: np.ndarray,
               sum_xx: np.ndarray) -> None:
    """Add the stacked sums to the K accumulators, about the stack's centre."""
    ref = mass[:, None] * center
    for acc, w, sx, sxx, r in zip(accs, mass, sum_x, sum_xx, ref):
        acc.set_reference(center)
        acc.weight += w
        acc.sum_x += sx
        acc.sum_xx += sxx
        acc.ref_mass += r


# ---------------------------------------------------------------------------------------------
# The fold


def diagonal_fold(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                  enc: Any, weights: np.ndarray, precision: Precision = FLOAT64
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """A mixture of diagonal (or spherical) Gaussians' E-step in one pass: scores
    ``[(x-c)^2, x-c] @ coef^T`` (the fused E-step's terms,
    :func:`~mixfold.compute.linear.centred_gaussian`), posteriors, then
    ``resp^T @ [(x-c)^2, x-c]``. Returns (posterior mass per component, per-row log-density);
    outside its form, the fused E-step's."""
    x = enc.values
    d = x.shape[1]
    if not _small_float64(enc, precision, len(components) * d):
        return fused_linear_mixture(accs, components, log_weights, enc, weights, precision)
    mu = np.array([c.mu for c in components])
    s2 = np.array([c.sigma2 for c in components])
    kernels = mixture_kernels()
    if kernels is not None:  # compiled: one call where NumPy makes thirty
        return _compiled_diagonal_fold(kernels["diagonal_estep"], accs, components, log_weights,
                                       enc, weights, mu, s2)
    center = gaussian_centre(mu, s2)
    features = np.empty((x.shape[0], 2 * d))
    xc = np.subtract(x, center, out=features[:, d:])
    with np.errstate(over="ignore"):  # a far row scores -inf: the generic path names it
        np.multiply(xc, xc, out=features[:, :d])
    # log p_k = [(x-c)^2, x-c] @ [-1 / (2 s2_k), m_k / s2_k] + const_k, m_k = mu_k - c
    coef = np.empty((len(components), 2 * d))
    prec = np.divide(1.0, s2, out=coef[:, d:])
    m = mu - center
    const = -0.5 * ((m * m * prec).sum(axis=1) + d * LOG_2PI - np.log(prec).sum(axis=1))
    np.multiply(prec, -0.5, out=coef[:, :d])
    coef[:, d:] *= m
    scores = features @ coef.T
    scores += const + log_weights
    top = np.asfortranarray(scores).max(axis=1)  # (a max along K rows: ~5x a C-order one's)
    if not np.isfinite(top).all():
        return fused_linear_mixture(accs, components, log_weights, enc, weights, precision)
    resp, lse = normalise_live_rows(scores, weights, top)
    mass = resp.sum(axis=0)
    sums = resp.T @ features
    _hand_over(accs, center, mass, sums[:, d:], sums[:, :d])
    return mass, lse


def _compiled_diagonal_fold(estep: Any, accs: Sequence[Any], components: Sequence[Any],
                            log_weights: np.ndarray, enc: Any, weights: np.ndarray,
                            mu: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`diagonal_fold`'s E-step in one compiled call
    (:func:`~mixfold.compute.numba_mixture.diagonal_estep`)."""
    found = _diagonal_sums(estep, enc, weights, mu, s2, log_weights)
    if found is None:  # a row no component can score: the generic path names it
        return fused_linear_mixture(accs, components, log_weights, enc, weights, FLOAT64)
    center, sums, lse = found
    d = len(center)
    mass = sums[:, -1].copy()
    _hand_over(accs, center, mass, sums[:, d:-1], sums[:, :d])
    return mass, lse


def _diagonal_sums(estep: Any, enc: Any, weights: np.ndarray, mu: np.ndarray, s2: np.ndarray,
                   log_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The compiled E-step's (centre (D,), sums (K, 2D + 1): ``[w(x-c)^2, w(x-c), w]`` per
    component, per-row log-density), or ``None`` where a row no component can score."""
    x = np.ascontiguousarray(enc.values)
    d = x.shape[1]
    center = np.empty(d)
    sums = np.empty((len(mu), 2 * d + 1))
    lse = np.empty(enc.n_rows)
    if not estep(x, np.ascontiguousarray(weights, dtype=np.float64), mu, s2,
                 np.ascontiguousarray(log_weights, dtype=np.float64), center, sums, lse):
        return None
    return center, sums, lse


def diagonal_statistics(estimators: Sequence[Any], components: Sequence[Any],
                        log_weights: np.ndarray, enc: Any, weights: np.ndarray,
                        precision: Precision = FLOAT64
                        ) -> tuple[np.ndarray, list[Any], np.ndarray] | None:
    """:func:`diagonal_fold`'s compiled E-step of one chunk with no accumulator: (posterior mass
    per component, each component's statistics as its fresh accumulator's ``value()`` would be
    after :func:`_hand_over` -- the same numbers, each sum ``0 + s`` -- per-row log-density);
    ``None`` outside that form (rows that miss entries or are many, missing-aware estimators,
    no numba, a row no component can score)."""
    x = enc.values
    kernels = mixture_kernels()
    if kernels is None or any(e.missing for e in estimators) \
            or not _small_float64(enc, precision, len(components) * x.shape[1]):
        return None
    mu = np.array([c.mu for c in components])
    s2 = np.array([c.sigma2 for c in components])
    found = _diagonal_sums(kernels["diagonal_estep"], enc, weights, mu, s2, log_weights)
    if found is None:
        return None
    center, sums, lse = found
    d = len(center)
    mass = sums[:, -1:]
    return sums[:, -1].copy(), _fresh_values(estimators, mass, sums[:, d:-1], sums[:, :d],
                                             mass * center), lse


def _fresh_values(estimators: Sequence[Any], weight: np.ndarray, sum_x: np.ndarray,
                  sum_xx: np.ndarray, ref_mass: np.ndarray) -> list[Any]:
    """The K fresh accumulators' ``value()`` once these stacked sums (K, ...) are added to them
    (:func:`_hand_over`): each ``0 + s``, so a -0 sum reads +0."""
    value_of = estimators[0].accumulator_class.value_of
    return [value_of(*sums) for sums in zip(weight + 0.0, sum_x + 0.0, sum_xx + 0.0,
                                             ref_mass + 0.0)]


def full_fold(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
              enc: Any, weights: np.ndarray, precision: Precision = FLOAT64
              ) -> tuple[np.ndarray, np.ndarray] | None:
    """A mixture of full-covariance (or tied) Gaussians' E-step: in float64 at small D, one
    compiled pass over the rows (:func:`~mixfold.families._full_gaussian_fold.fused_full_fold`);
    wider rows of a small chunk, whitened by BLAS and scored, normalised and weighted by one
    compiled call (:func:`~mixfold.families._full_gaussian_fold.whitened_full_fold`), else the
    three steps' own calls -- the stack's scores, its row normalisation, the stacked update's
    sums about the stack's reference point -- without the layers between them. Either way the
    bits of the three steps (and of the model-parallel column fold, which gives those). Returns
    (posterior mass per component, per-row log-density); the torch engine's fused E-step;
    ``None`` outside the form (the mixture runs its three steps)."""
    if precision.engine is Engine.TORCH:
        return fused_linear_mixture(accs, components, log_weights, enc, weights, precision)
    x = enc.values
    if precision.native and precision.dtype == np.float64:
        step = update_block_rows(x.shape[1])
        folded = fused_full_fold(accs, components, log_weights, enc, weights, step) \
            or whitened_full_fold(accs, components, log_weights, enc, weights, step)
        if folded is not None:
            return folded
    if not _small_float64(enc, precision, len(components) * x.shape[1]) \
            or enc.n_rows > STACK_BLOCK_ROWS:
        return None
    stack = type(components[0])

    def posteriors(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        scores = stack.stack_log_density(components, enc, precision)
        scores += log_weights
        return stack.stack_normalise(scores, weights)

    # one block, as the three steps normalise it (BLAS held as they hold it)
    resp, lse = map_row_blocks(enc.n_rows, enc.n_rows, posteriors)[0]
    point = accs[0].stack_reference(components)[0]
    for acc in accs:
        acc.set_reference(point)
    centred = x - point
    rx = np.empty_like(x)
    step = update_block_rows(x.shape[1])
    for lo in range(0, x.shape[0], step):
        add_outer_sums(accs, centred[lo:lo + step], resp[lo:lo + step], point, rx[lo:lo + step])
    return resp.sum(axis=0), lse


def tied_fold(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
              enc: Any, weights: np.ndarray, precision: Precision = FLOAT64
              ) -> tuple[np.ndarray, np.ndarray] | None:
    """A tied mixture's E-step on a small chunk (one covariance shared by all K components,
    their accumulators of one covariance key): the rows centred on the stack's centre and
    whitened by one GEMM, then one compiled call
    (:func:`~mixfold.compute.numba_mixture.tied_estep`: every row scored under every component,
    normalised; the posterior masses and first sums about the centre); the chunk's pooled
    scatter ``sum w (x-c)(x-c)^T`` (:func:`pooled_scatter`, which the posteriors do not change)
    is handed to the components in shares of their posterior mass: the pooled M-step reads only
    the sum of the shares. Outside that form (no numba, components not sharing one factor, keys
    that differ), :func:`full_fold`."""
    key = accs[0].covariance_key
    if any(a.covariance_key != key for a in accs):
        return full_fold(accs, components, log_weights, enc, weights, precision)
    found = _tied_sums(components, log_weights, enc, weights, precision)
    if found is None:  # (a row no component can score: the generic path names it)
        return full_fold(accs, components, log_weights, enc, weights, precision)
    center, mass, sum_x, shares, lse = found
    _hand_over(accs, center, mass, sum_x, shares)
    return mass, lse


def _tied_sums(components: Sequence[Any], log_weights: np.ndarray, enc: Any,
               weights: np.ndarray, precision: Precision
               ) -> tuple[np.ndarray, ...] | None:
    """:func:`tied_fold`'s compiled E-step: (centre (D,), posterior masses (K,), first sums
    (K, D) about it, the chunk's pooled scatter (:func:`pooled_scatter`) in shares of the
    posterior masses (K, D, D), per-row log-density), or ``None`` outside
    its form (no numba, the torch engine, rows that miss entries or are many, components not
    sharing one factor, a row no component can score)."""
    x = enc.values
    u = components[0].precision_cholesky
    kernels = mixture_kernels()
    if kernels is None or precision.engine is Engine.TORCH \
            or not _small_float64(enc, precision, len(components) * x.shape[1]) \
            or any(c.precision_cholesky is not u and not np.array_equal(c.precision_cholesky, u)
                   for c in components):
        return None
    k, d = len(components), x.shape[1]
    mu = np.array([c.mu for c in components])
    s2 = np.empty((k, d))
    s2[:] = np.diagonal(components[0].cov)
    center = np.empty(d)
    kernels["stack_centre"](mu, s2, center)
    w = np.ascontiguousarray(weights, dtype=np.float64)
    xc = np.subtract(x, center, out=np.empty(x.shape))
    white = xc @ u  # one GEMM whitens every row for all K
    const = np.asarray(log_weights, dtype=np.float64) \
        + (components[0].log_det_precision_cholesky - 0.5 * d * LOG_2PI)
    sums = np.empty((k, d + 1))
    lse = np.empty(enc.n_rows)
    if not kernels["tied_estep"](xc, white, w, (mu - center) @ u, const, sums, lse):
        return None
    mass = sums[:, -1].copy()
    total = np.add.reduce(mass)
    share = mass / total if total > 0 else mass
    return center, mass, sums[:, :d], share[:, None, None] * pooled_scatter(x, w, center), lse


def tied_statistics(estimators: Sequence[Any], components: Sequence[Any],
                    log_weights: np.ndarray, enc: Any, weights: np.ndarray,
                    precision: Precision = FLOAT64
                    ) -> tuple[np.ndarray, list[Any], np.ndarray] | None:
    """:func:`tied_fold` of one chunk with no accumulator, as :func:`diagonal_statistics` is
    :func:`diagonal_fold`'s: (posterior masses, each component's statistics as its fresh
    accumulator's ``value()`` after the hand-over, per-row log-density); ``None`` where the
    estimators are not of one covariance key (no key: a full covariance each), are
    missing-aware, or outside :func:`_tied_sums`'s form."""
    key = estimators[0].covariance_keys
    if key is None or any(e.covariance_keys != key or e.missing for e in estimators):
        return None
    found = _tied_sums(components, log_weights, enc, weights, precision)
    if found is None:
        return None
    center, mass, sum_x, shares, lse = found
    return mass, _fresh_values(estimators, mass[:, None], sum_x, shares,
                               mass[:, None] * center), lse


def full_statistics(estimators: Sequence[Any], components: Sequence[Any],
                    log_weights: np.ndarray, enc: Any, weights: np.ndarray,
                    precision: Precision = FLOAT64
                    ) -> tuple[np.ndarray, list[Any], np.ndarray] | None:
    """:func:`full_fold` of one chunk with no accumulator, as :func:`diagonal_statistics` is
    :func:`diagonal_fold`'s: the fused compiled pass (float64, D <= 8) or the whitened one
    (D > 24, one row block), whose row blocks' sums are added up as the hand-over adds them
    into fresh accumulators; a tied stack (one covariance key), :func:`tied_statistics`;
    ``None`` outside those forms (missing-aware estimators, the torch engine, other
    precisions, rows of 9 to 24 coordinates)."""
    if estimators[0].covariance_keys is not None:
        return tied_statistics(estimators, components, log_weights, enc, weights, precision)
    if any(e.covariance_keys is not None or e.missing for e in estimators) \
            or precision.engine is Engine.TORCH \
            or not (precision.native and precision.dtype == np.float64):
        return None
    reference, step = estimators[0].accumulator_class.stack_reference, \
        update_block_rows(enc.values.shape[1])
    folded = fused_full_parts(reference, components, log_weights, enc, weights, step) \
        or whitened_full_parts(reference, components, log_weights, enc, weights, step)
    if folded is None:
        return None
    parts, point, mass, lse = folded
    k, d = len(components), len(point)
    weight, sum_x, sum_xx, ref = np.zeros((k, 1)), np.zeros((k, d)), np.zeros((k, d, d)), \
        np.zeros((k, d))
    for part in parts:  # add_block_moments' sums, in block order, from +0
        weight[:, 0] += part.mass
        sum_x += part.sum_x
        sum_xx += part.sum_xx
        ref += part.mass[:, None] * point
    return mass, _fresh_values(estimators, weight, sum_x, sum_xx, ref), lse


def pooled_scatter(x: np.ndarray, w: np.ndarray, point: np.ndarray) -> np.ndarray:
    """``sum w (x - point)(x - point)^T`` (D, D) of rows ``x`` (n, D) of weights ``w`` (n,),
    kept with the rows and weights between EM iterations where the feature cache has room (the
    point, a snapped centre, stays put from one iteration to the next; about it the differences
    are exact, as the other paths' sums are).

    >>> x = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    >>> pooled_scatter(x, np.ones(3), np.array([2.0, 3.0])).tolist()
    [[8.0, 8.0], [8.0, 8.0]]
    """
    d = x.shape[1]
    store = cache_for(("tied.scatter", point.tobytes()), [x], 8 * (d * d + len(w)), x.nbytes)
    kept = None if store is None else store.get("weights")
    # the weights are compared, not placed: a nested fold's are a new posterior each iteration
    if kept is not None and np.array_equal(kept, w):
        return store["scatter"]
    rooted = np.sqrt(w)[:, None] * (x - point)  # weights are never negative
    scatter = rooted.T @ rooted  # (a rank-k update: symmetric)
    if store is not None:
        store.update(weights=w.copy(), scatter=scatter)
    return scatter


def update_block_rows(d: int) -> int:
    """Rows per block of a stacked full-covariance update of D-vectors: a block of rows and
    its weighted copy stay within ~2 MB (in cache while every component reads them)."""
    return max(256, (1 << 17) // d)


def add_outer_sums(accs: Sequence[Any], centred: np.ndarray, resp: np.ndarray,
                   point: np.ndarray, rx: np.ndarray) -> None:
    """Add a block of rows ``centred`` about ``point`` (n, D) to the full-covariance
    accumulators, column k of ``resp`` (n, K) to ``accs[k]``: ``r_k @ (x-c)`` and
    ``(x-c).T @ (r_k (x-c))`` (:func:`~mixfold.families._full_gaussian_moments.block_moments`:
    one compiled pass for every component at small D, else per component a GEMV and a symmetric
    rank-k update in ``rx`` (n, D)). Each component's sums are its own arithmetic, so any range
    of components gets the bits of the whole."""
    moments = block_moments(centred, None, np.ascontiguousarray(resp.T), 0, len(centred), rx)
    add_block_moments(accs, moments, point)


# ---------------------------------------------------------------------------------------------
# The M-step


def _stacked_moments(estimators: Sequence[Any], stats: Sequence[Any]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(weights (K,), means (K, D), central second moments (K, D) or (K, D, D)) of the K
    payloads, as :func:`~mixfold.families._centred.central_moments` makes them one by one --
    under one covariance key, the pooled (weight,) and (1, ...) second moment instead;
    ``None`` outside the stacked M-step's form (options differ, missing entries, a prior, a
    mixed covariance key, a component with no weight)."""
    first = estimators[0]
    payloads = _stacked_payloads(estimators, stats)
    if payloads is None:
        return None
    own, s0 = payloads
    shape = (-1,) + (1,) * own[0][2].ndim
    m = np.array([o[1] for o in own]) / s0[:, None]
    mean = np.array([o[3] for o in own]) / s0[:, None] + m
    if first.covariance_keys is not None and own[0][2].ndim == 2:  # a tied full covariance
        weight, pooled = _pooled_outer(s0, m, np.array([o[2] for o in own]))
        return weight, mean, pooled
    outer = m[:, :, None] * m[:, None, :] if own[0][2].ndim == 2 else m * m
    second = np.array([o[2] for o in own]) / s0.reshape(shape) - outer
    if second.ndim == 3:
        second = 0.5 * (second + second.transpose(0, 2, 1))
    if first.covariance_keys is not None:
        weight, pooled = _pooled(s0, second)
        s0, second = np.array([weight]), pooled[None]
    return s0, mean, second


def _stacked_payloads(estimators: Sequence[Any], stats: Sequence[Any]
                      ) -> tuple[list[Any], np.ndarray] | None:
    """(the K payloads' own arrays, their weights (K,)), or ``None`` outside the stacked
    M-step's form (options differ, missing entries, a prior, a component with no weight)."""
    first = estimators[0]
    if first.missing or not first._prior().is_flat \
            or any(e is not first and vars(e) != vars(first) for e in estimators):
        return None
    own = [s[0] for s in stats]
    s0 = np.array([o[0][0] for o in own])
    return (own, s0) if (s0 > 0).all() else None


def _pooled(s0: np.ndarray, second: np.ndarray) -> tuple[float, np.ndarray]:
    """A tied covariance's (weight, covariance): the K scatters pooled, as
    :func:`~mixfold.families._shared_covariance.estimate_children` pools them."""
    shape = (-1,) + (1,) * (second.ndim - 1)
    weight = float(np.add.reduce(s0))
    return weight, np.add.reduce(s0.reshape(shape) * second) / weight


def _pooled_outer(s0: np.ndarray, m: np.ndarray, sum_xx: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """A tied full covariance's ((weight,), (1, D, D) covariance) from the K masses ``s0``,
    means ``m`` (K, D) and outer-product sums ``sum_xx`` (K, D, D) about one point: the
    scatters pooled, ``sum_k sum_xx_k - sum_k s0_k m_k m_k^T``, before the one division (the
    small-data fold hands over only the pooled sum)."""
    weight = np.add.reduce(s0)
    pooled = (np.add.reduce(sum_xx) - (m.T * s0) @ m) / weight
    return np.array([weight]), (0.5 * (pooled + pooled.T))[None]


def diagonal_estimate(estimators: Sequence[Any], masses: np.ndarray,
                      stats: Sequence[Any]) -> list[Any] | None:
    """The K diagonal (or spherical) Gaussians of the K payloads (one covariance key: their
    pooled variances), or ``None`` outside the stacked form. Each variance per coordinate and
    no key: one compiled call (:func:`~mixfold.compute.numba_mixture.diagonal_moments`, NumPy's
    operations, so their bits)."""
    first = estimators[0]
    kernels = mixture_kernels()
    if kernels is not None and not first.spherical and first.covariance_keys is None:
        return _compiled_diagonal_estimate(kernels["diagonal_moments"], estimators, stats)
    moments = _stacked_moments(estimators, stats)
    if moments is None:
        return None
    s0, mu, raw = moments
    if first.spherical:
        raw = np.repeat(raw.mean(axis=1, keepdims=True), raw.shape[1], axis=1)
    floor = variance_floor(raw, first.reg_covar, first.reg_covar_mode)
    var = np.maximum(np.maximum(raw, 0.0) + floor, first.min_variance)
    _warn_collapsed(raw <= np.maximum(floor, first.min_variance), s0, mu, raw, var)
    return first.distribution_class.stack_of(mu, var)


def _compiled_diagonal_estimate(moments: Any, estimators: Sequence[Any],
                                stats: Sequence[Any]) -> list[Any] | None:
    """:func:`diagonal_estimate` of one variance per coordinate and component, its moments and
    floors in one compiled call."""
    payloads = _stacked_payloads(estimators, stats)
    if payloads is None:
        return None
    own, s0 = payloads
    first = estimators[0]
    sum_x, sum_xx, ref = (np.array([o[i] for o in own]) for i in (1, 2, 3))
    mu, raw, var = (np.empty_like(sum_x) for _ in range(3))
    if moments(s0, sum_x, sum_xx, ref, float(first.reg_covar),
               first.reg_covar_mode == "relative", float(first.min_variance), mu, raw, var):
        floor = variance_floor(raw, first.reg_covar, first.reg_covar_mode)
        _warn_collapsed(raw <= np.maximum(floor, first.min_variance), s0, mu, raw, var)
    return first.distribution_class.stack_of(mu, var)


def _warn_collapsed(collapsed: np.ndarray, s0: np.ndarray, mu: np.ndarray, raw: np.ndarray,
                    floored: np.ndarray) -> None:
    """The generic M-step's words for each component with a variance on its floor
    (``collapsed`` (K, D)): its first such coordinate's ``raw`` and ``floored`` variance."""
    # (rows searched only when one collapsed: most iterations have none)
    for k in np.flatnonzero(collapsed.any(axis=1)) if collapsed.any() else ():
        j = int(np.flatnonzero(collapsed[k])[0])
        warn_collapsed_variance(raw[k, j], floored[k, j], s0[k], mu[k, j],
                                f" in dimension {j} ({int(collapsed[k].sum())} of "
                                f"{raw.shape[1]})", stacklevel=4)


def full_estimate(estimators: Sequence[Any], masses: np.ndarray,
                  stats: Sequence[Any]) -> list[Any] | None:
    """The K full-covariance Gaussians of the K payloads (one covariance key: one pooled
    covariance, factored once), or ``None`` outside the stacked form."""
    moments = _stacked_moments(estimators, stats)
    if moments is None:
        return None
    s0, mu, cov = moments
    first = estimators[0]
    d = mu.shape[1]
    diag = np.diagonal(cov, axis1=1, axis2=2)
    floor = variance_floor(diag, first.reg_covar, first.reg_covar_mode)
    if first.reg_covar_mode == "relative":  # a collapsed column: the component's own scale
        scale = first.reg_covar * np.maximum(diag.max(axis=1, keepdims=True), 1.0)
        floor = np.where(diag > 0, floor, scale)
    floor = np.maximum(floor, ROUNDOFF_FLOOR * np.maximum(diag, 0.0))
    _warn_collapsed(diag <= floor, s0, mu, diag, diag + floor)
    cov.reshape(len(cov), d * d)[:, ::d + 1] += floor  # (a view: the moments are C-ordered)
    return first.distribution_class.stack_of(mu, cov)
