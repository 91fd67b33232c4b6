"""``toolledger replay``: run each session of a log again and report where it now diverges.

Live tools run only from a log verified with its key (``--key-file``, ``--key-env``, as for
``verify``), or with ``--unverified``: the rule :func:`~engine.replay.redrive` applies too
(:mod:`engine.replay.trust`). The log is verified before anything runs, the ``--setup``
module included.

Exit status: 0 when nothing diverged, 1 when something did (the report says what), and 1 with
one line on stderr for a mistake the user can fix (a missing file, a bad ``--setup``, a log
that does not verify, live tools from a log that was not verified).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from typing import cast
from contextlib import closing
from functools import partial

import trio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from events.errors import UnverifiedRecordError
from events.stores.base import ArtifactStore, keeps_artifacts
from events.types import Record

from ..core.visible import visible, visible_json
from ..replay import ReplayError, ReplayReport, ReplaySetup, ToolMode, VerifiedRecords, redrive
from ..replay.clock import virtual_clock
from ..replay.trust import UnverifiedLogError, check_live
from ._common import LOG_HELP, UsageError, load_key, open_log, read_sessions

__all__ = ["add_parser", "load_setup", "run"]

#: A replay this long (sessions, or records in all) gets a progress bar on a terminal.
LONG_REPLAY_SESSIONS = 5
LONG_REPLAY_RECORDS = 500
#: What to do when live tools were to run from a log that was not verified.
UNVERIFIED_REMEDY = (
    "Give the log's key with --key-file PATH or --key-env VAR (as to `toolledger verify`), or "
    "add --unverified to run the tools anyway (only for a log nobody else could have written)."
)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    replay = commands.add_parser(
        "replay",
        help="run the sessions of a log again and report where they now diverge",
        description=(
            "Re-drive each session of a log: send its user messages again, answer the "
            "model from its recorded messages and the approver from its recorded answers, "
            "and compare the calls and the transcript with the log. With --tools recorded (the "
            "default) each call is answered from its recorded result, so it works on any log "
            "without its code, and --setup can give today's handlers and policy to see what "
            "they would decide about these calls. With --tools live the real tools run "
            "(--setup must give them), to see where they now behave differently: only from a "
            "log verified with its key (--key-file, --key-env), or with --unverified. The "
            "report names the first divergence of each call, and says if the log was not "
            "verified. Exit status: 0 nothing diverged, 1 something did (or the log could "
            "not be replayed, or did not verify). The log is only read."
        ),
    )
    replay.add_argument("log", metavar="LOG", help=LOG_HELP)
    replay.add_argument(
        "--session",
        metavar="ID",
        help="replay only this session (its full id, or a prefix that names one session)",
    )
    replay.add_argument(
        "--tools",
        choices=("recorded", "live"),
        default="recorded",
        help=(
            "recorded: answer each call from its recorded result (default; needs no code); "
            "live: run the real tools, which --setup must give (they act on the world again)"
        ),
    )
    replay.add_argument(
        "--setup",
        metavar="MODULE:NAME",
        help=(
            "replay with what MODULE's NAME gives: a ReplaySetup (tools, handlers, "
            "result_handlers, rules, max_depth) or a function of no arguments returning one. "
            "What it leaves out is replayed as the log shows it"
        ),
    )
    trust = replay.add_mutually_exclusive_group()
    trust.add_argument("--key-file", metavar="PATH",
                       help="the HMAC key the log was written with: the file's exact bytes "
                            "(every record is verified with it before anything runs)")
    trust.add_argument("--key-env", metavar="VAR",
                       help="the HMAC key the log was written with: the value of environment "
                            "variable VAR")
    trust.add_argument("--unverified", action="store_true",
                       help="with --tools live and no key: run the real tools from a log that "
                            "was not verified (a grant in it may be forged by anyone who can "
                            "write the file)")
    replay.add_argument("--json", action="store_true",
                        help="print the reports as one JSON document")
    replay.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Replay the sessions of the log; 0 if none diverged, else 1."""
    mode: ToolMode = args.tools
    key = load_key(args.key_file, args.key_env)
    try:
        check_live(mode, verified=key is not None, unverified=args.unverified,
                   remedy=UNVERIFIED_REMEDY)
        sessions = read_sessions(args.log, args.session, key)  # with a key, each verified
    except (UnverifiedLogError, UnverifiedRecordError) as exc:
        raise UsageError(f"{exc} Nothing was replayed.") from exc
    setup = load_setup(args.setup) if args.setup else ReplaySetup()
    if mode == "live" and not setup.tools:
        raise UsageError(
            "--tools live runs the real tools: give them with --setup MODULE:NAME "
            "(a ReplaySetup whose tools are the log's tools)"
        )
    total = sum(len(records) for records in sessions.values())
    long = len(sessions) >= LONG_REPLAY_SESSIONS or total >= LONG_REPLAY_RECORDS
    clock = None if mode == "live" else virtual_clock()
    replay_all = partial(_replay_all, sessions, mode, setup,
                         verified=key is not None, unverified=args.unverified,
                         log=args.log, key=key)
    try:
        if long and console.is_terminal and not args.json:
            with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("records"), TimeElapsedColumn(),
                          console=console, transient=True) as bar:
                task = bar.add_task("replay", total=total)
                reports = trio.run(replay_all, lambda done: bar.update(task, completed=done),
                                   clock=clock)
        else:
            reports = trio.run(replay_all, None, clock=clock)
    except ReplayError as exc:
        raise UsageError(f"{args.log}: {exc}") from exc
    ok = all(report.ok for report in reports)
    if args.json:
        print(visible_json({"log": args.log, "tools": mode, "verified": key is not None, "ok": ok,
                            "sessions": [report.to_json() for report in reports]}),
              file=console.file)
        return 0 if ok else 1
    if not reports:
        console.print(Text(f"{visible(args.log, newlines=False)} holds no sessions", style="dim"),
                      soft_wrap=True)
    for index, report in enumerate(reports):
        if index:
            console.print()
        console.print(report, soft_wrap=True)
    return 0 if ok else 1


async def _replay_all(
    sessions: dict[str, list[Record]],
    mode: ToolMode,
    setup: ReplaySetup,
    progress: Callable[[int], None] | None,
    *,
    verified: bool,
    unverified: bool,
    log: str,
    key: bytes | None,
) -> list[ReplayReport]:
    """Each session replayed; ``verified``: a store given the key read (and so verified) them.
    The log's store is open while they are, for the artifacts it keeps (the whole of long
    results, which the recorded tools give back)."""
    with closing(open_log(log, key=key)) as store:
        artifacts = cast(ArtifactStore, store) if keeps_artifacts(store) else None
        reports = []
        done = 0
        for sid, records in sessions.items():
            def report(covered: int, _total: int, before: int = done) -> None:
                if progress is not None:
                    progress(before + covered)

            reports.append(await redrive(
                VerifiedRecords(session_id=sid, records=records) if verified else records,
                tools=setup.tools, tool_mode=mode, unverified=unverified,
                handlers=setup.handlers, result_handlers=setup.result_handlers,
                rules=setup.rules, max_depth=setup.max_depth, progress=report,
                artifacts=artifacts,
            ))
            done += len(records)
        return reports


def load_setup(spec: str) -> ReplaySetup:
    """The :class:`ReplaySetup` that ``MODULE:NAME`` names (calling it if it is a function).
    Any problem is a :class:`UsageError` saying which."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise UsageError(f"--setup {spec!r}: expected MODULE:NAME, e.g. myproject.replay:setup")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: modules of this directory import
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UsageError(f"--setup {spec}: no module named {exc.name!r} (run from the "
                             f"directory that holds it, or install it)") from exc
        raise UsageError(f"--setup {spec}: importing {module_name} failed: {exc}") from exc
    except Exception as exc:
        raise UsageError(f"--setup {spec}: importing {module_name} failed: "
                         f"{type(exc).__name__}: {exc}") from exc
    try:
        value = getattr(module, name)
    except AttributeError:
        raise UsageError(f"--setup {spec}: module {module_name} has no {name!r}") from None
    if not isinstance(value, ReplaySetup) and callable(value):
        try:
            value = value()
        except Exception as exc:
            raise UsageError(f"--setup {spec}: calling {name}() failed: "
                             f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(value, ReplaySetup):
        raise UsageError(f"--setup {spec}: {name} is a {type(value).__name__}, not a "
                         f"ReplaySetup or a function that returns one")
    return value
