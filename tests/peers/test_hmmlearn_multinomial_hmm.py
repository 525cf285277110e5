"""hmmlearn's own tests of MultinomialHMM (``hmmlearn/tests/test_multinomial_hmm.py`` of the
installed hmmlearn), run against :mod:`mixfold.sklearn`'s wrappers with only the import of
``hmm`` changed (and its relative import of helpers naming hmmlearn's test package)."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("hmmlearn", "tests/test_multinomial_hmm.py"),
                  {r"^from hmmlearn import hmm$": "from mixfold import sklearn as hmm",
                   r"^from \. import ": "from hmmlearn.tests import "}, globals())

#: hmmlearn's tests that cannot be expressed against another implementation, and why.
EXCLUDED = {
    "TestMultinomialHMM.test_fit_with_init":
        "calls MultinomialHMM._init, hmmlearn's private initialisation step",
    "TestMultinomialHMM.test__check_and_set_multinomial_n_features_n_trials":
        "calls hmmlearn's private _check_and_set_n_features",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
