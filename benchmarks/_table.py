"""Markdown tables for the benchmarks' output: what `record.py` keeps in benchmarks/README.md
(and what the docs quote) is what the script prints."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def markdown_row(cells: Sequence[object]) -> str:
    """One row: ``| a | b |``."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_header(columns: Sequence[str], right: Sequence[bool] | None = None) -> str:
    """The header row and its rule (a column right-aligned where ``right`` says so)."""
    right = right or [False] * len(columns)
    rule = ["---:" if r else "---" for r in right]
    return markdown_row(columns) + "\n" + markdown_row(rule)


def print_measures(rows: Sequence[tuple], first: str, ratio: str) -> None:
    """Print ``(name, measure, value, ratio or None)`` rows as a table, flushed (a recorded
    run's output is read while it runs)."""
    print("\n" + markdown_header([first, "measure", "value", ratio], [False, False, True, True]))
    for name, measure, value, r in rows:
        print(markdown_row([name, measure, f"{value:.3f}", "" if r is None else f"{r:.2f}"]))
    sys.stdout.flush()
