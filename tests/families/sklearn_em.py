"""scikit-learn's GaussianMixture as the reference EM for the vector Gaussian families."""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture


def clustered_rows(n: int = 4500, k: int = 3, d: int = 4, seed: int = 0) -> np.ndarray:
    """Overlapping, correlated clusters off the origin (so EM has real work for 15 iterations)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 2.5, size=(k, d))
    x = np.concatenate([rng.normal(c, 1.0 + 0.3 * j, size=(n // k, d))
                        for j, c in enumerate(centers)])
    return x @ rng.normal(size=(d, d)) * 0.5 + 3.0


def sklearn_trajectory(x: np.ndarray, covariance_type: str, weights: np.ndarray,
                       means: np.ndarray, precisions: np.ndarray,
                       iterations: int) -> tuple[np.ndarray, GaussianMixture]:
    """Per-iteration mean log-likelihood of scikit-learn's EM from the given parameters.

    One warm-started ``fit`` with ``max_iter=1`` is one EM iteration; its ``lower_bound_`` is the
    mean log-likelihood its E-step computed, i.e. under the parameters that *entered* the
    iteration — what ``FitResult.log_likelihood[i]`` records.
    """
    gm = GaussianMixture(len(weights), covariance_type=covariance_type, reg_covar=1e-6, tol=0.0,
                         max_iter=1, warm_start=True, weights_init=weights, means_init=means,
                         precisions_init=precisions, init_params="random_from_data",
                         random_state=0)
    bounds = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # tol=0 never "converges"
        for _ in range(iterations):
            gm.fit(x)
            bounds.append(gm.lower_bound_)
    return np.array(bounds), gm


def max_relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b)).max()))
