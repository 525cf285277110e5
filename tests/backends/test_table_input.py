"""Table input on the engines: Spark DataFrame column types, the CLI on a resident backend."""

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import mixfold
from mixfold.examples.customers import load_customers
from mixfold.io.tables import column_specs, record_spec
from mixfold.spec import estimator_from_spec
from tests.backends.mpirun import run_mpiexec


@pytest.mark.slow
def test_spark_dataframe_column_types_choose_the_same_families(spark_session):
    frame = pd.DataFrame(load_customers())
    frame["member"] = frame["visits"] > 5
    frame["delta"] = frame["visits"] - 4
    sdf = spark_session.createDataFrame(frame.astype({"spend": "float64"}))
    specs = column_specs(sdf)
    assert specs == column_specs(frame) == {
        "age": "gaussian", "plan": "categorical", "visits": "poisson",
        "spend": {"optional": "gaussian"}, "member": "bernoulli", "delta": "gaussian"}
    spec = {"mixture": {"record": {"*": "auto", "spend": {"optional": "log_gaussian"}}},
            "k": 2, "pseudo_count": 1.0}
    on_spark = mixfold.optimize(sdf, estimator_from_spec(spec, specs), backend=spark_session,
                                seed=0, max_iter=20, progress=False)
    local = mixfold.optimize(frame, estimator_from_spec(spec, specs), seed=0, max_iter=20,
                             progress=False)
    np.testing.assert_allclose(on_spark.fit_result.log_likelihood,
                               local.fit_result.log_likelihood, rtol=1e-9)


@pytest.mark.slow
def test_spark_text_and_token_columns_default_to_a_topic_model(spark_session):
    frame = pd.DataFrame({"review": ["a long review of the red apple pie that we ate", None] * 3,
                          "tokens": [["red", "apple"], ["green", "pear", "pie"]] * 3,
                          "plan": ["free", "pro", "team"] * 2})
    specs = column_specs(spark_session.createDataFrame(frame))
    assert specs == column_specs(frame) == {
        "review": {"optional": {"lda": {"n_topics": 10}}}, "tokens": {"lda": {"n_topics": 10}},
        "plan": "categorical"}


@pytest.mark.slow
def test_cli_fit_on_the_mp_backend_equals_local(tmp_path):
    from mixfold.cli import main

    frame = pd.DataFrame(load_customers())
    frame.to_csv(tmp_path / "c.csv", index=False)
    spec = json.dumps({"mixture": record_spec(frame), "k": 3, "pseudo_count": 1.0})
    outs = {}
    for backend in ("local", "mp"):
        args = ["fit", str(tmp_path / "c.csv"), "--model", spec, "--backend", backend,
                "--out", str(tmp_path / f"{backend}.json"), "--no-progress", "--max-iter", "15"]
        if backend == "mp":
            args += ["--workers", "2"]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        outs[backend] = mixfold.load(tmp_path / f"{backend}.json")
    np.testing.assert_allclose(outs["mp"].weights, outs["local"].weights, rtol=1e-9)


@pytest.mark.slow
def test_cli_under_mpiexec_reads_a_share_per_rank_and_equals_local(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = pd.DataFrame(load_customers())
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp_path / "c.parquet",
                   row_group_size=500)
    spec = {"mixture": record_spec(frame), "k": 3, "pseudo_count": 1.0}
    out = run_mpiexec(2, ["-m", "mixfold", "fit", str(tmp_path / "c.parquet"), "--model",
                          json.dumps(spec), "--backend", "mpi", "--max-iter", "20",
                          "--no-progress", "--out", str(tmp_path / "m.json")])
    assert out.count("model written to") == 1  # rank 0 alone reports
    assert "on 3000 rows (mpi, float64)" in out
    local = mixfold.optimize(frame, estimator_from_spec(spec), max_iter=20, progress=False)
    fitted = mixfold.load(tmp_path / "m.json")
    np.testing.assert_allclose(fitted.weights, local.weights, rtol=1e-9)
