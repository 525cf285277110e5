"""scikit-learn's own tests of BayesianGaussianMixture
(``sklearn/mixture/tests/test_bayesian_mixture.py`` of the installed scikit-learn), run against
:class:`mixfold.sklearn.BayesianGaussianMixture` with only the estimator's import changed. The
tests of scikit-learn's private normalisers (``_log_dirichlet_norm``, ``_log_wishart_norm``) run
as well: they check the arithmetic scikit-learn's lower bound is made of."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("sklearn", "mixture/tests/test_bayesian_mixture.py"),
                  {r"^from sklearn\.mixture import BayesianGaussianMixture$":
                   "from mixfold.sklearn import BayesianGaussianMixture"}, globals())

#: scikit-learn's tests that cannot be expressed against another implementation, and why.
EXCLUDED = {
    "test_compare_covar_type":
        "builds each covariance type's start with BayesianGaussianMixture._check_parameters "
        "and ._initialize_parameters, scikit-learn's private methods",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow  # after the peer's module: its own marks are replaced
