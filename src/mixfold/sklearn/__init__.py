"""scikit-learn-style estimators for the common cases (needs scikit-learn: ``mixfold[sklearn]``).

- :class:`GaussianMixture` (``mixfold.sklearn.mixture``): scikit-learn's
  ``sklearn.mixture.GaussianMixture`` (full, diagonal, tied or spherical covariances) on an
  array of shape (n_samples, n_features), with its stopping rule, attributes and error words;
- :class:`BayesianGaussianMixture` (``mixfold.sklearn.bayesian_mixture``): scikit-learn's
  variational ``BayesianGaussianMixture`` (Dirichlet-process or Dirichlet weight prior), its
  priors, attributes and lower bound;
- :class:`GaussianHMM`, :class:`GMMHMM`, :class:`CategoricalHMM`, :class:`MultinomialHMM`,
  :class:`PoissonHMM`
  (``mixfold.sklearn.hmm``): hmmlearn's models of the same names: rows of one or more
  sequences stacked into one array, ``lengths`` saying where each ends;
- :class:`MixedTypeClustering`: clusters of a pandas DataFrame of mixed column types, each column
  modelled by the family its type suggests (:mod:`mixfold.io.tables`), overridable per column.

All fit with mixfold's EM (any backend, any precision band) and keep the fitted mixfold model as
``model_``; ``get_params`` / ``set_params``, cloning and pickling work as in scikit-learn.
All three pass scikit-learn's estimator checks (the two that assume rows are independent do
not apply to an HMM; tests/test_sklearn.py says which), and the peers' own test files pass
against them (tests/peers).

>>> import numpy as np
>>> X = np.vstack([np.random.default_rng(0).normal(m, 0.5, size=(100, 2)) for m in (0, 5)])
>>> gm = GaussianMixture(2, random_state=0).fit(X)
>>> sorted(round(m) for m in gm.means_[:, 0])
[0, 5]
>>> int((gm.predict(X[:100]) == gm.predict(X[:1])[0]).sum())
100
"""

from mixfold.sklearn.bayesian_mixture import BayesianGaussianMixture
from mixfold.sklearn.hmm import (GMMHMM, CategoricalHMM, ConvergenceMonitor, GaussianHMM,
                                 MultinomialHMM, PoissonHMM)
from mixfold.sklearn.mixture import (ComponentSelection, GaussianMixture, MixedTypeClustering,
                                     select_n_components)

__all__ = ["GaussianMixture", "GaussianHMM", "GMMHMM", "CategoricalHMM", "MultinomialHMM",
           "PoissonHMM", "BayesianGaussianMixture",
           "MixedTypeClustering", "ConvergenceMonitor",
           "select_n_components", "ComponentSelection"]
