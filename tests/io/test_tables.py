"""Table input: default families by column type, Arrow tables, Parquet/CSV/npy paths."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mixfold
from mixfold import MixtureEstimator, RowBlocks
from mixfold.io.tables import (as_fit_input, collect_rows, column_specs, read_data, record_spec)
from mixfold.spec import NoDefault, SpecError, estimator_from_spec


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    n = 600
    seg = rng.integers(0, 2, n)
    spend = np.where(seg == 1, rng.lognormal(4, 0.3, n), rng.lognormal(2, 0.3, n))
    spend[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame({
        "age": np.where(seg == 1, rng.normal(55, 5, n), rng.normal(25, 4, n)),
        "plan": np.where(seg == 1, "pro", np.where(rng.random(n) < 0.8, "free", "pro")),
        "visits": rng.poisson(np.where(seg == 1, 15, 3)),
        "member": rng.random(n) < np.where(seg == 1, 0.9, 0.2),
        "spend": spend,
    })


def test_pandas_dtypes_choose_default_families(frame):
    specs = column_specs(frame)
    assert specs == {"age": "gaussian", "plan": "categorical", "visits": "poisson",
                     "member": "bernoulli", "spend": {"optional": "gaussian"}}
    odd = pd.DataFrame({"delta": [-2, 3], "level": pd.Categorical(["a", "b"]),
                        "name": pd.Series(["x", None], dtype=object),
                        "when": pd.to_datetime(["2024-01-01", "2024-02-01"])})
    specs = column_specs(odd)
    assert specs["delta"] == "gaussian"  # an integer column with negative values
    assert specs["level"] == {"categorical": {"levels": ["a", "b"]}}  # its declared categories
    assert specs["name"] == {"optional": "categorical"}
    assert isinstance(specs["when"], NoDefault) and "datetime64" in specs["when"].message


def test_arrow_table_types_choose_the_same_families(frame):
    table = pa.Table.from_pandas(frame, preserve_index=False)
    assert column_specs(table) == column_specs(frame)


def test_record_spec_overrides_and_unknown_column(frame):
    spec = record_spec(frame, {"spend": {"optional": "log_gaussian"}})
    assert spec["record"]["spend"] == {"optional": "log_gaussian"}
    assert spec["record"]["age"] == "gaussian"
    with pytest.raises(SpecError, match=r"\$\.record\.spendd: unknown column 'spendd'"):
        record_spec(frame, {"spendd": "gaussian"})


def test_fitted_default_record_recovers_the_segments(frame):
    spec = {"mixture": record_spec(frame, {"spend": {"optional": "log_gaussian"}}), "k": 2,
            "pseudo_count": 1.0}
    model = mixfold.optimize(frame, estimator_from_spec(spec), seed=0, progress=False)
    ages = sorted(c.fields["age"].mu for c in model.components)
    assert ages[0] == pytest.approx(25, abs=1) and ages[1] == pytest.approx(55, abs=1)


def test_parquet_metadata_sees_nulls_and_negatives_in_any_row_group(tmp_path):
    n = 1000
    values = np.arange(n) % 50  # counts (repeated values: not an identifier column)
    frame = pd.DataFrame({"count": values, "shift": values.copy(),
                          "text": ["a"] * n})
    frame.loc[n - 1, "shift"] = -5                         # only in the last row group
    frame["text"] = frame["text"].astype(object)
    frame.loc[n - 2, "text"] = None                        # a null in the last row group
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=200)
    assert pq.ParquetFile(path).num_row_groups == 5
    assert column_specs(path) == {"count": "poisson", "shift": "gaussian",
                                  "text": {"optional": "categorical"}}
    # the first block alone would miss both
    assert column_specs(RowBlocks.parquet(path)) == {"count": "poisson", "shift": "poisson",
                                                     "text": "categorical"}


def test_read_data_makes_row_blocks_never_the_whole_file(tmp_path, frame):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=100)
    source = read_data(path)
    assert isinstance(source, RowBlocks) and source.n_rows == len(frame)
    assert [len(b) for b in source.blocks()] == [100] * 6
    csv = tmp_path / "f.csv"
    frame.to_csv(csv, index=False)
    blocks = [len(b) for b in read_data(csv, block_rows=250).blocks()]
    assert blocks == [250, 250, 100]
    pd.testing.assert_frame_equal(collect_rows(read_data(path)), frame)


def test_npy_and_bad_paths(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(read_data(tmp_path / "x.npy"), np.arange(6.0).reshape(3, 2))
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="not a readable .npy array"):
        read_data(tmp_path / "o.npy")  # object arrays would need pickle: refused
    (tmp_path / "x.txt").write_text("1\n2\n")
    with pytest.raises(ValueError,
                       match=r"expected one of \['.csv', '.jsonl', '.npy', '.parquet'\]"):
        read_data(tmp_path / "x.txt")
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        read_data(tmp_path / "absent.parquet")


def test_optimize_reads_arrow_tables_and_paths_like_the_frame(tmp_path, frame):
    est = estimator_from_spec({"mixture": record_spec(frame), "k": 2, "pseudo_count": 1.0})
    in_memory = mixfold.optimize(frame, est, seed=1, progress=False)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    from_arrow = mixfold.optimize(table, est, seed=1, progress=False)
    assert from_arrow == in_memory
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=128)
    out_of_core = mixfold.optimize(str(path), est, seed=1, progress=False)
    assert out_of_core.fit_result.backend == "stream"
    a = [c.fields["age"].mu for c in out_of_core.components]
    b = [c.fields["age"].mu for c in in_memory.components]
    np.testing.assert_allclose(a, b, rtol=1e-8)


def test_arrow_table_for_a_vector_family_becomes_an_array():
    table = pa.table({"x": [0.0, 1.0, 2.0], "y": [1.0, 1.0, 0.0]})
    rows = as_fit_input(table, MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 2))
    np.testing.assert_array_equal(rows, [[0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])


def test_a_path_is_read_into_memory_for_resident_backends(tmp_path, frame):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=100)
    est = estimator_from_spec({"mixture": record_spec(frame), "k": 2})
    assert isinstance(as_fit_input(path, est), RowBlocks)  # local: streamed
    joined = as_fit_input(path, est, backend="mp")
    pd.testing.assert_frame_equal(joined, frame)
    with pytest.raises(ValueError, match="backend must be one of"):
        as_fit_input(path, est, backend="gpu-cluster")


def test_an_identifier_column_is_left_out_of_auto_with_a_note(tmp_path):
    from click.testing import CliRunner

    from mixfold.cli import main
    from mixfold.spec import LeftOut, estimator_from_spec

    frame = pd.DataFrame({"id": np.arange(100) + 7, "x": np.tile([0.5, 1.5], 50)})
    specs = column_specs(frame)
    assert isinstance(specs["id"], LeftOut) and specs["x"] == "gaussian"
    assert isinstance(column_specs(pa.Table.from_pandas(frame))["id"], LeftOut)
    est = estimator_from_spec({"record": {"*": "auto"}}, specs)
    assert list(est.fields) == ["x"]
    named = estimator_from_spec({"record": {"*": "auto", "id": "gaussian"}}, specs)
    assert list(named.fields) == ["id", "x"]
    frame.to_csv(tmp_path / "f.csv", index=False)
    out = CliRunner().invoke(main, ["spec", str(tmp_path / "f.csv")])
    assert out.exit_code == 0 and json.loads(out.stdout) == {"record": {"x": "gaussian"}}
    assert "note: column 'id' looks like an identifier" in out.stderr


def test_overdispersed_counts_and_proportions_get_their_families(tmp_path):
    rng = np.random.default_rng(1)
    n = 2000
    frame = pd.DataFrame({
        "claims": rng.negative_binomial(0.5, 0.05, n),     # variance ~ 40 times the mean
        "visits": rng.poisson(4.0, n),
        "share": rng.beta(2.0, 5.0, n),
        "ratio": rng.uniform(0.0, 2.0, n),
    })
    frame.loc[3, "share"] = np.nan
    want = {"claims": "negative_binomial", "visits": "poisson", "share": {"optional": "beta"},
            "ratio": "gaussian"}
    assert column_specs(frame) == want
    assert column_specs(pa.Table.from_pandas(frame, preserve_index=False)) == want
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=500)
    # Parquet metadata holds ranges but no variances: counts stay Poisson there
    assert column_specs(path) == {**want, "claims": "poisson"}
    frame.loc[7, "share"] = 1.0  # a value at the edge: not a Beta's
    assert column_specs(frame)["share"] == {"optional": "gaussian"}
    spec = estimator_from_spec(record_spec(frame.drop(columns="share")))
    fit = mixfold.optimize(frame.drop(columns="share"), spec, progress=False)
    assert fit.fields["claims"].r == pytest.approx(0.5, rel=0.15)


def test_token_lists_and_long_text_default_to_a_topic_model():
    frame = pd.DataFrame({
        "tokens": [["red", "apple"], ["green", "pear", "pie"]],
        "review": ["a long review of the red apple pie that we ate", None],
        "plan": ["free", "pro"]})
    specs = column_specs(frame)
    assert specs["tokens"] == {"lda": {"n_topics": 10}}
    assert specs["review"] == {"optional": {"lda": {"n_topics": 10}}}
    assert specs["plan"] == "categorical"
    assert column_specs(pa.Table.from_pandas(frame, preserve_index=False)) == specs
    model = mixfold.optimize(frame[["tokens", "plan"]],
                             estimator_from_spec(record_spec(frame[["tokens", "plan"]])),
                             max_iter=2, progress=False)
    assert model.fields["tokens"].n_topics == 10


def test_parquet_and_csv_text_columns_are_sampled_for_documents(tmp_path):
    long = "a long review of the red apple pie that we ate"
    frame = pd.DataFrame({"review": [long, "the pear tart was dry and far too sweet for us"] * 6,
                          "plan": ["free", "pro", "team"] * 4,
                          "tokens": [["red", "apple"], ["green", "pear", "pie"]] * 6})
    frame.loc[9, "review"] = None  # a null in a later row group: seen in the metadata
    frame.loc[8:, "plan"] = " ".join(["words"] * 30)  # documents on average over the file
    path = tmp_path / "reviews.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=4)
    lda = {"lda": {"n_topics": 10}}
    # the first row group's values decide: 'plan' is levels there
    assert column_specs(path) == {"review": {"optional": lda}, "plan": "categorical",
                                  "tokens": lda}
    frame.drop(columns="tokens").to_csv(tmp_path / "reviews.csv", index=False)
    # one CSV chunk holds all 12 rows: 'plan' is documents on average there
    assert column_specs(tmp_path / "reviews.csv") == {"review": {"optional": lda},
                                                      "plan": lda}


def test_a_count_column_with_a_blank_cell_stays_a_count(tmp_path):
    (tmp_path / "c.csv").write_text("visits,share\n1,0.5\n2,0.1\n,0.3\n4,0.2\n")
    assert column_specs(tmp_path / "c.csv")["visits"] == {"optional": "poisson"}
    halves = pd.DataFrame({"x": [1.5, None, 2.0]})  # not whole numbers: still a Gaussian
    assert column_specs(halves)["x"] == {"optional": "gaussian"}


def test_a_declared_but_unused_category_is_scored():
    from mixfold.sklearn import MixedTypeClustering

    levels = pd.CategoricalDtype(["a", "b", "z"])
    frame = pd.DataFrame({"x": [1.0, 2, 3, 10, 11, 12],
                          "c": pd.Series(list("aabbaa"), dtype=levels)})
    mtc = MixedTypeClustering(2, random_state=0).fit(frame)
    unseen = pd.DataFrame({"x": [11.0], "c": pd.Series(["z"], dtype=levels)})
    proba = mtc.predict_proba(unseen)
    # the one level no row used gets the pseudo-count's share in each cluster: the x decides
    assert proba.shape == (1, 2) and proba.max() > 0.99
    assert mtc.predict(unseen)[0] == mtc.predict(frame.iloc[[4]])[0]


def test_a_datetime_column_gets_advice_that_works():
    when = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=6), "x": np.arange(6.0)})
    message = column_specs(when)["t"].message
    assert "convert it to numbers first" in message
    days = when.assign(t=(when["t"] - when["t"].min()).dt.days)  # the advice, as written
    assert column_specs(days)["t"] == "poisson"


def test_json_lines_are_a_frame_or_an_array(tmp_path):
    (tmp_path / "o.jsonl").write_text('{"a": 1.5, "b": "x"}\n\n{"a": null, "b": "y"}\n')
    frame = read_data(tmp_path / "o.jsonl")
    assert frame["b"].tolist() == ["x", "y"] and np.isnan(frame["a"][1])
    (tmp_path / "v.jsonl").write_text("[1, 2]\n[3, 4.5]\n")
    np.testing.assert_array_equal(read_data(tmp_path / "v.jsonl"), [[1, 2], [3, 4.5]])
    (tmp_path / "bad.jsonl").write_text("[1, 2]\n{nope\n")
    with pytest.raises(ValueError, match="bad.jsonl' line 2: not a JSON value"):
        read_data(tmp_path / "bad.jsonl")
    (tmp_path / "mixed.jsonl").write_text("[1, 2]\n{\"a\": 1}\n")
    with pytest.raises(ValueError, match="row 2 breaks the rows' kind"):
        read_data(tmp_path / "mixed.jsonl")
