"""Input shapes: one dict row or scalar columns for a Record, pandas' nullable columns."""

import warnings

import numpy as np
import pandas as pd
import pytest

import mixfold
from mixfold import (
    CategoricalEstimator,
    DataError,
    DataTypeError,
    GaussianEstimator,
    OptionalEstimator,
    PoissonEstimator,
    RecordEstimator,
)
from mixfold.families.optional import MissingMarkers


def record():
    return RecordEstimator({"x": GaussianEstimator(), "c": CategoricalEstimator()})


@pytest.mark.parametrize("data, field, got", [
    ({"x": 1.0, "c": "a"}, "x", "one float"),
    ({"x": [1.0, 2.0], "c": "a"}, "c", "one str"),
    ({"x": np.float64(1.0), "c": ["a"]}, "x", "one float64"),
    ({"x": np.array(1.0), "c": ["a"]}, "x", "one ndarray"),
    ({"x": [1.0], "c": {"a": 1}}, "c", "one dict"),
])
def test_a_single_dict_row_or_scalar_columns_say_what_was_expected(data, field, got):
    with pytest.raises(DataTypeError, match=rf"field \['{field}'\]: a mapping is read as "
                                            rf"columns .*{got}.*pass a list of one dict"):
        mixfold.fit(data, record(), progress=False)


def nullable_frame():
    return pd.DataFrame({
        "x": [1.0, 2.0, None, 4.0, 5.0, np.nan] * 5,
        "s": pd.array(["a", pd.NA, "b", "a", None, "b"] * 5, dtype="string"),
        "b": pd.array([True, pd.NA, False, True, None, True] * 5, dtype="boolean"),
        "f": pd.array([1.5, pd.NA, 2.5, 3.0, 2.0, None] * 5, dtype="Float64"),
        "i": pd.array([1, pd.NA, 2, 3, 2, None] * 5, dtype="Int64"),
    })


def test_pandas_nullable_columns_are_missing_values_in_optional_fields():
    frame = nullable_frame()
    est = RecordEstimator({"x": OptionalEstimator(GaussianEstimator()),
                           "s": OptionalEstimator(CategoricalEstimator()),
                           "b": OptionalEstimator(CategoricalEstimator()),
                           "f": OptionalEstimator(GaussianEstimator()),
                           "i": OptionalEstimator(PoissonEstimator())})
    model = mixfold.optimize(frame, est, progress=False)
    fields = model.fields
    # the reference: pandas' own count of missing values and of the present ones
    for name in frame.columns:
        assert fields[name].p_missing == pytest.approx(frame[name].isna().mean(), abs=1e-12)
    present = frame["x"].dropna()
    assert fields["x"].inner.mu == pytest.approx(present.mean(), rel=1e-12)
    assert fields["f"].inner.mu == pytest.approx(frame["f"].dropna().astype(float).mean())
    assert fields["i"].inner.lam == pytest.approx(frame["i"].dropna().astype(float).mean())
    shares = frame["s"].dropna().value_counts(normalize=True)
    assert dict(zip(fields["s"].inner.levels, fields["s"].inner.probs)) == \
        pytest.approx(shares.to_dict())
    assert fields["b"].inner.levels == (False, True)


def test_mixed_type_clustering_fits_a_frame_with_nullable_columns():
    from mixfold.sklearn import MixedTypeClustering

    frame = nullable_frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mixfold.DegenerateFitWarning)
        clusters = MixedTypeClustering(2).fit(frame)
    labels = clusters.predict(frame)
    assert labels.shape == (30,) and set(labels) <= {0, 1}
    assert np.isfinite(clusters.score(frame))


@pytest.mark.parametrize("value", [None, float("nan"), np.float32("nan"), pd.NA, pd.NaT,
                                   np.datetime64("NaT"), np.timedelta64("NaT")])
def test_every_missing_value_is_missing(value):
    assert MissingMarkers().is_missing(value)
    assert MissingMarkers().mask(np.array([1, value, "a"], dtype=object)).tolist() == \
        [False, True, False]
    assert not MissingMarkers(("NA",)).is_missing(value)  # only the markers given


def test_nat_in_a_datetime_array_is_missing():
    days = np.array(["2020-01-01", "NaT", "2020-01-03"], dtype="datetime64[D]")
    assert MissingMarkers().mask(days).tolist() == [False, True, False]


def test_a_missing_value_where_none_is_allowed_says_so():
    frame = nullable_frame()
    with pytest.raises(DataError, match=r"row 1, field \['s'\]: missing value in a categorical"):
        mixfold.fit(frame[["s"]], RecordEstimator({"s": CategoricalEstimator()}),
                    progress=False)
