"""Spark's shards resident in long-lived Python tasks (``backends/spark_resident.py``): the fit
equals the other sharded backends' bit for bit, with more shards than slots too; nothing runs or
listens after ``close``; the session's conf turns it off."""

import socket
import warnings
from functools import partial

import numpy as np
import pytest

import mixfold
from mixfold.backends.spark_resident import RESIDENT_CONF, resident_enabled
from mixfold.backends.mp import MPEncodedData
from mixfold.backends.spark import _bad_row_on_task
from mixfold.compute.fold import DEFAULT_CHUNK_ROWS
from mixfold.dispatch import encode_data, open_backend
from mixfold.precision import FLOAT64
from tests.backends.cases import CASES
from tests.reliability.models import assert_bit_identical

pytestmark = pytest.mark.slow


def gmm(**extra):
    rows, est, options = CASES["gmm"]()
    return rows, est, {**options, "progress": False, **extra}


def fitted(backend, num_workers):
    rows, est, options = gmm()
    return mixfold.fit(rows, est, backend=backend, num_workers=num_workers, **options)


def fitted_on_mp(num_workers):
    """The fit on ``num_workers`` mp workers, more than this machine's cores if need be."""
    rows, est, options = gmm()
    enc, bound = encode_data(rows, est)
    handle = MPEncodedData(enc, None, DEFAULT_CHUNK_ROWS, num_workers, oversubscribe=True)
    try:
        return mixfold.fit(handle, bound, **options)
    finally:
        handle.close()


def listening(port):
    """Whether something on this machine accepts connections on ``port`` (the driver's host is
    127.0.0.1 in the test session)."""
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("num_workers", [2, 5])  # 5 shards on 2 slots: 2 tasks hold them
def test_resident_fit_is_bit_identical_to_mp_and_equals_local(spark_session, num_workers):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback to a job per iteration
        on_spark = fitted(spark_session, num_workers)
    on_mp = fitted_on_mp(num_workers)
    local = fitted("local", None)
    assert on_spark.log_likelihood == on_mp.log_likelihood
    assert assert_bit_identical(on_spark.model, on_mp.model) > 0
    np.testing.assert_allclose(on_spark.log_likelihood, local.log_likelihood, rtol=1e-12)
    assert [w.rows for w in on_spark.workers] == [w.rows for w in on_mp.workers]
    assert all(w.seconds_per_iteration > 0 for w in on_spark.workers)


def test_the_stage_runs_on_the_first_fold_and_nothing_is_left_after_close(spark_session):
    rows, est, _ = gmm()
    sc = spark_session.sparkContext
    handle, bound, _ = open_backend(spark_session, rows, est, num_workers=3)
    try:
        handle.init_sample(0)  # before any fold: a Spark job, no stage yet
        assert handle.resident is None
        model = handle.initialize(bound, 0)  # its EM step is the first fold
        stage = handle.resident
        port = stage.port
        # 3 shards on 2 slots: contiguous groups
        assert sorted(t.hello.shards for t in stage.connected) == [(0, 1), (2,)]
        assert sc.statusTracker().getActiveJobsIds() and listening(port)
        handle.estimate(bound, model)
    finally:
        handle.close()
    handle.close()  # idempotent
    assert handle.resident is None and not stage.running()
    assert not stage.thread.is_alive()
    assert sc.statusTracker().getActiveJobsIds() == []
    assert not listening(port)
    assert spark_session.range(4).count() == 4  # the slots are free again


def test_the_sample_and_a_score_go_through_the_running_stage(spark_session):
    rows, est, _ = gmm()
    handle, bound, _ = open_backend(spark_session, rows, est, num_workers=2)
    try:
        model = handle.estimate(bound, handle.initialize(bound, 0))[0]
        sample = handle.init_sample(1)  # a job now would wait for the stage's slots forever
        n, ll = handle.log_density_sum(model)
    finally:
        handle.close()
    local, local_bound, _ = open_backend("local", rows, est)
    try:
        expected = local.init_sample(1)
        assert local.log_density_sum(model) == pytest.approx((n, ll), rel=1e-13)
    finally:
        local.close()
    assert sample[0].n_rows == expected[0].n_rows
    assert sample[1].tolist() == expected[1].tolist()


def test_the_sessions_conf_turns_resident_shards_off(spark_session):
    rows, est, _ = gmm()
    spark_session.conf.set(RESIDENT_CONF, "false")
    try:
        assert not resident_enabled(spark_session)
        handle, bound, _ = open_backend(spark_session, rows, est, num_workers=2)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # off by choice: no warning
            handle.estimate(bound, handle.initialize(bound, 0))
        assert handle.resident is None and handle.resident_off == ""
        handle.close()
    finally:
        spark_session.conf.unset(RESIDENT_CONF)
    assert resident_enabled(spark_session)


def test_a_session_with_dynamic_allocation_folds_by_jobs_with_one_warning(spark_session):
    rows, est, _ = gmm()
    conf = spark_session.sparkContext._conf  # the running context's own conf, read per fit
    conf.set("spark.dynamicAllocation.enabled", "true")
    try:
        with pytest.warns(RuntimeWarning, match="dynamic allocation is on") as caught:
            on_jobs = fitted(spark_session, 2)
    finally:
        conf.set("spark.dynamicAllocation.enabled", "false")
    assert len([w for w in caught if "not resident" in str(w.message)]) == 1
    on_mp = fitted_on_mp(2)
    np.testing.assert_allclose(on_jobs.log_likelihood, on_mp.log_likelihood, rtol=1e-13)


def test_an_error_in_a_fold_is_raised_as_it_is_and_the_stage_still_answers(spark_session):
    rows, est, _ = gmm()
    handle, bound, _ = open_backend(spark_session, rows, est, num_workers=2)
    try:
        model = handle.initialize(bound, 0)
        with pytest.raises(TypeError, match="precision must be resolved"):  # in each task
            handle.resident.call(partial(_bad_row_on_task, model, 100), {0: "float64",
                                                                         1: "float64"})
        assert handle.resident.call(partial(_bad_row_on_task, model, 100),
                                    {0: FLOAT64, 1: FLOAT64}) == {0: None, 1: None}
    finally:
        handle.close()
