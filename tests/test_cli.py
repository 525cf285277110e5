"""The command line, run in-process (click's CliRunner) and as ``python -m mixfold``."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import mixfold
from mixfold.cli import main
from mixfold.examples.customers import load_customers
from mixfold.io.tables import record_spec
from mixfold.spec import estimator_from_spec

SPEC = {"mixture": {"record": {"*": "auto", "spend": {"optional": "log_gaussian"}}}, "k": 3,
        "pseudo_count": 1.0}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    frame = pd.DataFrame(load_customers())
    frame.to_csv(root / "customers.csv", index=False)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                   root / "customers.parquet", row_group_size=500)
    (root / "spec.json").write_text(json.dumps(SPEC))
    rng = np.random.default_rng(0)
    np.save(root / "points.npy", np.vstack([rng.normal(0, 1, (200, 2)),
                                            rng.normal(5, 1, (200, 2))]))
    return root, frame


def run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result


def test_spec_prints_the_default_record(files):
    root, _ = files
    out = run("spec", root / "customers.csv", "--k", 3)
    assert out.exit_code == 0
    assert json.loads(out.stdout) == {
        "mixture": {"record": {"age": "gaussian", "plan": "categorical", "visits": "poisson",
                               "spend": {"optional": "gaussian"}}},
        "k": 3, "pseudo_count": 1.0}


def test_spec_gives_a_topic_model_to_a_parquet_text_column(tmp_path):
    frame = pd.DataFrame({"review": ["a long review of the red apple pie that we ate"] * 6,
                          "plan": ["free", "pro"] * 3})
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                   tmp_path / "reviews.parquet", row_group_size=3)
    out = run("spec", tmp_path / "reviews.parquet")
    assert out.exit_code == 0
    assert json.loads(out.stdout) == {"record": {"review": {"lda": {"n_topics": 10}},
                                                 "plan": "categorical"}}


def test_fit_parquet_writes_the_model_and_the_trace(files, tmp_path):
    root, frame = files
    out_path = tmp_path / "model.json"
    out = run("fit", root / "customers.parquet", "--model", root / "spec.json", "--out",
              out_path, "--seed", 2, "--tol", 1e-8, "--no-progress")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["iteration", "mean", "log-likelihood", "change", "seconds"]
    trace = [float(line.split()[1]) for line in lines[1:-1]]
    assert all(b >= a - 1e-12 for a, b in zip(trace, trace[1:]))  # EM never goes down
    assert lines[-1].startswith("converged after ") and "(stream, float64)" in lines[-1]
    assert out.stderr == ""
    fitted = mixfold.load(out_path)
    columns = {n: node for n, node in record_spec(frame)["record"].items()}
    same = mixfold.optimize(frame, estimator_from_spec(SPEC, columns), seed=2, tol=1e-8,
                            progress=False)
    assert trace == pytest.approx(same.fit_result.log_likelihood, rel=1e-9)
    np.testing.assert_allclose(fitted.weights, same.weights, rtol=1e-7)


def test_fit_progress_bar_goes_to_stderr(files, tmp_path):
    root, _ = files
    out = run("fit", root / "points.npy", "--model", '{"mixture": "diagonal_gaussian", "k": 2}',
              "--out", tmp_path / "m.json", "--progress", "--max-iter", 5)
    assert out.exit_code == 0, out.output
    assert "EM" in out.stderr and "EM" not in out.stdout
    model = mixfold.load(tmp_path / "m.json")
    assert sorted(round(c.mu[0]) for c in model.components) == [0, 5]


def test_score_equals_the_model_density(files, tmp_path):
    root, frame = files
    model_path = tmp_path / "model.json"
    run("fit", root / "customers.csv", "--model", root / "spec.json", "--out", model_path,
        "--no-progress")
    per_row = tmp_path / "rows.txt"
    out = run("score", model_path, root / "customers.parquet", "--per-row", per_row)
    assert out.exit_code == 0, out.output
    model = mixfold.load(model_path)
    expected = model.seq_log_density(model.encoder().encode(frame))
    np.testing.assert_allclose(np.loadtxt(per_row), expected, rtol=1e-12)
    words = out.stdout.split()
    assert words[:2] == ["rows", "3000"]
    assert float(words[4]) == pytest.approx(expected.sum(), rel=1e-9)


def test_sample_prints_json_rows(files, tmp_path):
    root, _ = files
    model_path = tmp_path / "model.json"
    run("fit", root / "customers.csv", "--model", root / "spec.json", "--out", model_path,
        "--no-progress")
    out = run("sample", model_path, "-n", 5, "--seed", 3)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(rows) == 5 and all(set(r) == {"age", "plan", "visits", "spend"} for r in rows)
    again = run("sample", model_path, "-n", 5, "--seed", 3)
    assert again.stdout == out.stdout
    hmm = mixfold.HiddenMarkovDistribution([mixfold.GaussianDistribution(-1, 1),
                                            mixfold.GaussianDistribution(1, 1)],
                                           [0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]])
    mixfold.save(hmm, tmp_path / "hmm.json")
    seqs = run("sample", tmp_path / "hmm.json", "-n", 3, "--length", 7, "--seed", 0)
    assert [len(json.loads(line)) for line in seqs.stdout.splitlines()] == [7, 7, 7]


@pytest.mark.parametrize("args, message", [
    (["fit", "{root}/absent.csv", "--model", "{root}/spec.json"],
     "no such file or folder: '{root}/absent.csv'"),
    (["fit", "{root}/customers.csv", "--model", '{"mixture": "gaussian"'],
     "the inline spec is not valid JSON"),
    (["fit", "{root}/customers.csv", "--model", '{"mixture": {"record": {"agee": "gaussian"}}}'],
     "spec $.mixture.record.agee: unknown column 'agee'"),
    (["fit", "{root}/customers.csv", "--model", '{"mixture": "gausian", "k": 2}'],
     "unknown kind 'gausian' (did you mean 'gaussian'?)"),
    (["fit", "{root}/customers.csv", "--model",
      '{"mixture": {"record": {"age": "gaussian", "plan": "poisson"}}, "k": 2}'],
     "row 0, field ['plan']: expected an integer >= 0, got 'free'"),
    (["fit", "{root}/bad.parquet", "--model", "{root}/spec.json"], "Parquet"),
    (["fit", "{root}/customers.csv", "--model", "{root}/absent.yaml"], "no such spec file"),
    (["score", "{root}/spec.json", "{root}/customers.csv"], "not a mixfold model file"),
    (["score", "{root}/absent.json", "{root}/customers.csv"], "no such model file"),
])
def test_bad_input_gives_one_line_and_status_1(files, args, message):
    root, _ = files
    (root / "bad.parquet").write_text("not parquet")
    args = [a.replace("{root}", str(root)) for a in args]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 1
    assert out.exception is None or isinstance(out.exception, SystemExit)
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("mixfold: error: ")
    assert message.replace("{root}", str(root)) in err


def test_python_dash_m_runs_the_cli_without_a_traceback(files):
    root, _ = files
    ok = subprocess.run([sys.executable, "-m", "mixfold", "--help"], capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0 and "fit" in ok.stdout and "plan" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "mixfold", "fit", str(root / "absent.csv"),
                          "--model", "gaussian"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == f"mixfold: error: no such file or folder: " \
                                 f"'{root / 'absent.csv'}'"


def test_plan_without_the_planner_names_the_module(files, tmp_path):
    import importlib.util

    from mixfold.parallel.resources import DeviceSpec, Resources

    if importlib.util.find_spec("mixfold.parallel.model_decomposition") is not None:
        pytest.skip("the planner is installed; test_plan_prints_both_plans covers it")
    root, _ = files
    resources = Resources((DeviceSpec("cpu:0"),))
    (tmp_path / "r.json").write_text(resources.to_json())
    out = CliRunner().invoke(main, ["plan", "--model", str(root / "spec.json"), "--resources",
                                    str(tmp_path / "r.json")])
    assert out.exit_code == 1
    assert out.stderr.strip() == ("mixfold: error: planning needs the module "
                                  "mixfold.parallel.model_decomposition, which this mixfold "
                                  "does not have")


def test_plan_prints_both_plans(files, tmp_path):
    pytest.importorskip("mixfold.parallel.model_decomposition")
    pytest.importorskip("mixfold.parallel.heterogeneous")
    from mixfold.parallel.resources import DeviceSpec, Resources

    root, _ = files
    resources = Resources((DeviceSpec("cpu:0", throughput=1.0),
                           DeviceSpec("cpu:1", throughput=1.0),
                           DeviceSpec("gpu:0", kind="gpu", throughput=6.0,
                                      precisions=("float16", "float32", "float64"))))
    (tmp_path / "r.json").write_text(resources.to_json())
    out = run("plan", "--model", root / "spec.json", "--resources", tmp_path / "r.json",
              "--data", root / "customers.parquet")
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert "model decomposition for 3000 rows on 3 devices" in text
    assert "heterogeneous plan" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines()
            if line.split() and line.split()[0] in ("cpu:0", "cpu:1", "gpu:0")}
    assert set(rows) == {"cpu:0", "cpu:1", "gpu:0"}
    assert sum(int(r[1]) for r in rows.values()) == 3000
    assert int(rows["gpu:0"][1]) > int(rows["cpu:0"][1])
    if __import__("importlib").util.find_spec("matplotlib") is not None:
        png = tmp_path / "timeline.png"
        drawn = run("plan", "--model", root / "spec.json", "--resources", tmp_path / "r.json",
                    "--data", root / "customers.csv", "--plot", png)
        assert drawn.exit_code == 0, drawn.output
        assert "model decomposition for 3000 rows" in drawn.stdout  # a CSV's rows are counted
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_plan_needs_sizes_the_spec_leaves_open(files, tmp_path):
    pytest.importorskip("mixfold.parallel.model_decomposition")
    pytest.importorskip("mixfold.parallel.heterogeneous")
    from mixfold.parallel.resources import DeviceSpec, Resources

    (tmp_path / "r.json").write_text(Resources((DeviceSpec("cpu:0"),)).to_json())
    out = CliRunner().invoke(main, ["plan", "--model", '{"mixture": "categorical", "k": 2}',
                                    "--resources", str(tmp_path / "r.json")])
    assert out.exit_code == 1
    assert "the spec leaves a size open" in out.stderr and "give --data" in out.stderr
    sized = run("plan", "--model", '{"mixture": {"categorical": {"levels": ["a", "b"]}}, "k": 2}',
                "--resources", tmp_path / "r.json", "--rows", 500)
    assert sized.exit_code == 0, sized.output
    assert "model decomposition for 500 rows on 1 devices" in sized.stdout


@pytest.fixture(scope="module")
def fitted(files, tmp_path_factory):
    root, frame = files
    model_path = tmp_path_factory.mktemp("fitted") / "model.json"
    out = run("fit", root / "customers.csv", "--model", root / "spec.json", "--out", model_path,
              "--seed", 1, "--no-progress")
    assert out.exit_code == 0, out.output
    return model_path, mixfold.load(model_path)


def test_predict_writes_the_most_likely_component_of_each_row(files, fitted, tmp_path):
    root, frame = files
    model_path, model = fitted
    expected = model.predict(frame)
    for data in ("customers.csv", "customers.parquet"):
        done = subprocess.run([sys.executable, "-m", "mixfold", "predict", str(model_path),
                               str(root / data)], capture_output=True, text=True, check=True)
        lines = done.stdout.splitlines()
        assert lines[0] == "component" and [int(v) for v in lines[1:]] == expected.tolist()
    out = run("predict", model_path, root / "customers.parquet", "--proba", "--out",
              tmp_path / "p.jsonl")
    assert out.exit_code == 0, out.output
    proba = [json.loads(line)["proba"] for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    np.testing.assert_allclose(proba, model.seq_posterior(frame), rtol=1e-12)
    out = run("predict", model_path, root / "customers.csv", "--proba", "--out", "-")
    table = pd.read_csv(__import__("io").StringIO(out.stdout))
    assert list(table.columns) == ["p0", "p1", "p2"]
    np.testing.assert_allclose(table.to_numpy(), model.seq_posterior(frame), rtol=1e-12)


def test_predict_names_a_bad_row(files, fitted, tmp_path):
    root, frame = files
    model_path, _ = fitted
    bad = frame.copy()
    bad.loc[3, "plan"] = "platinum"
    bad.to_csv(tmp_path / "bad.csv", index=False)
    out = run("predict", model_path, tmp_path / "bad.csv")
    assert out.exit_code == 1 and "row 3" in out.stderr and "platinum" in out.stderr


def test_fit_init_warm_starts_from_a_model(files, fitted, tmp_path):
    root, _ = files
    model_path, model = fitted
    out = run("fit", root / "customers.csv", "--model", root / "spec.json", "--init", model_path,
              "--max-iter", 0, "--out", tmp_path / "again.json", "--no-progress")
    assert out.exit_code == 0, out.output
    assert mixfold.load(tmp_path / "again.json") == model


def test_sample_of_a_sequence_model_asks_for_length(tmp_path):
    hmm = mixfold.HiddenMarkovDistribution([mixfold.GaussianDistribution(0, 1),
                                            mixfold.GaussianDistribution(5, 1)], [0.5, 0.5],
                                           [[0.9, 0.1], [0.1, 0.9]])
    mixfold.save(hmm, tmp_path / "hmm.json")
    out = run("sample", tmp_path / "hmm.json", "-n", 2)
    assert out.exit_code == 1 and "pass --length L" in out.stderr
    out = run("sample", tmp_path / "hmm.json", "-n", 2, "--length", 4, "--seed", 0)
    assert [len(json.loads(line)) for line in out.stdout.split("\n") if line] == [4, 4]


def test_fit_prints_each_warning_once(tmp_path):
    np.save(tmp_path / "two.npy", np.r_[np.zeros(50), np.ones(50)])
    done = subprocess.run([sys.executable, "-m", "mixfold", "fit", str(tmp_path / "two.npy"),
                           "--model", '{"mixture": "gaussian", "k": 3}', "--out",
                           str(tmp_path / "m.json"), "--no-progress"], capture_output=True,
                          text=True, check=True)
    lines = [line for line in done.stderr.splitlines() if "DegenerateFit" in line or
             "warning:" in line]
    assert lines and all(line.startswith("warning: ") for line in lines)
    assert len(lines) == len(set(lines)) and "fit.py" not in done.stderr


def test_a_bad_cell_in_a_numeric_csv_column_is_named(tmp_path):
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).frame.drop(columns="target")
    frame["sepal width (cm)"] = frame["sepal width (cm)"].astype(object)
    frame.loc[4, "sepal width (cm)"] = "abc"
    frame.to_csv(tmp_path / "iris.csv", index=False)
    out = run("spec", tmp_path / "iris.csv")
    assert out.exit_code == 1
    assert "column 'sepal width (cm)' is mostly numbers but 1 row(s) are not: row 4 ('abc')" \
        in out.stderr
    out = run("fit", tmp_path / "iris.csv", "--model", '{"record": {"*": "gaussian"}}',
              "--out", tmp_path / "m.json", "--no-progress")
    assert out.exit_code == 1
    assert "row 4, field ['sepal width (cm)']: expected a finite number, got 'abc'" in out.stderr


def test_an_empty_csv_is_named(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    out = run("spec", tmp_path / "empty.csv")
    assert out.exit_code == 1 and "empty.csv': the CSV file is empty" in out.stderr


def test_score_and_predict_with_unknown_values_as_missing(files, fitted, tmp_path):
    from mixfold.families.composite import records_log_densities

    root, frame = files
    model_path, model = fitted
    new = frame.head(5).copy()
    new.loc[1, "plan"] = "platinum"  # a level the fit never saw
    new.to_csv(tmp_path / "new.csv", index=False)
    assert run("score", model_path, tmp_path / "new.csv").exit_code == 1
    out = run("score", model_path, tmp_path / "new.csv", "--unknown", "missing",
              "--per-row", "-")
    assert out.exit_code == 0, out.output
    scores = np.array(out.stdout.split(), dtype=float)
    parts = np.log(model.weights) + records_log_densities(model.components, new)
    np.testing.assert_allclose(scores, np.log(np.exp(parts).sum(axis=1)), rtol=1e-12)
    # the row without the unseen level scores as it does without the policy
    np.testing.assert_allclose(scores[[0, 2, 3, 4]],
                               model.seq_log_density(new.drop(index=1)), rtol=1e-12)
    out = run("predict", model_path, tmp_path / "new.csv", "--unknown", "missing")
    assert out.exit_code == 0 and len(out.stdout.splitlines()) == 6


def test_select_reports_bic_per_k_as_scikit_learn(tmp_path):
    from sklearn.datasets import load_iris
    from sklearn.mixture import GaussianMixture

    X = load_iris().data
    np.save(tmp_path / "iris.npy", X)
    out = run("select", tmp_path / "iris.npy", "--model",
              '{"mixture": "multivariate_gaussian", "k": 2}', "--k", "1-3", "--max-iter", 500)
    assert out.exit_code == 0, out.output
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    assert [int(r[0]) for r in rows] == [1, 2, 3]
    assert [int(r[2]) for r in rows] == [(k - 1) + 4 * k + 10 * k for k in (1, 2, 3)]
    # one component has a closed form: the BIC equals scikit-learn's
    ref = GaussianMixture(1, reg_covar=1e-6).fit(X).bic(X)
    assert float(rows[0][3]) == pytest.approx(ref, rel=1e-5)
    assert sum("<- lowest BIC" in line for line in out.stdout.splitlines()) == 1


# --- what the CLI writes, it reads back; a closed pipe is not an error

def test_the_json_lines_sample_and_predict_write_are_read_back(files, tmp_path):
    root, _ = files
    model = tmp_path / "m.json"
    assert run("fit", root / "customers.csv", "--model", root / "spec.json", "--out",
               model).exit_code == 0
    drawn = run("sample", model, "-n", "300", "--seed", "1")
    (tmp_path / "s.jsonl").write_text(drawn.output)
    scored = run("score", model, tmp_path / "s.jsonl")
    assert scored.exit_code == 0, scored.output
    rows = pd.DataFrame([json.loads(line) for line in drawn.output.splitlines()])
    fitted = mixfold.load(model)
    expected = fitted.seq_log_density(fitted.encoder().encode(rows)).sum()
    assert f"rows 300  total log-likelihood {expected:.10g}" in scored.output
    out = tmp_path / "p.jsonl"
    assert run("predict", model, tmp_path / "s.jsonl", "--proba", "--out", out).exit_code == 0
    proba = [json.loads(line)["proba"] for line in out.read_text().splitlines()]
    np.testing.assert_allclose(proba, fitted.seq_posterior(fitted.encoder().encode(rows)))
    refit = run("fit", tmp_path / "s.jsonl", "--model", root / "spec.json", "--out",
                tmp_path / "refit.json")
    assert refit.exit_code == 0 and (tmp_path / "refit.json").is_file()


def test_a_reader_that_leaves_early_is_no_error(files, tmp_path):
    root, _ = files
    model = tmp_path / "m.json"
    run("fit", root / "customers.csv", "--model", root / "spec.json", "--out", model)
    shell = (f"{sys.executable} -m mixfold sample {model} -n 200000 | head -1; "
             f"echo status ${{PIPESTATUS[0]}}")
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=300)
    assert "Broken pipe" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.splitlines()[1] == "status 141" and json.loads(done.stdout.splitlines()[0])


def test_init_of_another_structure_is_one_line(files, tmp_path):
    root, _ = files
    model = tmp_path / "m3.json"
    run("fit", root / "customers.csv", "--model", root / "spec.json", "--out", model)
    two = dict(SPEC, k=2)
    result = run("fit", root / "customers.csv", "--model", json.dumps(two), "--init", model,
                 "--out", tmp_path / "m2.json")
    assert result.exit_code == 1 and not (tmp_path / "m2.json").exists()
    assert result.output.strip() == ("mixfold: error: init does not have the structure of the "
                                     "model being fitted: at model['weights']: 3 items, the "
                                     "fitted model has 2")
