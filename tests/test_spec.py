"""Model specs: every kind builds the estimator it names, specs round-trip, errors name the path."""

import json

import numpy as np
import pytest

import mixfold
from mixfold import (CategoricalEstimator, GaussianEstimator, HiddenMarkovEstimator,
                     MixtureEstimator, OptionalEstimator, PoissonEstimator, RecordEstimator,
                     SequenceEstimator)
from mixfold.spec import (LEAF_KINDS, SpecError, estimator_from_spec, load_spec,
                          spec_from_estimator)

ROUND_TRIPS = [
    "gaussian",
    {"binomial": {"n": 10}},
    {"categorical": {"levels": ["a", "b"], "pseudo_count": 0.5}},
    {"diagonal_gaussian": {"dim": 3, "reg_covar": 0.01}},
    {"mixture": "poisson", "k": 4, "pseudo_count": 1.0},
    {"mixture": ["gaussian", "exponential", {"gamma": {"max_shape": 100.0}}]},
    {"mixture": {"record": {"age": "gaussian", "plan": "categorical",
                            "spend": {"optional": "log_gaussian", "missing": [None, "NaN", "NA"],
                                      "pseudo_count": 0.5}}}, "k": 3, "keys": "top"},
    {"hidden_markov": {"multivariate_gaussian": {"dim": 2}}, "states": 3, "terminal": True,
     "pseudo_count": 0.1},
    {"sequence": "categorical", "length": "poisson"},
    {"composite": ["von_mises", "bernoulli", {"geometric": {"keys": "g"}}]},
    {"record": {"text": {"lda": {"n_topics": 20, "alpha": 0.1, "unknown": "ignore"}},
                "plan": "categorical"}},
]


@pytest.mark.parametrize("spec", ROUND_TRIPS, ids=lambda s: json.dumps(s)[:40])
def test_spec_round_trips_through_the_estimator(spec):
    est = estimator_from_spec(spec)
    assert spec_from_estimator(est) == spec
    # and through JSON text
    assert spec_from_estimator(estimator_from_spec(json.loads(json.dumps(spec)))) == spec


def test_every_leaf_kind_builds_its_estimator():
    for kind, cls in LEAF_KINDS.items():
        options = {"binomial": {"n": 5}, "lda": {"n_topics": 3}}
        spec = {kind: options[kind]} if kind in options else kind
        assert type(estimator_from_spec(spec)) is cls


def test_spec_builds_the_same_tree_as_code():
    spec = {"mixture": {"record": {"age": "gaussian", "plan": {"categorical":
                                                               {"pseudo_count": 0.5}},
                                   "pages": {"sequence": "categorical", "length": "poisson"},
                                   "income": {"optional": "log_gaussian"}}},
            "k": 2, "pseudo_count": 1.0}
    by_code = MixtureEstimator([RecordEstimator({
        "age": GaussianEstimator(), "plan": CategoricalEstimator(pseudo_count=0.5),
        "pages": SequenceEstimator(CategoricalEstimator(), PoissonEstimator()),
        "income": OptionalEstimator(mixfold.LogGaussianEstimator())})] * 2, pseudo_count=1.0)
    assert spec_from_estimator(by_code) == spec
    rows = [{"age": 31.0, "plan": "free", "pages": ["home", "pricing"], "income": None},
            {"age": 52.0, "plan": "pro", "pages": ["docs"], "income": 71_000.0}] * 40
    a = mixfold.optimize(rows, estimator_from_spec(spec), seed=3, progress=False)
    b = mixfold.optimize(rows, by_code, seed=3, progress=False)
    assert a == b


def test_a_fitted_hmm_spec_round_trips_from_its_distribution():
    truth = mixfold.HiddenMarkovDistribution([mixfold.GaussianDistribution(-2, 1),
                                              mixfold.GaussianDistribution(2, 1)],
                                             [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
    est = truth.estimator()
    assert isinstance(est, HiddenMarkovEstimator)
    assert spec_from_estimator(est) == {"hidden_markov": "gaussian", "states": 2}


def test_record_star_uses_the_data_columns_in_order():
    columns = {"a": "gaussian", "b": {"optional": "categorical"}, "c": "poisson"}
    est = estimator_from_spec({"record": {"*": "auto", "c": "geometric"}}, columns)
    assert list(est.fields) == ["a", "b", "c"]
    assert isinstance(est.fields["b"], OptionalEstimator)
    assert type(est.fields["c"]).__name__ == "GeometricEstimator"
    every = estimator_from_spec({"mixture": {"record": {"*": "exponential"}}, "k": 2}, columns)
    assert {type(f).__name__ for f in every.components[0].fields.values()} == \
        {"ExponentialEstimator"}


@pytest.mark.parametrize("spec, columns, message", [
    ("gausian", None, r"spec \$: unknown kind 'gausian' \(did you mean 'gaussian'\?\)"),
    ({"mixture": {"record": {"age": "gaussian", "plan": "categoricl"}}, "k": 2}, None,
     r"spec \$\.mixture\.record\.plan: unknown kind 'categoricl'"),
    ({"mixture": "gaussian", "k": 0}, None, r"spec \$\.mixture: k must be an integer >= 1, got 0"),
    ({"mixture": ["gaussian", "poisson"], "k": 3}, None, r"k=3 but the list holds 2 children"),
    ({"mixture": "gaussian", "kk": 3}, None, r"unknown option 'kk' for mixture"),
    ({"gaussian": {"reg_covar": -1.0}}, None,
     r"spec \$\.gaussian: GaussianEstimator: reg_covar must be a finite number >= 0, got -1"),
    ({"gaussian": {"sigma": 1.0}}, None, r"unknown option 'sigma' for gaussian"),
    ({"gaussian": {}, "reg_covar": 1.0}, None, r"a leaf takes its options inside its own"),
    ("mixture", None, r"'mixture' is a combinator"),
    ({"mixture": "gaussian", "record": {"a": "gaussian"}}, None, r"exactly one kind key"),
    ({"binomial": {}}, None, r"spec \$\.binomial: binomial needs the option 'n'"),
    (3, None, r"expected a family name or an object with one kind key, got int 3"),
    ({"record": {"agee": "gaussian"}}, {"age": "gaussian"},
     r"spec \$\.record\.agee: unknown column 'agee' \(the data has \['age'\]\)"),
    ({"record": {"*": "auto"}}, None, r"'\*' stands for the data's other columns"),
    ({"hidden_markov": "gaussian", "states": 2, "terminal": "yes"}, None,
     r"terminal must be true or false"),
    ({"optional": "gaussian", "missing": "NA"}, None, r"missing must be a list"),
])
def test_bad_specs_name_the_path(spec, columns, message):
    with pytest.raises(SpecError, match=message):
        estimator_from_spec(spec, columns)


def test_unusable_default_column_fails_only_when_used():
    from mixfold.spec import NoDefault

    columns = {"x": "gaussian", "when": NoDefault("column 'when' of type datetime64 has no "
                                                  "default family")}
    assert list(estimator_from_spec({"record": {"x": "gaussian"}}, columns).fields) == ["x"]
    with pytest.raises(SpecError, match=r"\$\.record\.when: column 'when' of type datetime64"):
        estimator_from_spec({"record": {"*": "auto"}}, columns)
    est = estimator_from_spec({"record": {"*": "auto", "when": "categorical"}}, columns)
    assert list(est.fields) == ["x", "when"]


def test_load_spec_reads_json_yaml_and_inline(tmp_path):
    spec = {"mixture": {"record": {"x": "gaussian"}}, "k": 2}
    (tmp_path / "m.json").write_text(json.dumps(spec))
    assert load_spec(tmp_path / "m.json") == spec
    assert load_spec(json.dumps(spec)) == spec
    yaml = pytest.importorskip("yaml")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(spec))
    assert load_spec(str(tmp_path / "m.yaml")) == spec
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(SpecError, match="bad.json: not valid JSON"):
        load_spec(tmp_path / "bad.json")
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "absent.json")


def test_optional_missing_markers_round_trip_nan():
    est = estimator_from_spec({"optional": "categorical", "missing": [None, "NaN", ""]})
    mask = est.missing.mask([None, float("nan"), "", "x"])
    np.testing.assert_array_equal(mask, [True, True, True, False])


def test_priors_and_shared_covariances_round_trip_through_a_spec():
    from mixfold import (HiddenMarkovEstimator, MixtureEstimator, MultivariateGaussianEstimator,
                         DiagonalGaussianEstimator)
    from mixfold.spec import estimator_from_spec, spec_from_estimator

    mix = MixtureEstimator([MultivariateGaussianEstimator(covariance_keys="c", mean_weight=2.0,
                                                          mean_prior=[1.0, 2.0])] * 3,
                           weights_prior=[2.0, 2.0, 3.0])
    hmm = HiddenMarkovEstimator([DiagonalGaussianEstimator(spherical=True,
                                                           covariance_prior=0.5)] * 2,
                                initial_prior=2.0, transition_prior=[[3.0, 1.0], [1.0, 3.0]])
    for est in (mix, hmm):
        spec = spec_from_estimator(est)
        assert spec_from_estimator(estimator_from_spec(spec)) == spec
    assert spec_from_estimator(mix)["weights_prior"] == [2.0, 2.0, 3.0]
    assert spec_from_estimator(hmm)["hidden_markov"] == {
        "diagonal_gaussian": {"spherical": True, "covariance_prior": 0.5}}
