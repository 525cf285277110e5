"""Covariances shared by the children of a combinator (tied covariances): the M-step of a
mixture's components or a hidden Markov model's emissions, where the estimators that name the
same ``covariance_keys`` pool their scatters and weights before the division.

Unlike ``keys`` (which ties a whole subtree: the same statistics, identical parameters), a
covariance key ties only the covariance: each component keeps its own mean and weight. The key
is local to one combinator's children (a GMM-HMM's states tie within their own mixtures).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import SharesCovariance, StackedEstimate
from mixfold.families._protocol import Distribution, Estimator

__all__ = ["estimate_children"]


def _key(est: Estimator) -> str | None:
    return est.covariance_keys if isinstance(est, SharesCovariance) else None


def estimate_children(estimators: Sequence[Estimator], masses: np.ndarray,
                      stats: Sequence[Any]) -> list[Distribution]:
    """Each child's M-step (``estimators[k].estimate(masses[k], stats[k])``), the children of a
    covariance key given the covariance of their pooled scatter.

    >>> import mixfold
    >>> from mixfold import MixtureEstimator, MultivariateGaussianEstimator
    >>> rng = np.random.default_rng(0)
    >>> x = np.vstack([rng.normal(-4, 1, (300, 2)), rng.normal(4, 2, (300, 2))])
    >>> tied = MixtureEstimator([MultivariateGaussianEstimator(covariance_keys="c")] * 2)
    >>> fit = mixfold.optimize(x, tied, seed=0, progress=False)
    >>> a, b = fit.components
    >>> bool(np.array_equal(a.cov, b.cov)), sorted(round(c.mu[0]) for c in fit.components)
    (True, [-4, 4])
    """
    stacked = _stacked(estimators, masses, stats)
    if stacked is not None:
        return stacked
    pooled: dict[str, list[Any]] = {}
    means: dict[int, np.ndarray] = {}
    for k, est in enumerate(estimators):
        key = _key(est)
        if key is None:
            continue
        weight, mean, scatter = est.covariance_scatter(float(masses[k]), stats[k])
        means[k] = mean
        if key not in pooled:
            pooled[key] = [weight, scatter, []]
        elif pooled[key][1].shape != scatter.shape:
            raise ValueError(f"components sharing the covariance {key!r} have covariances of "
                             f"shapes {pooled[key][1].shape} and {scatter.shape}")
        else:
            pooled[key][0] += weight
            pooled[key][1] = pooled[key][1] + scatter
    out = []
    for k, est in enumerate(estimators):
        key = _key(est)
        if key is None:
            out.append(est.estimate(float(masses[k]), stats[k]))
            continue
        weight, scatter, made = pooled[key]
        out.append(est.estimate_shared(means[k], weight, scatter, made))
    return out


def _stacked(estimators: Sequence[Estimator], masses: np.ndarray,
             stats: Sequence[Any]) -> list[Distribution] | None:
    """The children's M-step in one call, where they are of one :class:`StackedEstimate` class
    that takes them (``None``: estimate each)."""
    cls = type(estimators[0])
    if len(estimators) < 2 or not issubclass(cls, StackedEstimate) \
            or any(type(e) is not cls for e in estimators):
        return None
    return cls.stack_estimate(estimators, masses, stats)
