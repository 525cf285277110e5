"""The one look at a fit input's type: :func:`mixfold.io.kinds.kind_of`, and the kinds the steps
after it hand on."""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import mixfold
import mixfold.dispatch
from mixfold import GaussianEstimator, RowBlocks
from mixfold.io.kinds import Kind, kind_of
from mixfold.io.tables import prepared_input


def test_each_kind_of_input_is_recognised():
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    table = pa.table({"x": [1.0, 2.0]})
    assert kind_of("a.parquet") is kind_of(Path("a.csv")) is Kind.PATH
    assert kind_of(RowBlocks.from_factory(lambda: iter([np.zeros(2)]))) is Kind.ROW_BLOCKS
    assert kind_of(GaussianEstimator().encoder().fit(np.zeros(2)).encode(np.zeros(2))) \
        is Kind.ENCODED
    assert kind_of(frame) is kind_of(table) is kind_of(table.to_batches()[0]) is Kind.TABLE
    assert kind_of(np.zeros(2)) is kind_of([1.0, 2.0]) is kind_of(frame["x"]) is Kind.ROWS


def test_a_dask_collection_is_an_engines():
    dd = pytest.importorskip("dask.dataframe")
    da = pytest.importorskip("dask.array")
    frame = dd.from_pandas(pd.DataFrame({"x": [1.0, 2.0]}), npartitions=1)
    for collection in (frame, frame["x"], da.zeros(3)):
        assert kind_of(collection) is Kind.DASK and Kind.DASK.on_engine
    assert not any(k.on_engine for k in Kind if k not in (Kind.SPARK, Kind.DASK, Kind.RAY))


def test_prepared_input_says_what_it_made(tmp_path):
    est = GaussianEstimator()
    table = pa.table({"x": [1.0, 2.0, 3.0]})
    rows, kind = prepared_input(table, Kind.TABLE, est)
    assert kind is Kind.ROWS and rows.tolist() == [1.0, 2.0, 3.0]
    path = tmp_path / "x.csv"
    pd.DataFrame({"x": [1.0, 2.0, 3.0]}).to_csv(path, index=False)
    assert prepared_input(str(path), Kind.PATH, est)[1] is Kind.ROW_BLOCKS  # local: streamed
    joined, kind = prepared_input(str(path), Kind.PATH, est, "mp")  # held resident: joined
    assert kind is Kind.ROWS and len(joined) == 3


def test_a_fit_looks_at_its_input_once(monkeypatch):
    seen = []

    def counting(data):
        seen.append(type(data).__name__)
        return kind_of(data)

    def again(data):
        raise AssertionError(f"the input's type looked at again ({type(data).__name__})")

    monkeypatch.setattr(sys.modules["mixfold.fit"], "kind_of", counting)
    monkeypatch.setattr(mixfold.dispatch, "kind_of", again)
    x = np.random.default_rng(0).normal(size=200)
    model = mixfold.optimize(pa.table({"x": x}), GaussianEstimator(), progress=False)
    assert seen == ["Table"] and model.fit_result.n_rows == 200
