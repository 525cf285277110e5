"""The fixtures the peers' suites take from their own conftest: scikit-learn's ``global_dtype``
(its float32 run always on: dtype preservation is part of the drop-in) and
``global_random_seed`` (42, or SKLEARN_TESTS_GLOBAL_RANDOM_SEED as scikit-learn reads it)."""

import os

import numpy as np
import pytest


@pytest.fixture(params=[np.float32, np.float64])
def global_dtype(request):
    return request.param


def _seeds() -> list[int]:
    value = os.environ.get("SKLEARN_TESTS_GLOBAL_RANDOM_SEED")
    if value is None:
        return [42]
    if value == "all":
        return list(range(100))
    low, _, high = value.partition("-")
    return list(range(int(low), int(high or low) + 1))


def pytest_generate_tests(metafunc):
    if "global_random_seed" in metafunc.fixturenames:
        metafunc.parametrize("global_random_seed", _seeds())


def pytest_collection_modifyitems(items):
    """Skip the single parametrised cases a suite lists in ``EXCLUDED_CASES`` (test id ->
    reason), where the other cases of the same test run."""
    for item in items:
        if not isinstance(item, pytest.Function):  # (every collected item passes by here)
            continue
        cases = getattr(item.module, "EXCLUDED_CASES", {})
        name = item.name if item.cls is None else f"{item.cls.__name__}.{item.name}"
        if name in cases:
            item.add_marker(pytest.mark.skip(reason=cases[name]))
