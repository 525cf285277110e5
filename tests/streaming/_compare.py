"""Comparing fitted models parameter by parameter (streamed fits vs in-memory fits)."""

import numpy as np


def assert_models_close(a, b, rtol=1e-10, atol=1e-12):
    """Every number of ``a.to_dict()`` within ``rtol`` of ``b``'s; every other value equal."""
    _close(a.to_dict(), b.to_dict(), rtol, atol, "model")


def _close(x, y, rtol, atol, where):
    if isinstance(x, dict):
        assert isinstance(y, dict) and list(x) == list(y), where
        for k in x:
            _close(x[k], y[k], rtol, atol, f"{where}.{k}")
    elif isinstance(x, list) and x and all(isinstance(v, (int, float)) and
                                           not isinstance(v, bool) for v in x):
        np.testing.assert_allclose(np.asarray(x, float), np.asarray(y, float), rtol=rtol,
                                   atol=atol, err_msg=where)
    elif isinstance(x, list):
        assert isinstance(y, list) and len(x) == len(y), where
        for i, (u, v) in enumerate(zip(x, y)):
            _close(u, v, rtol, atol, f"{where}[{i}]")
    elif isinstance(x, float):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=where)
    else:
        assert x == y, where
