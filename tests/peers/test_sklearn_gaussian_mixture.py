"""scikit-learn's own tests of GaussianMixture (``sklearn/mixture/tests/test_gaussian_mixture.py``
of the installed scikit-learn), run against :class:`mixfold.sklearn.GaussianMixture` with only
the estimator's import changed. The tests of scikit-learn's private helpers
(``_compute_log_det_cholesky``, ``_estimate_gaussian_covariances_*``) run as well: they check
scikit-learn's arithmetic that the other tests use as their reference."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("sklearn", "mixture/tests/test_gaussian_mixture.py"),
                  {r"^from sklearn\.mixture import GaussianMixture$":
                   "from mixfold.sklearn import GaussianMixture"}, globals())

#: scikit-learn's tests that cannot be expressed against another implementation, and why.
EXCLUDED = {
    "test_gaussian_mixture_precisions_init":
        "builds its expected values with GaussianMixture._set_parameters and ._initialize, "
        "scikit-learn's private methods",
    "test_gaussian_mixture_all_init_does_not_estimate_gaussian_parameters":
        "counts calls of a mock of scikit-learn's private _estimate_gaussian_parameters, "
        "which mixfold's EM never calls",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow  # after the peer's module: its own marks are replaced
