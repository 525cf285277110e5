"""hmmlearn's own tests of PoissonHMM (``hmmlearn/tests/test_poisson_hmm.py`` of the
installed hmmlearn), run against :mod:`mixfold.sklearn`'s wrappers with only the import of
``hmm`` changed (and its relative import of helpers naming hmmlearn's test package)."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("hmmlearn", "tests/test_poisson_hmm.py"),
                  {r"^from hmmlearn import hmm$": "from mixfold import sklearn as hmm",
                   r"^from \. import ": "from hmmlearn.tests import "}, globals())

#: hmmlearn's tests that cannot be expressed against another implementation, and why.
EXCLUDED = {
    "TestPoissonHMM.test_fit_with_init":
        "calls PoissonHMM._init, hmmlearn's private initialisation step",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
