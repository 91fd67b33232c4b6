"""Serving the console with Hypercorn under trio, as ``toolledger web`` does."""

from __future__ import annotations

import secrets
import signal
import socket
from collections.abc import Callable
from typing import Any

import trio

from events.stores import EventStore

from ..present.renderers import Renderers
from .app import console_app

__all__ = ["serve_console"]


async def serve_console(store: EventStore, listening: socket.socket, *, read_only: bool,
                        announce: Callable[[str], None], token: str | None = None,
                        renderers: Renderers | None = None) -> None:
    """Serve the console over ``store`` on the bound socket ``listening`` until SIGINT or
    SIGTERM; ``announce`` gets the URL to open, with its token (drawn here unless given).
    ``renderers``: the tools' own views (see :func:`~engine.web.app.console_app`)."""
    from hypercorn.config import Config  # the web extra: checked by the caller
    from hypercorn.trio import serve

    token = token or secrets.token_urlsafe(24)
    app: Any = console_app(store, token=token, read_only=read_only,
                               renderers=renderers)
    config = Config()
    host, port = listening.getsockname()[:2]
    config.bind = [f"fd://{listening.detach()}"]
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0  # live pages hold a stream open: do not wait long for them
    shown = f"[{host}]" if ":" in host else host
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            stopping = trio.Event()

            async def run_server(task_status: trio.TaskStatus[list[str]]) -> None:
                await serve(app, config, shutdown_trigger=stopping.wait,
                            task_status=task_status)
                nursery.cancel_scope.cancel()

            await nursery.start(run_server)
            announce(f"http://{shown}:{port}/?token={token}")
            async for _ in signals:
                if stopping.is_set():
                    nursery.cancel_scope.cancel()
                    break
                stopping.set()
