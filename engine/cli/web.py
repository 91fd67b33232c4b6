"""``toolledger web STORE_URL``: serve the web console over a log (docs/web.md)."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing

import trio
from rich.console import Console

from ._common import (
    LOG_HELP,
    PLUGIN_HELP,
    PROG,
    UsageError,
    load_key,
    load_renderers,
    open_log,
    shown,
)
from .serve import LOOPBACK, _listening

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare ``web`` and its options."""
    web = commands.add_parser(
        "web",
        help="serve the web console: watch sessions live, answer approvals and questions",
        description=(
            "Serve a web console over the log: its sessions, each one live (transcript, call "
            "tree, policy reasons, approvals, results), and every approval and question that "
            "waits, with controls to answer them. It listens on 127.0.0.1 unless told "
            "otherwise and prints the URL to open, with a token drawn for this start. See "
            "docs/web.md."
        ),
    )
    web.add_argument("log", metavar="STORE_URL", help=LOG_HELP)
    web.add_argument("--host", default=LOOPBACK,
                     help="the address to listen on (default 127.0.0.1: this machine only)")
    web.add_argument("--port", type=int, default=8765,
                     help="the port to listen on (default 8765; 0 for any free one)")
    web.add_argument("--read-only", action="store_true",
                     help="show no controls and record no answer; the log is opened read-only")
    web.add_argument("--key-file", metavar="FILE",
                     help="verify every record with the HMAC key in FILE (the verify badge "
                          "then vouches for where the records came from)")
    web.add_argument("--key-env", metavar="NAME",
                     help="the same, with the key in the environment variable NAME")
    web.add_argument("--plugin", metavar="MODULE", action="append", default=[],
                     help=PLUGIN_HELP)
    web.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Serve until Ctrl-C."""
    try:
        import hypercorn  # noqa: F401  (the web extra)
        import starlette  # noqa: F401
    except ImportError:
        raise UsageError("toolledger web needs the web extra: pip install 'toolledger[web]'"
                         ) from None
    from ..web.serving import serve_console

    key = load_key(args.key_file, args.key_env)
    renderers = load_renderers(args.plugin)
    listening = _listening(args.host, args.port, "--port PORT")

    def announce(url: str) -> None:
        print(f"{PROG}: the console of {shown(args.log)} is at\n\n    {url}\n\n"
              f"(open it in a browser; the token in it is this start's, required on every "
              f"request; Ctrl-C stops)", file=sys.stderr, flush=True)

    async def main() -> None:
        with closing(open_log(args.log, key=key, read_only=args.read_only)) as store:
            await serve_console(store, listening, read_only=args.read_only, announce=announce,
                                renderers=renderers)

    trio.run(main)
    return 0
