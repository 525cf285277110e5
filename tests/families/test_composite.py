import numpy as np
import pandas as pd
import pytest

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, CompositeDistribution,
                     CompositeEstimator, DataError, DataTypeError, GaussianDistribution,
                     GaussianEstimator, RecordDistribution, RecordEstimator)
from mixfold.families import composite


def record_model():
    return RecordDistribution({"height": GaussianDistribution(170.0, 64.0),
                               "colour": CategoricalDistribution({"red": 0.7, "blue": 0.3})})


def test_record_log_density_is_sum_of_fields():
    d = record_model()
    row = {"height": 180.0, "colour": "blue"}
    expected = d.fields["height"].log_density(180.0) + np.log(0.3)
    assert d.log_density(row) == pytest.approx(expected, rel=1e-14)


def test_record_fit_from_dicts_dataframe_and_columns_agree():
    rows = record_model().sampler(0).sample(3000)
    est = RecordEstimator({"height": GaussianEstimator(), "colour": CategoricalEstimator()})
    a = mixfold.optimize(rows, est, progress=False)
    b = mixfold.optimize(pd.DataFrame(rows), est, progress=False)
    c = mixfold.optimize({"height": np.array([r["height"] for r in rows]),
                          "colour": [r["colour"] for r in rows]}, est, progress=False)
    assert a == b == c
    assert a.fields["height"].mu == pytest.approx(170.0, abs=0.5)
    assert a.fields["colour"].prob("red") == pytest.approx(0.7, abs=0.03)


def test_composite_of_tuples_and_2d_array():
    d = CompositeDistribution([GaussianDistribution(0, 1), GaussianDistribution(5, 4)])
    rows = d.sampler(1).sample(2000)
    assert isinstance(rows[0], tuple) and len(rows[0]) == 2
    est = CompositeEstimator([GaussianEstimator(), GaussianEstimator()])
    a = mixfold.optimize(rows, est, progress=False)
    b = mixfold.optimize(np.array(rows), est, progress=False)
    assert a == b
    assert a.factors[1].mu == pytest.approx(5.0, abs=0.2)


def test_ragged_tuple_row_is_named():
    est = CompositeEstimator([GaussianEstimator(), GaussianEstimator()])
    with pytest.raises(DataTypeError) as err:
        mixfold.optimize([(1.0, 2.0), (1.0,), (3.0, 4.0)], est, progress=False)
    assert err.value.row == 1


def test_bad_field_value_names_row_and_field():
    est = RecordEstimator({"height": GaussianEstimator(), "colour": CategoricalEstimator()})
    rows = [{"height": 1.0, "colour": "red"}, {"height": "tall", "colour": "red"}]
    with pytest.raises(DataTypeError) as err:
        mixfold.optimize(rows, est, progress=False)
    assert err.value.row == 1 and err.value.path == ("height",)
    assert "row 1, field ['height']" in str(err.value)


def test_missing_field_and_missing_column():
    est = RecordEstimator({"height": GaussianEstimator(), "colour": CategoricalEstimator()})
    with pytest.raises(DataError) as err:
        mixfold.optimize([{"height": 1.0, "colour": "red"}, {"height": 2.0}], est, progress=False)
    assert err.value.row == 1 and err.value.path == ("colour",)
    with pytest.raises(DataError) as err:
        mixfold.optimize(pd.DataFrame({"height": [1.0]}), est, progress=False)
    assert err.value.path == ("colour",)


def test_non_dict_row_is_a_type_error():
    est = RecordEstimator({"height": GaussianEstimator()})
    with pytest.raises(DataTypeError) as err:
        mixfold.optimize([{"height": 1.0}, [2.0]], est, progress=False)
    assert err.value.row == 1


def test_a_checkpoint_written_before_the_encoders_moved_still_resumes():
    # a checkpoint's fingerprint hashes the encoded rows' class by module and name, and the
    # estimator's public attributes: both as they were when everything lived in composite.py
    for cls in (composite.FactorEncoded, composite.CompositeEncoder, composite.RecordEncoder):
        assert cls.__module__ == "mixfold.families.composite"
    assert set(vars(CompositeEstimator([GaussianEstimator()], keys="k"))) == {"factors", "keys"}
    assert set(vars(RecordEstimator({"x": GaussianEstimator()}))) == {"fields", "factors", "keys"}
