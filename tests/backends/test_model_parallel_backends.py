"""ModelParallelEstimator composed with every data backend, on the real engines, equals local."""

import json

import numpy as np
import pytest

import mixfold
from mixfold.parallel.model_parallel import ModelParallelEstimator
from tests.backends.cases import CASES
from tests.backends.test_backends import ROOT, close, fit_case
from tests.backends.mpirun import run_mpiexec


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["mp", "spark", "dask", "ray"], indirect=True)
@pytest.mark.parametrize("case", ["gmm", "records", "lda"])
def test_model_parallel_estimator_on_every_data_backend_equals_local(engine, case):
    rows, est, options = CASES[case]()
    local = mixfold.fit(rows, est, progress=False, **options)
    res = mixfold.fit(rows, ModelParallelEstimator(est, num_workers=2), backend=engine,
                      num_workers=2, progress=False, **options)
    # an LDA cut's normaliser over topics is a sum of the ranges' sums: equal to rounding
    close(res.model.to_dict(), local.model.to_dict(), rtol=1e-12)
    np.testing.assert_allclose(res.log_likelihood, local.log_likelihood, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["gmm", "lda"])
def test_model_parallel_estimator_under_mpi_equals_local(tmp_path, case):
    out = tmp_path / "mpi.json"
    run_mpiexec(2, ["-m", "mpi4py", str(ROOT / "tests/backends/mpi_fit.py"), str(out), "2",
                    f"{case}_model_parallel"])
    got = json.loads(out.read_text())
    local = fit_case(case)
    close(got["final"], local.model.to_dict(), rtol=1e-12)
    np.testing.assert_allclose(got["trace"], local.log_likelihood, rtol=1e-12)
