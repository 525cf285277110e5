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
    "GaussianHMMTestMixin.test_fit_with_priors":
        "sets hmmlearn's prior attributes (startprob_prior, means_prior, covars_prior, ...), "
        "which mixfold's maximum-likelihood M-step does not have, and asserts the "
        "log-likelihood still rises by more than sqrt(eps) over 20 one-iteration refits: "
        "with no prior the M-step reaches this well-separated data's fixed point in one "
        "iteration, and the later refits gain exactly 0",
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
