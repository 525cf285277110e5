"""Worker faults: a real kill (mp) or a failing task attempt (Spark) leaves the model unchanged.

The faults fire inside the E-step of one shard, on the worker folding it (see faults.py); the
undisturbed fit runs on the same backend with the same layout, so the models must be equal bit
for bit.
"""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import mixfold
from mixfold import GaussianEstimator, MixtureEstimator

from .faults import FailTaskAttempt, FaultyEstimator, KillWorker, arm, fired
from .models import assert_bit_identical

ROOT = Path(__file__).parents[2]


def gmm_rows(n=3000):
    rng = np.random.default_rng(9)
    return np.concatenate([rng.normal(-2.0, 1.0, n // 2), rng.normal(3.0, 0.7, n - n // 2)])


def gmm_est():
    return MixtureEstimator([GaussianEstimator()] * 2)


OPTIONS = {"seed": 3, "max_iter": 12, "tol": 0.0, "progress": False}


def arm_at(directory, iterations, name="kill"):
    """A callback arming one fault after each of ``iterations`` (it fires in the next one)."""
    def callback(info):
        if info.iteration in iterations:
            arm(directory, f"{name}-{info.iteration}")
    return callback


@pytest.mark.slow
def test_mp_workers_killed_mid_iteration_are_restarted_and_the_model_is_unchanged(tmp_path):
    x = gmm_rows()
    undisturbed = mixfold.fit(x, gmm_est(), backend="mp", num_workers=2, **OPTIONS)
    second_shard_start = 1500  # shard_bounds(3000, 2): rows [0, 1500) and [1500, 3000)
    fault = KillWorker(tmp_path, second_shard_start, os.getpid())
    disturbed = mixfold.fit(x, FaultyEstimator(gmm_est(), fault), backend="mp", num_workers=2,
                            callbacks=[arm_at(tmp_path, {1, 4, 8})], **OPTIONS)
    kills = fired(tmp_path)
    assert len(kills) == 3  # three workers SIGKILLed inside iterations 2, 5 and 9
    for name in kills:  # each killed process is gone
        with pytest.raises(ProcessLookupError):
            os.kill(int(name.split("-")[1]), 0)
    assert disturbed.log_likelihood == undisturbed.log_likelihood
    assert assert_bit_identical(disturbed.model, undisturbed.model) == 5


@pytest.mark.slow
def test_mp_gives_up_with_a_clear_error_after_max_restarts(tmp_path):
    fault = KillWorker(tmp_path, 1500, os.getpid())
    for i in range(4):
        arm(tmp_path, f"kill-{i}")
    with pytest.raises(RuntimeError, match="gave up after 3 restarts"):
        mixfold.fit(gmm_rows(), FaultyEstimator(gmm_est(), fault), backend="mp", num_workers=2,
                    **OPTIONS)
    assert len(fired(tmp_path)) == 4


@pytest.fixture(scope="module")
def retrying_spark(tmp_path_factory):
    """A Spark session that retries failed tasks: the session-wide one when it is running (it is
    made by ``local_spark_session``, as here), else one of our own, stopped afterwards. Workers
    get this package as a zip, so they can unpickle the fault-injecting estimator."""
    pytest.importorskip("pyspark")
    from pyspark import SparkContext

    from mixfold.backends.spark import local_spark_session, stop_spark_session

    owned = SparkContext._active_spark_context is None
    session = local_spark_session(2)
    master = session.sparkContext.master
    if "," not in master:
        pytest.skip(f"the running Spark session ({master}) does not retry failed tasks")
    bundle = tmp_path_factory.mktemp("pyfiles") / "reliability_tests.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        for rel in ("tests/__init__.py", "tests/reliability/__init__.py",
                    "tests/reliability/faults.py"):
            zf.write(ROOT / rel, rel)
    session.sparkContext.addPyFile(str(bundle))
    yield session
    if owned:
        stop_spark_session(session)


@pytest.fixture
def spark_job_per_iteration(retrying_spark):
    """The retrying session with resident shards off: each fold is a Spark job, whose failed
    task attempts Spark itself retries (a resident task's error is the fit's, as on mp)."""
    from mixfold.backends.spark_resident import RESIDENT_CONF

    retrying_spark.conf.set(RESIDENT_CONF, "false")
    yield retrying_spark
    retrying_spark.conf.unset(RESIDENT_CONF)


@pytest.mark.slow
def test_spark_retries_a_failed_task_attempt_and_the_model_is_unchanged(
        tmp_path, spark_job_per_iteration):
    x = gmm_rows()
    session = spark_job_per_iteration
    undisturbed = mixfold.fit(x, gmm_est(), backend=session, num_workers=2, **OPTIONS)
    fault = FailTaskAttempt(tmp_path, partition=1)
    disturbed = mixfold.fit(x, FaultyEstimator(gmm_est(), fault), backend=session,
                            num_workers=2, callbacks=[arm_at(tmp_path, {0, 3, 6}, "fail")],
                            **OPTIONS)
    assert len(fired(tmp_path)) == 3
    attempts = [line.split() for line in (tmp_path / "attempts.log").read_text().splitlines()]
    retried = {stage for stage, attempt in attempts if attempt == "1"}
    assert len(retried) == 3  # each failed attempt 0 was followed by a successful attempt 1
    assert disturbed.log_likelihood == undisturbed.log_likelihood
    assert assert_bit_identical(disturbed.model, undisturbed.model) == 5


@pytest.mark.slow
def test_spark_resident_workers_killed_mid_iteration_restart_the_stage_unchanged(
        tmp_path, retrying_spark):
    x = gmm_rows()
    undisturbed = mixfold.fit(x, gmm_est(), backend=retrying_spark, num_workers=2, **OPTIONS)
    fault = KillWorker(tmp_path, 1500, os.getpid())  # the worker holding the second shard
    disturbed = mixfold.fit(x, FaultyEstimator(gmm_est(), fault), backend=retrying_spark,
                            num_workers=2, callbacks=[arm_at(tmp_path, {1, 5})], **OPTIONS)
    kills = fired(tmp_path)
    assert len(kills) == 2  # SIGKILLed inside iterations 2 and 6, each redone on a new stage
    for name in kills:
        with pytest.raises(ProcessLookupError):
            os.kill(int(name.split("-")[1]), 0)
    assert disturbed.log_likelihood == undisturbed.log_likelihood
    assert assert_bit_identical(disturbed.model, undisturbed.model) == 5
    assert retrying_spark.sparkContext.statusTracker().getActiveJobsIds() == []


@pytest.mark.slow
def test_spark_resident_gives_up_with_a_clear_error_after_max_restarts(tmp_path,
                                                                      retrying_spark):
    fault = KillWorker(tmp_path, 1500, os.getpid())
    for i in range(5):
        arm(tmp_path, f"kill-{i}")
    with pytest.raises(RuntimeError, match=r"gave up after 3 restarts of the resident stage "
                                           r"in fold 1 .*\(partition 1"):
        mixfold.fit(gmm_rows(), FaultyEstimator(gmm_est(), fault), backend=retrying_spark,
                    num_workers=2, **OPTIONS)
    assert len(fired(tmp_path)) == 4
    assert retrying_spark.sparkContext.statusTracker().getActiveJobsIds() == []


@pytest.mark.slow
def test_spark_session_without_task_retries_says_to_enable_them(tmp_path):
    """A user's ``local[2]`` session, in a process of its own (one SparkContext per process)."""
    pytest.importorskip("pyspark")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    out = subprocess.run([sys.executable, str(ROOT / "tests/reliability/spark_no_retries.py"),
                          str(tmp_path)], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    lines = out.stdout.splitlines()
    assert "retries: False" in lines, out.stdout + out.stderr
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert len(errors) == 1, out.stdout + out.stderr
    assert "does not retry failed tasks" in errors[0] and "local[2,4]" in errors[0]
    assert "fold 1 of this fit" in errors[0] and "spark.task.maxFailures" in errors[0]
    assert len(fired(tmp_path)) == 1  # the worker was killed once, inside the first fold


@pytest.mark.slow
def test_retries_are_read_from_the_session(retrying_spark):
    from mixfold.backends.spark import retries_failed_tasks

    assert retries_failed_tasks(retrying_spark.sparkContext)
