"""hmmlearn's own tests of GMMHMM (``hmmlearn/tests/test_gmm_hmm_new.py`` of the installed
hmmlearn), run against :class:`mixfold.sklearn.GMMHMM` with only its import changed (and the
suite's relative imports of helpers naming hmmlearn's test package)."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("hmmlearn", "tests/test_gmm_hmm_new.py"),
                  {r"^from \.\.hmm import GMMHMM$": "from mixfold.sklearn import GMMHMM",
                   r"^from \.test_gmm_hmm import ": "from hmmlearn.tests.test_gmm_hmm import ",
                   r"^from \. import ": "from hmmlearn.tests import "}, globals())

#: hmmlearn's tests that cannot be expressed against another implementation, and why.
_INIT = "calls GMMHMM._init, hmmlearn's private initialisation step"
EXCLUDED = {
    "GMMHMMTestMixin.test_init": _INIT,
    "GMMHMMTestMixin.test_fit_sparse_data": _INIT,
}

#: Single cases of a parametrised test, and why (the other cases run).
EXCLUDED_CASES = {
    "TestGMMHMM_MultiSequence.test_chunked[full]":
        "1000 rows as one sequence vs cut in five: covariances equal within 1.8e-3 after "
        "hmmlearn's 10 iterations (4.7e-3 after 100), the test allows 1e-3. Both fits start "
        "from the same hmmlearn recipe start (the other covariance types pass); the model "
        "(3 states x 2 Gaussians on 3 clusters) is not identified, and exact EM moves further "
        "along that ridge per iteration than hmmlearn's M-step (its covariances are taken about "
        "the E-step's means: its cut changes them by 0.9e-3)",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
