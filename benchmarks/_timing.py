"""How the single-thread micro-benchmarks time a call: its best CPU time over a few repeats."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_cpu_seconds(call: Callable[[], object], repeats: int) -> float:
    """The least CPU time of ``repeats`` calls, after one warm call (scratch buffers, compiled
    code loaded); on one thread CPU time is steadier than wall time under load."""
    call()
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        call()
        best = min(best, time.process_time() - t)
    return best
