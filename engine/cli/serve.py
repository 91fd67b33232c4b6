"""``toolledger serve MODULE:NAME``: serve a session's tools as an MCP server over stdio;
``--approvals SOCKET``: a person answers its approvals from another process
(:mod:`engine.hosts.approvalsocket`)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

import trio
from rich.console import Console

from ..hosts.approvalsocket import serve_approvals
from ..runtime.session import Session
from ._common import UsageError

__all__ = ["add_parser", "run"]

#: what MODULE:NAME names: a function of no arguments whose result is an ``async with`` block
#: that yields an open session (``Session.open(...)`` is one)
SessionFactory = Callable[[], AbstractAsyncContextManager[Session]]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    serve = commands.add_parser(
        "serve",
        help="serve a session's tools as an MCP server over stdio (the mcp extra)",
        description=(
            "Import MODULE (from the current directory too) and call its NAME, a function of "
            "no arguments that returns Session.open(...) (or any async context manager that "
            "yields an open session); serve that session's tools over stdin and stdout until "
            "the client closes them. Each call is a host call of the session, governed and "
            "logged like a model's. See docs/mcp.md."
        ),
    )
    serve.add_argument("target", metavar="MODULE:NAME",
                       help="the function that opens the session, e.g. myserver:session")
    serve.add_argument("--name", default="toolledger",
                       help="the server's name in its handshake (default: toolledger)")
    serve.add_argument("--approvals", metavar="SOCKET",
                       help="answer the approvals the session's approver leaves for later "
                            "from another process, over a Unix socket made at SOCKET "
                            "(toolledger approvals / approve / deny SOCKET)")
    serve.set_defaults(run=run)


def load(target: str) -> SessionFactory:
    """The function ``MODULE:NAME`` names; a :class:`UsageError` saying what is wrong if it
    names none."""
    module_name, _, name = target.partition(":")
    if not module_name or not name:
        raise UsageError(f"{target!r} is not MODULE:NAME (for example myserver:session)")
    if "" not in sys.path:
        sys.path.insert(0, "")  # a module in the current directory, as python -m finds it
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise UsageError(f"no module named {module_name!r} (run from the directory that "
                             f"holds it, or put it on PYTHONPATH)") from None
        raise
    if not hasattr(module, name):
        raise UsageError(f"{module_name} has no function {name!r}: define one that returns "
                         f"Session.open(...)")
    factory = getattr(module, name)
    if not callable(factory):
        raise UsageError(f"{target} is a {type(factory).__name__}, not a function that returns "
                         f"Session.open(...)")
    return factory  # type: ignore[no-any-return]


async def _serve(factory: SessionFactory, name: str, approvals: str | None) -> None:
    from ..mcp.serve import serve_stdio  # the mcp extra, only for this command

    opened: Any = factory()
    if not hasattr(opened, "__aenter__"):
        raise UsageError(f"{factory!r} returned {type(opened).__name__}, not an async context "
                         f"manager: return Session.open(...)")
    async with opened as session:
        if not isinstance(session, Session):
            raise UsageError(f"{factory!r} yielded {type(session).__name__}, not a Session")
        async with AsyncExitStack() as stack:
            if approvals is not None:
                try:
                    await stack.enter_async_context(serve_approvals(session, approvals))
                except ValueError as exc:  # the socket's path is taken, or too long
                    raise UsageError(str(exc)) from None
            await serve_stdio(session, name=name)


def run(args: argparse.Namespace, console: Console) -> int:
    """Serve until the client goes away."""
    trio.run(_serve, load(args.target), args.name, args.approvals)
    return 0
