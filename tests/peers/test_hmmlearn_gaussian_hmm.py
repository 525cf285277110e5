"""hmmlearn's own tests of GaussianHMM (``hmmlearn/tests/test_gaussian_hmm.py`` of the installed
hmmlearn), run against :mod:`mixfold.sklearn`'s wrappers: ``hmm`` is mixfold's module, and the
suite's relative import of its helpers names hmmlearn's test package."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("hmmlearn", "tests/test_gaussian_hmm.py"),
                  {r"^from \.\. import hmm$": "from mixfold import sklearn as hmm",
                   r"^from \. import ": "from hmmlearn.tests import "}, globals())

#: hmmlearn's tests that cannot be expressed against another implementation, and why.
EXCLUDED: dict[str, str] = {}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
