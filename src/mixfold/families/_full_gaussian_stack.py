"""K full-covariance Gaussians scored at once (a mixture's components, the hidden states'
emissions): the stacked scoring a :class:`~mixfold.MultivariateGaussianDistribution` inherits,
rows centred on the mean of the component means and whitened: in float64 at small D by one
compiled pass over the rows for every component, else block by block of rows (once per block for
a tied covariance)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import NormalisesStack, RelativeScoring, StackedScoring
from mixfold.compute.logspace import (LOG_2PI, affine_far_rows, normalise_rows_compiled,
                                     relative_affine_scores)
from mixfold.compute.scratch import scratch
from mixfold.families._full_gaussian_moments import compiled_passes, compiled_rows
from mixfold.families._missing import has_missing, require_native
from mixfold.families._protocol import Encoded
from mixfold.precision import native_dtype
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["FullGaussianStack", "stack_centre", "stack_constants", "whitening_terms",
           "whitened_terms", "whiten_rows", "whitened_block_rows"]


class FullGaussianStack(StackedScoring, RelativeScoring, NormalisesStack):
    """What K full-covariance Gaussians (``mu`` (D,), ``precision_cholesky`` (D, D) each) do at
    once."""

    # the fused fold's normalisation (families/_full_gaussian_fold.py), in every path
    stack_normalise = staticmethod(normalise_rows_compiled)

    @classmethod
    def can_stack(cls, components: Sequence[Any]) -> bool:
        """Components fitted with missing entries do not stack: their update reads each
        component's parameters (conditional expectations), one component at a time."""
        return not any(c.missing for c in components)

    #: ``stack_log_density`` takes ``units=(start, stop)`` (the centre is shared by the stack)
    stack_units = True

    @classmethod
    def stack_log_density(cls, components: Sequence[Any],
                          enc: Encoded, precision: Precision = FLOAT64,
                          units: tuple[int, int] | None = None) -> np.ndarray:
        """Log-densities of all components at once, array of shape (n_rows, K).

        Rows are centred on the mean of the component means (so the subtraction cancels
        little). In float64 at small D, one compiled pass over the rows differences each with
        each component's centred mean, whitens by ``U_k``, squares and sums
        (``compute/numba_gaussian.py``); otherwise, block by block of rows (each block
        read from memory once), the rows are whitened by each component's ``U_k`` and offset by
        ``(mu_k - c) U_k`` (one GEMM per component and block: the block with a ones column times
        ``[U_k; -(mu_k - c) U_k]``), squared and summed. A component's column is computed by
        the same calls whatever other components are stacked with it, so
        ``units=(start, stop)`` computes only those columns with the bits of the full call
        (model-parallel workers score ranges apart).
        """
        start, stop = (0, len(components)) if units is None else units
        if has_missing(enc):
            require_native(precision, "MultivariateGaussian")
            return np.stack([c.conditionals(enc.patterns).log_density
                             for c in components[start:stop]], axis=1)
        dt = native_dtype(precision)
        d = components[0].dim
        center = stack_centre(components)
        n = enc.n_rows
        out = np.empty((stop - start, n), dtype=dt)
        if dt != np.float64 or not _compiled_squares(components, start, stop, enc.values,
                                                     center, out):
            _numpy_squares(components, start, stop, enc.values, center, dt, out)
        out *= dt.type(-0.5)
        out += stack_constants(components[start:stop], d).astype(dt)[:, None]
        return out.T  # (n, K) in Fortran order: the log-sum-exp reduces contiguous columns

    @classmethod
    def stack_relative_log_density(cls, components: Sequence[Any],
                                   enc: Encoded) -> np.ndarray:
        """Log-densities less each row's largest quadratic part, (n_rows, K), finite for any
        finite row (:func:`~mixfold.compute.logspace.relative_affine_scores`)."""
        const = np.array([c.log_det_precision_cholesky for c in components]) \
            - 0.5 * enc.values.shape[1] * LOG_2PI
        return relative_affine_scores(enc.values, np.array([c.mu for c in components]),
                                      np.array([c.precision_cholesky for c in components]), const)

    @classmethod
    def stack_far_rows(cls, components: Sequence[Any],
                       enc: Encoded) -> np.ndarray:
        """Rows the plain scores cannot rank
        (:func:`~mixfold.compute.logspace.affine_far_rows`)."""
        return affine_far_rows(enc.values, np.array([c.mu for c in components]),
                               np.array([c.precision_cholesky for c in components]))


def _compiled_squares(components: Sequence[Any], start: int, stop: int, x: np.ndarray,
                      center: np.ndarray, out: np.ndarray) -> bool:
    """``out[k] = |((x - c) - (mu_k - c)) U_k|^2`` per row of components ``[start, stop)`` in
    one compiled pass over the rows (tied or not: at small D the products cost less than a
    pass); wider rows,
    whitened by BLAS (:func:`whiten_rows`) and squared by a compiled pass; ``False`` without
    numba."""
    kernels = compiled_passes(x.shape[1], scores=True)
    if kernels is None:
        return _whitened_squares(components, start, stop, x, center, out)
    offsets, factors = whitening_terms(components[start:stop], center)
    kernels["full_squares"](np.ascontiguousarray(x, dtype=np.float64),
                            np.array(center, dtype=np.float64), offsets, factors, out)
    return True


def _whitened_squares(components: Sequence[Any], start: int, stop: int, x: np.ndarray,
                      center: np.ndarray, out: np.ndarray) -> bool:
    """:func:`_compiled_squares` of wide rows, block by block of :func:`whitened_block_rows`
    rows; ``False`` without numba or where every component of the stack has the same factor
    (a tied mixture's blocks are whitened once, :func:`_tied_squares`)."""
    kernels = compiled_rows()
    if kernels is None or _tied(components):
        return False
    x = np.ascontiguousarray(x, dtype=np.float64)
    n, d = x.shape
    factors, offsets = whitened_terms(components[start:stop], center)
    step = whitened_block_rows(d)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        yt = scratch("mvg.whitened", (stop - start, d, hi - lo))
        whiten_rows(kernels, x, center, lo, hi, factors, yt)
        kernels["whitened_squares"](yt, offsets, lo, out)
    return True


def stack_centre(components: Sequence[Any]) -> np.ndarray:
    """The point every path of the stack centres its rows on: the mean of the component means."""
    return np.add.reduce(np.array([c.mu for c in components])) / len(components)


def whitening_terms(components: Sequence[Any], center: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(each component's mean less ``center`` (K, D), its whitening factor ``U_k`` (K, D, D)),
    as the compiled passes read them."""
    offsets = np.array([comp.mu - center for comp in components])
    return offsets, np.array([comp.precision_cholesky for comp in components], dtype=np.float64)


def _tied(components: Sequence[Any]) -> bool:
    """Whether the stack's components share one factor (a tied mixture's)."""
    shared = components[0].precision_cholesky
    return len(components) > 1 and all(c.precision_cholesky is shared for c in components)


def whitened_block_rows(d: int) -> int:
    """Rows per block whitened by BLAS: a block of rows (rows, D) and a component's whitened
    copy stay within ~2 MB."""
    return max(64, (1 << 17) // d)


def stack_constants(components: Sequence[Any], d: int) -> np.ndarray:
    """Each component's ``log|U_k| - D/2 log(2 pi)`` (K,), as every path adds it to the
    scores."""
    return np.array([c.log_det_precision_cholesky for c in components]) - 0.5 * d * LOG_2PI


def whitened_terms(components: Sequence[Any], center: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(each component's whitening factor ``U_k`` (K, D, D), its whitened mean
    ``(mu_k - c) U_k`` (K, D)), as :func:`whiten_rows` and the compiled passes after it read
    them."""
    factors = np.array([c.precision_cholesky for c in components], dtype=np.float64)
    offsets = np.array([(c.mu - center) @ c.precision_cholesky for c in components])
    return factors, offsets


def whiten_rows(kernels: dict[str, Any], x: np.ndarray, center: np.ndarray, lo: int, hi: int,
                factors: np.ndarray, yt: np.ndarray) -> None:
    """``yt[k]`` (D, hi - lo) = rows ``[lo, hi)`` of ``x`` (n, D; float64, C-contiguous) less
    ``center``, whitened by ``factors[k]``, coordinate by coordinate: the rows laid out by a
    compiled pass, then one GEMM per component, so that the compiled passes after it read each
    coordinate's rows contiguously. ``hi - lo`` at most :func:`whitened_block_rows`."""
    xct = scratch("mvg.centred_columns", (x.shape[1], hi - lo))
    kernels["centred_columns"](x, center, lo, hi, xct)
    for y, u in zip(yt, factors):
        np.matmul(u.T, xct, out=y)


def _numpy_squares(components: Sequence[Any], start: int, stop: int, x: np.ndarray,
                   center: np.ndarray, dt: np.dtype, out: np.ndarray) -> None:
    """:func:`_squares` of components ``[start, stop)``, or :func:`_tied_squares` where every
    component has the same factor."""
    step = whitened_block_rows(x.shape[1])
    if _tied(components):  # a tied mixture: whiten each block once
        _tied_squares(components[start:stop], x, center, dt, step, out)
    else:
        _squares(components[start:stop], x, center, dt, step, out)


def _squares(components: Sequence[Any], x: np.ndarray,
             center: np.ndarray, dt: np.dtype, step: int, out: np.ndarray) -> None:
    """``out[k] = |(x - mu_k) U_k|^2`` per row, block by block of rows (each block stays in
    cache while every component reads it)."""
    n, d = x.shape
    # [U_k; -(mu_k - c) U_k]: one GEMM of the block with a ones column whitens and offsets
    whitening = np.empty((len(components), d + 1, d), dt)
    for w, comp in zip(whitening, components):
        w[:d] = comp.precision_cholesky
        w[d] = -((comp.mu - center) @ comp.precision_cholesky)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = scratch("mvg.block", (hi - lo, d + 1), dt)
        np.subtract(x[lo:hi], center, dtype=dt, out=block[:, :d])
        block[:, d] = 1.0
        y = scratch("mvg.y", (hi - lo, d), dt)
        for j, whiten in enumerate(whitening):
            np.matmul(block, whiten, out=y)
            np.einsum("ij,ij->i", y, y, out=out[j, lo:hi])  # one pass: square and sum


def _tied_squares(components: Sequence[Any], x: np.ndarray,
                  center: np.ndarray, dt: np.dtype, step: int, out: np.ndarray) -> None:
    """:func:`_squares` where every component has the same ``U``: one GEMM per block whitens
    the rows, each component then subtracts its whitened mean ``(mu_k - c) U``."""
    n, d = x.shape
    u = components[0].precision_cholesky.astype(dt)
    offsets = [((comp.mu - center) @ components[0].precision_cholesky).astype(dt)
               for comp in components]
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = scratch("mvg.block", (hi - lo, d), dt)
        np.subtract(x[lo:hi], center, dtype=dt, out=block)
        white = scratch("mvg.white", (hi - lo, d), dt)
        np.matmul(block, u, out=white)
        y = scratch("mvg.y", (hi - lo, d), dt)
        for j, offset in enumerate(offsets):
            np.subtract(white, offset, out=y)
            np.einsum("ij,ij->i", y, y, out=out[j, lo:hi])
