"""Spark shards resident in long-lived Python tasks, driven over a socket from the driver.

A Spark job per iteration pays for launching tasks and for copying every cached shard from the
JVM into the Python workers, every iteration. A :class:`ResidentStage` instead runs one barrier
stage for the whole fit: one task per slot (gang-scheduled, so a cluster without enough slots
fails up front instead of deadlocking), each reading its partitions' shards once and keeping
them in its Python worker. The tasks connect back to a TCP server in the driver (bound to the
driver's host, on an ephemeral port), authenticate with a random token, and then answer
requests: a function and one argument per shard they hold, answered with one result per shard
-- so the driver reduces per-shard results in shard order whatever the slot count.

Frames are length-prefixed pickles; nothing is unpickled from a peer before it has sent the
token. Every socket has a timeout: a task whose worker dies, or a stage that fails, surfaces as
:class:`LostTask` (the caller restarts the stage or gives up), never as a hang.
"""

from __future__ import annotations

import hmac
import os
import pickle
import secrets
import selectors
import socket
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from mixfold.backends.mpi import threads_per_rank
from mixfold.compute.row_blocks import HeldThreads

__all__ = ["ResidentStage", "LostTask", "StageUnavailable", "RESIDENT_CONF", "resident_enabled",
           "task_slots", "first_error_line"]

#: The Spark conf key (``spark.conf.set(RESIDENT_CONF, "false")``) that turns resident shards
#: off: every iteration is then a Spark job of its own.
RESIDENT_CONF = "mixfold.spark.resident"

TOKEN_BYTES = 32
#: Seconds for every task to read its shards and connect (a busy cluster may queue the stage).
CONNECT_SECONDS = 300.0
#: Seconds a request may take before its task is taken for lost (a hung worker, a lost host).
REPLY_SECONDS = 1800.0
#: Seconds a task waits for the driver's next request: a driver gone silent ends the stage.
IDLE_SECONDS = 3600.0
#: Seconds one frame's bytes may take once the first has arrived.
FRAME_SECONDS = 60.0
#: Seconds the stage's thread may take to end after the stop message (then it is cancelled).
JOIN_SECONDS = 30.0
#: How often the driver, waiting, checks that the stage still runs.
POLL_SECONDS = 0.5

_HEADER = struct.Struct("!Q")


class LostTask(Exception):
    """A resident task that stopped answering: its worker died, its stage failed or timed out."""

    def __init__(self, executor: str, reason: str):
        super().__init__(f"the resident task on executor {executor} was lost: {reason}")
        self.executor, self.reason = executor, reason


class StageUnavailable(Exception):
    """The cluster cannot run the resident stage (the message says why)."""


def resident_enabled(session: Any) -> bool:
    """Whether ``session`` (a SparkSession or SparkContext) folds on resident shards: yes unless
    its conf sets :data:`RESIDENT_CONF` to ``false``."""
    conf = getattr(session, "conf", None)
    value = conf.get(RESIDENT_CONF, "true") if conf is not None else \
        session.getConf().get(RESIDENT_CONF, "true")
    return str(value).strip().lower() not in ("false", "0", "no", "off")


def task_slots(sc: Any) -> int:
    """Tasks ``sc`` can run at once (the scheduler's own count for the default resource
    profile; ``defaultParallelism`` where that internal call is not there)."""
    try:
        jsc = sc._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return max(1, int(jsc.maxNumConcurrentTasks(profile)))
    except Exception:  # noqa: BLE001 - an internal API: fall back to the public count
        return max(1, int(sc.defaultParallelism))


def first_error_line(err: BaseException) -> str:
    """A Java exception's message, first line only (the whole is a 9 KB stack trace)."""
    java = getattr(err, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(err)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:400]


def _send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_HEADER.pack(len(data)) + data)  # one write: no wait on the peer's ACK


def _no_delay(sock: socket.socket) -> socket.socket:
    """``sock`` sending each frame at once (Nagle's wait for an ACK costs ~40 ms a frame)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    parts, left = [], n
    while left:
        part = sock.recv(min(left, 1 << 20))
        if not part:
            raise EOFError("the peer closed the connection")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _recv_frame(sock: socket.socket) -> bytes:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    return _recv_exact(sock, size)


class _Hello(NamedTuple):
    """A task's first frame: where it runs and which shards it holds."""

    partition: int
    executor: str
    pid: int
    shards: tuple[int, ...]


def _task_threads(context: Any) -> HeldThreads:
    """This task's BLAS and row threads held to its host's cores shared by the stage's tasks
    on that host (the rule of every engine's workers), unless the user set
    ``MIXFOLD_NUM_THREADS`` (not ``OMP_NUM_THREADS``: PySpark sets it in every Python worker to
    the task's cpus)."""
    infos = context.getTaskInfos()
    host = infos[context.partitionId()].address.rpartition(":")[0]
    return HeldThreads(threads_per_rank(sum(i.address.rpartition(":")[0] == host
                                            for i in infos)), kept=("MIXFOLD_NUM_THREADS",))


class _TaskLoop:
    """The barrier task: read this task's shards, connect to the driver, answer its requests
    until the stop message (``None``), an idle timeout or the driver's end."""

    def __init__(self, address: tuple[str, int], token: bytes):
        self.address, self.token = address, token

    def __call__(self, elements: Iterator[Any]) -> Iterator[int]:
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        shards = sorted(elements, key=lambda s: s[0])
        hold = _task_threads(context)
        try:
            self._serve(context, shards)
        finally:
            hold.release()
        yield context.partitionId()

    def _serve(self, context: Any, shards: list[tuple]) -> None:
        executor = context.getTaskInfos()[context.partitionId()].address
        hello = _Hello(context.partitionId(), executor, os.getpid(),
                       tuple(int(s[0]) for s in shards))
        with _no_delay(socket.create_connection(self.address, timeout=FRAME_SECONDS)) as sock:
            sock.sendall(self.token)
            _send_frame(sock, pickle.dumps(hello, pickle.HIGHEST_PROTOCOL))
            while True:
                sock.settimeout(IDLE_SECONDS)
                request = _recv_frame(sock)
                sock.settimeout(FRAME_SECONDS)
                if not request:  # the stop message
                    return
                _send_frame(sock, _answer(pickle.loads(request), shards))


def _answer(request: tuple[Callable, dict[int, Any]], shards: list[tuple]) -> bytes:
    """("ok", [(shard, fn(shard, rows, weights, its argument))...]) for the shards the request
    names, or ("error", the exception) -- an error in a fold is the fit's, not a lost task."""
    fn, args = request
    try:
        reply = ("ok", [(i, fn(i, enc, w, args[i])) for i, enc, w in shards if i in args])
        return pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
    except Exception as err:  # noqa: BLE001 - handed to the driver, which raises it
        try:
            return pickle.dumps(("error", err), pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            return pickle.dumps(("error", RuntimeError(repr(err))), pickle.HIGHEST_PROTOCOL)


class _Task(NamedTuple):
    sock: socket.socket
    hello: _Hello


class ResidentStage:
    """One barrier stage over ``rdd`` (elements ``(shard, rows, weights)``, at most one per
    partition) holding its shards in ``tasks`` long-lived Python tasks, which connect to
    ``host`` (the driver as the executors reach it).

    :meth:`start` launches it and waits until every task holds its shards and has connected;
    :meth:`call` runs a function on every shard; :meth:`stop` ends the stage (idempotent).
    """

    def __init__(self, sc: Any, rdd: Any, tasks: int, host: str, bind: str | None = None):
        self.sc, self.rdd, self.tasks, self.host = sc, rdd, int(tasks), host
        #: the address the server listens on (the driver's bind address, as Spark's own
        #: services: in a container it differs from the host the tasks reach)
        self.bind = bind or host
        self.group = f"mixfold-resident-{secrets.token_hex(8)}"
        self.token = secrets.token_bytes(TOKEN_BYTES)
        self.server: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.connected: list[_Task] = []

    @property
    def port(self) -> int | None:
        """The driver's listening port while the stage runs."""
        return None if self.server is None else self.server.getsockname()[1]

    def start(self) -> None:
        """Launch the stage and wait for every task; :class:`StageUnavailable` if it cannot
        run (the stage is stopped first)."""
        self.server = socket.create_server((self.bind, 0))
        self.server.settimeout(POLL_SECONDS)
        try:
            stage = self._grouped().barrier().mapPartitions(
                _TaskLoop((self.host, self.port), self.token))
            self.thread = threading.Thread(target=self._collect, args=(stage,),
                                           name="mixfold-resident-stage", daemon=True)
            self.thread.start()
            self._accept_all()
        except BaseException:
            self.stop(lost=True)
            raise

    def _grouped(self) -> Any:
        """``rdd`` in ``tasks`` partitions: as it is when it has no more, else its shards
        shuffled into contiguous groups (a barrier stage needs one task per partition)."""
        n = self.rdd.getNumPartitions()
        if n <= self.tasks:
            return self.rdd
        tasks = self.tasks
        return self.rdd.map(lambda s: (s[0] * tasks // n, s)).partitionBy(
            tasks, lambda k: k).values()

    def _collect(self, stage: Any) -> None:
        self.sc.setJobGroup(self.group, "mixfold: shards resident for a fit", True)
        try:
            stage.collect()
        except BaseException as err:  # noqa: BLE001 - read by the driver's waits
            self.failure = err

    def _stage_error(self) -> str:
        return "its Spark stage ended" + (
            f": {first_error_line(self.failure)}" if self.failure is not None else "")

    def _accept_all(self) -> None:
        deadline = time.monotonic() + CONNECT_SECONDS
        while len(self.connected) < self.tasks:
            if not self.thread.is_alive():
                raise StageUnavailable(self._stage_error())
            if time.monotonic() > deadline:
                raise StageUnavailable(f"its {self.tasks} tasks did not all start within "
                                       f"{CONNECT_SECONDS:.0f} s")
            try:
                sock, _ = self.server.accept()
            except TimeoutError:
                continue
            task = self._authenticated(_no_delay(sock))
            if task is not None:
                self.connected.append(task)

    def _authenticated(self, sock: socket.socket) -> _Task | None:
        """The peer's hello once it sent the token; ``None`` (connection closed) otherwise."""
        try:
            sock.settimeout(FRAME_SECONDS)
            if not hmac.compare_digest(_recv_exact(sock, TOKEN_BYTES), self.token):
                sock.close()
                return None
            return _Task(sock, pickle.loads(_recv_frame(sock)))
        except (OSError, EOFError):
            sock.close()
            return None

    def call(self, fn: Callable, args: dict[int, Any]) -> dict[int, Any]:
        """``{shard: fn(shard, rows, weights, args[shard])}`` for every shard in ``args``, each
        run by the task holding it; an error raised there is raised here."""
        waiting = {}
        for task in self.connected:
            mine = {i: args[i] for i in task.hello.shards if i in args}
            self._send(task, pickle.dumps((fn, mine), pickle.HIGHEST_PROTOCOL))
            waiting[task.sock] = task
        results: dict[int, Any] = {}
        errors = []
        for _, (status, value) in self._replies(waiting):  # every reply read: none left over
            if status == "ok":
                results.update(value)
            else:
                errors.append(value)
        if errors:
            raise errors[0]
        return results

    def _send(self, task: _Task, frame: bytes) -> None:
        try:
            _send_frame(task.sock, frame)
        except OSError as err:
            raise LostTask(self._named(task), f"sending to it failed ({err})") from None

    def _replies(self, waiting: dict[socket.socket, _Task]) -> Iterator[tuple[_Task, Any]]:
        deadline = time.monotonic() + REPLY_SECONDS
        with selectors.DefaultSelector() as selector:
            for sock in waiting:
                selector.register(sock, selectors.EVENT_READ)
            while waiting:
                ready = selector.select(POLL_SECONDS)
                for key, _ in ready:
                    task = waiting.pop(key.fileobj)
                    selector.unregister(key.fileobj)
                    yield task, self._reply(task)
                if not ready and waiting:
                    self._check_running(next(iter(waiting.values())), deadline)

    def _reply(self, task: _Task) -> Any:
        try:
            return pickle.loads(_recv_frame(task.sock))
        except (OSError, EOFError) as err:
            reason = "its Python worker closed the connection" if isinstance(err, EOFError) \
                else f"reading its reply failed ({err})"
            raise LostTask(self._named(task), reason) from None

    def _check_running(self, task: _Task, deadline: float) -> None:
        if not self.thread.is_alive():
            raise LostTask(self._named(task), self._stage_error())
        if time.monotonic() > deadline:
            raise LostTask(self._named(task), f"no reply within {REPLY_SECONDS:.0f} s")

    @staticmethod
    def _named(task: _Task) -> str:
        return f"{task.hello.executor} (partition {task.hello.partition}, pid {task.hello.pid})"

    def running(self) -> bool:
        """Whether the stage holds its shards (started and not stopped)."""
        return self.server is not None

    def stop(self, lost: bool = False) -> None:
        """Send every task the stop message, close the sockets, end the stage (bounded: it is
        cancelled if it does not end, at once if a task was ``lost``); idempotent."""
        if self.server is None:
            return
        if lost:  # Spark may be retrying the failed stage: its tasks would find no driver
            self.sc.cancelJobGroup(self.group)
        for task in self.connected:
            try:
                _send_frame(task.sock, b"")
            except OSError:
                pass
            task.sock.close()
        self.connected = []
        self.server.close()
        self.server = None
        if self.thread is None:
            return
        self.thread.join(JOIN_SECONDS)
        if self.thread.is_alive():
            self.sc.cancelJobGroup(self.group)
            self.thread.join(JOIN_SECONDS)
        if self.thread.is_alive():
            warnings.warn("spark: the resident stage did not end after it was cancelled",
                          RuntimeWarning, stacklevel=2)
