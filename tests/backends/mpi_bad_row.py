"""Run as ``mpiexec -n 2 python mpi_bad_row.py OUT``: rank 1's slice holds a NaN (row 250 of
the data); every rank writes the error its fit raised, as JSON to OUT.RANK."""

import json
import sys

import numpy as np
from mpi4py import MPI

import mixfold

comm = MPI.COMM_WORLD
x = np.random.default_rng(8).normal(size=400)
x[250] = np.nan
mine = x[:200] if comm.rank == 0 else x[200:]
try:
    mixfold.fit(mine, mixfold.GaussianEstimator(), backend=comm, progress=False)
    got = None
except mixfold.DataError as err:
    got = {"type": type(err).__name__, "row": err.row, "message": str(err)}
with open(f"{sys.argv[1]}.{comm.rank}", "w") as fh:
    json.dump(got, fh)
