"""Run as ``mpiexec -n N python mpi_threads.py OUT``, as the README shows (no thread variables
set): every rank records the threads its fold and its BLAS run on during the fit, and after it.
Rank 0 writes them, with the fit's final log-likelihood, as JSON to OUT."""

import json
import sys

from mpi4py import MPI
from threadpoolctl import threadpool_info

import mixfold
from mixfold.compute.row_blocks import row_threads
from mixfold.compute.tree import shard_bounds
from tests.backends.cases import CASES

comm = MPI.COMM_WORLD
rows, estimator, options = CASES["gmm"]()
a, b = shard_bounds(len(rows), comm.size)[comm.rank]
seen = []


def record(info):
    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    seen.append((row_threads(), max(blas or [0])))


res = mixfold.fit(rows[a:b], estimator, backend=comm, progress=False, callbacks=[record],
                  **options)
after = row_threads()
everyone = comm.gather({"during": seen, "after": after}, root=0)
if comm.rank == 0:
    with open(sys.argv[1], "w") as fh:
        json.dump({"ranks": everyone, "final": res.final_log_likelihood}, fh)
