"""What a block of rows adds to K full-covariance accumulators: per component, the posterior mass,
``sum r (x-c)`` and ``sum r (x-c)(x-c)^T`` about a point ``c``. Up to :data:`COMPILED_MAX_DIM`
coordinates, one compiled pass over the rows for every component
(:mod:`mixfold.compute.numba_gaussian`; on small data too, where it replaces a few NumPy calls
per component, each costing more than its arithmetic); wider rows: one compiled pass makes each
component's sum, first sums and weighted rows ``s = sqrt(r) (x-c)``, whose symmetric rank-k update
``s.T @ s`` BLAS makes per component; without numba, NumPy's passes per component: a sum, a
GEMV, the weighted rows and the rank-k update.
(How wide the compiled scores go, :data:`COMPILED_SCORES_MAX_DIM`, is set here too: the two
widths in one place.)

Either way a component's sums are its own arithmetic, whatever others share the call: a range of
components gets the bits of the whole stack (the model-parallel column fold).

>>> x = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
>>> resp = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])  # (K, rows)
>>> m = block_moments(x, np.array([2.0, 3.0]), resp, 0, 3)
>>> m.mass.tolist(), m.sum_x.tolist(), m.sum_xx[0].tolist()
([2.0, 1.0], [[0.0, 0.0], [0.0, 0.0]], [[8.0, 8.0], [8.0, 8.0]])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixfold.compute.kernels import full_gaussian_kernels
from mixfold.compute.scratch import scratch

__all__ = ["BlockMoments", "block_moments", "add_block_moments", "compiled_passes",
           "compiled_rows", "add_rank_k", "COMPILED_MAX_DIM", "COMPILED_SCORES_MAX_DIM"]

#: the widest rows the compiled sums take: their work grows as D^2 per row and component without
#: BLAS's register blocking, so past it the per-component rank-k updates win
#: (benchmarks/full_gaussian_passes.py)
COMPILED_MAX_DIM = 8
#: ... and the compiled scores: a triangular product per component, whose few passes NumPy pays
#: per component cost more up to about here
COMPILED_SCORES_MAX_DIM = 24


@dataclass
class BlockMoments:
    """A block's sums for K components: ``mass`` (K,), ``sum_x`` (K, D), ``sum_xx`` (K, D, D)."""

    mass: np.ndarray
    sum_x: np.ndarray
    sum_xx: np.ndarray


def compiled_passes(d: int, scores: bool = False) -> dict[str, Any] | None:
    """The compiled float64 passes for the sums (the ``scores``) of rows of ``d`` coordinates,
    or ``None`` (NumPy's)."""
    widest = COMPILED_SCORES_MAX_DIM if scores else COMPILED_MAX_DIM
    return full_gaussian_kernels() if d <= widest else None


def compiled_rows() -> dict[str, Any] | None:
    """The compiled float64 passes around BLAS's products (any D), or ``None`` (NumPy's)."""
    return full_gaussian_kernels()


def block_moments(x: np.ndarray, point: np.ndarray | None, resp_t: np.ndarray, lo: int, hi: int,
                  rx: np.ndarray | None = None) -> BlockMoments:
    """The sums of rows ``[lo, hi)`` of ``x`` (n, D) about ``point`` (D,; ``None``: the rows are
    already centred), component k weighted by ``resp_t[k]`` (``resp_t`` (K, n), C-contiguous);
    ``rx`` (hi - lo, D) is the NumPy passes' scratch (without numba)."""
    k, d = resp_t.shape[0], x.shape[1]
    out = BlockMoments(np.empty(k), np.empty((k, d)), np.empty((k, d, d)))
    kernels = compiled_rows()
    if kernels is not None and x.dtype == np.float64 and x.flags.c_contiguous:
        origin = np.zeros(d) if point is None else np.array(point, dtype=np.float64)
        weights = resp_t if resp_t.flags.writeable else resp_t.copy()  # (the kernel's types)
        if d <= COMPILED_MAX_DIM:
            kernels["full_moments"](x, origin, weights, lo, hi, out.mass, out.sum_x, out.sum_xx)
            return out
        rooted = scratch("mvg.rooted", (k, hi - lo, d))
        kernels["weighted_rows"](x, origin, weights, lo, hi, out.mass, out.sum_x, rooted)
        add_rank_k(rooted, out.sum_xx)
        return out
    y = x[lo:hi] if point is None else np.subtract(
        x[lo:hi], point, out=scratch("mvg.centred_block", (hi - lo, d)))
    rx = scratch("mvg.rx", y.shape) if rx is None else rx
    for j, r in enumerate(resp_t[:, lo:hi]):
        out.mass[j] = r.sum()
        out.sum_x[j] = r @ y
        np.multiply(np.sqrt(r)[:, None], y, out=rx)  # responsibilities are never negative
        out.sum_xx[j] = rx.T @ rx  # NumPy runs s.T @ s as a rank-k update: half the products
    return out


def add_rank_k(rooted: np.ndarray, sum_xx: np.ndarray) -> None:
    """``sum_xx[k] = rooted[k].T @ rooted[k]`` of the weighted rows ``rooted`` (K, rows, D): per
    component BLAS's symmetric rank-k update."""
    for s, out in zip(rooted, sum_xx):
        np.matmul(s.T, s, out=out)  # NumPy runs s.T @ s as a rank-k update


def add_block_moments(accs: Sequence[Any], moments: BlockMoments, point: np.ndarray) -> None:
    """Add a block's sums about ``point`` to the K accumulators, in order."""
    for acc, s0, sx, sxx in zip(accs, moments.mass, moments.sum_x, moments.sum_xx):
        acc.weight += s0
        acc.sum_x += sx
        acc.sum_xx += sxx
        acc.ref_mass += s0 * point
