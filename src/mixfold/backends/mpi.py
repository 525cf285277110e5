"""``backend="mpi"``: SPMD — every rank encodes and holds its own rows; payloads reduce over MPI.

Run the same script on every rank, each passing its own rows (rank order = row order)::

    mpiexec -n 4 python my_fit.py

    # my_fit.py
    from mpi4py import MPI
    import mixfold
    rows = load_my_slice(MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size)
    model = mixfold.optimize(rows, estimator, backend="mpi")    # or backend=MPI.COMM_WORLD

Vocabularies are learnt on each rank and merged (an allgather of fitted encoders), global row
indices are re-based by an exclusive prefix sum of every node's row count (so seeded
initialisation is the same as on one machine), and each iteration reduces one flat float64 payload
with ``Reduce`` to rank 0 and ``Bcast`` back, so every rank holds the same model bit for bit.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np

from mixfold.backends._interface import EncodedDataHandle
from mixfold.backends._shard import require
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.fold import FoldResult, fold_rows, init_sample_mask
from mixfold.compute.payload import fold_shard, payload_combiner, score_shard, unpack_fold
from mixfold.compute.tree import fanout_for_depth
from mixfold.errors import DataError, NumericalError
from mixfold.families._protocol import Distribution, Encoded, Estimator, as_weights
from mixfold.precision import PLANNED, resolve_precision
from mixfold.precision.compensated import add_dd_payloads

__all__ = ["MPIEncodedData"]


class MPIEncodedData(EncodedDataHandle):
    """This rank's rows, folded here and reduced across the communicator."""

    name = "mpi"

    def __init__(self, comm: Any, enc: Encoded, weights: np.ndarray, chunk_rows: int):
        self.comm = comm
        self.enc = enc
        self.weights = weights
        self.chunk_rows = int(chunk_rows)
        self.n_rows = int(comm.allreduce(enc.n_rows))
        self.total_weight = float(comm.allreduce(float(weights.sum())))
        self.last_payload_size = 0
        self.plan: Any = None
        self.fanout = 2
        self.last_reduce_levels = 0
        self.features = FeatureCache.for_rows(enc.nbytes)

    @classmethod
    def from_rows(cls, data: Any, estimator: Estimator, *, init: Distribution | None,
                  weights: Any, chunk_rows: int, comm: Any = None) -> tuple[MPIEncodedData,
                                                                           Estimator]:
        """Encode this rank's ``data`` consistently with every other rank's."""
        mpi = require("mpi4py.MPI", "mpi", "mpi")
        comm = mpi.COMM_WORLD if comm is None else comm
        n_local = len(data) if hasattr(data, "__len__") else None
        counts = comm.allgather(n_local)
        empty = [r for r, n in enumerate(counts) if not n]
        if empty:
            raise DataError(f"MPI ranks {empty} have no rows: every rank needs at least one row")
        base = init.encoder() if init is not None else estimator.encoder()
        fitted = comm.allgather(base.fit(data))
        encoder = reduce(lambda a, b: a.merge(b), fitted)
        enc = encoder.encode(data)
        sizes = np.array(comm.allgather(enc.node_sizes()), dtype=np.int64)
        starts = sizes[:comm.rank].sum(axis=0) if comm.rank else np.zeros(sizes.shape[1], int)
        enc = enc.with_starts(iter(int(s) for s in starts))
        w = as_weights(weights, enc.n_rows)
        return cls(comm, enc, w, chunk_rows), estimator.bind(encoder)

    def apply_plan(self, plan: Any) -> None:
        """Give every rank exactly its planned rows (moving encoded rows between ranks, in row
        order), its planned band for ``precision=PLANNED``, and reduce through the planned
        k-way tree. Collective: call it on every rank with the same plan."""
        if len(plan.assignments) != self.comm.size:
            raise ValueError(f"the plan has {len(plan.assignments)} workers for an MPI "
                             f"communicator of {self.comm.size} ranks")
        counts = self.comm.allgather(self.enc.n_rows)
        first = int(sum(counts[:self.comm.rank]))
        outgoing = []
        for a, b in plan.row_bounds(self.n_rows):
            lo, hi = max(a, first) - first, min(b, first + self.enc.n_rows) - first
            lo, hi = (lo, hi) if lo < hi else (0, 0)
            outgoing.append((self.enc.rows(lo, hi), self.weights[lo:hi]))
        incoming = [p for p in self.comm.alltoall(outgoing) if p[0].n_rows]
        if incoming:
            self.enc = type(incoming[0][0]).concat([p[0] for p in incoming])
            self.weights = np.concatenate([p[1] for p in incoming])
        else:
            self.enc, self.weights = self.enc.rows(0, 0), self.weights[:0]
        self.plan = plan
        self.fanout = fanout_for_depth(self.comm.size, plan.reduce_depth)
        self.features = FeatureCache.for_rows(self.enc.nbytes)

    def _precision(self, precision: str) -> tuple[str, bool]:
        """(this rank's precision, whether payloads are compensated on every rank)."""
        precision = resolve_precision(precision)
        if not precision.planned:
            return precision, precision.compensated
        if self.plan is None:
            raise ValueError(f"precision {PLANNED!r} needs a handle with a plan (apply_plan)")
        mine = self.plan.execution_precisions()
        return mine[self.comm.rank], any(resolve_precision(p).compensated for p in mine)

    def _sum(self, local: np.ndarray, compensated: bool) -> np.ndarray:
        mpi = require("mpi4py.MPI", "mpi", "mpi")
        local = np.ascontiguousarray(local, dtype=np.float64)
        if self.plan is not None:
            total = self._tree_sum(local, payload_combiner(compensated))
        elif compensated:  # one MPI element = the whole [high, low] payload: never split
            whole = mpi.DOUBLE.Create_contiguous(local.size).Commit()
            op = mpi.Op.Create(_dd_reduce_op, commute=True)
            total = np.empty_like(local)
            try:
                self.comm.Reduce([local, 1, whole], [total, 1, whole], op=op, root=0)
            finally:
                op.Free()
                whole.Free()
        else:
            total = np.empty_like(local)
            self.comm.Reduce(local, total, op=mpi.SUM, root=0)
        self.comm.Bcast(total, root=0)
        return total

    def _tree_sum(self, local: np.ndarray, combine: Any) -> np.ndarray:
        """Reduce to rank 0 through a ``self.fanout``-ary tree (the planned depth): at level
        ``l`` every rank ``r`` with ``r % (stride k) == 0`` receives from ``r + j stride``."""
        rank, size, k = self.comm.rank, self.comm.size, self.fanout
        total, stride, levels = local, 1, 0
        while stride < size:
            if rank % (stride * k):
                self.comm.Send(total, dest=rank - rank % (stride * k), tag=levels)
                break
            parts = [total]
            for j in range(1, k):
                source = rank + j * stride
                if source < size:
                    part = np.empty_like(local)
                    self.comm.Recv(part, source=source, tag=levels)
                    parts.append(part)
            total = combine(*parts) if len(parts) > 1 else total
            stride *= k
            levels += 1
        self.last_reduce_levels = levels if rank == 0 else 0
        return total

    def fold(self, estimator: Estimator, model: Distribution,
             precision: str = "float64") -> FoldResult:
        mine, compensated = self._precision(precision)
        with self.features.active():  # this rank's rows stay: so may their features
            local = fold_shard(self.enc, self.weights, estimator, model, mine, self.chunk_rows,
                               compensated)
        flat = self._sum(local, compensated)
        self.last_payload_size = flat.size
        if not np.isfinite(flat[2]):
            self._name_bad_row(model, mine)
        return unpack_fold(flat, estimator, compensated)

    def log_density_sum(self, model: Distribution, precision: str = "float64") -> tuple[int, float]:
        mine, compensated = self._precision(precision)
        flat = self._sum(score_shard(self.enc, self.weights, model, mine, self.chunk_rows,
                                     compensated), compensated)
        if not np.isfinite(flat[2]):
            self._name_bad_row(model, mine)
        return int(flat[0]), float(flat[2])

    def close(self) -> None:
        self.features.clear()

    def _name_bad_row(self, model: Distribution, precision: str) -> None:
        fold_rows(None, self.enc, self.weights, model, precision, self.chunk_rows)
        raise NumericalError("the log-likelihood is not finite (the bad row is on another rank)")

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        mask = init_sample_mask(self.enc, seed, self.n_rows) & (self.weights > 0)
        idx = np.flatnonzero(mask)
        pieces = [p for p in self.comm.allgather((self.enc.take(idx), self.weights[idx]))
                  if p[0].n_rows]
        encs = [p[0] for p in pieces]
        return type(encs[0]).concat(encs), np.concatenate([p[1] for p in pieces])


def _dd_reduce_op(inbuf: Any, outbuf: Any, datatype: Any) -> None:
    """MPI user operation: ``out = in (+) out`` on ``[high..., low...]`` payloads (dd)."""
    a = np.frombuffer(inbuf, dtype=np.float64)
    b = np.frombuffer(outbuf, dtype=np.float64)
    b[...] = add_dd_payloads(a, b)
