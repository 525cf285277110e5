"""Data-parallel backends behind one interface (:class:`EncodedDataHandle`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mixfold.backends._interface import EncodedDataHandle, FoldResult
from mixfold.backends.local import DEFAULT_CHUNK_ROWS, LocalEncodedData
from mixfold.families._protocol import Encoded

__all__ = ["EncodedDataHandle", "FoldResult", "LocalEncodedData", "make_handle", "BACKENDS"]

#: Backend names ``optimize(backend=...)`` accepts.
BACKENDS = ("local",)


def make_handle(backend: Any, enc: Encoded, weights: np.ndarray | None, *,
                chunk_rows: int | None = None, num_workers: int | None = None) -> EncodedDataHandle:
    """Place encoded rows on ``backend`` (a name from :data:`BACKENDS`)."""
    if backend == "local":
        if num_workers not in (None, 1):
            raise ValueError(f"the local backend runs one worker, got num_workers={num_workers}")
        return LocalEncodedData(enc, weights, chunk_rows or DEFAULT_CHUNK_ROWS)
    raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
