"""The ``toolledger`` command: run the demo, read, check and replay logs, serve tools over MCP.

Each subcommand lives in its own module here (``demo``, ``show``, …) with an ``add_parser``
that declares it and a ``run(args, console)`` that does it. Mistakes a user can make (a missing
file, a corrupt or inconsistent log, an unknown session) print one line to stderr and exit 1;
there is no traceback for them. Nor for anything else: an error nobody foresaw is one line too,
with its type (``TOOLLEDGER_TRACEBACK=1`` shows the traceback, to report it).

Everything the commands print goes through a :class:`~engine.present.console.VisibleConsole` (or
:func:`~engine.core.visible.visible_json`, or :func:`~._common.error_line`): text from a log is shown
as visible escapes, never obeyed by the terminal.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from events.errors import LogError

from ..present.console import VisibleConsole
from . import approvals, copy, db, demo, fork, otel, replay, serve, show, tail, verify, web
from ._common import PROG, UsageError, error_line

__all__ = ["build_parser", "main"]

COMMANDS = (demo, show, tail, fork, copy, verify, replay, db, serve, approvals, otel, web)


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors quote the command line as visible escapes too."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, error_line(message, self.prog) + "\n")


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a tree not installed)."""
    try:
        return importlib.metadata.version(PROG)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one subcommand per action."""
    parser = _Parser(
        prog=PROG,
        description="Run an LLM agent's tool calls as an event-sourced process, and read the logs.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 1
    if args.command is None:  # no command: say what there is
        parser.print_help()
        return 0
    console = VisibleConsole(highlight=False)
    try:
        status: int = args.run(args, console)
        return status
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
    except Exception as exc:
        if os.environ.get("TOOLLEDGER_TRACEBACK"):
            raise
        _fail(f"unexpected {type(exc).__name__}: {exc} (a bug in {PROG}: please report it; "
              "TOOLLEDGER_TRACEBACK=1 shows where it happened)")
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
    print(error_line(message), file=sys.stderr)
