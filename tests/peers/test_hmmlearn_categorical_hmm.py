"""hmmlearn's own tests of CategoricalHMM (``hmmlearn/tests/test_categorical_hmm.py`` of the
installed hmmlearn), run against :mod:`mixfold.sklearn`'s wrappers with only the import of
``hmm`` changed (and its relative import of helpers naming hmmlearn's test package)."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("hmmlearn", "tests/test_categorical_hmm.py"),
                  {r"^from hmmlearn import hmm$": "from mixfold import sklearn as hmm",
                   r"^from \. import ": "from hmmlearn.tests import "}, globals())

#: hmmlearn's tests that cannot be expressed against another implementation, and why.
EXCLUDED = {
    "TestCategoricalHMM.test_fit_with_init":
        "calls CategoricalHMM._init, hmmlearn's private initialisation step",
    "TestCategoricalHMM.test__check_and_set_categorical_n_features":
        "calls hmmlearn's private _check_and_set_n_features",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
