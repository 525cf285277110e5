"""Per-thread scratch buffers reused from chunk to chunk of an E-step.

A chunk's temporaries (a (K, n) score block, centred features) are large enough that allocating
them afresh for every chunk costs page faults comparable to the arithmetic itself; kernels take
them from here instead. Buffers are thread-local (model-parallel threads never share one) and
must not outlive the chunk that asked for them.
"""

from __future__ import annotations

import math
import threading

import numpy as np

__all__ = ["scratch"]

_local = threading.local()


def scratch(name: str, shape: tuple[int, ...], dtype: np.dtype | type = np.float64) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` owned by this thread, reused by ``name``.

    >>> a = scratch("demo", (2, 3))
    >>> b = scratch("demo", (3, 2))
    >>> bool(np.shares_memory(a, b))
    True
    """
    dtype = np.dtype(dtype)
    cache = _local.__dict__.setdefault("buffers", {})
    size = math.prod(shape)
    buf = cache.get((name, dtype))
    if buf is None or buf.size < size:
        buf = np.empty(max(size, 1), dtype=dtype)
        cache[(name, dtype)] = buf
    return buf[:size].reshape(shape)
