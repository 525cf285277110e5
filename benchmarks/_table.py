"""Markdown tables for the benchmarks' output: what `record.py` keeps in benchmarks/README.md
(and what the docs quote) is what the script prints."""

from __future__ import annotations

from collections.abc import Sequence


def markdown_row(cells: Sequence[object]) -> str:
    """One row: ``| a | b |``."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown_header(columns: Sequence[str], right: Sequence[bool] | None = None) -> str:
    """The header row and its rule (a column right-aligned where ``right`` says so)."""
    right = right or [False] * len(columns)
    rule = ["---:" if r else "---" for r in right]
    return markdown_row(columns) + "\n" + markdown_row(rule)
