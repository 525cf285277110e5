"""Hard data for full-covariance mixtures: K clusters 1e6 from the origin (:data:`OFFSET`), each
of condition number 1e8 in one random basis, their means ``spacing`` apart along its long axis,
and a start whose means are moved ``start_shift`` along it and whose covariances are 1.5x."""

import numpy as np

from mixfold import MixtureDistribution, MultivariateGaussianDistribution

OFFSET = 1e6


def hard_full_rows(n: int, d: int, k: int = 3, seed: int = 0, *, spacing: float,
                   start_shift: float, shuffled: bool = False):
    """(rows, start): ``n`` rows (``shuffled``: in a random order, else cluster by cluster)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
    long_axis = basis[:, 0]
    means = OFFSET + rng.normal(0.0, 3.0, size=d) + spacing * np.arange(k)[:, None] * long_axis
    covs = [basis @ np.diag(np.logspace(4, -4, d) * (1 + 0.3 * j)) @ basis.T for j in range(k)]
    covs = [0.5 * (c + c.T) for c in covs]
    x = np.concatenate([rng.multivariate_normal(m, c, size=n // k) for m, c in zip(means, covs)])
    if shuffled:
        x = x[rng.permutation(len(x))]
    start = MixtureDistribution([MultivariateGaussianDistribution(m + start_shift * long_axis,
                                                                  1.5 * c)
                                 for m, c in zip(means, covs)], np.full(k, 1.0 / k))
    return x, start
