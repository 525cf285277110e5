"""Row blocks of one E-step chunk, folded on this process's cores.

A stacked E-step (all K components of a Gaussian mixture at once) streams a (K, rows) block
through scoring, the log-sum-exp and the weighted sums. Cut into blocks of a few thousand rows,
that block stays in a core's cache between those passes, and the blocks are independent: each
returns its own partial statistics, which are added up *in block order*. The result therefore
depends on the block size only, never on the number of threads or on which thread ran which
block: one thread, two threads and a model-parallel worker calling the same kernel get the same
bits.

Blocks run on one pool per process (created on first use, re-created after a fork), with BLAS
held to one thread meanwhile, so that T blocks on T cores do not each start T BLAS threads, and
so that a GEMM's bits do not depend on how many threads BLAS would have split it over. Calls from
any thread but the main one (a model-parallel worker, a Dask worker thread) run their blocks
serially and leave BLAS as their caller set it (one thread, in mixfold's workers): pools never
nest.

>>> import numpy as np
>>> parts = map_row_blocks(10, 4, lambda lo, hi: hi - lo)
>>> parts
[4, 4, 2]
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from typing import Any, Generic, TypeVar

__all__ = ["map_row_blocks", "run_each", "row_threads", "FirstBlockDecision", "blas_threads",
           "HeldThreads", "USER_THREAD_VARS", "one_blas_thread_in_children", "MeasuredThreads"]

_T = TypeVar("_T")
_lock = threading.Lock()
_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # (pid that made it, threads, pool)
_blas: Any = None  # threadpoolctl's controller, found once
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS")


def row_threads() -> int:
    """Threads a kernel may use: ``MIXFOLD_NUM_THREADS``, else ``OMP_NUM_THREADS`` (set to 1 in
    mp, Spark, Dask, Ray and MPI workers), else the cores this process may run on."""
    for name in ("MIXFOLD_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) >= 1:
            return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool[:2] != (os.getpid(), threads):
            _pool = (os.getpid(), threads,
                     ThreadPoolExecutor(threads, thread_name_prefix="mixfold-rows"))
        return _pool[2]


def blas_threads(n: int) -> Any:
    """Hold BLAS to ``n`` threads per call in this process: a context, or a limiter whose
    ``restore_original_limits()`` ends the hold (a no-op context without threadpoolctl)."""
    global _blas
    if _blas is None:  # finding the loaded BLAS libraries takes a few ms: once
        try:
            from threadpoolctl import ThreadpoolController
            _blas = [lib for lib in ThreadpoolController().lib_controllers
                     if lib.user_api == "blas"]
        except ImportError:
            _blas = False
    return _BlasHold(_blas, n) if _blas else nullcontext()


#: Variables by which a user sets a process's threads; when one is set, mixfold keeps it.
USER_THREAD_VARS = ("MIXFOLD_NUM_THREADS", "OMP_NUM_THREADS")


class HeldThreads:
    """This process's row threads (``MIXFOLD_NUM_THREADS``) and BLAS threads held to
    ``threads`` -- an engine worker's share of its node -- until :meth:`release`; nothing is
    held where one of ``kept`` is set (the user's choice stands)."""

    def __init__(self, threads: int, kept: tuple[str, ...] = USER_THREAD_VARS):
        self.threads: int | None = None
        self.limiter: Any = None
        if any(os.environ.get(v, "").isdigit() for v in kept):
            return
        self.threads = threads
        os.environ["MIXFOLD_NUM_THREADS"] = str(threads)
        self.limiter = blas_threads(threads)

    def release(self) -> None:
        """End the hold (idempotent)."""
        if self.threads is None:
            return
        self.threads = None
        os.environ.pop("MIXFOLD_NUM_THREADS", None)
        restore = getattr(self.limiter, "restore_original_limits", None)
        if restore is not None:
            restore()


class _BlasHold:
    """BLAS libraries held to ``n`` threads from construction until
    :meth:`restore_original_limits` (or the end of a ``with`` block). Only a library not at
    ``n`` already is set, and restored: a call or two per fold, where threadpoolctl's limiter
    reads every library's whole description each time."""

    def __init__(self, libraries: Sequence[Any], n: int):
        self._changed = []
        for lib in libraries:
            was = lib.get_num_threads()
            if was is not None and was != n:
                lib.set_num_threads(n)
                self._changed.append((lib, was))

    def restore_original_limits(self) -> None:
        for lib, was in reversed(self._changed):
            lib.set_num_threads(was)
        self._changed = []

    def __enter__(self) -> _BlasHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore_original_limits()


@contextmanager
def one_blas_thread_in_children() -> Iterator[None]:
    """Processes started inside this context run BLAS (and OpenMP, numexpr, numba) on one
    thread: the thread variables they read at start are set to 1, then restored."""
    saved = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: "1" for k in _THREAD_VARS})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def map_row_blocks(n_rows: int, block_rows: int, fold_block: Callable[[int, int], _T]) -> list[_T]:
    """``[fold_block(lo, hi) for each block of rows]`` in block order, blocks run concurrently.

    ``fold_block`` must only write to its own rows of shared outputs; it may use
    :func:`~mixfold.compute.scratch.scratch` buffers (they are per thread).
    """
    bounds = [(lo, min(n_rows, lo + block_rows)) for lo in range(0, n_rows, block_rows)]
    if threading.current_thread() is not threading.main_thread():
        return [fold_block(lo, hi) for lo, hi in bounds]
    with blas_threads(1):  # also serially: BLAS's thread count changes a GEMM's bits
        if min(row_threads(), len(bounds)) <= 1:
            return [fold_block(lo, hi) for lo, hi in bounds]
        threads = min(row_threads(), len(bounds))
        results: list[Any] = [None] * len(bounds)

        next_block = itertools.count()  # next() on it is atomic under the GIL

        def fold_share() -> None:  # take the next block until none is left: a thread that
            # the OS slows down takes fewer blocks instead of holding the others up at the end
            while (i := next(next_block)) < len(bounds):
                results[i] = fold_block(*bounds[i])

        pool = _executor(row_threads() - 1)
        futures = [pool.submit(fold_share) for _ in range(1, threads)]
        fold_share()  # this thread takes blocks too, instead of waiting idle
        for f in futures:
            # a helper the OS has not run yet has no block left to take: not waited for (on a
            # busy machine that wait is a scheduler slice, longer than a small fold)
            if not f.cancel():
                f.result()
        return results


class MeasuredThreads:
    """Whether a call that repeats (a fold per EM iteration) runs its blocks on the row threads
    or all on the calling thread, chosen by what each way has cost per unit of work so far, per
    size class: on a busy machine a helper thread waits a scheduler slice before it runs, and
    one thread wins. The slower way is tried again after ``probe_every`` calls times how much
    slower it was, at most 16 (a change of load is seen; trying costs about 1/``probe_every``).
    The choice never changes the bits: the blocks stay the same.

    >>> choice = MeasuredThreads()
    >>> way = choice.threaded(1000)
    >>> choice.timed(1000, way, lambda: None)
    >>> way, choice.threaded(1000)  # each way is measured once first
    (True, False)
    """

    def __init__(self, probe_every: int = 32) -> None:
        self.probe_every = probe_every
        self._seen: dict[int, dict[bool, list[float]]] = {}  # size class -> way -> [cost, age]

    def threaded(self, work: int) -> bool:
        ways = self._seen.setdefault(work.bit_length(), {})
        for way in (True, False):
            if way not in ways:
                return way
        best = min(ways, key=lambda w: ways[w][0])
        other = ways[not best]
        other[1] += 1
        slower = min(other[0] / max(ways[best][0], 1e-300), 16.0)  # tried again at least once
        return (not best) if other[1] >= self.probe_every * slower else best  # per 512 calls

    def timed(self, work: int, threaded: bool, run: Callable[[], Any]) -> None:
        """``run()``, its cost per unit of ``work`` recorded for the way it ran."""
        start = time.perf_counter()
        run()
        cost = (time.perf_counter() - start) / max(work, 1)
        ways = self._seen.setdefault(work.bit_length(), {})
        old = ways.get(threaded)
        ways[threaded] = [cost if old is None else 0.7 * old[0] + 0.3 * cost, 0]


class FirstBlockDecision(Generic[_T]):
    """A value that the first block of a :func:`map_row_blocks` call decides and the other
    blocks, maybe on other threads, wait for: ``value(lo, decide, arg)`` is ``decide(arg)``
    computed once by the block at row 0. That block calls :meth:`settle` when it ends (also
    when it fails before deciding), so no other block waits for ever; ``decided=True`` fixes
    ``default`` from the start.

    >>> floor = FirstBlockDecision(False)
    >>> map_row_blocks(10, 4, lambda lo, hi: floor.value(lo, lambda a: a > 3, hi - lo))
    [True, True, True]
    """

    __slots__ = ("_value", "_open", "_gate")

    def __init__(self, default: _T, decided: bool = False) -> None:
        self._value = default
        self._open = not decided  # (a plain flag, read without a call once decided)
        # held until settled: a waiting block passes it once released (a lock is a tenth of an
        # Event's cost, and a fold of one block never waits)
        self._gate = threading.Lock()
        if self._open:
            self._gate.acquire()

    def value(self, lo: int, decide: Callable[[Any], _T], arg: Any) -> _T:
        if self._open:
            if lo == 0:
                self._value = decide(arg)  # (written before the flag that publishes it)
                self.settle()
            else:
                with self._gate:
                    pass
        return self._value

    def settle(self) -> None:
        """End the wait, with the default if nothing was decided (the first block failed);
        called again, nothing more (only the first block settles)."""
        if self._open:
            self._open = False
            self._gate.release()


def run_each(calls: Sequence[Callable[[], Any]]) -> None:
    """Run independent calls (each writing only its own outputs) on the row-block pool.

    For work that splits by something other than rows, such as the fields of a record whose
    statistics are added field by field; the same rules hold: BLAS at one thread, serial when
    called from any thread but the main one.

    >>> out = [0, 0, 0]
    >>> run_each([lambda i=i: out.__setitem__(i, i * i) for i in range(3)])
    >>> out
    [0, 1, 4]
    """
    map_row_blocks(len(calls), 1, lambda lo, hi: calls[lo]())
