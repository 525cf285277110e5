"""A full-covariance mixture's float64 E-step, the fused compiled pass against the three steps
it replaces, and the vectorised exp64 it normalises with against NumPy's exp.

    python benchmarks/full_gaussian_fold.py [--rows 1000000] [--repeats 5]

The E1 model (K=4 full covariances, D=3), one thread (``MIXFOLD_NUM_THREADS=1`` unless set):

- one E-step over ``--rows`` rows, best CPU time of ``--repeats``: the three steps as main
  (836e1ef) ran them -- the compiled squares (``full_squares``), NumPy's log-sum-exp
  (``log_normalize_rows``, block by block of 32768 rows as the mixture runs it), the compiled
  sums (``full_moments``) -- and the fused pass (``fused_full_fold``), same rows, same start;
- exp over 4 million values in pieces of 32768 (a block of the mixture's normalisation), exp64
  (a compiled loop) against NumPy's,
  and each one's error against mpmath: the largest in ulps of the correctly rounded result
  and the share of values that are not the nearest float.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("MIXFOLD_NUM_THREADS", "1")

import mpmath  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402

import mixfold  # noqa: E402
from mixfold.compute.kernels import full_gaussian_kernels  # noqa: E402
from mixfold.compute.logspace import LOG_2PI, log_normalize_rows  # noqa: E402
from mixfold.compute.numba_math import exp64  # noqa: E402
from mixfold.families._full_gaussian_fold import fused_full_fold  # noqa: E402
from mixfold.families.stacked_gaussian import update_block_rows  # noqa: E402
from mixfold.families.units import STACK_BLOCK_ROWS  # noqa: E402

from _timing import best_cpu_seconds  # noqa: E402  (benchmarks/: the script's folder is on the path)

#: values per exp call: a block of the mixture's normalisation, in cache for both
PIECE = STACK_BLOCK_ROWS


def _model(n: int):
    """The E1 rows and a start a few iterations in (benchmarks/_peers.py's make_e1 shape)."""
    rng = np.random.default_rng(1)
    means = np.random.default_rng(0).normal(0, 4, size=(4, 3))
    x = means[rng.integers(0, 4, size=n)] + rng.normal(size=(n, 3))
    est = mixfold.MixtureEstimator([mixfold.MultivariateGaussianEstimator()] * 4)
    model = mixfold.optimize(x[:20000], est, max_iter=3, seed=0, progress=False)
    return x, model


def _three_steps(x, model, accs):
    """main's E-step: compiled squares, NumPy's normalisation per block, compiled sums."""
    kernels = full_gaussian_kernels()
    comps = model.components
    n, d = x.shape
    center = np.add.reduce(np.array([c.mu for c in comps])) / len(comps)
    offsets = np.array([c.mu - center for c in comps])
    factors = np.array([c.precision_cholesky for c in comps])
    const = np.array([c.log_det_precision_cholesky for c in comps]) - 0.5 * d * LOG_2PI
    weights = np.ones(n)
    point = accs[0].stack_reference(comps)[0]

    def run():
        resp = np.empty((n, len(comps)), order="F")
        for lo in range(0, n, STACK_BLOCK_ROWS):
            hi = min(n, lo + STACK_BLOCK_ROWS)
            out = np.empty((len(comps), hi - lo))
            kernels["full_squares"](x[lo:hi], center, offsets, factors, out)
            out *= -0.5
            out += const[:, None]
            scores = out.T
            scores += np.log(model.weights)
            resp[lo:hi] = log_normalize_rows(scores, weights[lo:hi])[0]
        resp_t = resp.T
        step = update_block_rows(d)
        sums = (np.empty(4), np.empty((4, d)), np.empty((4, d, d)))
        for lo in range(0, n, step):
            kernels["full_moments"](x, point, resp_t, lo, min(n, lo + step), *sums)
        return resp.sum(axis=0)
    return run


def _fused(x, model):
    enc = model.components[0].encoder().encode(x)
    accs = _accumulators(model, x.shape[1])
    weights = np.ones(len(x))

    def run():
        fused_full_fold(accs, model.components, np.log(model.weights), enc, weights,
                        update_block_rows(x.shape[1]))
    return run


def _accumulators(model, d):
    factory = mixfold.MultivariateGaussianEstimator(dim=d).accumulator_factory()
    return [factory.make() for _ in model.components]


@numba.njit(error_model="numpy", nogil=True)
def _exp_pieces(x, out, piece):
    # exp64 over x piece by piece, each piece's loop as the fused pass runs it over a chunk
    for lo in range(0, x.size, piece):
        xs, outs = x[lo:lo + piece], out[lo:lo + piece]
        for i in range(xs.size):
            outs[i] = exp64(xs[i])


def _numpy_pieces(x, out, piece):
    for lo in range(0, x.size, piece):
        np.exp(x[lo:lo + piece], out=out[lo:lo + piece])


def _ulps(x, got):
    with mpmath.workdps(40):
        want = np.array([float(mpmath.exp(mpmath.mpf(float(v)))) for v in x])
    err = np.abs(got - want) / np.spacing(want)
    return err.max(), 100.0 * (err > 0).mean()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    x, model = _model(args.rows)
    three = best_cpu_seconds(_three_steps(x, model, _accumulators(model, 3)), args.repeats)
    fused = best_cpu_seconds(_fused(x, model), args.repeats)
    print(f"One E-step of the E1 model (K=4 full covariances, D=3), {args.rows} rows, one "
          "thread, best CPU time:\n")
    print("| E-step | ms | vs the three steps |")
    print("|---|---:|---:|")
    print(f"| three steps (main: compiled squares, NumPy log-sum-exp, compiled sums) | "
          f"{three * 1e3:.1f} | 1.00 |")
    print(f"| fused pass (scores, exp64 normalisation, sums per chunk) | {fused * 1e3:.1f} | "
          f"{fused / three:.2f} |")
    values = np.random.default_rng(2).uniform(-40.0, 0.0, 4_000_000)
    out = np.empty_like(values)
    ours = best_cpu_seconds(lambda: _exp_pieces(values, out, PIECE), args.repeats)
    theirs = best_cpu_seconds(lambda: _numpy_pieces(values, out, PIECE), args.repeats)
    probe = np.random.default_rng(3).uniform(-708.0, 709.7, 20000)
    got = np.empty_like(probe)
    _exp_pieces(probe, got, PIECE)
    ours_err, theirs_err = _ulps(probe, got), _ulps(probe, np.exp(probe))
    print(f"\nexp of 4e6 values in pieces of {PIECE} (CPU time), and the error over 2e4 values "
          "uniform on [-708, 709.7] against mpmath:\n")
    print("| exp | ms | largest error (ulps) | not the nearest float |")
    print("|---|---:|---:|---:|")
    print(f"| exp64 (compute/numba_math.py) | {ours * 1e3:.1f} | {ours_err[0]:.0f} | "
          f"{ours_err[1]:.1f}% |")
    print(f"| NumPy's np.exp | {theirs * 1e3:.1f} | {theirs_err[0]:.0f} | {theirs_err[1]:.1f}% |")


if __name__ == "__main__":
    main()
