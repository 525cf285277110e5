"""scikit-learn's ``sklearn/mixture/tests/test_mixture.py`` (tests shared by its mixtures), its
GaussianMixture import rewritten to :class:`mixfold.sklearn.GaussianMixture`;
BayesianGaussianMixture stays scikit-learn's."""

import pytest

from tests.peers._suites import installed_tests, load_with_imports

load_with_imports(installed_tests("sklearn", "mixture/tests/test_mixture.py"),
                  {r"^from sklearn\.mixture import BayesianGaussianMixture, GaussianMixture$":
                   "from sklearn.mixture import BayesianGaussianMixture\n"
                   "from mixfold.sklearn import GaussianMixture"}, globals())

pytestmark = pytest.mark.slow
