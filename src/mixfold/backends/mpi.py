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

Ranks sharing a node share its cores, as every other engine's workers do: while the fit runs,
each rank folds on (and holds BLAS to) :func:`threads_per_rank` threads — the cores given to
it by the launcher's binding, else the node's cores over its ranks — unless
``MIXFOLD_NUM_THREADS`` or ``OMP_NUM_THREADS`` says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np

from mixfold.backends._row_faults import RowFault, caught, raise_at
from mixfold.backends._shard import RowPlan, ShardedEncodedData, require
from mixfold.backends.worker_records import Executor, TimedCombine, timed_task
from mixfold.compute.feature_cache import FeatureCache
from mixfold.compute.fold import fold_rows, init_sample_mask
from mixfold.compute.row_blocks import HeldThreads
from mixfold.compute.payload import add_payloads
from mixfold.errors import DataError, NumericalError
from mixfold.families._protocol import Distribution, Encoded, Estimator, as_weights

__all__ = ["MPIEncodedData", "threads_per_rank"]


def threads_per_rank(ranks_on_node: int, cores: int | None = None,
                     bound_cores: int | None = None) -> int:
    """Threads one rank runs: the cores the launcher bound it to, when it bound it to fewer than
    the node's; else the node's cores shared by its ranks (at least one).

    >>> threads_per_rank(2, cores=16, bound_cores=16), threads_per_rank(4, cores=2, bound_cores=2)
    (8, 1)
    >>> threads_per_rank(2, cores=16, bound_cores=1)
    1
    """
    cores = cores or os.cpu_count() or 1
    bound = bound_cores or len(os.sched_getaffinity(0))
    if bound < cores:
        return bound
    return max(1, cores // max(1, ranks_on_node))


def _rank_threads(comm: Any, mpi: Any) -> HeldThreads:
    """This rank's row and BLAS threads held to its share of the node (:func:`threads_per_rank`
    of the ranks sharing its memory)."""
    node = comm.Split_type(mpi.COMM_TYPE_SHARED)
    try:
        ranks_on_node = node.size
    finally:
        node.Free()
    return HeldThreads(threads_per_rank(ranks_on_node))


class MPIEncodedData(ShardedEncodedData):
    """This rank's rows, folded here and reduced across the communicator.

    Shard ``i`` is rank ``i``'s rows: the sharded base folds and scores, this rank runs its own
    shard's task and the payloads reduce over MPI.
    """

    name = "mpi"

    def __init__(self, comm: Any, enc: Encoded, weights: np.ndarray, chunk_rows: int):
        self.comm = comm
        self.enc = enc
        self.weights = weights
        ends = np.cumsum(comm.allgather(enc.n_rows)).tolist()
        bounds = [(0, ends[0])] + list(zip(ends[:-1], ends[1:]))
        self._lay_out(ends[-1], float(comm.allreduce(float(weights.sum()))), chunk_rows, bounds,
                      None)
        self.features = FeatureCache.for_rows(enc.nbytes)
        mpi = require("mpi4py.MPI", "mpi", "mpi")
        self.rank_threads = _rank_threads(comm, mpi)
        self.hosts = comm.allgather(mpi.Get_processor_name())

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
        fitted = comm.allgather(caught(base.fit, data))
        _raise_first_fault(fitted, counts)
        encoder = reduce(lambda a, b: a.merge(b), fitted)
        enc = caught(encoder.encode, data)
        _raise_first_fault(comm.allgather(enc if isinstance(enc, RowFault) else None), counts)
        sizes = np.array(comm.allgather(enc.node_sizes()), dtype=np.int64)
        starts = sizes[:comm.rank].sum(axis=0) if comm.rank else np.zeros(sizes.shape[1], int)
        enc = enc.with_starts(iter(int(s) for s in starts))
        w = as_weights(weights, enc.n_rows)
        return cls(comm, enc, w, chunk_rows), estimator.bind(encoder)

    def apply_plan(self, plan: RowPlan) -> None:
        """Give every rank exactly its planned rows (moving encoded rows between ranks, in row
        order), its planned band when folded with the plan as its precision, and reduce
        through the planned k-way tree. Collective: call it on every rank with the same plan."""
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
        self._lay_out(self.n_rows, self.total_weight, self.chunk_rows,
                      plan.row_bounds(self.n_rows), plan)
        self.features = FeatureCache.for_rows(self.enc.nbytes)

    def _reduce(self, task: str, shard_args: list[tuple],
                combine: Callable[..., np.ndarray]) -> np.ndarray:
        with self.features.active():  # this rank's rows stay: so may their features
            local = timed_task(task, self.enc, self.weights, shard_args[self.comm.rank],
                               self.comm.rank, self.comm.size)
        return self._sum(local, combine)

    def _sum(self, local: np.ndarray, combine: TimedCombine) -> np.ndarray:
        mpi = require("mpi4py.MPI", "mpi", "mpi")
        local = np.ascontiguousarray(local, dtype=np.float64)
        if self.plan is not None:
            total = self._tree_sum(local, combine)
        elif combine.payloads is not add_payloads:  # one MPI element = a whole dd payload
            whole = mpi.DOUBLE.Create_contiguous(local.size).Commit()
            op = mpi.Op.Create(_payload_op(combine), commute=True)
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

    def executors(self) -> list[Executor]:
        return [Executor(f"rank {r}", host) for r, host in enumerate(self.hosts)]

    def close(self) -> None:
        self.features.clear()
        self.rank_threads.release()

    def shard(self, i: int) -> tuple[Encoded, np.ndarray]:
        if i != self.comm.rank:
            raise ValueError(f"shard {i} lives on MPI rank {i}, not on rank {self.comm.rank}")
        return self.enc, self.weights

    def _name_bad_row(self, model: Distribution, precisions: list[str]) -> None:
        fold_rows(None, self.enc, self.weights, model, precisions[self.comm.rank],
                  self.chunk_rows)
        raise NumericalError("the log-likelihood is not finite (the bad row is on another rank)")

    def init_sample(self, seed: int) -> tuple[Encoded, np.ndarray]:
        mask = init_sample_mask(self.enc, seed, self.n_rows) & (self.weights > 0)
        idx = np.flatnonzero(mask)
        pieces = [p for p in self.comm.allgather((self.enc.take(idx), self.weights[idx]))
                  if p[0].n_rows]
        encs = [p[0] for p in pieces]
        return type(encs[0]).concat(encs), np.concatenate([p[1] for p in pieces])


def _raise_first_fault(outcomes: list[Any], counts: list[int]) -> None:
    """Raise the first rank's bad row among every rank's ``outcomes`` (each rank raises the same
    error, its row counted from rank 0's first row: one rank alone raising would leave the
    others waiting in the next collective)."""
    for rank, got in enumerate(outcomes):
        if isinstance(got, RowFault):
            raise_at(got, sum(counts[:rank]))


def _payload_op(combine: Callable[..., np.ndarray]) -> Callable[[Any, Any, Any], None]:
    """An MPI user operation ``out = in (+) out`` on whole payloads (the ``dd`` two-sum)."""

    def op(inbuf: Any, outbuf: Any, datatype: Any) -> None:
        b = np.frombuffer(outbuf, dtype=np.float64)
        b[...] = combine(np.frombuffer(inbuf, dtype=np.float64), b)

    return op
