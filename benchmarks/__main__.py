"""Run toolledger's benchmarks and print the table.

``python -m benchmarks [--quick] [--json | --markdown] [--clock wall|cpu] [--repeat N]
[--only GROUP ...]``; ``python -m benchmarks --render RUN.json [--markdown]`` prints a saved
run again. docs/performance.md says what each figure includes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from . import GROUPS, run
from .harness import Row, Settings, row_from_json
from .report import machine, markdown, print_table, to_json


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark command takes: sizes, output, repetitions, clock, render."""
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and two repetitions: checks that everything runs")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions per figure (7)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time (default), or the process's CPU time, which a busy "
                             "neighbour on a shared machine does not inflate")
    parser.add_argument("--render", metavar="FILE",
                        help="print the table of a run saved with --json, without running")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    add_run_options(parser)
    parser.add_argument("--only", nargs="+", choices=sorted(GROUPS), metavar="GROUP",
                        help=f"run only these groups: {', '.join(GROUPS)}")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.render:
        return render(args.render, as_markdown=args.markdown)
    settings = Settings(quick=args.quick, repeat=args.repeat, clock_name=args.clock)
    started = time.perf_counter()
    progress = Console(stderr=True)
    rows = []
    for name in GROUPS:
        if args.only and name not in args.only:
            continue
        with progress.status(f"running {name}…"):
            rows.extend(run(settings, [name]))
    return _print(rows, args, time.perf_counter() - started)


def _print(rows: list[Row], args: argparse.Namespace, took: float) -> int:
    """Print a run's rows as :func:`add_run_options`' options ask: JSON, Markdown or a table."""
    if args.json:
        out = to_json(rows, settings={"quick": args.quick, "repeat": args.repeat,
                                      "clock": args.clock, "seconds": round(took, 1)})
        json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    show(rows, title(machine(), quick=args.quick, seconds=took, clock=args.clock),
         as_markdown=args.markdown)
    return 0


def command(prog: str, description: str | None, run_rows: Callable[[Settings], list[Row]],
            argv: list[str] | None, clock: str | None = None) -> int:
    """The ``main`` of one benchmark module's own command (``python -m benchmarks.schemas``,
    ...): the options every benchmark takes, then its rows as a table, Markdown or JSON, or
    a saved run rendered again; so each module says only what it measures. ``clock``: the
    one clock a module's figures mean anything on (``--clock`` then names nothing else)."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(parser)
    args = parser.parse_args(argv)
    if args.render:
        return render(args.render, as_markdown=args.markdown)
    if clock is not None:
        args.clock = clock
    settings = Settings(quick=args.quick, repeat=args.repeat, clock_name=args.clock)
    started = time.perf_counter()
    rows = run_rows(settings)
    return _print(rows, args, time.perf_counter() - started)


def title(about: dict[str, Any], *, quick: bool, seconds: float, clock: str = "wall") -> str:
    return (f"toolledger benchmarks{' (quick)' if quick else ''}: {about['cpus']} CPUs, "
            f"{about['cpu']}, {about['implementation']} {about['python']}; {clock} clock; "
            f"{seconds:.0f} s")


def show(rows: list[Row], heading: str, *, as_markdown: bool) -> None:
    if as_markdown:
        print(f"{heading}\n\n{markdown(rows)}")
    else:
        print_table(rows, title=heading)


def render(path: str, *, as_markdown: bool) -> int:
    """Print the table of a saved ``--json`` run."""
    with open(path, encoding="utf-8") as file:
        saved = json.load(file)
    rows = [row_from_json(row) for row in saved["rows"]]
    settings = saved.get("settings", {})
    heading = title(saved["machine"], quick=bool(settings.get("quick")),
                    seconds=float(settings.get("seconds", 0)),
                    clock=str(settings.get("clock", "wall")))
    show(rows, heading, as_markdown=as_markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
