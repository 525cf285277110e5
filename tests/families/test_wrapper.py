"""The wrappers of one child (Optional, ZeroInflated, Censored) on what they share
(:mod:`mixfold.families._wrapper`): the dict form, parameter count, refit estimator and the
switch's M-step, against values written out by hand."""

from __future__ import annotations

import json
import math
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

import mixfold.families
from mixfold import (CensoredDistribution, CensoredEstimator, Distribution, GaussianDistribution,
                     GaussianEstimator, PoissonDistribution, PoissonEstimator,
                     ZeroInflatedDistribution, ZeroInflatedEstimator)
from mixfold.families._protocol import ArrayEncoded, NodeStatistics
from mixfold.families._wrapper import WrapperCounts, smoothed_share
from mixfold.families.censored import CensoredEncoder
from mixfold.families.optional import (MissingMarkers, OptionalDistribution, OptionalEncoded,
                                       OptionalEncoder, OptionalEstimator)

FAMILIES = Path(mixfold.families.__file__).parent

#: The issue's bound on a combinator's file: every ``def`` in it.
MAX_DEFS = 25


@pytest.mark.parametrize("module", ["optional", "zero_inflated", "censored"])
def test_a_wrapper_file_holds_at_most_25_defs(module):
    defs = re.findall(r"^\s*def ", (FAMILIES / f"{module}.py").read_text(), flags=re.M)
    assert len(defs) <= MAX_DEFS, f"families/{module}.py has {len(defs)} defs"


@pytest.mark.parametrize("own, child, pc", [(1.0, 3.0, 0.0), (0.0, 5.0, 2.0), (7.5, 0.0, 0.5)])
def test_smoothed_share_is_the_beta_smoothed_fraction(own, child, pc):
    assert smoothed_share(own, child, pc) == pytest.approx((own + pc) / (own + child + 2 * pc))


def test_smoothed_share_without_weight_is_even():
    assert smoothed_share(0.0, 0.0, 0.0) == 0.5


def test_dict_forms_as_model_files_write_them():
    gauss = {"family": "Gaussian", "mu": 1.0, "sigma2": 2.0}
    inner = GaussianDistribution(1.0, 2.0)
    assert OptionalDistribution(inner, 0.25).to_dict() == \
        {"family": "Optional", "inner": gauss, "p_missing": 0.25}  # default markers left out
    assert OptionalDistribution(inner, 0.25, missing=("NA", None)).to_dict() == \
        {"family": "Optional", "inner": gauss, "p_missing": 0.25,
         "missing": {"none": True, "nan": False, "values": ["NA"]}}
    assert CensoredDistribution(inner, truncate=(0, None)).to_dict() == \
        {"family": "Censored", "base": gauss, "truncate": [0.0, None]}
    assert ZeroInflatedDistribution(PoissonDistribution(3.0), 0.2).to_dict() == \
        {"family": "ZeroInflated", "inner": {"family": "Poisson", "lam": 3.0}, "p_zero": 0.2}


@pytest.mark.parametrize("d", [
    OptionalDistribution(GaussianDistribution(1.0, 2.0), 0.25),
    OptionalDistribution(GaussianDistribution(1.0, 2.0), 0.0, missing=("NA", float("nan"))),
    CensoredDistribution(GaussianDistribution(-1.0, 0.5), truncate=(None, 3.0)),
    CensoredDistribution(GaussianDistribution(-1.0, 0.5)),
    ZeroInflatedDistribution(PoissonDistribution(3.0), 1.0),
])
def test_dict_form_round_trips_through_json(d):
    back = Distribution.from_dict(json.loads(json.dumps(d.to_dict())))
    assert back == d and type(back) is type(d) and repr(back) == repr(d)


def test_parameter_counts_add_the_probability_to_the_child():
    inner = GaussianDistribution(0.0, 1.0)
    assert OptionalDistribution(inner, 0.5).n_parameters() == 3
    assert ZeroInflatedDistribution(PoissonDistribution(1.0), 0.5).n_parameters() == 2
    assert CensoredDistribution(inner, truncate=(0, 1)).n_parameters() == 2  # window fixed


def test_refit_estimators_keep_the_settings():
    d = OptionalDistribution(GaussianDistribution(0.0, 1.0), 0.5, missing=("NA",))
    est = d.estimator(pseudo_count=2.0)
    assert isinstance(est, OptionalEstimator) and est.missing == MissingMarkers(("NA",))
    assert est.pseudo_count == 2.0 and isinstance(est.inner, GaussianEstimator)
    z = ZeroInflatedDistribution(PoissonDistribution(1.0), 0.5).estimator(pseudo_count=1.0)
    assert isinstance(z, ZeroInflatedEstimator) and z.pseudo_count == 1.0
    c = CensoredDistribution(GaussianDistribution(0.0, 1.0), truncate=(0, None)).estimator()
    assert isinstance(c, CensoredEstimator) and c.truncate == (0.0, math.inf)


def test_a_switch_estimates_its_probability_and_child_from_named_counts():
    rows = np.array([0.0, 1.0, 2.0, 5.0])
    acc = PoissonEstimator().accumulator_factory().make()
    acc.seq_initialize(ArrayEncoded(rows), np.ones(4), None)
    stats = NodeStatistics((np.array([1.0, 3.0]),), (acc.value(),))
    assert WrapperCounts(*stats.own[0]) == WrapperCounts(own=1.0, child=3.0)
    fit = ZeroInflatedEstimator(PoissonEstimator(), pseudo_count=1.0).estimate(4.0, stats)
    assert fit.p_zero == pytest.approx((1.0 + 1.0) / (4.0 + 2.0))
    assert fit.inner.lam == pytest.approx(rows.mean())
    opt = OptionalEstimator(PoissonEstimator(), missing=("NA",)).estimate(4.0, stats)
    assert opt.p_missing == pytest.approx(0.25) and opt.missing == MissingMarkers(("NA",))


@pytest.mark.parametrize("obj, home", [
    (MissingMarkers(("NA", None)), "optional"),
    (OptionalEncoder(GaussianDistribution(0, 1).encoder()), "optional"),
    (OptionalEncoder(GaussianDistribution(0, 1).encoder()).encode([1.0, None]), "optional"),
    (CensoredEncoder(GaussianDistribution(0, 1).encoder(), (0.0, math.inf)), "censored"),
])
def test_moved_classes_keep_their_public_home(obj, home):
    assert type(obj).__module__ == f"mixfold.families.{home}"
    back = pickle.loads(pickle.dumps(obj))
    assert type(back) is type(obj) and repr(back) == repr(obj)
    if isinstance(obj, OptionalEncoded):
        assert back.present.tolist() == [True, False]
