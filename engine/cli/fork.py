"""``toolledger fork``: start a new session from a prefix of an old one.

The source log is only read when the copy goes to another log (``--into``); a target that is
not a log is refused, never cut. The records copied are verified first: the session's chain
is checked as ``toolledger verify`` would (with the key, if given, with which the keyed store
also checks every record it reads), so a fork never seals again what a broken chain shows
changed. Either log may be a path or a store URL.
"""

from __future__ import annotations

import argparse
import json
from contextlib import closing

import trio
from rich.console import Console
from rich.text import Text

from events.errors import CorruptLogError, SessionInUse, UnverifiedRecordError
from events.stores import EventStore
from events.stores.copying import CopyError, verified_chain

from ..core.visible import visible
from ..runtime.fork import fork
from ._common import (
    LOG_HELP,
    PROG,
    UsageError,
    load_key,
    open_log,
    read_sessions,
    refuse_writing_over,
)

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
    parser.add_argument("log", metavar="LOG", help=LOG_HELP)
    parser.add_argument("--at", metavar="SEQ", type=int, required=True,
                        help="the last record to keep (see `toolledger show` or jq for seqs)")
    parser.add_argument("--session", metavar="ID",
                        help="the session to fork (required if the log holds several)")
    parser.add_argument("--into", metavar="LOG2",
                        help="write the new session to this log (a path or a store URL)")
    parser.add_argument("--id", metavar="NEW", dest="new_id", help="the new session's id")
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--key-file", metavar="PATH",
                     help="the HMAC key of the logs: the file's exact bytes (the source is "
                          "verified with it, the new session sealed with it)")
    key.add_argument("--key-env", metavar="VAR",
                     help="the HMAC key of the logs: the value of environment variable VAR")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Fork the session and print the new id."""
    if args.into is not None:
        refuse_writing_over("--into", args.into, [args.log], args.key_file,
                            instead="to fork within the log, leave out --into")
    key = load_key(args.key_file, args.key_env)
    sessions = read_sessions(args.log, args.session, key)
    if len(sessions) != 1:
        known = ", ".join(sessions) or "none"
        raise UsageError(f"{args.log} holds {len(sessions)} sessions ({known}): name one with --session")
    [session_id] = sessions

    async def go() -> str:
        if args.into is None:
            with closing(open_log(args.log, key=key, read_only=False)) as store:
                await _check_chain(args.log, store, session_id)
                return await fork(store, session_id, at=args.at, new_session_id=args.new_id)
        with closing(open_log(args.log, key=key)) as source, \
                closing(_target(args.into, key)) as target:
            await _check_chain(args.log, source, session_id)
            return await fork(source, session_id, at=args.at, new_session_id=args.new_id,
                              into=target)

    try:
        new_id = trio.run(go)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except SessionInUse as exc:  # the new session's id, held by another writer
        raise UsageError(f"{exc}. Nothing was forked: fork again once it is free, or choose "
                         f"another --id") from exc
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


async def _check_chain(log: str, store: EventStore, session_id: str) -> None:
    """Refuse a session whose chain does not verify (with the store's key, if it has one)."""
    try:
        await verified_chain(store, session_id)
    except CopyError as exc:
        raise UsageError(f"{exc}; a fork copies only records whose chain verifies "
                         f"(see `{PROG} verify {log}`)") from exc


def _target(log: str, key: bytes | None) -> EventStore:
    """The store of the log the fork goes into; a file that is not a log is refused."""
    try:
        return open_log(log, key=key, read_only=False)
    except UnverifiedRecordError:
        raise
    except CorruptLogError as exc:
        raise UsageError(
            f"--into {log} is not a toolledger log, or a corrupt one (line {exc.line}: "
            f"{exc.problem}); it was not changed: choose a new file or a sound log"
        ) from exc
