"""Dask collections and Ray datasets encoded on their workers (backends/_partitions.py): the
same fit as the local backend on the same rows, a driver whose memory does not grow with the
data, and a worker lost mid-fit recovered with the same result."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import mixfold
from mixfold.backends._partitions import row_starts
from mixfold.errors import DataError
from mixfold.spec import estimator_from_spec
from tests.backends.cases import CASES
from tests.backends.test_backends import close

SPEC = {"mixture": {"record": {"a": "gaussian", "k": {"optional": "poisson"},
                               "s": {"optional": "categorical"}, "c": "categorical"}}, "k": 2}
OPTIONS = {"seed": 1, "max_iter": 10, "tol": 0.0}


@pytest.fixture(scope="module")
def parquet_folder(tmp_path_factory):
    """Three Parquet files of a float, a nullable integer, a nullable string and a
    categorical column; the string level "rare" only in the last file."""
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 3000
    z = rng.random(n) < 0.4
    frame = pd.DataFrame({
        "a": np.where(z, rng.normal(-2, 1, n), rng.normal(2, 1, n)),
        "k": pd.array(np.where(rng.random(n) < 0.1, None, rng.poisson(3 + 3 * z, n)),
                      dtype="Int64"),
        "s": pd.Series(np.where(z, "u", rng.choice(["v", "w"], n))).astype("string"),
        "c": pd.Categorical(np.where(z, "x", "y"))})
    frame.loc[5, "s"] = None
    frame.loc[n - 3:, "s"] = "rare"
    folder = tmp_path_factory.mktemp("parquet")
    for i in range(3):
        frame.iloc[i * 1000:(i + 1) * 1000].to_parquet(folder / f"part{i}.parquet")
    return folder


def local_fit(parquet_folder):
    import pyarrow.parquet as pq

    table = pq.read_table(parquet_folder)
    return mixfold.fit(table, estimator_from_spec(SPEC), progress=False, **OPTIONS)


def test_row_starts_are_prefix_sums_per_node_and_skip_empty_partitions():
    starts, bounds, total = row_starts([([2, 5], 2.0), None, ([3, 1], 3.0)])
    assert starts == [[0, 0], None, [2, 5]]
    assert bounds == [(0, 2), (2, 2), (2, 5)] and total == 5.0
    with pytest.raises(DataError, match="no rows"):
        row_starts([None, None])


@pytest.mark.slow
def test_dask_dataframe_from_parquet_is_encoded_on_the_workers(dask_client, parquet_folder):
    import dask.dataframe as dd

    frame = dd.read_parquet(parquet_folder)
    assert frame.npartitions == 3
    res = mixfold.fit(frame, estimator_from_spec(SPEC), backend=dask_client, progress=False,
                      **OPTIONS)
    local = local_fit(parquet_folder)
    assert res.backend == "dask"
    close(res.model.to_dict(), local.model.to_dict())
    assert "rare" in res.model.to_dict()["components"][0]["fields"]["s"]["inner"]["levels"]
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)


@pytest.mark.slow
def test_dask_array_is_encoded_block_by_block(dask_client):
    import dask.array as da

    x, est, options = CASES["missing_entries"]()
    blocks = da.from_array(x, chunks=(700, 2))  # rows in 5 blocks, columns split in two
    local = mixfold.fit(x, est, progress=False, **options)
    res = mixfold.fit(blocks, est, backend=dask_client, progress=False, **options)
    close(res.model.to_dict(), local.model.to_dict())
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)


@pytest.mark.slow
def test_dask_dataframe_with_a_weight_column_and_a_series(dask_client):
    import dask.dataframe as dd
    import pandas as pd

    rng = np.random.default_rng(3)
    x, w = rng.normal(1.0, 2.0, 900), rng.uniform(0, 3, 900)
    frame = dd.from_pandas(pd.DataFrame({"x": x, "w": w}), npartitions=4)
    est = mixfold.RecordEstimator({"x": mixfold.GaussianEstimator()})
    m = mixfold.optimize(frame, est, backend=dask_client, weights="w", progress=False)
    assert m.fields["x"].mu == pytest.approx(np.average(x, weights=w), rel=1e-12)
    series = mixfold.optimize(frame["x"], mixfold.GaussianEstimator(), backend=dask_client,
                              progress=False)
    assert series.mu == pytest.approx(x.mean(), rel=1e-12)
    with pytest.raises(ValueError, match="on the dask backend"):
        mixfold.optimize(frame, est, backend="local", progress=False)
    with pytest.raises(ValueError, match="name one of its columns"):
        mixfold.optimize(frame, est, backend=dask_client, weights=w, progress=False)


@pytest.mark.slow
def test_ray_dataset_from_parquet_is_encoded_in_ray_tasks(ray_started, parquet_folder):
    import ray.data

    dataset = ray.data.read_parquet(str(parquet_folder))
    res = mixfold.fit(dataset, estimator_from_spec(SPEC), backend="ray", progress=False,
                      **OPTIONS)
    local = local_fit(parquet_folder)
    assert res.backend == "ray"
    close(res.model.to_dict(), local.model.to_dict())
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)


def _slow_if_first(batch):
    """Holds back the block that starts at row 0 (its ``a`` is the marker -100)."""
    if batch["a"].iloc[0] == -100.0:
        time.sleep(1.5)
    return batch


@pytest.mark.slow
def test_ray_dataset_whose_first_block_finishes_last_keeps_its_row_order(ray_started):
    """Ray hands blocks back as their tasks finish; the seeded start reads rows by position,
    so the fit must see the dataset's own order."""
    import pandas as pd
    import ray.data

    rng = np.random.default_rng(4)
    x = np.concatenate([[-100.0], rng.normal(-3, 1, 299), rng.normal(3, 1, 900)])
    frames = [pd.DataFrame({"a": x[i:i + 300]}) for i in range(0, 1200, 300)]
    dataset = ray.data.from_pandas(frames).map_batches(_slow_if_first, batch_format="pandas",
                                                        batch_size=None)
    est = mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 2)
    options = {"seed": 3, "max_iter": 5, "tol": 0.0, "progress": False}
    res = mixfold.fit(dataset, est, backend="ray", **options)
    local = mixfold.fit(pd.DataFrame({"a": x}), est, **options)
    close(res.model.to_dict(), local.model.to_dict())
    assert dataset.context.execution_options.preserve_order is False  # the user's left as set


# ------------------------------------------------------------------------------------------
# The driver's memory


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_growth(fit) -> int:
    """The driver's peak resident memory above its level before ``fit()``, sampled every 20 ms."""
    base, peak, done = _rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.02)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        fit()
    finally:
        done.set()
        watcher.join()
    return max(peak[0], _rss()) - base


def _gaussian_partition(seed: int, rows: int):
    import pandas as pd

    rng = np.random.default_rng(seed)
    z = rng.random(rows) < 0.5
    return pd.DataFrame({"a": np.where(z, rng.normal(-2, 1, rows), rng.normal(2, 1, rows)),
                         "b": rng.normal(0, 1, rows), "c": rng.normal(5, 2, rows)})


SMALL, LARGE = 50_000, 1_000_000  # rows; the large data is 24 MB of floats
GROWTH_MARGIN = 16 * 2**20  # 2/3 of the large data: its encoding alone in the driver exceeds it
MEMORY_EST = {"mixture": {"record": {"a": "gaussian", "b": "gaussian", "c": "gaussian"}},
              "k": 2}


def _dask_frame(rows: int):
    import dask.dataframe as dd

    return dd.from_map(_gaussian_partition, range(8), rows=rows // 8)


def _ray_dataset(rows: int):
    import ray.data

    def generate(batch):
        return _gaussian_partition(int(batch["id"][0]), rows // 8)

    return ray.data.range(8, override_num_blocks=8).map_batches(generate, batch_size=1,
                                                                batch_format="pandas")


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dask", "ray"], indirect=True)
def test_the_drivers_memory_does_not_grow_with_the_data(engine):
    make = _dask_frame if engine != "ray" else _ray_dataset
    backend = engine if engine != "ray" else "ray"

    def fit(rows):
        return lambda: mixfold.fit(make(rows), estimator_from_spec(MEMORY_EST), backend=backend,
                                   progress=False, max_iter=3, tol=0.0)

    fit(SMALL)()  # engines warm: first-call imports and task definitions are not data
    small, large = peak_rss_growth(fit(SMALL)), peak_rss_growth(fit(LARGE))
    assert large - small < GROWTH_MARGIN, (small, large)


# ------------------------------------------------------------------------------------------
# A bad row, named by its index in the whole data


def _partitioned(engine, frame, parts: int):
    if engine == "ray":
        import ray.data

        step = -(-len(frame) // parts)
        return ray.data.from_pandas([frame.iloc[i:i + step] for i in range(0, len(frame), step)])
    import dask.dataframe as dd

    return dd.from_pandas(frame, npartitions=parts)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["dask", "ray"], indirect=True)
def test_a_bad_row_is_named_by_its_row_in_the_data(engine):
    import pandas as pd

    rng = np.random.default_rng(7)
    x = rng.normal(size=300)
    x[250] = np.nan  # in the third of three partitions
    labels = rng.choice(["a", "b"], 300).astype(object)
    labels[170] = None  # a missing level: the second partition's vocabulary fails
    est = mixfold.RecordEstimator({"x": mixfold.GaussianEstimator()})
    backend = engine if engine != "ray" else "ray"
    with pytest.raises(DataError) as err:
        mixfold.fit(_partitioned(engine, pd.DataFrame({"x": x}), 3), est, backend=backend,
                    progress=False)
    assert (err.value.row, err.value.path) == (250, ("x",))
    assert "finite" in str(err.value)
    both = mixfold.RecordEstimator({"x": mixfold.GaussianEstimator(),
                                    "c": mixfold.CategoricalEstimator()})
    with pytest.raises(DataError) as err:
        mixfold.fit(_partitioned(engine, pd.DataFrame({"x": np.nan_to_num(x), "c": labels}), 3),
                    both, backend=backend, progress=False)
    assert (err.value.row, err.value.path) == (170, ("c",))


# ------------------------------------------------------------------------------------------
# A lost worker


def _kill_a_dask_worker_at(client, iteration: int, killed: list):
    pids = client.run(os.getpid)

    def kill(info):
        if info.iteration == iteration and not killed:
            address, pid = sorted(pids.items())[-1]
            os.kill(pid, signal.SIGKILL)
            killed.append(address)

    return kill


@pytest.mark.slow
def test_dask_worker_killed_mid_fit_its_scattered_shard_is_resent(dask_client):
    rows, est, options = CASES["gmm"]()
    undisturbed = mixfold.fit(rows, est, progress=False, **options)
    killed: list = []
    res = mixfold.fit(rows, est, backend=dask_client, num_workers=2, progress=False,
                      callbacks=[_kill_a_dask_worker_at(dask_client, 3, killed)], **options)
    assert killed
    close(res.model.to_dict(), undisturbed.model.to_dict())
    dask_client.wait_for_workers(2, timeout=300)  # the nanny restarts it (slowly under load)


@pytest.mark.slow
def test_dask_worker_killed_mid_fit_its_partition_is_encoded_again(dask_client,
                                                                    parquet_folder):
    import dask.dataframe as dd

    killed: list = []
    res = mixfold.fit(dd.read_parquet(parquet_folder), estimator_from_spec(SPEC),
                      backend=dask_client, progress=False,
                      callbacks=[_kill_a_dask_worker_at(dask_client, 3, killed)], **OPTIONS)
    assert killed
    close(res.model.to_dict(), local_fit(parquet_folder).model.to_dict())
    dask_client.wait_for_workers(2, timeout=300)  # the nanny restarts it (slowly under load)


@pytest.mark.slow
def test_ray_workers_killed_mid_fit_the_dataset_fit_is_unchanged(ray_started, parquet_folder):
    import ray.data

    from tests.backends.conftest import _cmdline, child_processes

    killed: list = []

    def kill_ray_workers(info):
        if info.iteration == 3 and not killed:
            for pid in child_processes(os.getpid()):
                if _cmdline(pid).strip() == "ray::IDLE":  # task workers, not Ray's agents
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

    res = mixfold.fit(ray.data.read_parquet(str(parquet_folder)), estimator_from_spec(SPEC),
                      backend="ray", progress=False, callbacks=[kill_ray_workers], **OPTIONS)
    assert killed
    close(res.model.to_dict(), local_fit(parquet_folder).model.to_dict())
