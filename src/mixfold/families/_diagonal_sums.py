"""The statistics of diagonal Gaussians: moments about a reference point, added row by row,
for K components at once, by the fused linear E-step (its features ``[(x-c)^2; x-c]`` laid out
transposed) and in double-double; and with rows that miss entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import (CompensatedAccumulation, FusedFold, LinearInFeatures,
                                  StackedUpdate)
from mixfold.compute.linear import LinearTerms
from mixfold.families._centred import VectorMoments
from mixfold.families._diagonal_stack import centred_terms
from mixfold.families._missing import has_missing, require_native
from mixfold.families._protocol import Encoded
from mixfold.families.contract import LeafAccumulator
from mixfold.families.stacked_gaussian import diagonal_fold
from mixfold.precision.bands import FLOAT64, Precision
from mixfold.precision.compensated import add_weighted_moments

__all__ = ["DiagonalGaussianAccumulator", "MissingDiagonalGaussianAccumulator",
           "transpose_rows", "centred_transposed", "TRANSPOSE_ROWS", "TRANSPOSE_VALUES"]


#: Rows a one-sub-block (float64) block of the fused E-step transposes at a time: NumPy's
#: strided copy is faster over cache-sized pieces than over a whole block ...
TRANSPOSE_ROWS = 4096
#: ... and over pieces of at most this many values (1 MiB of float64) when rows are wide.
TRANSPOSE_VALUES = 1 << 17


def transpose_rows(d: int) -> int:
    """Rows of D values per transposed piece: :data:`TRANSPOSE_ROWS`, or the power of two
    within :data:`TRANSPOSE_VALUES` for wider rows.

    >>> transpose_rows(10), transpose_rows(128)
    (4096, 1024)
    """
    rows = min(TRANSPOSE_ROWS, max(TRANSPOSE_VALUES // max(d, 1), 64))
    return 1 << (rows.bit_length() - 1)


def centred_transposed(rows: np.ndarray, center: np.ndarray, out: np.ndarray) -> None:
    """``out[i, :, j] = rows[i * w + j] - center`` for ``out`` of shape (s, D, w): ``rows``
    (s * w, D) transposed into s sub-blocks and centred, in ``out``'s dtype. One sub-block is
    transposed in pieces of :func:`transpose_rows` rows (one call for the whole pieces).

    >>> out, rows = np.empty((1, 2, 3)), np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    >>> centred_transposed(rows, np.array([1.0, 0.0]), out)
    >>> out[0].tolist()
    [[0.0, 1.0, 2.0], [10.0, 20.0, 30.0]]
    """
    s, d, w = out.shape
    piece = transpose_rows(d)
    whole = w // piece * piece if s == 1 else 0
    if whole > piece:
        pieces = rows[:whole].reshape(-1, piece, d).transpose(0, 2, 1)
        into = out[0, :, :whole].reshape(d, -1, piece).transpose(1, 0, 2)
        np.subtract(pieces, center[:, None], out=into, casting="same_kind")
        if whole < w:
            np.subtract(rows[whole:].T, center[:, None], out=out[0, :, whole:],
                        casting="same_kind")
        return
    np.subtract(rows.reshape(s, w, d).transpose(0, 2, 1), center[:, None], out=out,
                casting="same_kind")


class DiagonalGaussianAccumulator(VectorMoments, LeafAccumulator, StackedUpdate,
                                  LinearInFeatures, CompensatedAccumulation, FusedFold):
    """Statistics about a reference point ``c``
    (:class:`~mixfold.families._centred.CentredMoments`): the sum of weights, and per coordinate
    the sums of ``w (x-c)``, ``w (x-c)^2`` and ``w c``."""

    # a mixture's E-step of all K at once (families/stacked_gaussian.py)
    stack_fold = staticmethod(diagonal_fold)

    @staticmethod
    def stack_reference(components: Sequence[Any]) -> np.ndarray:
        """The fused E-step's centre of these components
        (:func:`~mixfold.compute.linear.gaussian_centre`), for each."""
        return np.repeat(centred_terms(components)[0][None], len(components), axis=0)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        c = self.point_for(x, w)
        d = x - c
        s0 = w.sum()
        self.weight += s0
        self.sum_x += w @ d
        self.sum_xx += w @ (d * d)
        self.ref_mass += s0 * c

    def _add_dd(self, x: np.ndarray, w_hi: np.ndarray, w_lo: np.ndarray) -> None:
        add_weighted_moments(self, x, w_hi, w_lo, reference=self.point_for(x, w_hi))

    @staticmethod
    def linear_terms(accs: Sequence[DiagonalGaussianAccumulator],
                     components: Sequence[Any],
                     enc: Encoded) -> LinearTerms:
        """The scores as :class:`~mixfold.compute.linear.LinearTerms` on the centred
        features ``[(x-c)^2; x-c]`` (2D of them), centred on the mean of the means; the sums
        stay about that centre."""
        center, coef, const, peak = centred_terms(components)
        x, d = enc.values, enc.values.shape[1]

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            centred_transposed(x[lo:hi], center, out[:, d:])
            np.square(out[:, d:], out=out[:, :d])  # np.square: faster than x * x, same bits

        def add_sums(sums: np.ndarray, mass: np.ndarray, _: None) -> None:
            for acc, w, sx, sxx in zip(accs, mass, sums[:, d:], sums[:, :d]):
                acc.add_about(center, w, sx, sxx)

        return LinearTerms(coef, const, features, add_sums, peak=peak, source=x,
                           key=("diagonal-gaussian", center.tobytes()))

    @staticmethod
    def stack_update(accs: Sequence[DiagonalGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once; ``resp`` (n_rows, K) already includes row weights.

        Column by column (``r_k @ (x-c)``, ``r_k @ (x-c)^2``): a component's sums do not depend
        on the others in the call, so any range of components can be added apart with the same
        bits. The rows are centred once per distinct reference point (one for a stack whose
        references :meth:`stack_reference` set).
        """
        x = enc.values
        at = xc = xx = None
        for k, acc in enumerate(accs):
            r = resp[:, k]
            c = acc.point_for(x, r)
            if at is None or not np.array_equal(c, at):
                at, xc = c, (x - c if np.any(c) else x)  # (about the origin: as they are)
                xx = xc * xc
            s0 = r.sum()
            acc.weight += s0
            acc.sum_x += r @ xc
            acc.sum_xx += r @ xx
            acc.ref_mass += s0 * c


class MissingDiagonalGaussianAccumulator(DiagonalGaussianAccumulator):
    """Statistics of rows that may miss entries: per coordinate, the sum of the weights of the
    rows that have it, and the weighted sums of its deviations from the reference point and
    their squares, and the weighted reference (each length D). A missing coordinate drops out
    of its sums: with independent coordinates the observed ones carry all there is to learn
    (the M-step is exact for the observed-data likelihood)."""

    def __init__(self, dim: int, keys: str | None = None):
        super().__init__(dim, keys)
        self.weight = np.zeros(dim)

    def _add(self, x: np.ndarray, w: np.ndarray) -> None:
        seen = ~np.isnan(x)
        c = self.point_for(x, w)
        d = np.where(seen, x - c, 0.0)
        mass = w @ seen
        self.weight += mass
        self.sum_x += w @ d
        self.sum_xx += w @ (d * d)
        self.ref_mass += mass * c

    def seq_update(self, enc: Encoded, weights: np.ndarray, model: Any,
                   precision: Precision = FLOAT64) -> None:
        if has_missing(enc):
            require_native(precision, "DiagonalGaussian")
        return super().seq_update(enc, weights, model, precision)

    @staticmethod
    def linear_terms(accs: Sequence[DiagonalGaussianAccumulator],
                     components: Sequence[Any],
                     enc: Encoded) -> LinearTerms | None:
        """The fused E-step's terms for complete rows (``None`` for rows that miss entries:
        the mixture then scores, normalises and adds in three steps); a component's mass
        adds to every coordinate's weight."""
        if has_missing(enc):
            return None
        return DiagonalGaussianAccumulator.linear_terms(accs, components, enc)

    @staticmethod
    def stack_update(accs: Sequence[DiagonalGaussianAccumulator], enc: Encoded,
                     resp: np.ndarray) -> None:
        """Add rows to K accumulators at once, column by column; a missing coordinate adds to
        none of its sums."""
        if not has_missing(enc):
            DiagonalGaussianAccumulator.stack_update(accs, enc, resp)
            return
        p = enc.patterns
        seen = p.observed > 0
        for k, acc in enumerate(accs):
            r = resp[:, k]
            c = acc.point_for(np.where(seen, p.zero_filled, np.nan), r)
            d = np.where(seen, p.zero_filled - c, 0.0)
            mass = r @ p.observed
            acc.weight += mass
            acc.sum_x += r @ d
            acc.sum_xx += r @ (d * d)
            acc.ref_mass += mass * c
