"""Checkpoint and resume: a fit killed at iteration k and resumed equals the uninterrupted fit."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mixfold
from mixfold import (
    CategoricalEstimator,
    CheckpointError,
    GaussianEstimator,
    MixtureEstimator,
    PoissonEstimator,
    RecordEstimator,
)
from mixfold.checkpoint import _checksum, read_checkpoint

from .models import assert_bit_identical

CHILD = Path(__file__).with_name("checkpoint_child.py")
ROOT = Path(__file__).parents[2]


def gmm_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-3, 1, n // 3), rng.normal(0, 0.5, n // 3),
                           rng.normal(4, 1.5, n - 2 * (n // 3))])


def est3():
    return MixtureEstimator([GaussianEstimator()] * 3)


def record_rows():
    rng = np.random.default_rng(2)
    return [{"x": float(rng.normal(3 * (i % 2), 1)), "c": "ab"[i % 2] if i % 7 else "c",
             "n": int(rng.poisson(2 + 5 * (i % 2)))} for i in range(400)]


def record_est():
    return MixtureEstimator([RecordEstimator({"x": GaussianEstimator(), "c": CategoricalEstimator(),
                                              "n": PoissonEstimator()})] * 2, pseudo_count=1.0)


def resign(path, doc):
    """Write a crafted checkpoint with the checksum of its new contents."""
    doc["checksum"] = _checksum(doc)
    path.write_text(json.dumps(doc))


def stop_after(k):
    return lambda info: info.iteration == k


@pytest.mark.parametrize("data, make", [(gmm_data(), est3), (record_rows(), record_est)])
def test_stopped_and_resumed_equals_uninterrupted(tmp_path, data, make):
    whole = mixfold.fit(data, make(), seed=1, max_iter=30, tol=0.0, progress=False)
    path = tmp_path / "fit.ckpt.json"
    first = mixfold.fit(data, make(), seed=1, max_iter=30, tol=0.0, progress=False,
                        checkpoint=path, callbacks=[stop_after(6)])
    assert first.stop_reason == "callback" and first.iterations == 7
    saved = read_checkpoint(path)
    assert saved.iterations == 7 and saved.model == first.model and not saved.finished
    resumed = mixfold.fit(data, make(), seed=1, max_iter=30, tol=0.0, progress=False,
                          checkpoint=path)
    assert resumed.iterations == whole.iterations == 30
    assert resumed.log_likelihood == whole.log_likelihood  # every value, bit for bit
    assert assert_bit_identical(resumed.model, whole.model) > 0
    assert read_checkpoint(path).iterations == 30


def test_a_finished_fit_resumes_to_the_same_result_without_iterating(tmp_path):
    path = tmp_path / "fit.json"
    done = mixfold.fit(gmm_data(), est3(), progress=False, checkpoint=path)
    assert done.converged and read_checkpoint(path).stop_reason == "converged"
    calls = []
    again = mixfold.fit(gmm_data(), est3(), progress=False, checkpoint=path,
                        callbacks=[calls.append])
    assert calls == [] and again.converged and again.iterations == done.iterations
    assert again.model == done.model and again.log_likelihood == done.log_likelihood


def test_raising_max_iter_continues_where_the_fit_stopped(tmp_path):
    path = tmp_path / "fit.json"
    short = mixfold.fit(gmm_data(), est3(), max_iter=4, tol=0.0, progress=False, checkpoint=path)
    assert short.stop_reason == "max_iter" and short.iterations == 4
    longer = mixfold.fit(gmm_data(), est3(), max_iter=9, tol=0.0, progress=False, checkpoint=path)
    whole = mixfold.fit(gmm_data(), est3(), max_iter=9, tol=0.0, progress=False)
    assert longer.iterations == 9 and longer.log_likelihood == whole.log_likelihood
    assert_bit_identical(longer.model, whole.model)


def test_the_file_is_json_replaced_atomically(tmp_path):
    path = tmp_path / "fit.json"
    seen = []
    mixfold.fit(gmm_data(), est3(), max_iter=5, tol=0.0, progress=False, checkpoint=path,
                callbacks=[lambda info: seen.append(json.loads(path.read_text())["iterations"])])
    assert seen == [1, 2, 3, 4, 5]
    assert sorted(os.listdir(tmp_path)) == ["fit.json"]  # no temporary file left behind
    doc = json.loads(path.read_text())
    assert doc["format"] == "mixfold-checkpoint" and doc["model"]["format"] == "mixfold-model"
    assert set(doc["fingerprint"]) == {"rows", "total_weight", "estimator", "sample", "data"}


def test_resuming_against_other_input_is_refused(tmp_path):
    path = tmp_path / "fit.json"
    x = gmm_data()
    mixfold.fit(x, est3(), max_iter=3, tol=0.0, progress=False, checkpoint=path)
    changed = x.copy()
    changed[-1] += 1e-9  # one row, slightly
    with pytest.raises(CheckpointError, match="the data differs"):
        mixfold.fit(changed, est3(), progress=False, checkpoint=path)
    with pytest.raises(CheckpointError, match="the number of rows differs"):
        mixfold.fit(x[:-1], est3(), progress=False, checkpoint=path)
    with pytest.raises(CheckpointError, match="the total row weight differs"):
        mixfold.fit(x, est3(), progress=False, checkpoint=path, weights=np.full(x.size, 2.0))
    with pytest.raises(CheckpointError, match="the estimator differs"):
        mixfold.fit(x, MixtureEstimator([GaussianEstimator(reg_covar=1e-3)] * 3),
                    progress=False, checkpoint=path)
    with pytest.raises(CheckpointError, match="seed=0, this fit has seed=5"):
        mixfold.fit(x, est3(), seed=5, progress=False, checkpoint=path)
    assert read_checkpoint(path).iterations == 3  # the refused fits left it alone


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ('{"format": "mixfold-model", "version": 1, "model": {}}', "not a mixfold checkpoint"),
    ('{"format": "mixfold-checkpoint", "version": 7}', "unsupported checkpoint version 7"),
    ('{"format": "mixfold-checkpoint", "version": 2, "iterations": 2}', "malformed checkpoint"),
    ('{"format": "mixfold-checkpoint", "version": 1, "iterations": 2}', "older mixfold"),
])
def test_a_corrupt_checkpoint_is_refused(tmp_path, text, message):
    path = tmp_path / "fit.json"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=message):
        mixfold.fit(gmm_data(), est3(), progress=False, checkpoint=path)


def test_a_crafted_model_in_a_checkpoint_is_refused(tmp_path):
    path = tmp_path / "fit.json"
    mixfold.fit(gmm_data(), est3(), max_iter=2, tol=0.0, progress=False, checkpoint=path)
    doc = json.loads(path.read_text())
    doc["model"]["model"]["components"][0]["__reduce__"] = ["os.system", ["echo"]]
    resign(path, doc)  # a crafted file carries a matching checksum: the schema still holds
    with pytest.raises(CheckpointError, match="unknown field '__reduce__'"):
        mixfold.fit(gmm_data(), est3(), progress=False, checkpoint=path)


def test_bad_checkpoint_option_is_refused_up_front():
    with pytest.raises(ValueError, match="checkpoint must be None or a file path, got 3"):
        mixfold.fit(gmm_data(), est3(), checkpoint=3)


# ---------------------------------------------------------------------------------------------
# A real process, killed with SIGKILL after iteration k, then resumed by a new process


def run_child(*args, kill=False):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, str(CHILD), *map(str, args)]
    if not kill:
        subprocess.run(cmd, check=True, env=env, timeout=300)
        return None
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc


def load_output(path):
    out = json.loads(Path(path).read_text())
    return mixfold.Distribution.from_dict(out["model"]), out


@pytest.mark.slow
@pytest.mark.parametrize("case, kill_at", [("records", 7), ("full_gmm", 4)])
def test_a_killed_process_resumes_bit_identically(tmp_path, case, kill_at):
    ckpt = tmp_path / "fit.ckpt.json"
    run_child(case, ckpt, tmp_path / "unused.json", kill_at, kill=True)
    assert read_checkpoint(ckpt).iterations == kill_at + 1  # what the killed process left
    run_child(case, ckpt, tmp_path / "resumed.json")
    run_child(case, "-", tmp_path / "whole.json")
    resumed, r = load_output(tmp_path / "resumed.json")
    whole, w = load_output(tmp_path / "whole.json")
    assert r["iterations"] == w["iterations"] == 25
    assert r["log_likelihood"] == w["log_likelihood"]
    assert assert_bit_identical(resumed, whole) >= 7  # every parameter array of the model


# ---------------------------------------------------------------------------------------------
# A checkpoint is validated like a model file, carries a checksum and must fit the estimator


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "fit.json"
    mixfold.fit(gmm_data(), est3(), max_iter=3, tol=0.0, progress=False, checkpoint=path)
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("change, message", [
    (lambda d: d["log_likelihood"].__setitem__(-1, "nan"),
     r"field log_likelihood must be a list of numbers, got \[.*'nan'\]"),
    (lambda d: d["log_likelihood"].__setitem__(-1, True), "field log_likelihood must be"),
    (lambda d: d.__setitem__("stop_reason", {"a": 1}),
     r"field stop_reason must be null or one of 'converged', 'decrease', got \{'a': 1\}"),
    (lambda d: d.__setitem__("stop_reason", "callback"), "field stop_reason must be"),
    (lambda d: d.__setitem__("exec", "import os"), "unknown field 'exec'"),
    (lambda d: d["fingerprint"].__setitem__("extra", 1), "unknown field fingerprint.'extra'"),
    (lambda d: d["fingerprint"].__setitem__("rows", "600"), "field fingerprint.rows must be"),
    (lambda d: d.__setitem__("iterations", 2.0), "field iterations must be an integer >= 0"),
    (lambda d: d.__setitem__("seed", True), "field seed must be an integer >= 0"),
    (lambda d: d.__setitem__("warnings", [1]), "field warnings must be a list of strings"),
    (lambda d: d["seconds"].__setitem__(0, -1.0), "field seconds must be a list of numbers >= 0"),
    (lambda d: d.__setitem__("version", True), "unsupported checkpoint version True"),
    (lambda d: d.pop("checksum"), "field checksum is missing"),
])
def test_mistyped_and_unknown_fields_are_refused(saved, change, message):
    path, doc = saved
    change(doc)
    resign(path, doc) if "checksum" in doc else path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match=message):
        mixfold.fit(gmm_data(), est3(), max_iter=6, tol=0.0, progress=False, checkpoint=path)


def test_one_altered_number_fails_the_checksum(saved):
    path, doc = saved
    doc["model"]["model"]["components"][0]["mu"] = 123.0
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="the checksum does not match the contents"):
        mixfold.fit(gmm_data(), est3(), max_iter=6, tol=0.0, progress=False, checkpoint=path)


@pytest.mark.parametrize("change, message", [
    (lambda m: {"format": "mixfold-model", "version": 1,
                "model": {"family": "Gaussian", "mu": 0.0, "sigma2": 1.0}},
     r"at model: a Gaussian where the estimator has a Mixture"),
    (lambda m: {**m, "model": {**m["model"], "weights": [0.25] * 4,
                               "components": m["model"]["components"] + [
                                   m["model"]["components"][0]]}},
     r"at model\['(components|weights)'\]: 4 items, the estimator has 3"),
    (lambda m: {**m, "model": {**m["model"], "components": [
        {"family": "Poisson", "lam": 1.0}] + m["model"]["components"][1:]}},
     r"at model\['components'\]\[0\]: a Poisson where the estimator has a Gaussian"),
])
def test_a_model_that_does_not_fit_the_estimator_is_refused_naming_the_difference(
        saved, change, message):
    path, doc = saved
    doc["model"] = change(doc["model"])
    resign(path, doc)
    with pytest.raises(CheckpointError, match="does not fit this estimator: " + message):
        mixfold.fit(gmm_data(), est3(), max_iter=6, tol=0.0, progress=False, checkpoint=path)


def test_a_record_checkpoint_fits_its_own_estimator(tmp_path):
    path = tmp_path / "fit.json"
    first = mixfold.fit(record_rows(), record_est(), max_iter=2, tol=0.0, progress=False,
                        checkpoint=path)
    more = mixfold.fit(record_rows(), record_est(), max_iter=4, tol=0.0, progress=False,
                       checkpoint=path)
    assert more.iterations == 4 and more.log_likelihood[:2] == first.log_likelihood


def test_a_checkpoint_in_a_missing_folder_fails_before_any_work(tmp_path):
    seen = []
    with pytest.raises(FileNotFoundError, match="the folder .*nope.* does not exist"):
        mixfold.fit(gmm_data(), est3(), progress=False, callbacks=[seen.append],
                    checkpoint=tmp_path / "nope" / "fit.json")
    assert seen == []
    with pytest.raises(IsADirectoryError, match="is a folder"):
        mixfold.fit(gmm_data(), est3(), progress=False, checkpoint=tmp_path)


def test_resuming_with_a_smaller_max_iter_stops_at_once_and_says_so(tmp_path):
    path = tmp_path / "fit.json"
    mixfold.fit(gmm_data(), est3(), max_iter=6, tol=0.0, progress=False, checkpoint=path)
    calls = []
    with pytest.warns(UserWarning, match="holds 6 iterations, more than max_iter=4"):
        again = mixfold.fit(gmm_data(), est3(), max_iter=4, tol=0.0, progress=False,
                            checkpoint=path, callbacks=[calls.append])
    assert calls == [] and again.iterations == 6
    assert again.stop_reason == "checkpoint_past_max_iter"
    assert any("more than max_iter=4" in w for w in again.warnings)
    assert read_checkpoint(path).iterations == 6  # left as it was
    same = mixfold.fit(gmm_data(), est3(), max_iter=6, tol=0.0, progress=False, checkpoint=path)
    assert same.stop_reason == "max_iter" and same.iterations == 6
