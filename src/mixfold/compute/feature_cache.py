"""Feature rows of the fused E-step kept from one EM iteration to the next.

The fused mixture E-step (:mod:`mixfold.compute.linear`) lays every row block out as feature
rows — a Gaussian's ``[(x-c)^2; x-c]`` transposed from the rows, a categorical's one-hot rows —
before its two GEMMs. Those features depend on the rows and on a few parameters that stay put
from iteration to iteration (a Gaussian's centre is snapped to a grid), so a handle whose rows
stay resident can keep them: the next iteration's blocks skip the transposing, centring and
squaring and read the kept rows instead.

They cost memory, so they are kept only within a budget: all kept features together take at
most ``MIXFOLD_FEATURE_CACHE`` times the bytes of the rows they come from (default
:data:`DEFAULT_RATIO`; ``0`` keeps none). A float32 E-step's features fit that budget for most
numeric rows (a diagonal Gaussian's 2D + 1 float32 feature rows against D float64 values); a
float64 one's do not, and are computed per iteration as without a cache. Features are stored by
the identity of the array they are read from (its root buffer, offset, shape and strides) and
dropped as soon as that array is freed, so a buffer reused for other rows never meets stale
features; the rows of an open handle must not change in place (they do not during a fit).

>>> import numpy as np
>>> x = np.arange(8.0)
>>> cache = FeatureCache(x.nbytes)
>>> with cache.active():
...     store = cache_for(("demo",), [x[2:6]], nbytes=32, data_bytes=32)
...     store["block 0"] = x[2:6] * 2
...     again = cache_for(("demo",), [x[2:6]], nbytes=32, data_bytes=32)
>>> again["block 0"].tolist(), cache.kept_bytes
([4.0, 6.0, 8.0, 10.0], 32)
>>> del x, store, again  # the rows are freed: their features go with them
>>> cache.kept_bytes
0
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

__all__ = ["FeatureCache", "cache_for", "cache_ratio", "rows_identity", "DEFAULT_RATIO",
           "MEMORY_SHARE"]

#: Kept features may take this many times the bytes of the rows they are computed from. 1.25
#: admits a float32 diagonal Gaussian's (2D + 1) float32 rows against its D float64 values
#: (84 vs 80 bytes a row at D=10), not the float64 ones (168).
DEFAULT_RATIO = 1.25

#: ... and at most this share of the memory free when the handle is opened.
MEMORY_SHARE = 0.5

_active: ContextVar[FeatureCache | None] = ContextVar("mixfold_feature_cache", default=None)


def cache_ratio() -> float:
    """The budget ratio: ``MIXFOLD_FEATURE_CACHE`` (a number >= 0) or :data:`DEFAULT_RATIO`.

    >>> cache_ratio() >= 0
    True
    """
    value = os.environ.get("MIXFOLD_FEATURE_CACHE", "")
    if not value:
        return DEFAULT_RATIO
    try:
        ratio = float(value)
    except ValueError:
        ratio = -1.0
    if not ratio >= 0 or ratio == float("inf"):
        raise ValueError(f"MIXFOLD_FEATURE_CACHE must be a finite number >= 0 (a multiple of the "
                         f"rows' bytes that kept features may take), got {value!r}")
    return ratio


def rows_identity(a: np.ndarray) -> tuple[np.ndarray, tuple[Any, ...]]:
    """(the root array that owns ``a``'s memory, ``a``'s place in it): byte offset, shape,
    strides and dtype. Equal places in a live root are the same rows.

    >>> x = np.zeros((4, 3))
    >>> root, place = rows_identity(x[1:3])
    >>> root is x, place[:2]
    (True, (24, (2, 3)))
    """
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    return root, (offset, a.shape, a.strides, a.dtype.str)


class FeatureCache:
    """Kept feature blocks of one handle's rows, at most ``limit`` bytes in all.

    ``limit``: the bytes all entries may take together (the handle's rows' bytes times the
    ratio); ``ratio`` (default :func:`cache_ratio`, read once): the most one entry may take per
    byte of its rows. Entries are dicts the E-step fills block by block; each goes when any
    array it was computed from is freed, or at :meth:`clear`.
    """

    def __init__(self, limit: float, ratio: float | None = None):
        self.limit = float(limit)
        self.ratio = cache_ratio() if ratio is None else float(ratio)
        self.kept_bytes = 0
        self.fold = 0  # counts the activations: one per fold of the handle's rows
        # full key -> (store, bytes, weak references to the sources, the fold it was last used)
        self._entries: dict[Hashable, tuple[dict[Any, np.ndarray], int, list[Any], int]] = {}

    @classmethod
    def for_rows(cls, data_bytes: int) -> FeatureCache:
        """A cache for rows of ``data_bytes`` bytes: :func:`cache_ratio` times those, and at
        most :data:`MEMORY_SHARE` of the memory free now (where the system says).

        >>> FeatureCache.for_rows(0).limit
        0.0
        """
        ratio = cache_ratio()
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):  # not a POSIX system that says
            free = -1
        limit = ratio * data_bytes
        return cls(min(limit, MEMORY_SHARE * free) if free >= 0 else limit, ratio)

    def entry(self, key: Hashable, sources: Sequence[np.ndarray], nbytes: int,
              data_bytes: int) -> dict[Any, np.ndarray] | None:
        """The store of the features ``key`` of ``sources`` (new and empty on first use), or
        ``None`` when they would take more than the ratio of ``data_bytes`` or the limit. To
        make room, stores not used in this fold go, those used longest ago first (features of
        an earlier centre); stores this fold uses are never evicted for one another (models
        that fold the same rows twice, such as a mixture of mixtures, would otherwise evict
        each other's features at every fold and never use them)."""
        if nbytes > self.ratio * data_bytes or nbytes > self.limit:
            return None
        roots, places = zip(*(rows_identity(s) for s in sources))
        full_key = (key, tuple(id(r) for r in roots), places)
        found = self._entries.pop(full_key, None)
        if found is not None:
            self._entries[full_key] = found[:3] + (self.fold,)  # now the most recently used
            return found[0]
        stale = [k for k, e in self._entries.items() if e[3] < self.fold]
        if self.kept_bytes - sum(self._entries[k][1] for k in stale) + nbytes > self.limit:
            return None
        for k in stale:
            if self.kept_bytes + nbytes <= self.limit:
                break
            self._drop(k)
        this = weakref.ref(self)

        def forget(_: Any) -> None:  # a source died: its id may now name other rows
            cache = this()
            if cache is not None:
                cache._drop(full_key)

        store: dict[Any, np.ndarray] = {}
        self._entries[full_key] = (store, nbytes, [weakref.ref(r, forget) for r in roots],
                                   self.fold)
        self.kept_bytes += nbytes
        return store

    def _drop(self, full_key: Hashable) -> None:
        found = self._entries.pop(full_key, None)
        if found is not None:
            self.kept_bytes -= found[1]

    def clear(self) -> None:
        """Drop every kept block."""
        self._entries.clear()
        self.kept_bytes = 0

    @contextmanager
    def active(self) -> Iterator[FeatureCache]:
        """Within the block (one fold of the rows), fused E-steps of this thread keep their
        features here."""
        self.fold += 1
        token = _active.set(self)
        try:
            yield self
        finally:
            _active.reset(token)


def cache_for(key: Hashable, sources: Sequence[np.ndarray], nbytes: int,
              data_bytes: int) -> dict[Any, np.ndarray] | None:
    """The active cache's store for the features ``key`` of ``sources`` (see
    :meth:`FeatureCache.entry`); ``None`` without an active cache or room in it."""
    cache = _active.get()
    return None if cache is None else cache.entry(key, sources, nbytes, data_bytes)
