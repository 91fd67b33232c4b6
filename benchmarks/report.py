"""The table: printed with rich, or as Markdown, or as JSON."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from .harness import Figure, Row, Settings, fmt

__all__ = ["group_command", "machine", "markdown", "print_table", "run_group", "to_json"]


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


def group_command(prog: str, description: str | None, *, repeat: int) -> argparse.ArgumentParser:
    """The options of a group's own command (``python -m benchmarks.hosts``, ...):
    ``--quick``, ``--repeat``, ``--clock`` and ``--markdown``; the command adds its own."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, two repetitions")
    parser.add_argument("--repeat", type=int, default=repeat,
                        help=f"repetitions per figure ({repeat})")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    return parser


def run_group(run: Callable[[Settings], list[Row]], args: argparse.Namespace, *,
              title: str) -> list[Row]:
    """Run a group as :func:`group_command`'s options say, and print its table (or its
    Markdown)."""
    started = time.perf_counter()
    rows = run(Settings(quick=args.quick, repeat=args.repeat, clock_name=args.clock))
    if args.markdown:
        print(markdown(rows))
    else:
        print_table(rows, title=f"{title} ({time.perf_counter() - started:.0f} s)")
    return rows
