"""``toolledger db init``: create a database store's tables, or upgrade them.

Schema changes are explicit: a store never upgrades the tables it finds, it says to run this
(see :mod:`events.stores.sqlite_schema`). A store that keeps no tables (a JSONL file) needs
none, and is refused here.
"""

from __future__ import annotations

import argparse
from contextlib import closing

import trio
from rich.console import Console
from rich.text import Text

from events.stores.urls import parse_store_url

from ..core.visible import visible
from ._common import UsageError, open_log, shown

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare ``db`` and its one subcommand, ``init``."""
    parser = commands.add_parser(
        "db", help="set up a database store (db init URL)",
        description="Set up a database that holds logs.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = actions.add_parser(
        "init",
        help="create the tables in a database, or upgrade them to this version's layout",
        description=(
            "Create the store's tables in the database URL names (sqlite:///runs.db, "
            "postgresql://user@host/db), or upgrade tables an older toolledger made to this "
            "version's layout. Idempotent: current tables are left as they are. Refused for "
            "tables laid out by a newer toolledger."
        ),
    )
    init.add_argument("url", metavar="URL", help="the database: sqlite:///PATH or postgresql://…")
    init.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Create or upgrade the tables."""

    try:
        kind = parse_store_url(args.url).kind
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if kind in ("jsonl", "memory"):
        raise UsageError(f"{args.url} names a {kind} store, which keeps no tables to create: "
                         f"use it as it is (db init is for sqlite:/// and postgresql:// URLs)")

    async def init() -> None:
        with closing(open_log(args.url, read_only=False)) as store:
            await getattr(store, "init_schema")()

    trio.run(init)
    console.print(Text(f"{visible(shown(args.url), newlines=False)}: tables ready"),
                  soft_wrap=True)
    return 0
