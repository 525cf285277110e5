"""num_workers is checked wherever it is taken, and capped at the rows and the cores."""

import multiprocessing
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

import mixfold
from mixfold import GaussianEstimator, MixtureEstimator
from mixfold.backends.mp import MPEncodedData
from mixfold.cli import main
from mixfold.dispatch import encode_data

BAD = [-1, 0, 2.5, "2", True, np.bool_(True)]
MESSAGE = "num_workers must be None or an integer >= 1"


def data(n=100):
    return np.random.default_rng(0).normal(size=n)


def est():
    return MixtureEstimator([GaussianEstimator()] * 2)


@pytest.mark.parametrize("backend", ["local", "mp", "model_parallel", "spark", "dask", "ray"])
@pytest.mark.parametrize("value", BAD)
def test_optimize_refuses_a_bad_num_workers_before_starting_anything(backend, value):
    with pytest.raises(ValueError, match=MESSAGE):
        mixfold.optimize(data(), est(), backend=backend, num_workers=value, progress=False)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("value", BAD)
def test_the_backend_handles_refuse_a_bad_num_workers(value):
    enc, _ = encode_data(data(), est())
    with pytest.raises(ValueError, match=MESSAGE):
        MPEncodedData(enc, None, 1000, num_workers=value)
    for module, cls in (("mixfold.backends.dask", "DaskEncodedData"),
                        ("mixfold.backends.ray", "RayEncodedData")):
        handle_class = getattr(pytest.importorskip(module), cls)
        with pytest.raises((ValueError, ImportError), match=f"{MESSAGE}|pip install"):
            handle_class(enc, None, 1000, num_workers=value)
    from mixfold.backends.spark import SparkEncodedData

    with pytest.raises((ValueError, ImportError), match=f"{MESSAGE}|pip install"):
        SparkEncodedData.from_encoded(enc, None, 1000, num_workers=value)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("value", [-1, 2.5, True])
def test_the_sklearn_wrappers_refuse_a_bad_n_workers(value):
    from mixfold.sklearn import GaussianMixture

    with pytest.raises(ValueError, match=MESSAGE):
        GaussianMixture(2, n_workers=value).fit(data().reshape(-1, 1))


@pytest.mark.parametrize("value", ["-1", "2.5", "two", "0"])
def test_the_cli_refuses_a_bad_workers_option(tmp_path, value):
    np.save(tmp_path / "x.npy", data())
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "x.npy"), "--model", '"gaussian"',
                                       "--backend", "mp", "--workers", value,
                                       "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and "--workers" in result.output


def test_a_huge_num_workers_is_capped_at_the_rows_and_the_cores_and_says_so():
    enc, _ = encode_data(data(100), est())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = MPEncodedData(enc, None, 1000, num_workers=10**6)
    try:
        cores = multiprocessing.cpu_count()
        assert len(handle.workers) == min(100, cores)
        said = " ".join(str(w.message) for w in caught)
        assert "num_workers=1000000 is more than the 100 rows: using 100 workers" in said
        if cores < 100:
            assert f"num_workers=100 is more than this machine's {cores} cores" in said
    finally:
        handle.close()
    assert multiprocessing.active_children() == []


def test_the_user_may_insist_on_more_workers_than_cores():
    enc, bound = encode_data(data(100), est())
    wanted = multiprocessing.cpu_count() + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        handle = MPEncodedData(enc, None, 1000, num_workers=wanted, oversubscribe=True)
    try:
        assert len(handle.workers) == wanted
        fitted = mixfold.fit(handle, bound, max_iter=3, progress=False)
    finally:
        handle.close()
    assert fitted.iterations == 3
