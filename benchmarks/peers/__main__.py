"""Time ``add(a, b)`` through toolledger and its peers in one run, and print the ratios.

``python -m benchmarks.peers [--quick] [--json | --markdown] [--clock wall|cpu] [--repeat N]
[--only STACK ...] [--group GROUP ...]``; ``--render RUN.json [--markdown]`` prints a saved
run again. The peers come with the extra ``bench`` (``pip install toolledger[bench]``); those
not installed are named on stderr and in the table's title, and the rest are timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from rich.console import Console

from ..__main__ import add_run_options, show
from ..harness import Settings, row_from_json
from ..report import machine, to_json
from . import GROUPS, INSTALL, STACKS, missing, run, versions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__)
    add_run_options(parser)
    parser.add_argument("--only", nargs="+", choices=STACKS, metavar="STACK", default=[],
                        help=f"time only these stacks: {', '.join(STACKS)}")
    parser.add_argument("--group", nargs="+", choices=GROUPS, metavar="GROUP", default=[],
                        help=f"run only these groups: {', '.join(GROUPS)}")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.render:
        return render(args.render, as_markdown=args.markdown)
    absent = missing(args.only)
    if absent:
        print(f"not installed, not timed: {', '.join(absent)} ({INSTALL})", file=sys.stderr)
    settings = Settings(quick=args.quick, repeat=args.repeat, clock_name=args.clock)
    started = time.perf_counter()
    with Console(stderr=True).status("timing toolledger and its peers…"):
        rows = run(settings, args.only, args.group)
    took = time.perf_counter() - started
    facts = {"quick": args.quick, "repeat": args.repeat, "clock": args.clock,
             "seconds": round(took, 1), "versions": versions(args.only), "missing": absent}
    if args.json:
        json.dump(to_json(rows, settings=facts), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    show(rows, title(machine(), facts), as_markdown=args.markdown)
    return 0


def title(about: dict[str, Any], facts: dict[str, Any]) -> str:
    stacks = ", ".join(f"{name} {version}" for name, version in facts.get("versions", {}).items())
    heading = (f"toolledger and its peers{' (quick)' if facts.get('quick') else ''}: "
               f"{stacks}; {about['cpus']} CPUs, {about['cpu']}, {about['implementation']} "
               f"{about['python']}; {facts.get('clock', 'wall')} clock; "
               f"{float(facts.get('seconds', 0)):.0f} s")
    if facts.get("missing"):
        heading += f"; not installed: {', '.join(facts['missing'])} ({INSTALL})"
    return heading


def render(path: str, *, as_markdown: bool) -> int:
    """Print the table of a saved ``--json`` run."""
    with open(path, encoding="utf-8") as file:
        saved = json.load(file)
    rows = [row_from_json(row) for row in saved["rows"]]
    show(rows, title(saved["machine"], saved.get("settings", {})), as_markdown=as_markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
