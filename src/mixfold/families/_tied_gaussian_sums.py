"""The statistics of full-covariance Gaussians that share one covariance (``covariance_keys``,
a tied mixture): :class:`~mixfold.families._full_gaussian_sums.MultivariateGaussianAccumulator`'s
payload, whose accumulators name their key, so that a mixture's small-data fold of them all
(:func:`~mixfold.families.stacked_gaussian.tied_fold`) may hand over the pooled scatter once.

>>> from mixfold import MixtureEstimator, MultivariateGaussianEstimator
>>> est = MultivariateGaussianEstimator(dim=2, covariance_keys="c")
>>> acc = est.accumulator_factory().make()
>>> type(acc).__name__, acc.covariance_key, acc.sum_xx.shape
('TiedGaussianAccumulator', 'c', (2, 2))
"""

from __future__ import annotations

from mixfold.families._full_gaussian_sums import MultivariateGaussianAccumulator
from mixfold.families.stacked_gaussian import tied_fold

__all__ = ["TiedGaussianAccumulator"]


class TiedGaussianAccumulator(MultivariateGaussianAccumulator):
    """:class:`~mixfold.families._full_gaussian_sums.MultivariateGaussianAccumulator` of an
    estimator whose covariance is pooled under ``covariance_key``. Its ``sum_xx`` counts only
    through the key's pooled sum: a mixture's small-data fold (:func:`tied_fold`) adds the
    chunk's pooled scatter to the K components in shares of their posterior mass (every other
    path adds each component's own outer products; the sums are the same, and so is the
    pooled covariance)."""

    # a tied mixture's E-step of all K at once on small data (families/stacked_gaussian.py)
    stack_fold = staticmethod(tied_fold)

    def __init__(self, dim: int, keys: str | None = None, covariance_key: str | None = None):
        super().__init__(dim, keys)
        self.covariance_key = covariance_key
