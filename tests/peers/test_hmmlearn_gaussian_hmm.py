"""hmmlearn's own tests of GaussianHMM (``hmmlearn/tests/test_gaussian_hmm.py`` of the installed
hmmlearn), run against :mod:`mixfold.sklearn`'s wrappers: ``hmm`` is mixfold's module, and the
suite's relative import of its helpers names hmmlearn's test package."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("hmmlearn", "tests/test_gaussian_hmm.py"),
                  {r"^from \.\. import hmm$": "from mixfold import sklearn as hmm",
                   r"^from \. import ": "from hmmlearn.tests import "}, globals())

#: hmmlearn's tests that cannot be expressed against another implementation, and why.
_INIT = "calls GaussianHMM._init, hmmlearn's private initialisation step"
EXCLUDED = {
    "GaussianHMMTestMixin.test_score_samples_and_decode": _INIT,
    "GaussianHMMTestMixin.test_fit_too_little_data": _INIT,
    "TestGaussianHMMWithDiagonalCovars.test_covar_is_writeable":
        _INIT + ", and reads its private _covars_ buffer's flags",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
