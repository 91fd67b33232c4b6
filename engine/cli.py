"""The ``toolledger`` command: run the demo, or show what a log holds.

``toolledger demo`` runs a real session over a tiny project (see :mod:`engine.demo`) and prints
its transcript and call tree; ``toolledger show LOG`` folds every session of a JSONL log and
prints the same two views (one code path: :mod:`engine.render`). Mistakes a user can make (a
missing file, a corrupt or inconsistent log, an unknown session) print one line to stderr and
exit 1; there is no traceback for them.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from functools import partial

import trio
from rich.console import Console
from rich.text import Text

from events.errors import LogError
from events.stores.jsonl import read_jsonl
from events.types import Record

from .approvals import Approver, approve_all, deny_all, terminal_approver
from .demo import run_demo
from .reducers import LogInconsistency, fold
from .render import print_session

__all__ = ["build_parser", "main"]

PROG = "toolledger"


class UsageError(Exception):
    """A mistake the user can fix; its message is printed as one line."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one subcommand per action."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run an LLM agent's tool calls as an event-sourced process, and read the logs.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run a scripted session with real tools over a tiny Python project",
        description=(
            "Write a tiny Python project with a bug into DIR, then run a scripted session whose "
            "tools do real work there: read a file, run the tests, write the fix (this asks "
            "for approval), and review the change (two nested calls). Prints the transcript, "
            "the call tree and where the log is (DIR/session.jsonl, recreated on every run)."
        ),
    )
    demo.add_argument(
        "--approve",
        choices=("all", "none", "ask"),
        default=None,
        help=(
            "who approves the calls that need it: all (grant every one), none (refuse every "
            "one; the session still finishes), ask (ask at the terminal). Default: ask when "
            "standard input is a terminal, else none (safe)"
        ),
    )
    demo.add_argument(
        "--workdir",
        metavar="DIR",
        default="toolledger-demo",
        help="where to write the project and its log (default: ./toolledger-demo)",
    )

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 1
    console = Console(highlight=False)
    try:
        if args.command == "demo":
            return _demo(console, args.approve, args.workdir)
        return _show(console, args.log, args.session)
    except UsageError as exc:
        _fail(str(exc))
    except LogError as exc:
        _fail(str(exc))
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (`| head`): nothing left to say
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        _fail(f"{exc.strerror or exc}{where}")
    except KeyboardInterrupt:
        _fail("interrupted")
    return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


def _fail(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)


def _approver(choice: str) -> Approver:
    """The approver ``--approve`` names (the choice is already resolved from its default)."""
    if choice == "all":
        return approve_all
    if choice == "none":
        return deny_all
    if not sys.stdin.isatty():
        raise UsageError("--approve ask needs a terminal to ask at; use --approve all or none")
    return terminal_approver()


def _demo(console: Console, approve: str | None, workdir: str) -> int:
    note = ""
    if approve is None:
        approve = "ask" if sys.stdin.isatty() else "none"
        if approve == "none":
            note = (": no terminal to ask at, so calls that need approval are refused; "
                    "--approve all grants them")
    approver = _approver(approve)
    console.print(Text(f"Running the demo in {workdir} (approvals: {approve}{note})", style="dim"),
                  soft_wrap=True)
    console.print()
    run = trio.run(partial(run_demo, workdir, approver))
    print_session(run.projection, console)
    console.print()
    # soft_wrap: a long path stays on one line, so it can be copied
    console.print(Text.assemble(("Log: ", "bold"), str(run.log_path)), soft_wrap=True)
    console.print(Text(f"Read it again with: {PROG} show {run.log_path}", style="dim"),
                  soft_wrap=True)
    return 0


def _show(console: Console, path: str, session: str | None) -> int:
    records = read_jsonl(path)
    by_session: dict[str, list[Record]] = {}
    for record in records:
        by_session.setdefault(record.session_id, []).append(record)
    if session is not None:
        chosen = [sid for sid in by_session if sid == session] or [
            sid for sid in by_session if sid.startswith(session)
        ]
        if len(chosen) != 1:
            known = ", ".join(by_session) or "none"
            problem = "matches several sessions" if chosen else "is not a session in it"
            raise UsageError(f"{path}: {session!r} {problem} (sessions: {known})")
        by_session = {chosen[0]: by_session[chosen[0]]}
    if not by_session:
        console.print(Text(f"{path} holds no sessions", style="dim"), soft_wrap=True)
        return 0
    try:
        projections = [fold(session_records) for session_records in by_session.values()]
    except LogInconsistency as exc:
        raise UsageError(f"{path}: inconsistent log: {exc}") from exc
    for index, projection in enumerate(projections):
        if index:
            console.print()
        print_session(projection, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
