"""Row-block sources: Parquet by row group, CSV in chunks, factories, arrays; table layouts."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mixfold import (CategoricalEstimator, DiagonalGaussianEstimator, GaussianEstimator,
                     MixtureEstimator, RecordEstimator, RowBlocks)
from mixfold.io.readers import reads_named_fields, table_rows


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.normal(size=1000), "y": rng.normal(size=1000),
                         "c": rng.choice(["a", "b", "c"], size=1000)})


def test_array_blocks_are_views_of_the_rows_and_every_pass_is_the_same():
    x = np.arange(20.0).reshape(10, 2)
    source = RowBlocks.from_array(x, block_rows=3)
    first, second = list(source.blocks()), list(source)
    assert [len(b) for b in first] == [3, 3, 3, 1]
    assert all(np.shares_memory(b, x) for b in first)
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(second))
    assert source.n_rows == 10


def test_array_blocks_of_a_list_and_of_a_dataframe(frame):
    rows = [{"a": i} for i in range(5)]
    assert [len(b) for b in RowBlocks.from_array(rows, 2)] == [2, 2, 1]
    blocks = list(RowBlocks.from_array(frame, 400, layout="frame"))
    assert [len(b) for b in blocks] == [400, 400, 200]
    pd.testing.assert_frame_equal(pd.concat(blocks), frame)


def test_parquet_is_read_one_row_group_at_a_time(tmp_path, frame):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pandas(frame), path, row_group_size=300)
    source = RowBlocks.parquet(path, layout="frame")
    assert source.n_rows == 1000
    blocks = list(source.blocks())
    assert [len(b) for b in blocks] == [300, 300, 300, 100]
    pd.testing.assert_frame_equal(pd.concat(blocks, ignore_index=True), frame)
    # batches never span row groups
    sizes = [len(b) for b in RowBlocks.parquet(path, block_rows=128, layout="frame")]
    assert sum(sizes) == 1000 and max(sizes) == 128


def test_parquet_folder_reads_its_files_in_path_order(tmp_path, frame):
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, part in enumerate([frame[:400], frame[400:700], frame[700:]]):
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False),
                       folder / f"part-{i:02d}.parquet", row_group_size=250)
    source = RowBlocks.parquet(folder, columns=["y", "x"])
    assert source.n_rows == 1000
    got = np.concatenate(list(source.blocks(DiagonalGaussianEstimator().encoder())))
    np.testing.assert_array_equal(got, frame[["y", "x"]].to_numpy())


def test_csv_is_read_in_chunks(tmp_path, frame):
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False)
    source = RowBlocks.csv(path, block_rows=333, columns=["x"])
    assert source.n_rows is None
    blocks = list(source.blocks(GaussianEstimator().encoder()))
    assert [len(b) for b in blocks] == [333, 333, 333, 1]
    assert all(b.ndim == 1 for b in blocks)
    np.testing.assert_allclose(np.concatenate(blocks), frame["x"].to_numpy(), rtol=1e-15)


def test_a_factory_is_called_once_per_pass():
    calls = []

    def make():
        calls.append(1)
        return iter([np.ones(2), np.ones(3)])

    source = RowBlocks.from_factory(make)
    assert [len(b) for b in source] == [2, 3]
    assert [len(b) for b in source] == [2, 3]
    assert len(calls) == 2


def test_layout_auto_follows_the_encoder(frame):
    table = pa.Table.from_pandas(frame[["x", "y"]])
    record = RecordEstimator({"x": GaussianEstimator(), "y": GaussianEstimator()})
    assert reads_named_fields(record.encoder())
    assert reads_named_fields(MixtureEstimator([record] * 2).encoder())
    assert not reads_named_fields(MixtureEstimator([DiagonalGaussianEstimator()] * 2).encoder())
    source = RowBlocks.from_factory(lambda: [table])
    (as_frame,) = source.blocks(record.encoder())
    (as_array,) = source.blocks(DiagonalGaussianEstimator().encoder())
    assert isinstance(as_frame, pd.DataFrame) and list(as_frame.columns) == ["x", "y"]
    assert as_array.dtype == np.float64 and as_array.shape == (1000, 2)
    np.testing.assert_array_equal(as_array, frame[["x", "y"]].to_numpy())


def test_table_rows_of_one_column_several_columns_and_mixed_types(frame):
    one = table_rows(frame[["c"]], "array")
    assert one.shape == (1000,) and list(one[:3]) == list(frame["c"][:3])
    mixed = table_rows(pa.Table.from_pandas(frame[["x", "c"]]), "array")
    assert mixed.dtype == object and mixed.shape == (1000, 2)
    assert mixed[0, 0] == frame["x"][0] and mixed[0, 1] == frame["c"][0]
    ints = table_rows(pa.table({"a": [1, 2], "b": [0.5, 1.5]}), "array")
    np.testing.assert_array_equal(ints, [[1.0, 0.5], [2.0, 1.5]])
    assert table_rows([(1, 2)], "array") == [(1, 2)]  # not a table: unchanged


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="block_rows must be an integer >= 1, got 0"):
        RowBlocks.from_array(np.ones(3), 0)
    with pytest.raises(ValueError, match="layout must be one of"):
        RowBlocks.from_array(np.ones(3), 2, layout="rows")
    with pytest.raises(TypeError, match="make_blocks must be a callable"):
        RowBlocks([np.ones(3)])
    with pytest.raises(TypeError, match="must return an iterable"):
        list(RowBlocks.from_factory(lambda: 3))
    with pytest.raises(FileNotFoundError, match="no such file"):
        RowBlocks.parquet(tmp_path / "missing.parquet")
    with pytest.raises(FileNotFoundError, match="no .csv files"):
        RowBlocks.csv(tmp_path)


def test_categorical_column_from_parquet_keeps_its_values(tmp_path, frame):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.Table.from_pandas(frame[["c"]]), path, row_group_size=500)
    enc = CategoricalEstimator().encoder()
    blocks = list(RowBlocks.parquet(path).blocks(enc))
    assert sorted(set(np.concatenate(blocks))) == ["a", "b", "c"]
