"""How few folds can any extrapolation of EM's steps need on a case? An oracle's count.

    PYTHONPATH=src python benchmarks/accelerated_floor.py [--case P3] [--scale 0.05] [--tol 1e-8]

The oracle knows, for free, EM's Jacobian ``J`` at the fixed point (by finite differences of
the EM map there, folds not counted) and extrapolates every fold's EM step through it,
``theta + (I - J)^+ (M(theta) - theta)``: the step that SQUAREM, Anderson acceleration and
quasi-Newton methods approximate from secants. Each such step costs one fold (the fold that
gives ``M(theta)`` also scores ``theta``), unless that step leaves the parameter space or scores
below EM's own step ``M(theta)`` (far from the optimum, where the linearisation does not hold:
the oracle scores both for free), where it takes ``M(theta)``. The table gives, per fold, the
relative distance of the log-likelihood below the optimum for plain EM and for the oracle, and
the fold at which each would stop under the loop's test (two consecutive folds within ``tol``,
relative).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mixfold as mf  # noqa: E402
from _peers import GENERATORS  # noqa: E402
from accelerated import CASES, model_of  # noqa: E402
from mixfold.families._flat import from_flat, to_flat  # noqa: E402


def em_step(rows, est, model) -> tuple[mf.Distribution, float]:
    """M(model) and the mean log-likelihood of ``model``: one fold."""
    res = mf.fit(rows, est, init=model, tol=0.0, max_iter=1, progress=False)
    return res.model, res.log_likelihood[0]


def em_jacobian(rows, est, model, h: float = 1e-6) -> np.ndarray:
    x, g0 = to_flat(model), to_flat(em_step(rows, est, model)[0])
    jac = np.empty((g0.size, x.size))
    for j in range(x.size):
        xj = x.copy()
        xj[j] += h
        jac[:, j] = (to_flat(em_step(rows, est, from_flat(model, xj))[0]) - g0) / h
    return jac


def oracle_path(rows, est, init, jac, folds: int) -> list[float]:
    """The log-likelihoods of the oracle's folded models."""
    lls, model, eye = [], init, np.eye(jac.shape[0])
    for _ in range(folds):
        produced, ll = em_step(rows, est, model)
        lls.append(ll)
        x, gx = to_flat(model), to_flat(produced)
        step = np.linalg.lstsq(eye - jac, gx - x, rcond=1e-10)[0]
        model = produced  # the oracle stays in the parameter space and never falls below EM
        try:  # (scoring its candidate and EM's step is free: folds not counted)
            jump = from_flat(model, x + step)
            if em_step(rows, est, jump)[1] >= em_step(rows, est, produced)[1]:
                model = jump
        except (mf.ParameterError, ValueError, np.linalg.LinAlgError):
            pass
    return lls


def stop_fold(lls: list[float], tol: float) -> int | None:
    for k in range(1, len(lls)):
        if abs(lls[k] - lls[k - 1]) <= tol * abs(lls[k - 1]):
            return k + 1
    return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="P3", choices=sorted(CASES))
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--folds", type=int, default=12, help="oracle folds to run")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    name, kind = CASES[args.case]
    data, start, label = GENERATORS[name](args.scale)
    rows, est, init = model_of(kind, data, start)
    best = mf.fit(rows, est, init=init, tol=1e-14, max_iter=100000, progress=False)
    plain = mf.fit(rows, est, init=init, tol=args.tol, max_iter=100000, progress=False)
    jac = em_jacobian(rows, est, best.model)
    rates = np.sort(np.abs(np.linalg.eigvals(jac)))[::-1]
    oracle = oracle_path(rows, est, init, jac, args.folds)
    top = best.final_log_likelihood

    def gap(ll: float) -> str:
        return f"{max(top - ll, 0.0) / abs(top):.1e}"

    print(f"{args.case} ({label}), tol={args.tol:g}; EM's rates at the optimum (|eigenvalues| "
          f"of its Jacobian): {', '.join(f'{r:.3f}' for r in rates[:4])}")
    print("| fold | plain EM: LL below the optimum (relative) | oracle |")
    print("| ---: | ---: | ---: |")
    for k in range(max(len(plain.log_likelihood), len(oracle))):
        cells = [gap(p[k]) if k < len(p) else "" for p in (plain.log_likelihood, oracle)]
        print(f"| {k + 1} | {cells[0]} | {cells[1]} |")
    print(f"stops at fold: plain EM {stop_fold(plain.log_likelihood, args.tol)}, "
          f"oracle {stop_fold(oracle, args.tol)}")


if __name__ == "__main__":
    main()
