"""``toolledger tail``: print a session's records one a line; with ``--follow``, as they come.

A progress update's streamed output follows its line, one line of output a line, so ``tail
-f`` shows a running tool's output as it comes.

With ``--follow`` it is the way to watch a running session from another terminal: it prints
what the log holds, then each record the session's writer appends, from any process, until
interrupted (Ctrl-C ends it quietly, status 0). It reads through the store's
:meth:`~events.stores.EventStore.follow`, so it never slows the writer down. The log is only
read.
"""

from __future__ import annotations

import argparse
import time
from contextlib import closing

import trio
from rich.console import Console
from rich.text import Text

from events.codec import encode_record
from events.types import Record, ToolProgress

from ..core.visible import visible_json
from ..present.progress import OUTPUT_MARK, streamed_lines
from ..present.render import short_json
from ._common import LOG_HELP, UsageError, choose_session, load_key, open_log

__all__ = ["add_parser", "record_line", "run"]

#: How much of an event's data a line shows.
DATA_WIDTH = 100


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    parser = commands.add_parser(
        "tail",
        help="print a session's records one a line; --follow to watch it as it runs",
        description=(
            "Print the records of a session, one a line: seq, time (UTC), type and the "
            "start of the event's data. With --follow, keep printing each record as it is "
            "appended, by any process, until interrupted: watch a running session from "
            "another terminal. The log is only read."
        ),
    )
    parser.add_argument("log", metavar="LOG", help=LOG_HELP)
    parser.add_argument(
        "--session", metavar="ID",
        help="the session (its full id, or a prefix that names one); required if the log "
             "holds several. With --follow, an id the log does not hold yet is waited for",
    )
    parser.add_argument("--after", metavar="SEQ", type=int, default=0,
                        help="start after this seq (default: from the first record)")
    parser.add_argument("-f", "--follow", action="store_true",
                        help="keep printing records as they are appended, until interrupted")
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--key-file", metavar="PATH",
                     help="the log's HMAC key (the file's exact bytes): verify every record")
    key.add_argument("--key-env", metavar="VAR",
                     help="the log's HMAC key: the value of environment variable VAR")
    parser.add_argument("--json", action="store_true",
                        help="print each record as one JSON object a line (JSON Lines)")
    parser.set_defaults(run=run)


def record_line(record: Record) -> Text:
    """One line about ``record``: seq, time (UTC), type, and the start of its data. A
    progress update that streamed output (``content``) has it on the lines below, each
    marked, as the tool wrote it; its line says where a forwarded one came from
    (``source``) and leaves out the output it repeats."""
    data = encode_record(record)
    stamp = time.strftime("%H:%M:%S", time.gmtime(record.time))
    event = record.event
    shown = data["data"]
    if isinstance(event, ToolProgress) and event.content:
        shown = {key: value for key, value in shown.items() if key != "content"}
    line = Text.assemble(
        (f"{record.seq:>5}", "bold"), f"  {stamp}  ", (data["type"], "cyan"),
        "  ", short_json(shown, DATA_WIDTH),
    )
    if isinstance(event, ToolProgress) and event.source is None:
        for output in streamed_lines(event):
            line.append(f"\n{'':17}{OUTPUT_MARK}", style="dim")
            line.append(output)
    return line


def run(args: argparse.Namespace, console: Console) -> int:
    """Print the session's records (and, with ``--follow``, the ones to come)."""
    key = load_key(args.key_file, args.key_env)

    def show(record: Record) -> None:
        if args.json:
            print(visible_json(encode_record(record)), flush=True)
        else:
            console.print(record_line(record), soft_wrap=True, overflow="ignore", crop=False)

    async def tail() -> None:
        with closing(open_log(args.log, key=key)) as store:
            session_id = _session(args, await store.sessions())
            if args.follow:
                async for record in store.follow(session_id, after=args.after):
                    show(record)
            else:
                for record in await store.read(session_id, after=args.after):
                    show(record)

    try:
        trio.run(tail)
    except KeyboardInterrupt:  # the way out of --follow
        if not args.follow:
            raise
    return 0


def _session(args: argparse.Namespace, ids: list[str]) -> str:
    """The session to print: the one ``--session`` names, or the log's only one."""
    if args.session is None:
        if len(ids) != 1:
            known = ", ".join(ids) or "none"
            raise UsageError(f"{args.log} holds {len(ids)} sessions ({known}): name one with "
                             f"--session")
        return ids[0]
    if args.follow and not any(sid.startswith(args.session) for sid in ids):
        return str(args.session)  # not started yet: wait for it
    return choose_session(args.log, ids, args.session)
