"""What the scikit-learn-style wrappers share: the one check of hyper-parameters against a table
of rules, the rules common to every wrapper, the EM seed from a ``random_state``, the workers
option and the Gaussian emission or component of a ``covariance_type``."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

try:
    from sklearn.base import BaseEstimator
    from sklearn.utils.validation import check_random_state
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError("mixfold.sklearn needs scikit-learn >= 1.6: pip install "
                      "\"mixfold[sklearn]\"") from err

from mixfold.backends import BACKENDS
from mixfold.families import DiagonalGaussianEstimator, Estimator, MultivariateGaussianEstimator
from mixfold.fit import int_at_least
from mixfold.precision import BANDS

def _check_params(est: BaseEstimator, rules: Mapping[str, tuple[Any, str]]) -> None:
    """Check hyper-parameters against ``rules`` (name -> (test, what is expected)), once, at fit."""
    for name, (ok, expected) in rules.items():
        value = getattr(est, name)
        if not ok(value):
            raise ValueError(f"{type(est).__name__}: {name} must be {expected}, got {value!r}")


def _is_nonneg(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v) and v >= 0


_COMMON_RULES: dict[str, tuple[Any, str]] = {
    "max_iter": (lambda v: int_at_least(v, 0), "an integer >= 0 (0: the start itself)"),
    "tol": (_is_nonneg, "a finite number >= 0"),
    "backend": (lambda v: v in BACKENDS or not isinstance(v, str),
                f"one of {list(BACKENDS)} or an engine object"),
    "precision": (lambda v: v in BANDS, f"one of {list(BANDS)}"),
}

_MIXTURE_RULES = {**_COMMON_RULES, "n_init": (lambda v: int_at_least(v, 1), "an integer >= 1")}

def _seed(random_state: Any) -> int:
    """An EM seed from a scikit-learn ``random_state`` (None means the fixed seed 0)."""
    if random_state is None:
        return 0
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def _workers(est: BaseEstimator) -> int | None:
    """``num_workers``, or ``n_workers`` (its old name) when that is set."""
    return est.num_workers if est.n_workers is None else est.n_workers


def _gaussian(covariance_type: str, reg_covar: float) -> Estimator:
    if covariance_type in ("full", "tied"):
        return MultivariateGaussianEstimator(reg_covar=reg_covar)
    return DiagonalGaussianEstimator(reg_covar=reg_covar)
