"""Units: the K children of a node that score the same rows -- a mixture's components, a hidden
Markov or semi-Markov model's state emissions -- and the machinery they share.

- Encoding: children that read the rows alike share one encoding (:func:`shared_encoder`;
  :class:`SharedEncoder` over the distinct ones, each child reading its slot).
- Scoring: :class:`Units` writes ``log p_k(x)`` into column ``k`` of one (rows, K) matrix, all K
  in one call when the children stack (:class:`~mixfold.capabilities.StackedScoring`), any
  range of columns with the bits of the whole (a model-parallel executor scores ranges apart).
- Normalising: each row's columns into posteriors by a stable log-sum-exp, block by block of
  rows on all cores for a stack (:meth:`Units.posteriors`); in a band's own operations for the
  emulated bands and ``dd`` (:func:`band_posteriors`).
- Handing down: :class:`UnitAccumulators` adds the rows to unit ``k``'s accumulator weighted by
  column ``k`` of the posteriors (all K at once where their family stacks its update).
- The column hooks a model-parallel executor drives (:mod:`mixfold.families._hooks`), written
  once over the units: :class:`UnitColumns` for the node's distribution, :class:`UnitsFold`
  for its accumulator.

>>> from mixfold import GaussianDistribution, PoissonDistribution
>>> units = Units([GaussianDistribution(0, 1), GaussianDistribution(3, 1)], row_normalised=True)
>>> units.stack.__name__, units.slots
('GaussianDistribution', None)
>>> enc = units.encoder.encode([0.0, 1.5, 3.0])
>>> resp, lse = units.posteriors(enc, "float64", np.log([0.5, 0.5]), np.ones(3))
>>> resp.round(3).tolist()
[[0.989, 0.011], [0.5, 0.5], [0.011, 0.989]]
>>> Units([GaussianDistribution(0, 1), PoissonDistribution(2.0)]).slots
(0, 1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from mixfold.capabilities import (CentredStatistics, NormalisesStack, RelativeScoring,
                                  StackedScoring, StackedUpdate)
from mixfold.compute.estep_plan import Fusion, fused_pass_of, fusion_of
from mixfold.compute.logspace import log_normalize_rows, logsumexp_rows
from mixfold.compute.row_blocks import map_row_blocks
from mixfold.decomposition import decomposition_for
from mixfold.families._hooks import (ChildFold, ChildScore, FoldChildren, FoldsColumns,
                                     ScoreChildren, ScoresColumns)
from mixfold.families._protocol import Accumulator, Distribution, Encoded, Encoder, Estimator
from mixfold.precision.bands import Precision
from mixfold.precision.doubledouble import DD, dd_mul, dd_sum_rows

__all__ = ["Units", "UnitAccumulators", "SharedEncoder", "SharedEncoded", "shared_encoder",
           "encoding_slots", "child_rows", "bind_units", "stackable", "stack_columns",
           "set_stack_references", "seeded_posteriors", "band_posteriors", "band_matrix",
           "band_posterior_matrix", "UnitColumns", "UnitsFold", "STACK_BLOCK_ROWS"]

#: Rows per block when stacked units are scored and normalised on all cores. Large enough that
#: each of a block's many short NumPy calls does real work outside the GIL.
STACK_BLOCK_ROWS = 32768


# ---------------------------------------------------------------------------------------------
# Encoding: children that read the data the same way share one encoding


class SharedEncoded(Encoded):
    """One encoding per distinct child encoder (only when the children's encoders differ)."""

    __slots__ = ("parts", "n_rows", "start")

    def __init__(self, parts: Sequence[Encoded]):
        self.parts = tuple(parts)
        self.n_rows = self.parts[0].n_rows
        self.start = self.parts[0].start

    def rows(self, begin: int, end: int) -> SharedEncoded:
        return SharedEncoded([p.rows(begin, end) for p in self.parts])

    def take(self, indices: np.ndarray) -> SharedEncoded:
        return SharedEncoded([p.take(indices) for p in self.parts])

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def node_sizes(self) -> list[int]:
        return [s for p in self.parts for s in p.node_sizes()]

    def with_starts(self, starts: Iterator[int]) -> SharedEncoded:
        return SharedEncoded([p.with_starts(starts) for p in self.parts])

    @classmethod
    def concat(cls, parts: Sequence[Encoded]) -> SharedEncoded:
        return SharedEncoded([type(ps[0]).concat(ps) for ps in zip(*(p.parts for p in parts))])


class SharedEncoder(Encoder):
    """Encodes rows once per distinct encoder among several children that read the same rows.

    ``slot[k]`` is the part child ``k`` reads. When all children encode alike, use the plain
    child encoder instead (:func:`shared_encoder` does this).
    """

    def __init__(self, encoders: Sequence[Encoder], slot: Sequence[int]):
        self.encoders = tuple(encoders)
        self.slot = tuple(slot)

    def fit(self, values: Any) -> SharedEncoder:
        return SharedEncoder([e.fit(values) for e in self.encoders], self.slot)

    def encode(self, values: Any) -> SharedEncoded:
        return SharedEncoded([e.encode(values) for e in self.encoders])

    def merge(self, other: Encoder) -> SharedEncoder:
        if not isinstance(other, SharedEncoder) or other.slot != self.slot:
            raise ValueError(f"cannot merge encoders {self!r} and {other!r}")
        return SharedEncoder([a.merge(b) for a, b in zip(self.encoders, other.encoders)], self.slot)

    def child_encoder(self, k: int) -> Encoder:
        return self.encoders[self.slot[k]]

    def __repr__(self) -> str:
        return f"SharedEncoder({list(self.encoders)!r})"


def shared_encoder(encoders: Sequence[Encoder]) -> Encoder:
    """The one encoder all children use, or a :class:`SharedEncoder` over the distinct ones."""
    distinct: list[Encoder] = []
    slot = []
    for e in encoders:
        for i, d in enumerate(distinct):
            if d == e:
                slot.append(i)
                break
        else:
            slot.append(len(distinct))
            distinct.append(e)
    return distinct[0] if len(distinct) == 1 else SharedEncoder(distinct, slot)


def encoding_slots(encoder: Encoder) -> tuple[int, ...] | None:
    """Which part of a shared encoding each child reads (``None``: all read the one encoding)."""
    return encoder.slot if isinstance(encoder, SharedEncoder) else None


def child_rows(enc: Encoded, k: int, slots: tuple[int, ...] | None) -> Encoded:
    """The encoding child ``k`` reads."""
    return enc if slots is None else enc.parts[slots[k]]


def bind_units(estimators: Sequence[Estimator], encoder: Encoder) -> list[Estimator]:
    """The children's estimators bound to a fitted shared ``encoder``, each to its part."""
    slots = encoding_slots(encoder)
    if slots is not None:
        return [e.bind(encoder.child_encoder(k)) for k, e in enumerate(estimators)]
    bound: dict[int, Estimator] = {}  # one encoding: an estimator given K times is bound once
    for e in estimators:
        if id(e) not in bound:
            bound[id(e)] = e.bind(encoder)
    return [bound[id(e)] for e in estimators]


# ---------------------------------------------------------------------------------------------
# Stacks: K children of one class scored (or updated) in one call


def stackable(children: Sequence[Any]) -> type | None:
    """The common class of the children when it scores all of them in one call."""
    cls = type(children[0])
    if not issubclass(cls, StackedScoring) or any(type(c) is not cls for c in children):
        return None
    return cls if cls.can_stack(children) else None


def stack_columns(cls: type, components: Sequence[Any], enc: Encoded, precision: Precision,
                  units: tuple[int, int] | None = None) -> np.ndarray:
    """Columns ``units=(start, stop)`` of ``cls.stack_log_density(components, enc)`` (all when
    ``None``), (n_rows, stop - start), with the same bits as in the full call.

    A :class:`~mixfold.capabilities.StackedScoring` family whose stack shares something across
    components (a centre) declares ``stack_units = True`` and takes ``units``; any other scores
    each column on its own, so the range of components is scored alone.
    """
    if units is None:
        return cls.stack_log_density(components, enc, precision)
    if cls.stack_units:
        return cls.stack_log_density(components, enc, precision, units=units)
    return cls.stack_log_density(components[units[0]:units[1]], enc, precision)


def set_stack_references(accs: Sequence[Accumulator], units: Sequence[Distribution],
                         start: int = 0, stop: int | None = None) -> None:
    """Give the centred statistics of accumulators ``[start, stop)`` -- and of their children,
    down the tree (a record's fields) -- the points the whole stack of ``units`` gives them: a
    function of the model alone, so every shard and every unit range sums about the same point
    and their payloads add."""
    stop = len(accs) if stop is None else stop
    if isinstance(accs[0], CentredStatistics):
        for acc, point in zip(accs[start:stop], accs[0].stack_reference(units)[start:stop]):
            acc.set_reference(point)
        return
    width = len(accs[0].children())
    below = [decomposition_for(u).units for u in units]
    if width == 0 or any(len(b) != width for b in below):
        return
    for i in range(width):
        set_stack_references([a.children()[i] for a in accs], [b[i] for b in below], start, stop)


# ---------------------------------------------------------------------------------------------
# Scoring and normalising


class Units:
    """K distributions scoring the same rows: their shared ``encoder``, which part of it each
    reads (``slots``), and the class that scores them all in one call (``stack``, or ``None``).

    ``row_normalised``: the node normalises each row's K scores itself (a mixture), so its
    matrices are in Fortran order (each column contiguous for the log-sum-exp) and a stack is
    scored and normalised block by block of :data:`STACK_BLOCK_ROWS` rows on all cores; a
    hidden-state chain reads the whole matrix in its recursion instead.
    """

    def __init__(self, children: Sequence[Distribution], row_normalised: bool = False):
        self.children = tuple(children)
        self.encoder = shared_encoder([c.encoder() for c in self.children])
        self.slots = encoding_slots(self.encoder)
        self.stack = stackable(self.children) if self.slots is None else None
        self.row_normalised = row_normalised

    def __len__(self) -> int:
        return len(self.children)

    def rows(self, enc: Encoded, k: int) -> Encoded:
        """The encoding unit ``k`` reads."""
        return child_rows(enc, k, self.slots)

    def score_range(self, enc: Encoded, precision: Precision, start: int, stop: int,
                    out: np.ndarray) -> None:
        """Write log p_k(x) of units ``[start, stop)`` into ``out[:, start:stop]`` (float64):
        each column gets the same bits whatever range it is scored in."""
        if self.stack is not None:
            out[:, start:stop] = stack_columns(self.stack, self.children, enc, precision,
                                               (start, stop))
            return
        for k in range(start, stop):
            out[:, k] = self.children[k].seq_log_density(self.rows(enc, k), precision)

    def scores(self, enc: Encoded, precision: Precision,
               offsets: np.ndarray | None = None) -> np.ndarray:
        """``log p_k(x) (+ offsets[k])`` of every row and unit, float64 (n_rows, K)."""
        if self.stack is not None:  # the stack's own block, no copy where it is in float64
            scores = self.stack.stack_log_density(self.children, enc, precision)
            scores = np.asfortranarray(scores, dtype=np.float64) if self.row_normalised \
                else scores.astype(np.float64, copy=False)
        else:
            scores = np.empty((enc.n_rows, len(self)), order="F" if self.row_normalised else "C")
            self.score_range(enc, precision, 0, len(self), scores)
        if offsets is not None:
            scores += offsets
        return scores

    def score_columns(self, rows: Encoded, precision: Precision, start: int, stop: int,
                      out: np.ndarray, score: ScoreChildren | None = None,
                      offsets: np.ndarray | None = None) -> None:
        """:meth:`score_range` as the serial E-step scores the units (a row-normalised stack
        block by block of rows), plus ``offsets``; with ``score``, the units' log-densities
        come from it (a model-parallel executor's)."""
        if score is not None:
            children = [ChildScore(k, self.children[k], self.rows(rows, k))
                        for k in range(start, stop)]
            for k, ll in zip(range(start, stop), score(children, precision)):
                out[:, k] = ll
        elif self.stack is None or not self.row_normalised:
            self.score_range(rows, precision, start, stop, out)
        else:
            for lo in range(0, rows.n_rows, STACK_BLOCK_ROWS):
                hi = min(rows.n_rows, lo + STACK_BLOCK_ROWS)
                self.score_range(rows.rows(lo, hi), precision, start, stop, out[lo:hi])
        if offsets is not None:
            out[:, start:stop] += offsets[start:stop]

    def each_block(self, n: int, each: Callable[[int, int], None]) -> None:
        """Run ``each(lo, hi)`` over the row blocks the units are normalised in: a
        row-normalised stack's blocks on this process's cores, or all ``n`` rows at once."""
        if self.stack is None or not self.row_normalised:
            each(0, n)
        else:
            map_row_blocks(n, STACK_BLOCK_ROWS, each)

    def log_density(self, enc: Encoded, precision: Precision, offsets: np.ndarray) -> np.ndarray:
        """``log sum_k exp(offsets[k] + log p_k(x))`` of every row, (n_rows,)."""
        if self.stack is None:
            return logsumexp_rows(self.scores(enc, precision, offsets))
        lse = np.empty(enc.n_rows)

        def score_block(lo: int, hi: int) -> None:
            lse[lo:hi] = logsumexp_rows(self.scores(enc.rows(lo, hi), precision, offsets))

        self.each_block(enc.n_rows, score_block)
        return lse

    def posteriors(self, enc: Encoded, precision: Precision, offsets: np.ndarray,
                   weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(posteriors of the scores plus ``offsets`` times the row ``weights``, (n_rows, K);
        log-density (n_rows,)). Every row's arithmetic is the same however the rows are split
        into blocks, so the result is too."""
        if self.stack is None:
            return log_normalize_rows(self.scores(enc, precision, offsets), weights)
        resp = np.empty((enc.n_rows, len(self)), order="F" if self.row_normalised else "C")
        lse = np.empty(enc.n_rows)

        def normalise_block(lo: int, hi: int) -> None:
            resp[lo:hi], lse[lo:hi] = self._normalise_rows(
                self.scores(enc.rows(lo, hi), precision, offsets), weights[lo:hi])

        self.each_block(enc.n_rows, normalise_block)
        return resp, lse

    def normalise(self, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Turn gathered ``scores`` (rows, K) into weighted posteriors in place, on the blocks
        :meth:`posteriors` uses (a block of a Fortran matrix's rows keeps every reduction over
        the units in order, so the same bits); return the log-density."""
        lse = np.empty(scores.shape[0])

        def normalise_block(lo: int, hi: int) -> None:
            lse[lo:hi] = self._normalise_rows(scores[lo:hi], weights[lo:hi])[1]

        self.each_block(scores.shape[0], normalise_block)
        return lse

    def _normalise_rows(self, scores: np.ndarray,
                        weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~mixfold.compute.logspace.log_normalize_rows`, or the stack's own where it has
        one (:class:`~mixfold.capabilities.NormalisesStack`: every path then gives its bits)."""
        if self.stack is not None and issubclass(self.stack, NormalisesStack):
            return self.stack.stack_normalise(scores, weights)
        return log_normalize_rows(scores, weights)

    def log_sum_exp(self, scores: np.ndarray) -> np.ndarray:
        """:meth:`log_density` of gathered ``scores`` (rows, K), on its blocks."""
        lse = np.empty(scores.shape[0])

        def log_sum_exp_block(lo: int, hi: int) -> None:
            lse[lo:hi] = logsumexp_rows(np.array(scores[lo:hi], order="F"))

        self.each_block(scores.shape[0], log_sum_exp_block)
        return lse

    def rank_far_rows(self, post: np.ndarray, lse: np.ndarray, enc: Encoded,
                      offsets: np.ndarray) -> np.ndarray:
        """``post`` with the rows the plain scores cannot rank -- so far out that ``x - mu``
        lost the means' digits (x = 1e20 under unit Gaussians ties components of one
        variance), or every log-density below -1e308 (x = 1e200) -- scored relative to each
        row's best, where the stack can (:class:`~mixfold.capabilities.RelativeScoring`)."""
        if self.stack is None or not issubclass(self.stack, RelativeScoring):
            return post
        far = np.flatnonzero((lse == -np.inf) | self.stack.stack_far_rows(self.children, enc))
        if far.size:
            with np.errstate(divide="ignore"):
                scores = self.stack.stack_relative_log_density(self.children, enc.take(far)) \
                    + offsets
            post[far] = log_normalize_rows(scores)[0]
        return post

    def draw(self, unit_of: np.ndarray, rng: np.random.Generator) -> Any:
        """One value for each entry of ``unit_of`` (which unit draws it), in its order: unit
        by unit, each drawing its rows at once."""
        parts = []
        for k, child in enumerate(self.children):
            rows = np.flatnonzero(unit_of == k)
            parts.append((rows, child._sample(rows.size, rng)))
        return _scatter(parts, unit_of.size)


def _scatter(parts: Sequence[tuple[np.ndarray, Any]], n: int) -> Any:
    """Put the values drawn for each group of row positions back in row order."""
    arrays = [v for _, v in parts if len(v)]
    if arrays and all(isinstance(v, np.ndarray) for v in arrays):
        shapes = {v.shape[1:] for v in arrays}
        if len(shapes) == 1:
            out = np.empty((n,) + arrays[0].shape[1:], dtype=np.result_type(*arrays))
            for idx, v in parts:
                if len(idx):
                    out[idx] = v
            return out
    rows: list[Any] = [None] * n
    for idx, v in parts:
        for i, value in zip(idx, v):
            rows[i] = value
    return rows


def band_posteriors(scores: Sequence[Any], ops: Any) -> tuple[list[Any], Any]:
    """(posteriors, log-density) of every row from the units' ``scores`` with every step in
    the band of ``ops``: ``r_k = exp(s_k - max s) / sum_j exp(s_j - max s)``,
    ``log p = max s + log(sum)``. Band arrays per unit; ``None`` for a unit that takes no
    part (a weight of 0) stays ``None``."""
    live = [s for s in scores if s is not None]
    top = live[0]
    for s in live[1:]:
        top = ops.maximum(top, s)
    shifted = [None if s is None else ops.exp(ops.sub(s, top)) for s in scores]
    total = ops.total([e for e in shifted if e is not None])
    resp = [None if e is None else ops.div(e, total) for e in shifted]
    return resp, ops.add(top, ops.log(total))


def band_matrix(columns: Sequence[Any], ops: Any, n_rows: int, fill: float) -> np.ndarray:
    """Band arrays per unit handed to float64 as the columns of one (n_rows, K) Fortran
    matrix; a ``None`` column holds ``fill``."""
    out = np.full((n_rows, len(columns)), fill, order="F")
    for k, column in enumerate(columns):
        if column is not None:
            out[:, k] = ops.to_float64(column)
    return out


def band_posterior_matrix(scores: Sequence[Any], ops: Any,
                          n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`band_posteriors` handed to float64: (posteriors (n_rows, K) in Fortran order,
    log-density (n_rows,))."""
    resp, lse = band_posteriors(scores, ops)
    return band_matrix(resp, ops, n_rows, 0.0), ops.to_float64(lse)


def seeded_posteriors(rows: Encoded, k: int, rng: Any) -> np.ndarray:
    """Dirichlet(1) posteriors over ``k`` units for every row, (n_rows, k), from hashes of
    the rows' global indices: the same however the rows are chunked or sharded."""
    resp = -np.log1p(-rng.row_uniform(rows, k))
    resp /= resp.sum(axis=1, keepdims=True)
    return resp


# ---------------------------------------------------------------------------------------------
# Handing the posteriors down


class UnitAccumulators:
    """The accumulators of K units (``accs``: the node's children, in order) and how rows
    reach them: unit ``k``'s accumulator adds the rows with column ``k`` of a posterior
    matrix that already holds the row weights. ``slots`` says which part of a shared encoding
    each reads; ``stack_class`` is their one class when all K read one encoding (``None``
    otherwise), ``stack_update`` its stacked update, ``fused_pass`` the pass that scores,
    normalises and adds a chunk at once (:func:`~mixfold.compute.estep_plan.fused_pass_of`)
    and ``fusion`` where it runs."""

    def __init__(self, accs: list[Accumulator], slots: tuple[int, ...] | None):
        self.accs = accs
        self.slots = slots
        cls = type(accs[0])
        same = slots is None and all(type(a) is cls for a in accs)
        self.stack_class = cls if same else None
        self.stack_update = cls.stack_update if same and issubclass(cls, StackedUpdate) \
            else None
        self.fused_pass = fused_pass_of(cls) if same else None
        self.fusion = fusion_of(cls) if same else Fusion.NONE

    def rows(self, enc: Encoded, k: int) -> Encoded:
        """The encoding unit ``k``'s accumulator reads."""
        return child_rows(enc, k, self.slots)

    def add(self, enc: Encoded, resp: np.ndarray, units: Units, precision: Precision,
            start: int = 0, stop: int | None = None, fold: FoldChildren | None = None) -> None:
        """Add the rows to the accumulators of units ``[start, stop)`` weighted by ``resp``
        (n_rows, K); any range gets the bits the whole gets (a stacked update goes column by
        column, summing centred statistics about the points the whole stack gives them); with
        ``fold``, the units' folds run through it."""
        stop = len(self.accs) if stop is None else stop
        if fold is not None:
            fold([ChildFold(k, self.accs[k], self.rows(enc, k), np.ascontiguousarray(resp[:, k]),
                            units.children[k]) for k in range(start, stop)], precision)
        elif self.stack_update is not None and units.stack is not None:
            set_stack_references(self.accs, units.children, start, stop)
            self.stack_update(self.accs[start:stop], enc, resp[:, start:stop])
        else:
            for k in range(start, stop):
                self.accs[k].seq_update(self.rows(enc, k), np.ascontiguousarray(resp[:, k]),
                                        units.children[k], precision)

    def add_dd(self, enc: Encoded, resp: Sequence[Any], weights: DD, units: Units, ops: Any,
               about_stack: bool) -> DD:
        """The ``dd`` band: each unit's posteriors (band arrays from :func:`band_posteriors`)
        times the double-double row ``weights``, added by its accumulator in double-double
        (about the stack's points when ``about_stack``, as the other bands' folds sum, so
        mixed plans' payloads add). Returns the units' posterior masses (K,)."""
        if about_stack:
            set_stack_references(self.accs, units.children)
        n, k_all = enc.n_rows, len(self.accs)
        mass = DD(np.zeros((n, k_all)), np.zeros((n, k_all)))
        for k, r in enumerate(resp):
            rw = DD(np.zeros(n), np.zeros(n)) if r is None else dd_mul(DD(*ops.pair(r)), weights)
            mass.hi[:, k], mass.lo[:, k] = rw.hi, rw.lo
            self.accs[k].seq_update_dd(self.rows(enc, k), rw.hi, rw.lo, units.children[k], ops)
        return dd_sum_rows(mass)

    def initialize(self, enc: Encoded, resp: np.ndarray, rng: Any) -> None:
        """Seed each unit's accumulator with its column of ``resp`` (n_rows, K), weights
        included, and its own child of ``rng``."""
        for k, acc in enumerate(self.accs):
            acc.seq_initialize(self.rows(enc, k), np.ascontiguousarray(resp[:, k]), rng.child(k))


# ---------------------------------------------------------------------------------------------
# The column hooks, written once over the units


class UnitColumns(ScoresColumns):
    """A distribution whose children are its ``units`` (:class:`Units`), scored into the
    columns of one (rows, K) matrix, each column offset by its unit's ``log_weights`` entry (a
    mixture's; ``None``: no offsets, a chain's states). Its parts are the units, its encoder
    theirs."""

    units: Units
    log_weights: np.ndarray | None = None

    def unit_rows(self, enc: Encoded) -> Encoded:
        return enc

    def score_columns(self, rows: Encoded, precision: Precision, start: int, stop: int,
                      out: np.ndarray, score: ScoreChildren | None = None) -> None:
        """Write the columns of units ``[start, stop)`` (plus their offsets) into ``out``
        (n_rows, K) with the bits the serial E-step gives them; with ``score``, the units'
        log-densities come from it."""
        self.units.score_columns(rows, precision, start, stop, out, score, self.log_weights)

    def parts(self) -> tuple[Distribution, ...]:
        return self.units.children

    def encoder(self) -> Encoder:
        return self.units.encoder


class UnitsFold(FoldsColumns):
    """An accumulator whose children are the accumulators of its units
    (:class:`UnitAccumulators`, ``units``): each unit adds the rows with its column of the
    posteriors."""

    units: UnitAccumulators

    def children(self) -> Sequence[Accumulator]:
        return self.units.accs

    def add_columns(self, rows: Encoded, resp: np.ndarray, model: Any, precision: Precision,
                    start: int, stop: int, fold: FoldChildren | None = None) -> None:
        self.units.add(rows, resp, model.units, precision, start, stop, fold)
