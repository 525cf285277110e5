"""Real engines, started once per test session, and a check that none outlives it."""

import os
import time

import pytest

# scripts run under mpiexec, not test modules
collect_ignore = ["mpi_fit.py", "mpi_plan.py", "mpi_threads.py", "spark_gpus.py"]


def child_processes(pid: int) -> list[int]:
    """Live (non-zombie) descendants of ``pid``, read from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, par in parents.items() if par == p]
        found.extend(kids)
        frontier.extend(kids)
    return found


@pytest.fixture(scope="session", autouse=True)
def no_engine_outlives_the_tests():
    """Requested first, torn down last: after every engine fixture has stopped its engine."""
    yield
    deadline = time.time() + 30
    while len(child_processes(os.getpid())) > 1 and time.time() < deadline:
        time.sleep(0.5)
    # multiprocessing's resource tracker is the interpreter's own helper: it lives until exit
    left = {pid: cmd for pid in child_processes(os.getpid())
            if "resource_tracker" not in (cmd := _cmdline(pid))}
    assert left == {}, "engine processes outlived the test session"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


@pytest.fixture(scope="session")
def spark_session():
    from mixfold.backends.spark import local_spark_session, stop_spark_session

    session = local_spark_session(2)
    yield session
    stop_spark_session(session)


@pytest.fixture(scope="session")
def dask_client():
    from mixfold.backends.dask import local_dask_client

    client = local_dask_client(2)
    yield client
    cluster = client.cluster
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def ray_started():
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 * 1024 * 1024, _node_ip_address="127.0.0.1",
             configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture
def engine(request):
    """``backend=`` value for a backend name, with its session-wide engine started."""
    name = request.param
    if name == "spark":
        return request.getfixturevalue("spark_session")
    if name == "dask":
        return request.getfixturevalue("dask_client")
    if name == "ray":
        request.getfixturevalue("ray_started")
    return name
