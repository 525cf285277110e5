"""compute/tree.py: shard ranges and the one tree reduce, against brute-force references (the
tree written out by hand, exact rational sums for the ``dd`` reduce)."""

from fractions import Fraction
from functools import reduce

import numpy as np
import pytest

from mixfold.compute.payload import payload_combiner
from mixfold.compute.tree import fanout_for_depth, shard_bounds, tree_levels, tree_reduce


@pytest.mark.parametrize("n_rows, n_shards", [(1, 1), (1, 5), (7, 3), (10, 10), (10, 4),
                                              (1000, 7), (5, 0), (5, -2), (2 ** 40, 3)])
def test_shards_are_contiguous_balanced_and_none_is_empty(n_rows, n_shards):
    bounds = shard_bounds(n_rows, n_shards)
    assert len(bounds) == max(1, min(n_shards, n_rows))
    assert bounds[0][0] == 0 and bounds[-1][1] == n_rows
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [b - a for a, b in bounds]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def _by_hand(items, fanout):
    """The tree written out level by level: groups of ``fanout`` in order, a lone last item
    carried up as it is."""
    level = list(items)
    while len(level) > 1:
        groups = [level[i:i + fanout] for i in range(0, len(level), fanout)]
        level = [g[0] if len(g) == 1 else "(" + "+".join(g) + ")" for g in groups]
    return level[0]


@pytest.mark.parametrize("fanout", [2, 3, 4, 7])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 30])
def test_tree_shape_is_fixed_by_the_order_and_fanout(n, fanout):
    items = [f"x{i}" for i in range(n)]
    got = tree_reduce(items, lambda *xs: "(" + "+".join(xs) + ")", fanout)
    assert got == _by_hand(items, fanout)

    depth = tree_reduce([0] * n, lambda *xs: max(xs) + 1, fanout)
    assert depth == tree_levels(n, fanout)


def test_float_reduce_is_the_same_tree_every_time():
    # float addition is not associative: the tree's bits are those of its written-out order
    x = np.random.default_rng(0).standard_normal(37) * 10.0 ** np.arange(-18, 19)
    want = eval(_by_hand([repr(float(v)) for v in x], 3))  # noqa: S307 (our own numbers)
    for _ in range(3):
        assert tree_reduce(list(x), lambda *xs: sum(xs[1:], xs[0]), 3) == want


def test_an_empty_reduce_raises():
    with pytest.raises(ValueError, match="nothing to reduce"):
        tree_reduce([], lambda *xs: xs[0])


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 100, 10_000, 10_001])
@pytest.mark.parametrize("depth", [1, 2, 3, 7])
def test_fanout_for_depth_is_the_smallest_that_fits(n, depth):
    k = fanout_for_depth(n, depth)
    smallest = next(f for f in range(2, n + 3) if tree_levels(n, f) <= depth)
    assert k == smallest


def test_dd_tree_reduce_is_exact_and_independent_of_the_tree():
    # hi + lo payloads of values across 600 binary orders of magnitude, with cancellation
    rng = np.random.default_rng(3)
    n, width = 41, 5
    hi = rng.standard_normal((n, width)) * 2.0 ** rng.integers(-300, 300, (n, width))
    hi[::2] *= -1
    lo = hi * 2.0 ** -60 * rng.standard_normal((n, width))
    payloads = [np.concatenate([hi[i], lo[i]]) for i in range(n)]
    exact = [sum((Fraction(float(h)) + Fraction(float(l_)) for h, l_ in zip(hi[:, j], lo[:, j])),
                 Fraction(0)) for j in range(width)]
    add = payload_combiner(compensated=True)
    results = [tree_reduce(payloads, add, fanout) for fanout in (2, 3, 16, n)]
    for got in results:
        for j, want in enumerate(exact):
            total = Fraction(float(got[j])) + Fraction(float(got[width + j]))
            scale = max(abs(Fraction(float(h))) for h in hi[:, j])
            assert abs(total - want) <= scale * Fraction(2) ** -100
    # the rounded sums agree however the tree was cut
    assert all(np.array_equal(r[:width], results[0][:width]) for r in results)
    assert all(np.array_equal(r[:width], [float(e) for e in exact]) for r in results)


def test_float_payload_reduce_is_plain_addition():
    p = [np.array([1.0, 2.0, 3.0]), np.array([0.5, -2.0, 1e300])]
    got = tree_reduce(p, payload_combiner(compensated=False))
    assert got.tolist() == reduce(np.add, p).tolist()
    assert p[0].tolist() == [1.0, 2.0, 3.0]  # inputs never written over
