"""``toolledger fork``: start a new session from a prefix of an old one."""

from __future__ import annotations

import argparse
import json

import trio
from rich.console import Console
from rich.text import Text

from events.stores import JsonlStore

from ..fork import fork
from ..visible import visible
from ._common import PROG, UsageError, read_sessions

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    parser = commands.add_parser(
        "fork",
        help="start a new session from the first SEQ records of a session",
        description=(
            "Copy the first SEQ records of a session into a new session (in the same log, or "
            "in --into), recording where it came from. Open the new session with another "
            "model, policy or tools and resume it, to see what would have happened. The old "
            "session is not changed."
        ),
    )
    parser.add_argument("log", metavar="LOG", help="path of the JSONL log file")
    parser.add_argument("--at", metavar="SEQ", type=int, required=True,
                        help="the last record to keep (see `toolledger show` or jq for seqs)")
    parser.add_argument("--session", metavar="ID",
                        help="the session to fork (required if the log holds several)")
    parser.add_argument("--into", metavar="LOG2", help="write the new session to this log")
    parser.add_argument("--id", metavar="NEW", dest="new_id", help="the new session's id")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Fork the session and print the new id."""
    sessions = read_sessions(args.log, args.session)
    if len(sessions) != 1:
        known = ", ".join(sessions) or "none"
        raise UsageError(f"{args.log} holds {len(sessions)} sessions ({known}): name one with --session")
    [session_id] = sessions

    async def go() -> str:
        with JsonlStore(args.log) as source:
            if args.into is None:
                return await fork(source, session_id, at=args.at, new_session_id=args.new_id)
            with JsonlStore(args.into) as target:
                return await fork(source, session_id, at=args.at, new_session_id=args.new_id,
                                  into=target)

    try:
        new_id = trio.run(go)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    where = args.into or args.log
    if args.json:
        print(json.dumps({"session_id": new_id, "log": where,
                          "forked_from": {"session_id": session_id, "seq": args.at}}))
    else:
        old, new, log = (visible(text, newlines=False) for text in (session_id, new_id, where))
        console.print(Text(f"forked {old} at seq {args.at} into {new} ({log})"), soft_wrap=True)
        console.print(Text(f"Read it with: {PROG} show {log} --session {new}", style="dim"),
                      soft_wrap=True)
    return 0
