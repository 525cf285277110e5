"""MPI ranks on one node share its cores (backends/mpi.py: threads_per_rank), run as the README
shows: ``mpiexec -n 2 python my_fit.py`` with no thread variable set."""

import json
import os
from pathlib import Path

import pytest

from mixfold.backends.mpi import threads_per_rank
from tests.backends.mpirun import run_mpiexec
from tests.backends.test_backends import fit_case

ROOT = Path(__file__).resolve().parents[2]


def test_threads_per_rank_share_the_node_or_keep_the_launchers_binding():
    assert threads_per_rank(2, cores=16, bound_cores=16) == 8
    assert threads_per_rank(3, cores=16, bound_cores=16) == 5
    assert threads_per_rank(4, cores=2, bound_cores=2) == 1
    assert threads_per_rank(2, cores=16, bound_cores=2) == 2


@pytest.mark.slow
def test_two_ranks_without_thread_variables_do_not_oversubscribe(tmp_path):
    out = tmp_path / "threads.json"
    run_mpiexec(2, [str(ROOT / "tests/backends/mpi_threads.py"), str(out)], thread_vars=False)
    got = json.loads(out.read_text())
    cores = os.cpu_count()
    bound = len(os.sched_getaffinity(0))
    share = threads_per_rank(2, cores=cores, bound_cores=bound)
    for rank in got["ranks"]:
        assert rank["during"] and {r for r, _ in rank["during"]} == {share}
        assert {b for _, b in rank["during"]} <= {share, 0}  # 0: no BLAS library found
        assert rank["after"] == bound  # the hold ends with the fit
    assert got["final"] == pytest.approx(fit_case("gmm").final_log_likelihood, rel=1e-12)


@pytest.mark.slow
def test_a_bad_row_on_one_rank_is_raised_on_every_rank_with_its_row(tmp_path):
    out = tmp_path / "error"
    run_mpiexec(2, [str(ROOT / "tests/backends/mpi_bad_row.py"), str(out)], timeout=60)
    for rank in range(2):  # no rank left waiting: both raise rank 1's row, counted from row 0
        got = json.loads(Path(f"{out}.{rank}").read_text())
        assert got["type"] == "DataError" and got["row"] == 250, got
