"""Out-of-core batch EM: a block source folded one pass per iteration equals the in-memory fit."""

import gc
import weakref

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, DiagonalGaussianDistribution,
                     DiagonalGaussianEstimator, GaussianDistribution, GaussianEstimator,
                     MixtureDistribution, MixtureEstimator, RecordDistribution, RecordEstimator,
                     RowBlocks)
from mixfold.backends import LocalEncodedData
from mixfold.backends.stream import StreamEncodedData
from mixfold.errors import DataError
from mixfold.dispatch import encode_data
from tests.streaming._compare import assert_models_close

OPTIONS = dict(max_iter=15, tol=0.0, seed=3, progress=False)


def gaussian_mixture_rows(n, seed=0):
    truth = MixtureDistribution([DiagonalGaussianDistribution([-2.0, 0.0], [1.0, 1.0]),
                                 DiagonalGaussianDistribution([2.0, 1.0], [0.5, 2.0]),
                                 DiagonalGaussianDistribution([0.0, 4.0], [1.0, 0.3])],
                                [0.3, 0.5, 0.2])
    return truth.sampler(seed).sample(n)


def diag_estimator():
    return MixtureEstimator([DiagonalGaussianEstimator()] * 3)


def record_rows(n, seed=1):
    """Records whose plan level "zeta" appears only in the last rows (the last row group)."""
    truth = MixtureDistribution([
        RecordDistribution({"age": GaussianDistribution(25.0, 16.0),
                            "plan": CategoricalDistribution({"free": 0.7, "pro": 0.3})}),
        RecordDistribution({"age": GaussianDistribution(50.0, 25.0),
                            "plan": CategoricalDistribution({"free": 0.2, "pro": 0.8})})],
        [0.4, 0.6])
    frame = pd.DataFrame(truth.sampler(seed).sample(n))
    frame.loc[frame.index[-50:], "plan"] = ["zeta", "alpha"] * 25
    return frame


def record_estimator():
    return MixtureEstimator([RecordEstimator({"age": GaussianEstimator(),
                                              "plan": CategoricalEstimator(pseudo_count=0.1)})] * 2)


def test_parquet_fit_equals_the_in_memory_fit_gaussian_mixture(tmp_path):
    x = gaussian_mixture_rows(7000)
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": x[:, 0], "b": x[:, 1]}), path, row_group_size=1000)
    memory = mixfold.fit(x, diag_estimator(), chunk_rows=512, **OPTIONS)
    for source in (RowBlocks.parquet(path), RowBlocks.parquet(path, block_rows=333)):
        stream = mixfold.fit(source, diag_estimator(), **OPTIONS)
        assert stream.backend == "stream" and stream.n_rows == 7000
        assert_models_close(stream.model, memory.model)
        np.testing.assert_allclose(stream.log_likelihood, memory.log_likelihood, rtol=1e-12)


def test_parquet_fit_equals_the_in_memory_fit_records_with_late_levels(tmp_path):
    frame = record_rows(4000)
    path = tmp_path / "records.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=700)
    assert set(pq.ParquetFile(path).read_row_group(0)["plan"].to_pylist()) == {"free", "pro"}
    memory = mixfold.optimize(frame, record_estimator(), **OPTIONS)
    stream = mixfold.optimize(RowBlocks.parquet(path), record_estimator(), **OPTIONS)
    assert stream.components[0].fields["plan"].levels == ("alpha", "free", "pro", "zeta")
    assert_models_close(stream, memory)


def test_csv_fit_equals_the_in_memory_fit(tmp_path):
    x = gaussian_mixture_rows(5000)[:, 1]
    path = tmp_path / "x.csv"
    pd.DataFrame({"value": x}).to_csv(path, index=False, float_format="%.17g")
    est = MixtureEstimator([GaussianEstimator()] * 3)
    memory = mixfold.optimize(x, est, **OPTIONS)
    stream = mixfold.optimize(RowBlocks.csv(path, block_rows=900), est, **OPTIONS)
    assert_models_close(stream, memory)


def test_factory_with_empty_and_one_row_blocks_equals_the_in_memory_fit():
    x = gaussian_mixture_rows(3000)
    cuts = [0, 0, 1, 1, 2, 500, 501, 501, 2999, 3000, 3000]

    def blocks():
        for begin, end in zip(cuts, cuts[1:]):
            yield x[begin:end]

    memory = mixfold.optimize(x, diag_estimator(), **OPTIONS)
    stream = mixfold.optimize(RowBlocks.from_factory(blocks), diag_estimator(), **OPTIONS)
    assert_models_close(stream, memory)


def test_nested_encodings_get_global_row_indices():
    """A mixture of records with a sequence field: items re-based block by block."""
    from tests.test_mixture_of_records import estimator, truth_model

    rows = truth_model().sampler(5).sample(2500)
    memory = mixfold.optimize(rows, estimator(), max_iter=4, tol=0.0, progress=False)
    stream = mixfold.optimize(RowBlocks.from_array(rows, 377), estimator(), max_iter=4, tol=0.0,
                              progress=False)
    assert_models_close(stream, memory)
    handle, _ = StreamEncodedData.open(RowBlocks.from_array(rows, 377), estimator(), init=None)
    starts = [(enc.start, enc.children[2].items.start) for enc in handle.encoded_blocks()]
    items_before = np.cumsum([0] + [len(r["visits"]) for r in rows])
    assert starts == [(b, int(items_before[b])) for b in range(0, 2500, 377)]


def test_init_sample_is_the_in_memory_one_when_the_data_is_sampled():
    x = gaussian_mixture_rows(23_000)[:, 0]
    est = GaussianEstimator()
    local = LocalEncodedData(encode_data(x, est)[0])
    stream, _ = StreamEncodedData.open(RowBlocks.from_array(x, 4099), est, init=None)
    (a, wa), (b, wb) = local.init_sample(7), stream.init_sample(7)
    assert 0 < b.n_rows < 23_000
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(wa, wb)


def test_stream_accumulate_is_one_pass_of_statistics():
    x = gaussian_mixture_rows(2000)
    model = mixfold.optimize(x, diag_estimator(), max_iter=2, progress=False)
    est = model.estimator()
    local = LocalEncodedData(encode_data(x, est)[0])
    stream, _ = StreamEncodedData.open(RowBlocks.from_array(x, 300), est, init=None)
    (n1, s1), (n2, s2) = local.stream_accumulate(est, model), stream.stream_accumulate(est, model)
    assert n1 == n2 == 2000.0
    np.testing.assert_allclose(s2.to_array(), s1.to_array(), rtol=1e-12)


def test_at_most_one_block_is_alive_while_the_next_is_read():
    x = gaussian_mixture_rows(4000)
    alive_when_reading, sizes = [], []

    def blocks():
        refs = []
        for begin in range(0, len(x), 500):
            gc.collect()
            alive_when_reading.append(sum(r() is not None for r in refs))
            block = x[begin:begin + 500].copy()  # a block of its own, as a reader makes
            refs.append(weakref.ref(block))
            sizes.append(len(block))
            yield block
            del block

    mixfold.optimize(RowBlocks.from_factory(blocks), diag_estimator(), max_iter=3,
                     progress=False)
    assert max(sizes) == 500
    assert len(alive_when_reading) == 8 * (1 + 1 + 1 + 3)  # learn, sample, init step, 3 iters
    assert max(alive_when_reading) == 0


def test_a_source_that_changes_between_passes_is_an_error():
    passes = []

    def blocks():
        passes.append(1)
        yield np.arange(10.0 + len(passes))

    with pytest.raises(DataError, match="same rows on every pass"):
        mixfold.optimize(RowBlocks.from_factory(blocks), GaussianEstimator(), progress=False)


def test_errors_name_the_global_row():
    x = gaussian_mixture_rows(1000)
    x[637, 1] = np.nan
    with pytest.raises(DataError, match="row 637, field \\[1\\]"):
        mixfold.optimize(RowBlocks.from_array(x, 100), diag_estimator(), progress=False)
    init = MixtureDistribution([RecordDistribution({
        "age": GaussianDistribution(30.0, 9.0),
        "plan": CategoricalDistribution({"free": 0.5, "pro": 0.5})})] * 2, [0.5, 0.5])
    frame = record_rows(1000)
    with pytest.raises(DataError, match=r"row 950, field \['plan'\]: level 'zeta' is not"):
        mixfold.optimize(RowBlocks.from_array(frame, 300), record_estimator(), init=init,
                         progress=False)


def test_init_and_options():
    x = gaussian_mixture_rows(1000)
    init = mixfold.optimize(x, diag_estimator(), max_iter=2, progress=False)
    memory = mixfold.optimize(x, diag_estimator(), init=init, **OPTIONS)
    stream = mixfold.optimize(RowBlocks.from_array(x, 256), diag_estimator(), init=init,
                              **OPTIONS)
    assert_models_close(stream, memory)
    source = RowBlocks.from_array(x, 256)
    with pytest.raises(ValueError, match="local backend, not 'mp'"):
        mixfold.optimize(source, diag_estimator(), backend="mp")
    with pytest.raises(ValueError, match="row weights are not supported"):
        mixfold.optimize(source, diag_estimator(), weights=np.ones(1000))
    with pytest.raises(DataError, match="no rows"):
        mixfold.optimize(RowBlocks.from_factory(lambda: [np.zeros(0)]), GaussianEstimator())
