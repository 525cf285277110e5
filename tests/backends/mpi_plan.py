"""Run as ``mpiexec -n N python -m mpi4py mpi_plan.py OUT``: planned fits on every rank.

Rank 0 writes, as JSON to OUT: the dd fit (uniform dd band) and the planned fit (rank 0
float32, the others float64, unequal rows), with the rows each rank held and the reduce levels.
"""

import json
import sys

from mpi4py import MPI

import mixfold
from mixfold.compute.tree import shard_bounds
from mixfold.parallel.heterogeneous import Worker
from tests.backends.cases import CASES

comm = MPI.COMM_WORLD
out = sys.argv[1]
rows, estimator, options = CASES["gmm"]()
a, b = shard_bounds(len(rows), comm.size)[comm.rank]
mine = rows[a:b]
dd = mixfold.fit(mine, estimator, backend=comm, precision="dd", progress=False, **options)
pool = [Worker(f"mpi:{r}", precisions=("float32",) if r == 0 else ("float64",),
               base_throughput=3.0 if r == 0 else 1.0) for r in range(comm.size)]
planned = mixfold.fit(mine, estimator, backend=comm, resources=pool, precision="auto",
                      progress=False, **options)
dd_pool = [Worker(f"mpi:{r}", precisions=("dd",)) for r in range(comm.size)]
dd_plan = mixfold.fit(mine, estimator, backend=comm, precision="dd", resources=dd_pool,
                      progress=False, **options)
if comm.rank == 0:
    with open(out, "w") as fh:
        json.dump({"dd": dd.model.to_dict(), "dd_trace": dd.log_likelihood,
                   "dd_plan": dd_plan.model.to_dict(),
                   "planned": planned.model.to_dict(), "planned_trace": planned.log_likelihood,
                   "rows": [a.rows for a in planned.plan.assignments],
                   "bands": [a.precision for a in planned.plan.assignments]}, fh)
