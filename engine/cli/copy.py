"""``toolledger copy``: move sessions from one store to another, their chain proven on arrival.

Every session copied is checked first (its chain must verify in the source), refused if the
target already holds it, written in one batch, and verified in the target against the
source's head hash (see :mod:`events.stores.copying`). Sessions the target holds are refused
before anything is written.
"""

from __future__ import annotations

import argparse
from contextlib import closing

import trio
from rich.console import Console
from rich.text import Text

from events.integrity import SessionChain
from events.stores.copying import CopyError, copy_session

from ..core.visible import visible, visible_json
from ._common import (
    LOG_HELP,
    UsageError,
    choose_session,
    counted,
    load_key,
    open_log,
    refuse_writing_over,
    shown,
)

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    parser = commands.add_parser(
        "copy",
        help="copy sessions from one log to another (files, databases), chain intact",
        description=(
            "Copy every session of SRC (or those --session names) into DST, each a JSONL "
            "file's path or a store URL (sqlite:///runs.db, postgresql://...). A session "
            "is copied only if its hash chain verifies in SRC and DST does not hold it yet; "
            "it is written whole, and verified in DST against SRC's head hash. SRC is only "
            "read. With a key, both are opened with it."
        ),
    )
    parser.add_argument("source", metavar="SRC", help=LOG_HELP)
    parser.add_argument("target", metavar="DST",
                        help="where the sessions go: a JSONL file's path, or a store URL")
    parser.add_argument(
        "--session", metavar="ID", action="append", default=[],
        help="copy only this session (its full id, or a prefix that names one); repeatable",
    )
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--key-file", metavar="PATH",
                     help="the HMAC key of both logs: the file's exact bytes")
    key.add_argument("--key-env", metavar="VAR",
                     help="the HMAC key of both logs: the value of environment variable VAR")
    parser.add_argument("--json", action="store_true", help="print what was copied as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Copy the sessions and print each one's head in the target."""
    refuse_writing_over("DST", args.target, [args.source], args.key_file,
                        instead="copy into another log")
    key = load_key(args.key_file, args.key_env)

    async def go() -> list[SessionChain]:
        with closing(open_log(args.source, key=key)) as source, \
                closing(open_log(args.target, key=key, read_only=False)) as target:
            ids = await source.sessions()
            chosen = [choose_session(args.source, ids, wanted) for wanted in args.session]
            chosen = list(dict.fromkeys(chosen)) if args.session else ids
            held = [sid for sid in chosen if await target.last_seq(sid)]
            if held:
                raise UsageError(
                    f"{shown(args.target)} already holds {', '.join(map(repr, held))}: copy never "
                    f"overwrites or extends a session; nothing was copied (leave them out "
                    f"with --session, or copy into another store)")
            return [await copy_session(source, target, sid) for sid in chosen]

    try:
        copied = trio.run(go)
    except CopyError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        sessions = [{"session_id": c.session_id, "records": c.records, "head": c.head}
                    for c in copied]
        print(visible_json({"source": shown(args.source), "target": shown(args.target),
                            "sessions": sessions}))
        return 0
    source, target = (visible(shown(text), newlines=False) for text in (args.source, args.target))
    for chain in copied:
        console.print(Text.assemble(
            "copied ", (visible(chain.session_id, newlines=False), "bold"),
            f"  {chain.records} records, verified in {target}, head ", (chain.head or "", "cyan"),
        ), soft_wrap=True)
    console.print(Text(f"{counted(len(copied), 'session')} copied from "
                       f"{source} to {target}", style="dim"), soft_wrap=True)
    return 0
