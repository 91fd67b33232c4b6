"""``toolledger show``: print the sessions a log holds."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.text import Text

from ..render import print_session
from ._common import fold_sessions, read_sessions

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    show = commands.add_parser(
        "show",
        help="print the transcript and call tree of each session in a JSONL log",
        description=(
            "Read a JSONL log, rebuild each session from its records, and print its transcript "
            "and call tree. The log is only read, never changed."
        ),
    )
    show.add_argument("log", metavar="LOG", help="path of the JSONL log file")
    show.add_argument(
        "--session",
        metavar="ID",
        help="show only this session (its full id, or a prefix that names one session)",
    )
    show.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Fold each session of the log and print its transcript and call tree."""
    path = args.log
    sessions = read_sessions(path, args.session)
    if not sessions:
        console.print(Text(f"{path} holds no sessions", style="dim"), soft_wrap=True)
        return 0
    for index, projection in enumerate(fold_sessions(path, sessions)):
        if index:
            console.print()
        print_session(projection, console)
    return 0
