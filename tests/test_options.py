"""Options are checked at construction against one declared table per estimator."""

import inspect
import math

import numpy as np
import pytest

import mixfold
from mixfold.errors import ParameterError
from mixfold.families._protocol import Estimator
from mixfold.options import check_options, integer, none_or, number, one_of
from mixfold.sklearn import GaussianMixture

#: Constructor arguments that are children or data, not options with a rule.
STRUCTURE = {"components", "emissions", "inner", "item", "length", "fields", "factors", "keys",
             "levels", "vocabulary", "missing_markers", "durations"}


def _all_estimators():
    found, todo = set(), [Estimator]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if not inspect.isabstract(sub) and sub.__module__.startswith("mixfold."):
                found.add(sub)
    return sorted(found, key=lambda c: c.__name__)


def _children():
    """Arguments that build an estimator apart from its options (its children)."""
    leaf = mixfold.GaussianEstimator()
    counts = mixfold.PoissonEstimator()
    return {"components": [leaf], "emissions": [leaf], "inner": counts, "item": leaf,
            "fields": {"x": leaf}, "factors": [leaf], "n_topics": 2, "n": 5,
            "durations": [counts]}


def _options(cls):
    params = inspect.signature(cls.__init__).parameters
    return [n for n in params if n != "self" and n not in STRUCTURE
            and not (n == "missing" and "inner" in params)]


def _build(cls, **options):
    params = inspect.signature(cls.__init__).parameters
    needed = {k: v for k, v in _children().items() if k in params}
    return cls(**{**needed, **options})


@pytest.mark.parametrize("cls", _all_estimators(), ids=lambda c: c.__name__)
def test_every_option_has_a_declared_rule(cls):
    missing = [n for n in _options(cls) if n not in cls.option_rules]
    assert not missing, f"{cls.__name__} declares no rule for {missing}"
    _build(cls)  # the defaults pass their own rules


BAD = [float("nan"), float("inf"), -1.0, "x", True, None, [1.0]]


@pytest.mark.parametrize("cls", _all_estimators(), ids=lambda c: c.__name__)
def test_bad_values_are_refused_at_construction_naming_the_option(cls):
    for name in _options(cls):
        rule = cls.option_rules[name]
        for bad in BAD:
            if rule.accepts(bad):
                continue
            with pytest.raises(ParameterError, match=rf"^{cls.__name__}: {name} must be "):
                _build(cls, **{name: bad})


@pytest.mark.parametrize("make, message", [
    (lambda: mixfold.MixtureEstimator([mixfold.GaussianEstimator()], pseudo_count=math.nan),
     "MixtureEstimator: pseudo_count must be a finite number >= 0, got nan"),
    (lambda: mixfold.MixtureEstimator([mixfold.GaussianEstimator()], pseudo_count=math.inf),
     "MixtureEstimator: pseudo_count must be a finite number >= 0, got inf"),
    (lambda: mixfold.GaussianEstimator(min_variance=math.nan),
     "GaussianEstimator: min_variance must be a finite number > 0, got nan"),
    (lambda: mixfold.MultivariateGaussianEstimator(reg_covar=math.nan),
     "MultivariateGaussianEstimator: reg_covar must be a finite number >= 0, got nan"),
    (lambda: mixfold.CategoricalEstimator(pseudo_count=math.inf),
     "CategoricalEstimator: pseudo_count must be a finite number >= 0, got inf"),
    (lambda: mixfold.DiagonalGaussianEstimator(reg_covar_mode="relatve"),
     "reg_covar_mode must be one of \\['absolute', 'relative'\\], got 'relatve'"),
])
def test_the_reported_options_fail_at_construction_not_at_fit(make, message):
    with pytest.raises(ParameterError, match=message):
        make()


def test_good_values_of_every_kind_still_pass():
    est = mixfold.MixtureEstimator([mixfold.GaussianEstimator(reg_covar=np.float32(0.0),
                                                              min_variance=1e-9)] * 2,
                                   pseudo_count=np.float64(0.5))
    x = np.concatenate([np.zeros(20), np.ones(20) * 5]) + np.linspace(0, 0.1, 40)
    assert mixfold.fit(x, est, progress=False).model.weights.sum() == pytest.approx(1.0)
    assert mixfold.DirichletEstimator(dim=np.int64(3)).dim == 3


def test_fit_online_and_sklearn_use_the_same_mechanism():
    x = np.arange(10.0)
    with pytest.raises(ValueError, match="^tol must be a finite number >= 0, got nan$"):
        mixfold.fit(x, mixfold.GaussianEstimator(), tol=math.nan)
    with pytest.raises(ValueError, match=r"^chunk_rows must be None or an integer >= 1"):
        mixfold.OnlineEM(mixfold.GaussianEstimator(), chunk_rows=0)
    with pytest.raises(ValueError, match="^GaussianMixture: reg_covar must be a finite number"):
        GaussianMixture(reg_covar=math.nan).fit(np.ones((5, 1)))


def test_rules_say_what_they_expect():
    rules = {"k": integer(1), "p": number(0, 1), "m": one_of("a", "b"), "d": none_or(integer(2))}
    check_options("T", rules, {"k": 2, "p": 0.0, "m": "b", "d": None})
    cases = [("k", 0, "an integer >= 1"), ("p", 1.5, "a finite number in [0, 1]"),
             ("m", "c", "one of ['a', 'b']"), ("d", 1, "None or an integer >= 2"),
             ("k", True, "an integer >= 1"), ("p", "0.5", "a finite number in [0, 1]")]
    for name, bad, words in cases:
        with pytest.raises(ValueError) as err:
            check_options("T", rules, {name: bad})
        assert str(err.value) == f"T: {name} must be {words}, got {bad!r}"
