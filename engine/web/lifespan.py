"""Running an ASGI app's lifespan around a block: :func:`lifespan`.

The console folds long sessions and checks long chains in the background, in a nursery its
lifespan opens (see :mod:`engine.web.folding`). A server runs that lifespan (``toolledger web``
does, through Hypercorn); a host that mounts the console in its own app (Starlette does not run
a mounted app's lifespan) or calls it directly (``httpx.ASGITransport``) runs it with this.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import trio

__all__ = ["lifespan"]

Message = MutableMapping[str, Any]
App = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Message]],
                Callable[[Message], Awaitable[None]]], Awaitable[None]]


#: How long (seconds) stopping the app may take before it is left behind.
STOPPING = 10.0


@asynccontextmanager
async def lifespan(app: App) -> AsyncIterator[None]:
    """Start ``app`` (ASGI ``lifespan.startup``), run the block, then stop it
    (``lifespan.shutdown``), as a server would: e.g. in a host's own lifespan,
    ``async with lifespan(console): yield``. An app that fails to start or to stop raises
    ``RuntimeError`` with what it said."""
    to_app, from_us = trio.open_memory_channel[Message](2)
    to_us, from_app = trio.open_memory_channel[Message](2)
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
    failed: str | None = None

    async def run() -> None:
        async with from_us, to_us:
            await app(scope, from_us.receive, to_us.send)

    async def said(what: str) -> str | None:
        message = await from_app.receive()
        if message["type"] == f"lifespan.{what}.complete":
            return None
        return f"the app did not {'start' if what == 'startup' else 'stop'}: " + str(
            message.get("message") or message["type"])

    async with to_app, from_app, trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await to_app.send({"type": "lifespan.startup"})
        failed = await said("startup")
        if failed is None:
            try:
                yield
            finally:
                with trio.CancelScope(shield=True,
                                      deadline=trio.current_time() + STOPPING) as stopping:
                    await to_app.send({"type": "lifespan.shutdown"})
                    failed = await said("shutdown")
                if stopping.cancelled_caught:
                    failed = f"the app did not stop within {STOPPING:g} s"
        nursery.cancel_scope.cancel()  # an app that failed, or did not stop, is stopped
    if failed is not None:
        raise RuntimeError(failed)
