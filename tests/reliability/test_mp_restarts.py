"""mp workers that die again while being replaced: every restart path is retried, and a pool
whose restarts are spent ends in the documented RuntimeError with no process left."""

import multiprocessing
import os
import signal
import threading
import time

import numpy as np
import pytest

import mixfold
from mixfold import GaussianEstimator, MixtureEstimator
from mixfold.backends.mp import MPEncodedData
from mixfold.dispatch import encode_data

from .faults import FaultyEstimator, KillOnLoad, KillWorker, arm, fired
from .models import assert_bit_identical

OPTIONS = {"seed": 3, "max_iter": 6, "tol": 0.0, "progress": False}


def rows(n=2000):
    rng = np.random.default_rng(9)
    return np.concatenate([rng.normal(-2.0, 1.0, n // 2), rng.normal(3.0, 0.7, n - n // 2)])


def est():
    return MixtureEstimator([GaussianEstimator()] * 2)


class LoadFaultPool(MPEncodedData):
    """The mp pool with shards that can kill the worker loading them (see KillOnLoad)."""

    def __init__(self, directory, *args, **kwargs):
        self.directory = directory
        super().__init__(*args, **kwargs)

    def shard(self, i):
        shard, weights = super().shard(i)
        return KillOnLoad(shard, self.directory), weights


def pool(directory, estimator, **kwargs):
    enc, bound = encode_data(rows(), estimator)
    return LoadFaultPool(directory, enc, None, 10_000, num_workers=2, **kwargs), bound


def kill_worker(handle, i):
    """SIGKILL worker ``i`` and wait until it is dead (joined: no zombie)."""
    os.kill(handle.pids[i], signal.SIGKILL)
    handle.workers[i].process.join(10)


def assert_no_process_left(pids):
    assert multiprocessing.active_children() == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.fixture(scope="module")
def undisturbed():
    return mixfold.fit(rows(), est(), backend="mp", num_workers=2, **OPTIONS)


def test_a_replacement_that_dies_while_loading_its_shard_is_replaced_again(tmp_path,
                                                                            undisturbed):
    handle, bound = pool(tmp_path, est())
    seen = set(handle.pids)

    def kill_idle_worker(info):  # between iterations: the next send finds a dead pipe
        if info.iteration == 1:
            arm(tmp_path, "load-1")
            arm(tmp_path, "load-2")
            kill_worker(handle, 0)
        seen.update(handle.pids)

    try:
        result = mixfold.fit(handle, bound, callbacks=[kill_idle_worker], **OPTIONS)
        assert handle.restarts == 3 and len(fired(tmp_path)) == 2
    finally:
        handle.close()
    assert result.log_likelihood == undisturbed.log_likelihood
    assert_bit_identical(result.model, undisturbed.model)
    assert_no_process_left(seen)


def test_a_replacement_that_dies_in_its_first_fold_is_replaced_again(tmp_path, undisturbed):
    fault = KillWorker(tmp_path, 1000, os.getpid())  # shard 1 starts at row 1000

    def arm_three(info):  # fire in iteration 3: the worker, then its first two replacements
        if info.iteration == 2:
            for k in range(3):
                arm(tmp_path, f"kill-{k}")

    result = mixfold.fit(rows(), FaultyEstimator(est(), fault), backend="mp", num_workers=2,
                         callbacks=[arm_three], **OPTIONS)
    assert len(fired(tmp_path)) == 3  # the worker and its first two replacements
    assert result.log_likelihood == undisturbed.log_likelihood


def test_when_the_restarts_are_spent_the_error_names_the_worker_and_no_process_is_left(
        tmp_path):
    handle, bound = pool(tmp_path, est())
    seen = set(handle.pids)

    def kill_and_poison(info):
        for k in range(5):
            arm(tmp_path, f"load-{k}")
        seen.update(handle.pids)
        kill_worker(handle, 1)

    with pytest.raises(RuntimeError, match=r"mp worker 1 died; gave up after 3 restarts"):
        mixfold.fit(handle, bound, callbacks=[kill_and_poison], **OPTIONS)
    assert handle.closed and len(fired(tmp_path)) == 3
    assert_no_process_left(seen)


def test_a_loop_killing_every_worker_ends_in_the_documented_error(tmp_path):
    enc, bound = encode_data(rows(), est())
    handle = MPEncodedData(enc, None, 10_000, num_workers=2)
    seen, stop = set(handle.pids), threading.Event()

    def killer():  # bounded: at most 4 s, or until the fit ends
        deadline = time.monotonic() + 4
        while not stop.is_set() and time.monotonic() < deadline:
            for pid in list(handle.pids) if not handle.closed else []:
                seen.add(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        with pytest.raises(RuntimeError, match=r"mp worker \d died; gave up after 3 restarts"):
            mixfold.fit(handle, bound, seed=3, max_iter=10_000, tol=0.0, progress=False)
    finally:
        stop.set()
        thread.join()
        handle.close()
    assert_no_process_left(seen)
