"""Initialisation quality: mixfold's seeded start against scikit-learn's k-means start.

For each data set (scikit-learn's iris, wine, breast cancer, digits projected to 10-D, and 8
well-separated 10-D clusters), a full-covariance Gaussian mixture with K = the number of
classes is fitted from 20 seeds by ``mixfold.optimize`` (the core API, its default
initialisation, ``tol=1e-10``) and by ``sklearn.mixture.GaussianMixture`` (its default
``init_params="kmeans"``, ``tol=1e-9``): both run to convergence. The table prints the median,
worst and best final mean log-likelihood per row of each, their median difference, and the
median adjusted Rand index against the classes. Run: ``python benchmarks/init_quality.py``.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler

import mixfold

SEEDS = range(20)
REG_COVAR = 1e-6


def data_sets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 8, size=(8, 10))
    blobs = np.vstack([rng.normal(c, 1.0, size=(150, 10)) for c in centres])
    digits = load_digits()
    return {
        "iris": load_iris(return_X_y=True),
        "wine (standardised)": (StandardScaler().fit_transform(load_wine().data),
                                load_wine().target),
        "breast cancer (PCA 5)": (PCA(5, random_state=0).fit_transform(
            StandardScaler().fit_transform(load_breast_cancer().data)),
            load_breast_cancer().target),
        "digits (PCA 10)": (PCA(10, random_state=0).fit_transform(digits.data), digits.target),
        "8 blobs 10-D": (blobs, np.repeat(np.arange(8), 150)),
    }


def mixfold_fit(X: np.ndarray, k: int, seed: int) -> tuple[float, np.ndarray]:
    est = mixfold.MixtureEstimator([mixfold.MultivariateGaussianEstimator(reg_covar=REG_COVAR)]
                                   * k)
    model = mixfold.optimize(X, est, seed=seed, max_iter=1000, tol=1e-10, progress=False)
    enc = model.encoder().encode(X)
    return float(model.seq_log_density(enc).mean()), model.seq_posterior(enc).argmax(axis=1)


def sklearn_fit(X: np.ndarray, k: int, seed: int) -> tuple[float, np.ndarray]:
    gm = GaussianMixture(k, covariance_type="full", reg_covar=REG_COVAR, tol=1e-9,
                         max_iter=1000, random_state=seed).fit(X)
    return float(gm.score(X)), gm.predict(X)


def main() -> int:
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", mixfold.DegenerateFitWarning)
    header = (f"{'data set':<22} {'K':>2}  {'mixfold median':>14} {'worst':>9} {'best':>9}  "
              f"{'sklearn median':>14} {'worst':>9} {'best':>9}  {'median diff':>11}  "
              f"{'ARI mixfold':>11} {'ARI sklearn':>11}")
    print(f"final mean log-likelihood per row over {len(SEEDS)} seeds (higher is better)")
    print(header)
    for name, (X, y) in data_sets().items():
        k = len(np.unique(y))
        ours = [mixfold_fit(X, k, s) for s in SEEDS]
        theirs = [sklearn_fit(X, k, s) for s in SEEDS]
        lo, lt = np.array([o[0] for o in ours]), np.array([t[0] for t in theirs])
        ari_o = np.median([adjusted_rand_score(y, o[1]) for o in ours])
        ari_t = np.median([adjusted_rand_score(y, t[1]) for t in theirs])
        print(f"{name:<22} {k:>2}  {np.median(lo):>14.5f} {lo.min():>9.4f} {lo.max():>9.4f}  "
              f"{np.median(lt):>14.5f} {lt.min():>9.4f} {lt.max():>9.4f}  "
              f"{np.median(lo) - np.median(lt):>+11.1e}  {ari_o:>11.3f} {ari_t:>11.3f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
