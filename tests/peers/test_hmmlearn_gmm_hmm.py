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

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
