"""``toolledger serve MODULE:NAME``: serve a session's tools as an MCP server, over stdio or,
with ``--http PORT``, over streamable HTTP (hypercorn under trio); with ``--approvals SOCKET``,
a person answers its approvals, and the questions its clients cannot be asked, from another
process (:mod:`engine.hosts.approvalsocket`)."""

from __future__ import annotations

import argparse
import importlib
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Any

import trio
from rich.console import Console

from ..core.approvals import LATER
from ..core.questions import Question
from ..hosts.approvalsocket import serve_approvals
from ..runtime.session import Session
from ._common import PROG, UsageError

__all__ = ["add_parser", "run"]

#: where ``--http`` listens unless ``--host`` says otherwise: this machine only
LOOPBACK = "127.0.0.1"

#: where the MCP endpoint is, on the HTTP server
PATH = "/mcp"

#: what MODULE:NAME names: a function of no arguments whose result is an ``async with`` block
#: that yields an open session (``Session.open(...)`` is one)
SessionFactory = Callable[[], AbstractAsyncContextManager[Session]]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    serve = commands.add_parser(
        "serve",
        help="serve a session's tools as an MCP server over stdio or HTTP (the mcp extra)",
        description=(
            "Import MODULE (from the current directory too) and call its NAME, a function of "
            "no arguments that returns Session.open(...) (or any async context manager that "
            "yields an open session); serve that session's tools over stdin and stdout until "
            "the client closes them or, with --http PORT, over MCP's streamable HTTP at "
            "http://HOST:PORT/mcp until Ctrl-C (the http extra). Each call is a host call of "
            "the session, governed and logged like a model's. See docs/mcp.md."
        ),
    )
    serve.add_argument("target", metavar="MODULE:NAME",
                       help="the function that opens the session, e.g. myserver:session")
    serve.add_argument("--name", default="toolledger",
                       help="the server's name in its handshake (default: toolledger)")
    serve.add_argument("--http", metavar="PORT", type=_port,
                       help="serve over streamable HTTP on this port (0: any free one) "
                            "instead of stdio; the address is printed on stderr")
    serve.add_argument("--host",
                       help=f"the address to listen on with --http (default: {LOOPBACK}, "
                            f"this machine only: the server asks for no credentials)")
    serve.add_argument("--approvals", metavar="SOCKET",
                       help="answer the approvals the session's approver leaves for later, "
                            "and the questions of calls whose client cannot be asked, from "
                            "another process, over a Unix socket made at SOCKET (toolledger "
                            "approvals / approve / deny / answer SOCKET)")
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


def _for_the_socket(question: Question) -> Any:
    """The asker of a served call's question its client cannot be asked, with
    ``--approvals``: it waits for a person at the socket."""
    return LATER


def _unasked(approvals: str | None) -> dict[str, Any]:
    """The server's option for the questions its clients cannot be asked: without a socket,
    declined (nobody else could answer them); with one, left for it."""
    return {} if approvals is None else {"unasked": _for_the_socket}


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port: give a number from 1 to 65535, or 0 for any free one")
    return port


@asynccontextmanager
async def _opened(factory: SessionFactory, approvals: str | None) -> AsyncIterator[Session]:
    """The session ``factory`` opens, answering its approvals at the socket ``approvals``
    (if given) for as long as it is open."""
    opened: Any = factory()
    if not hasattr(opened, "__aenter__"):
        raise UsageError(f"{factory!r} returned {type(opened).__name__}, not an async context "
                         f"manager: return Session.open(...)")
    async with opened as session, AsyncExitStack() as stack:
        if not isinstance(session, Session):
            raise UsageError(f"{factory!r} yielded {type(session).__name__}, not a Session")
        if approvals is not None:
            try:
                await stack.enter_async_context(serve_approvals(session, approvals))
            except ValueError as exc:  # the socket's path is taken, or cannot be made
                raise UsageError(str(exc)) from None
        yield session


async def _serve(factory: SessionFactory, name: str, approvals: str | None) -> None:
    from ..mcp.serve import serve_stdio  # the mcp extra, only for this command

    async with _opened(factory, approvals) as session:
        await serve_stdio(session, name=name, **_unasked(approvals))


def _security(host: str) -> Any:
    """Which ``Host`` and ``Origin`` headers the server answers: loopback names, and ``host``
    itself; any, when it listens on every address (``0.0.0.0``, ``::``), whose names it
    cannot know."""
    from mcp.server.transport_security import TransportSecuritySettings

    from ..mcp.http import LOOPBACK_ONLY

    if host.strip("[]") in ("", "0.0.0.0", "::"):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    named = f"[{host.strip('[]')}]" if ":" in host else host
    if f"{named}:*" in LOOPBACK_ONLY.allowed_hosts:
        return LOOPBACK_ONLY
    return TransportSecuritySettings(
        allowed_hosts=[*LOOPBACK_ONLY.allowed_hosts, f"{named}:*"],
        allowed_origins=[*LOOPBACK_ONLY.allowed_origins, f"http://{named}:*"])


def _listening(host: str, port: int, option: str = "--http PORT") -> socket.socket:
    """A socket bound to ``host`` and ``port``, or a :class:`UsageError` saying why not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        listening = socket.socket(family, kind, proto)
        try:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            listening.bind(address)
        except OSError:
            listening.close()
            raise
    except OSError as exc:
        raise UsageError(f"cannot listen on {host} port {port}: {exc.strerror or exc} (choose "
                         f"another {option}, 0 for any free one, or another --host)") from None
    return listening


async def _serve_http(factory: SessionFactory, name: str, host: str, port: int,
                      approvals: str | None) -> None:
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve
    except ImportError:
        raise UsageError("serve --http needs hypercorn: install toolledger's http extra "
                         "(pip install 'toolledger[http]')") from None
    from ..mcp.http import http_app  # the mcp extra, only for this command

    config = Config()
    config.bind = [f"fd://{_listening(host, port).detach()}"]  # hypercorn owns it from here
    config.loglevel = "WARNING"  # the address is ours to print, with the endpoint's path
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with _opened(factory, approvals) as session, trio.open_nursery() as nursery:
            app: Any = http_app(session, path=PATH, name=name,
                                transport_security=_security(host), **_unasked(approvals))
            stopping = trio.Event()

            async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
                await serve(app, config, shutdown_trigger=stopping.wait,
                            task_status=task_status)
                nursery.cancel_scope.cancel()  # it has stopped: stop waiting for signals

            [address, *_] = await nursery.start(run_server)
            print(f"{PROG}: serving {name} over MCP at {address}{PATH} (Ctrl-C stops)",
                  file=sys.stderr, flush=True)
            if approvals is not None:
                print(f"{PROG}: approvals and questions that wait are answered at "
                      f"{approvals} ({PROG} approvals / approve / deny / answer {approvals})",
                      file=sys.stderr, flush=True)
            async for _ in signals:
                if stopping.is_set():  # asked twice: cancel what still runs, now
                    nursery.cancel_scope.cancel()
                    break
                print(f"{PROG}: stopping: calls in flight have {config.graceful_timeout:g} s "
                      f"to finish (Ctrl-C again cancels them now)", file=sys.stderr, flush=True)
                stopping.set()


def run(args: argparse.Namespace, console: Console) -> int:
    """Serve until the client goes away (stdio) or until Ctrl-C (``--http``)."""
    if args.http is None:
        if args.host is not None:
            raise UsageError("--host is where --http listens: add --http PORT (over stdio "
                             "there is nothing to listen on)")
        trio.run(_serve, load(args.target), args.name, args.approvals)
    else:
        trio.run(_serve_http, load(args.target), args.name, args.host or LOOPBACK, args.http,
                 args.approvals)
    return 0
