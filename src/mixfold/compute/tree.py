"""Shard layout and the tree reduce: contiguous row ranges, and a deterministic k-ary fold of
partial results over their order (so the reduced sum does not depend on which worker finished
first)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["shard_bounds", "tree_reduce", "tree_levels", "fanout_for_depth"]


def shard_bounds(n_rows: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous, balanced row ranges ``[begin, end)`` for ``n_shards`` shards: none empty,
    except the single shard of zero rows (a handle always has one shard to fold).

    >>> shard_bounds(5, 2), shard_bounds(2, 4), shard_bounds(0, 3)
    ([(0, 2), (2, 5)], [(0, 1), (1, 2)], [(0, 0)])
    """
    n_shards = max(1, min(int(n_shards), n_rows))
    edges = np.linspace(0, n_rows, n_shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def tree_reduce(items: Sequence[Any], combine: Callable[..., Any], fanout: int = 2) -> Any:
    """Reduce ``items`` through a ``fanout``-ary tree over their order (deterministic).

    The one tree of every backend: ``combine`` may add payloads here or submit the addition as
    a remote task and return its future (Dask, Ray), so local and remote trees have the same
    shape, order and fanout.

    >>> tree_reduce("abcde", lambda *xs: "(" + "+".join(xs) + ")", fanout=2)
    '(((a+b)+(c+d))+e)'
    >>> tree_reduce("abcde", lambda *xs: "(" + "+".join(xs) + ")", fanout=3)
    '((a+b+c)+(d+e))'
    """
    level = list(items)
    if not level:
        raise ValueError("nothing to reduce")
    while len(level) > 1:
        level = [combine(*level[i:i + fanout]) if len(level[i:i + fanout]) > 1 else level[i]
                 for i in range(0, len(level), fanout)]
    return level[0]


def tree_levels(n_items: int, fanout: int) -> int:
    """How many levels :func:`tree_reduce` takes to fold ``n_items`` with ``fanout``."""
    levels = 0
    while n_items > 1:
        n_items = -(-n_items // fanout)
        levels += 1
    return levels


def fanout_for_depth(n_items: int, depth: int) -> int:
    """The smallest fanout (>= 2) whose tree folds ``n_items`` in at most ``depth`` levels.

    >>> fanout_for_depth(8, 2), fanout_for_depth(10_000, 7), fanout_for_depth(2, 1)
    (3, 4, 2)
    """
    depth = max(1, int(depth))
    k = max(2, int(math.ceil(n_items ** (1.0 / depth))))
    while k ** depth < n_items:  # guard the float root
        k += 1
    while k > 2 and (k - 1) ** depth >= n_items:
        k -= 1
    return k
