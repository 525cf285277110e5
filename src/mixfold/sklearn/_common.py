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
from mixfold.options import Rule, check_options, integer, rule
from mixfold.precision import BANDS

def _check_params(est: BaseEstimator, rules: Mapping[str, Rule]) -> None:
    """Check hyper-parameters against ``rules`` (:mod:`mixfold.options`, the one mechanism of
    every estimator), once, at fit (as scikit-learn checks its ``_parameter_constraints``)."""
    check_options(type(est).__name__, rules, {name: getattr(est, name) for name in rules})


def _is_nonneg(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and np.isfinite(v) and v >= 0


_COMMON_RULES: dict[str, Rule] = {
    "max_iter": rule(lambda v: integer(0).accepts(v), "an integer >= 0 (0: the start itself)"),
    "tol": rule(_is_nonneg, "a finite number >= 0"),
    "backend": rule(lambda v: v in BACKENDS or not isinstance(v, str),
                f"one of {list(BACKENDS)} or an engine object"),
    "precision": rule(lambda v: v in BANDS, f"one of {list(BANDS)}"),
}

_MIXTURE_RULES = {**_COMMON_RULES, "n_init": integer(1)}

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


def _gaussian(covariance_type: str, reg_covar: float, **prior: Any) -> Estimator:
    """The core Gaussian estimator of a component of this ``covariance_type`` (tied ones
    share their covariance by the key "tied"), with the Gaussian prior options ``prior``."""
    if covariance_type in ("full", "tied"):
        keys = "tied" if covariance_type == "tied" else None
        return MultivariateGaussianEstimator(reg_covar=reg_covar, covariance_keys=keys, **prior)
    return DiagonalGaussianEstimator(reg_covar=reg_covar,
                                     spherical=covariance_type == "spherical", **prior)
