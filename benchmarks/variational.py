"""Variational Gaussian mixtures, mixfold beside scikit-learn in the same run.

Both fit ``BayesianGaussianMixture`` (Dirichlet-process prior, K components, the same seed and
k-means start) to blobs of n rows and d features, to scikit-learn's stopping rule; the table
gives each library's iterations, seconds, seconds per iteration, lower bound (scikit-learn's
convention) and effective components (weight > 0.01), and mixfold's time as a ratio of
scikit-learn's.

    PYTHONPATH=src python benchmarks/variational.py [--quick]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.mixture import BayesianGaussianMixture as SklearnBGM

from mixfold.sklearn import BayesianGaussianMixture

CASES = [(20_000, 5, 10, "full"), (20_000, 5, 10, "diag"), (100_000, 10, 10, "diag")]
QUICK = [(5_000, 3, 6, "full"), (5_000, 3, 6, "diag")]


def blobs(n: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 6, size=(4, d))
    return centres[rng.integers(0, 4, n)] + rng.normal(size=(n, d))


def timed(model: object, X: np.ndarray) -> tuple[object, float]:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X)
    return model, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    cases = QUICK if parser.parse_args().quick else CASES
    print(f"{'case':<22} {'library':<13} {'iters':>5} {'seconds':>8} {'s/iter':>8} "
          f"{'lower bound':>14} {'used':>4} {'ratio':>6}")
    for n, d, k, kind in cases:
        X = blobs(n, d)
        options = dict(n_components=k, covariance_type=kind, random_state=0, max_iter=500)
        theirs, t_theirs = timed(SklearnBGM(**options), X)
        ours, t_ours = timed(BayesianGaussianMixture(**options), X)
        case = f"n={n} d={d} K={k} {kind}"
        for name, model, t in (("mixfold", ours, t_ours), ("scikit-learn", theirs, t_theirs)):
            bound = float(np.ravel(model.lower_bound_)[0])
            print(f"{case:<22} {name:<13} {model.n_iter_:>5} {t:>8.2f} {t / model.n_iter_:>8.4f} "
                  f"{bound:>14.6g} {int((model.weights_ > 0.01).sum()):>4} "
                  f"{t / t_theirs:>6.2f}")


if __name__ == "__main__":
    main()
