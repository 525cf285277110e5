"""Real faults injected into the E-step of one shard, on the worker that folds it.

:class:`FaultyEstimator` is any estimator with a fault hook in its accumulator's ``seq_update``:
the statistics, their payload and the M-step are the inner estimator's, so a fit that survives
the fault must end in exactly the model of an undisturbed fit. A fault fires once per *armed*
marker file (``arm``): the first worker that claims a marker (an atomic rename) carries it out.
"""

import os
import signal
from pathlib import Path

from mixfold.families._protocol import Accumulator, AccumulatorFactory, Estimator


def arm(directory, name):
    """Arm one fault: the next matching fold that claims it fires."""
    Path(directory, f"armed-{name}").touch()


def fired(directory):
    """The markers of the faults that fired, as 'fired-<pid>-<name>' names."""
    return sorted(p.name for p in Path(directory).glob("fired-*"))


def _claim(directory, pattern="*"):
    for marker in sorted(Path(directory).glob(f"armed-{pattern}")):
        try:
            marker.rename(marker.with_name(f"fired-{os.getpid()}-{marker.name[6:]}"))
        except FileNotFoundError:  # another worker claimed it first
            continue
        return True
    return False


class KillWorker:
    """SIGKILL the process folding the shard that starts at row ``shard_start`` (not the driver)."""

    def __init__(self, directory, shard_start, driver_pid):
        self.directory, self.shard_start, self.driver_pid = str(directory), shard_start, driver_pid

    def fire(self, enc):
        if os.getpid() != self.driver_pid and enc.start == self.shard_start \
                and _claim(self.directory):
            os.kill(os.getpid(), signal.SIGKILL)


class FailTaskAttempt:
    """Raise in the first attempt (attemptNumber 0) of Spark task ``partition``; log attempts."""

    def __init__(self, directory, partition):
        self.directory, self.partition = str(directory), partition

    def fire(self, enc):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None or ctx.partitionId() != self.partition:
            return
        attempt = ctx.attemptNumber()
        with open(Path(self.directory, "attempts.log"), "a") as log:
            log.write(f"{ctx.stageId()} {attempt}\n")
        if attempt == 0 and _claim(self.directory):
            raise RuntimeError(f"injected failure of attempt 0 of partition {self.partition}")


class FaultyAccumulator(Accumulator):
    def __init__(self, inner, fault):
        self.inner, self.fault = inner, fault

    def children(self):
        return (self.inner,)

    def seq_update(self, enc, weights, model, precision="float64"):
        self.fault.fire(enc)
        return self.inner.seq_update(enc, weights, model, precision)

    def seq_initialize(self, enc, weights, rng):
        self.inner.seq_initialize(enc, weights, rng)


class FaultyEstimator(Estimator):
    """``inner`` with ``fault.fire(encoded_chunk)`` called before each E-step chunk."""

    def __init__(self, inner, fault):
        self.inner, self.fault = inner, fault

    def accumulator_factory(self):
        make = self.inner.accumulator_factory().make
        return AccumulatorFactory(lambda: FaultyAccumulator(make(), self.fault))

    def estimate(self, nobs, stats):
        _, (inner_stats,) = stats
        return self.inner.estimate(nobs, inner_stats)

    def encoder(self):
        return self.inner.encoder()

    def bind(self, encoder):
        return FaultyEstimator(self.inner.bind(encoder), self.fault)

    def initial_guess(self, sample, weights, rng):
        return self.inner.initial_guess(sample, weights, rng)


def _shard_or_die(shard, directory):
    if _claim(directory, "load-*"):
        os.kill(os.getpid(), signal.SIGKILL)
    return shard


class KillOnLoad:
    """A shard that SIGKILLs the worker unpickling it (loading its shard) when a ``load-*``
    marker is armed; otherwise it unpickles as the shard itself."""

    def __init__(self, shard, directory):
        self.shard, self.directory = shard, str(directory)

    def __reduce__(self):
        return (_shard_or_die, (self.shard, self.directory))
