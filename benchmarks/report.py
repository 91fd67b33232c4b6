"""The table: printed with rich, or as Markdown, or as JSON."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from .harness import Figure, Row, fmt

__all__ = ["machine", "markdown", "print_table", "to_json"]


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def _cell(figure: Figure) -> str:
    value = f"{fmt(figure.median, figure.unit)} {figure.unit}"
    if len(figure.samples) > 1:
        value += f" ({fmt(figure.low, figure.unit)}–{fmt(figure.high, figure.unit)})"
    return value


def _target(row: Row) -> str:
    if not row.target:
        return ""
    mark = {True: "met", False: "NOT met", None: ""}[row.met]
    if row.met is False and row.floor:
        mark += f"; its floor alone misses it ({row.floor})"
    return f"{row.target}: {mark}"


def _lines(rows: Sequence[Row]) -> list[list[str]]:
    return [
        [
            row.group,
            row.figure.name,
            _cell(row.figure),
            "" if row.baseline is None else row.baseline.name,
            "" if row.baseline is None else _cell(row.baseline),
            row.comparison,
            _target(row),
        ]
        for row in rows
    ]


HEADERS = ["group", "benchmark", "median (min–max)", "baseline", "baseline median (min–max)",
           "vs baseline", "target"]


def print_table(rows: Sequence[Row], *, title: str, console: Console | None = None) -> None:
    """The table on the terminal."""
    console = console or Console(width=max(Console().width, 180))
    table = Table(title=title, show_lines=False)
    for header in HEADERS:
        table.add_column(header, overflow="fold")
    for line, row in zip(_lines(rows), rows):
        style = "red" if row.met is False else None
        table.add_row(*line, style=style)
    console.print(table)
    notes = [f"{row.figure.name}: {row.note}" for row in rows if row.note]
    for note in notes:
        console.print(f"  note — {note}")


def markdown(rows: Sequence[Row]) -> str:
    """The table as Markdown, for docs/performance.md."""
    out = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for line in _lines(rows):
        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |")
    return "\n".join(out)


def to_json(rows: Sequence[Row], *, settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "machine": machine(),
        "settings": settings,
        "rows": [row.as_json() for row in rows],
    }
