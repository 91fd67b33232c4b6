"""Serve a session's tools over MCP's streamable HTTP, as an ASGI app.

The SDK's streamable HTTP transport needs its session manager running (``manager.run()``)
while requests arrive. The app :func:`http_app` returns runs it in its own lifespan, so any
ASGI server that runs lifespans serves it as it is. An app put *inside* a host's Starlette
app (``Mount``) has no lifespan of its own, so a host uses :class:`MCPEndpoint` instead: an
ASGI app it routes to when it builds its app, and serves from its own lifespan, where it
opens the session (``async with endpoint.serving(session)``). :func:`http_app` is that
endpoint with that lifespan.

Every MCP client that connects (an MCP session each) calls the same toolledger session: each
``tools/call`` is a host call of it, governed and logged as :mod:`engine.mcp.serve` says. The
session is a trio :class:`engine.Session` under a trio server (hypercorn's trio worker, as
``toolledger serve --http`` runs it) or an :class:`engine.hosts.aio.Session` under an asyncio
one (uvicorn, hypercorn's asyncio worker).

When the serving ends (the server shuts down), the SDK cancels what its MCP sessions still
run: a call in flight ends as cancelled in the log, as when a client gives up on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ._sdk import mcp, mcp_types  # first: without the SDK, its clear ImportError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..core.questions import Asker
from .rounds import DEFAULT_INPUT_TIMEOUT, checked_timeout
from .serve import Served, mcp_server

__all__ = ["LOOPBACK_ONLY", "MCPEndpoint", "http_app"]

#: The default check of every request's ``Host`` and ``Origin`` headers: only loopback names
#: (``127.0.0.1``, ``localhost``, ``[::1]``, any port), so that a web page the user's browser
#: loads cannot reach a local server through a name it controls (DNS rebinding).
LOOPBACK_ONLY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)


class MCPEndpoint:
    """The MCP endpoint over streamable HTTP, as an ASGI app a host routes to, that serves a
    session's tools while :meth:`serving` runs.

    A host builds it with its app and enters ``serving(session)`` in its lifespan, once the
    session is open::

        endpoint = MCPEndpoint()

        @asynccontextmanager
        async def lifespan(app):
            async with Session.open(store, tools=[...]) as session, endpoint.serving(session):
                yield

        app = Starlette(routes=[Route("/mcp", endpoint), ...], lifespan=lifespan)

    Outside :meth:`serving` it answers 503 with a JSON-RPC error. ``name``, ``version``,
    ``instructions``, ``unasked`` and ``input_timeout`` go to :func:`engine.mcp.mcp_server`. ``transport_security`` checks each
    request's ``Host`` and ``Origin`` headers: :data:`LOOPBACK_ONLY` by default; a server that
    others reach by name gives its own ``TransportSecuritySettings`` (the SDK's), or turns the
    check off with ``TransportSecuritySettings(enable_dns_rebinding_protection=False)``.
    ``options`` go to the SDK's ``StreamableHTTPSessionManager``: ``json_response``,
    ``stateless``, ``session_idle_timeout``, ``max_sessions``, ``max_request_body_size``,
    ``event_store``, ``retry_interval``.
    """

    def __init__(self, *, name: str = "toolledger", version: str | None = None,
                 instructions: str | None = None,
                 transport_security: TransportSecuritySettings | None = None,
                 unasked: Asker | None = None, input_timeout: float = DEFAULT_INPUT_TIMEOUT,
                 **options: Any) -> None:
        self._server_options: dict[str, Any] = {
            "name": name, "version": version, "instructions": instructions,
            "unasked": unasked, "input_timeout": checked_timeout(input_timeout)}
        self._security = LOOPBACK_ONLY if transport_security is None else transport_security
        self._options = options
        StreamableHTTPSessionManager(mcp.server.Server(name), **options)  # bad options: now
        self._manager: StreamableHTTPSessionManager | None = None
        self._entered = False

    @property
    def is_serving(self) -> bool:
        """Whether a :meth:`serving` block runs now."""
        return self._manager is not None

    @asynccontextmanager
    async def serving(self, session: Served) -> AsyncIterator[None]:
        """Serve ``session``'s tools at this endpoint for the length of the block: the SDK's
        session manager runs in it, and leaving the block ends every MCP session (what they
        still run is cancelled). The block may be entered again after it ends, not while it
        runs (a ``RuntimeError``)."""
        if self._entered:
            raise RuntimeError("this MCPEndpoint is serving a session already: make one "
                               "endpoint per served session")
        self._entered = True
        try:
            manager = StreamableHTTPSessionManager(
                mcp_server(session, **self._server_options), security_settings=self._security,
                **self._options)
            async with manager.run():
                self._manager = manager  # answered from now: the manager runs
                try:
                    yield
                finally:
                    self._manager = None  # 503 from now, while the manager ends its sessions
        finally:
            self._entered = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:
            body = mcp_types.JSONRPCError(jsonrpc="2.0", id=None, error=mcp_types.ErrorData(
                code=mcp_types.INTERNAL_ERROR,
                message="this MCP endpoint is not serving a session: enter "
                        "endpoint.serving(session) in the app's lifespan"))
            response = Response(body.model_dump_json(by_alias=True, exclude_unset=True),
                                status_code=503, media_type="application/json")
            await response(scope, receive, send)
            return
        await manager.handle_request(scope, receive, send)


def http_app(session: Served, *, path: str = "/mcp", name: str = "toolledger",
             **options: Any) -> Starlette:
    """An ASGI app (Starlette) that serves ``session``'s tools over MCP's streamable HTTP at
    ``path``, while the session is open.

    Its lifespan runs the SDK's session manager, so serve it with an ASGI server that runs
    lifespans (hypercorn, uvicorn): ``await hypercorn.trio.serve(http_app(session), config)``
    inside the session's block under trio, ``uvicorn.Server(uvicorn.Config(http_app(session),
    ...)).serve()`` inside an :class:`engine.hosts.aio.Session`'s block under asyncio.
    ``name`` and ``options`` are :class:`MCPEndpoint`'s. To serve the tools from a host's own
    Starlette app, route to an :class:`MCPEndpoint` and serve it from the host's lifespan.
    """
    endpoint = MCPEndpoint(name=name, **options)
    return Starlette(routes=[Route(path, endpoint)],
                     lifespan=lambda app: endpoint.serving(session))
