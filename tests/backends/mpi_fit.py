"""Run as ``mpiexec -n N python -m mpi4py mpi_fit.py OUT N CASE``: each rank fits its slice.

Rank 0 writes the initial model (max_iter=0) and the final model of the same fit, and the payload
size of the last reduce, as JSON to OUT.
"""

import json
import sys

from mpi4py import MPI

import mixfold
from mixfold.compute.tree import shard_bounds
from mixfold.backends.mpi import MPIEncodedData
from tests.backends.cases import CASES

comm = MPI.COMM_WORLD
out, expected_size, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
assert comm.size == expected_size, f"mpiexec gave {comm.size} ranks, expected {expected_size}"

rows, estimator, options = CASES[case]()
a, b = shard_bounds(len(rows), comm.size)[comm.rank]
mine = rows[a:b]
start = mixfold.optimize(mine, estimator, backend=comm, progress=False,
                         **{**options, "max_iter": 0})
handle, bound = MPIEncodedData.from_rows(mine, estimator, init=None, weights=None,
                                        chunk_rows=1000, comm=comm)
res = mixfold.fit(handle, bound, progress=False, **options)
if comm.rank == 0:
    with open(out, "w") as fh:
        json.dump({"start": start.to_dict(), "final": res.model.to_dict(),
                   "iterations": res.iterations, "trace": res.log_likelihood,
                   "payload": handle.last_payload_size,
                   "workers": [list(w) for w in res.workers],
                   "stats_size": bound.accumulator_factory().make().payload_size()}, fh)
