"""hmmlearn's ``hmmlearn/tests/test_base.py`` (installed hmmlearn): its ConvergenceMonitor tests
run against :class:`mixfold.sklearn.ConvergenceMonitor` (the one import changed); the rest
test hmmlearn's private base class and kernels, which have no counterpart to run against."""

import pytest

from tests.peers._suites import exclude, installed_tests, load_with_imports

load_with_imports(installed_tests("hmmlearn", "tests/test_base.py"),
                  {r"^from hmmlearn\.base import BaseHMM, ConvergenceMonitor$":
                   "from hmmlearn.base import BaseHMM\n"
                   "from mixfold.sklearn import ConvergenceMonitor"}, globals())

_STUB = ("runs hmmlearn's own BaseHMM through StubHMM, a subclass filling its private "
         "_compute_log_likelihood hook")
#: hmmlearn's tests that cannot be expressed against another implementation, and why.
EXCLUDED = {
    "TestBaseAgainstWikipedia": _STUB + ", and calls its private _do_forward_pass / "
                                        "_do_backward_pass / _do_viterbi_pass and _hmmc kernels",
    "TestBaseConsistentWithGMM": _STUB,
    "test_base_hmm_attributes": _STUB + ", and its private _check",
    "test_stationary_distribution": _STUB,
}

exclude(globals(), EXCLUDED)
pytestmark = pytest.mark.slow
