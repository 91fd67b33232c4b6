"""The official MCP client calls a session's tools over streamable HTTP, served by
``engine.mcp.http_app`` (or an ``MCPEndpoint`` in a host's app) behind a real HTTP server:
hypercorn under trio for a trio session, uvicorn under asyncio for an ``engine.hosts.aio``
session. The client speaks both eras of the protocol: the handshake's stateful sessions
(``mode="legacy"``) and the single-exchange requests it tries first (``mode="auto"``).
``toolledger serve --http`` is tested in tests/mcp/test_mcp_serve_http.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from mcp import Client
from mcp_http_clients import (
    MODES,
    check_the_log,
    check_what_the_client_saw,
    exercise,
    uvicorn_serving,
)
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from engine import LATER, Annotations, ApprovalRequest, Session, ToolResult, fold, text, tool
from engine.hosts.aio import Session as AioSession
from engine.mcp import LOOPBACK_ONLY, MCPEndpoint, http_app
from events import MemoryStore


@tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
      output_schema={"type": "object", "properties": {"size": {"type": "integer"}},
                     "required": ["size"]},
      annotations=Annotations(read_only=True))
async def stat(call: Any, ctx: Any) -> ToolResult:
    """Size of a path's name."""
    return ToolResult(content=[text("ok")],
                      structured_content={"size": len(call.arguments["path"])})


@tool
async def wipe(call: Any, ctx: Any) -> ToolResult:
    """Wipe everything (declares nothing: destructive, so the policy asks)."""
    return ToolResult(content=[text("wiped")])


TOOLS = [stat, wipe]


@asynccontextmanager
async def hypercorn_serving(app: Any, path: str = "/mcp", *, grace: float = 3,
                            ) -> AsyncIterator[str]:
    """``app`` served by hypercorn under trio on a free loopback port, for the block: the
    endpoint's URL. A request still running when the block ends has ``grace`` seconds to
    finish."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.loglevel = "WARNING"
    config.graceful_timeout = grace
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        [address] = await nursery.start(partial(serve, app, config,
                                                shutdown_trigger=stop.wait))
        try:
            yield address + path
        finally:
            stop.set()


@pytest.mark.parametrize("options", [{}, {"stateless": True, "json_response": True}],
                         ids=["sessions", "stateless"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_trio_session_served_by_hypercorn_under_trio(
    mode: str, options: dict[str, Any],
) -> None:
    store = MemoryStore()
    async with Session.open(store, tools=TOOLS) as session:
        async with hypercorn_serving(http_app(session, **options)) as url:
            seen = await exercise(url, mode)
    check_what_the_client_saw(seen)
    check_the_log(await store.read(session.session_id))


@pytest.mark.parametrize("mode", MODES)
def test_an_asyncio_session_served_by_uvicorn_under_asyncio(mode: str) -> None:
    store = MemoryStore()

    async def main() -> str:
        async with AioSession.open(store, tools=TOOLS) as session:
            async with uvicorn_serving(http_app(session, name="aio")) as url:
                check_what_the_client_saw(await exercise(url, mode), name="aio")
        return session.session_id

    session_id = asyncio.run(main())
    check_the_log(trio.run(store.read, session_id))


def host_app(endpoint: MCPEndpoint, store: MemoryStore, opened: list[str]) -> Starlette:
    """A host's own app: a route of its own, the MCP endpoint at /tools/mcp, and a lifespan
    that opens the session and serves it there."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AioSession.open(store, tools=TOOLS) as session, endpoint.serving(session):
            opened.append(session.session_id)
            yield

    async def health(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/health", health), Route("/tools/mcp", endpoint)],
                     lifespan=lifespan)


@pytest.mark.parametrize("mode", MODES)
def test_a_host_app_routes_to_an_endpoint_it_serves_from_its_own_lifespan(mode: str) -> None:
    store = MemoryStore()
    endpoint = MCPEndpoint(name="host")
    opened: list[str] = []

    async def main() -> None:
        assert not endpoint.is_serving
        async with uvicorn_serving(host_app(endpoint, store, opened), "/tools/mcp") as url:
            check_what_the_client_saw(await exercise(url, mode), name="host")
            assert endpoint.is_serving
            async with httpx.AsyncClient() as http:
                health = await http.get(url.replace("/tools/mcp", "/health"))
            assert health.text == "ok"
        assert not endpoint.is_serving

    asyncio.run(main())
    [session_id] = opened
    check_the_log(trio.run(store.read, session_id))


async def test_an_endpoint_that_is_not_serving_answers_503_and_says_what_to_do() -> None:
    app = Starlette(routes=[Route("/mcp", MCPEndpoint())])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1") as http:
        answer = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.status_code == 503
    assert "endpoint.serving(session)" in answer.json()["error"]["message"]


async def test_an_endpoint_serves_one_session_at_a_time_and_again_after() -> None:
    endpoint = MCPEndpoint()
    async with Session.open(MemoryStore(), tools=TOOLS) as session:
        async with endpoint.serving(session):
            with pytest.raises(RuntimeError, match="serving a session already"):
                async with endpoint.serving(session):
                    pass
            assert endpoint.is_serving
        assert not endpoint.is_serving
        app = Starlette(routes=[Route("/mcp", endpoint)],
                        lifespan=lambda app: endpoint.serving(session))
        async with hypercorn_serving(app) as url:
            async with Client(url) as client:
                assert (await client.call_tool("stat", {"path": "x"})).structured_content \
                    == {"size": 1}


@pytest.mark.parametrize(("options", "error"), [
    ({"session_idle_timeout": -1}, ValueError),
    ({"max_sessions": 0}, ValueError),
    ({"no_such_option": True}, TypeError),
])
def test_options_the_sdk_refuses_are_refused_when_the_app_is_made(
    options: dict[str, Any], error: type[Exception],
) -> None:
    with pytest.raises(error):
        MCPEndpoint(**options)
    with pytest.raises(error):
        http_app(object(), **options)  # type: ignore[arg-type]


async def test_only_loopback_names_are_answered_by_default() -> None:
    async with Session.open(MemoryStore(), tools=TOOLS) as session:
        async with hypercorn_serving(http_app(session)) as url:
            port = url.rsplit(":", 1)[1].split("/")[0]
            async with httpx.AsyncClient() as http:
                rebound = await http.post(url, headers={"Host": f"attacker.example:{port}"},
                                          json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                foreign = await http.post(
                    url, headers={"Origin": "http://attacker.example"},
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert session.calls == {}
    assert rebound.status_code == 421
    assert foreign.status_code == 403
    assert "localhost:*" in LOOPBACK_ONLY.allowed_hosts


class Later:
    """An approver that answers "later", and says when it was asked."""

    def __init__(self) -> None:
        self.asked = trio.Event()

    async def __call__(self, request: ApprovalRequest) -> Any:
        self.asked.set()
        return LATER


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_that_stops_with_a_call_in_flight_leaves_it_cancelled_in_the_log(
    mode: str,
) -> None:
    store = MemoryStore()
    later = Later()
    failures: list[BaseException] = []
    async with Session.open(store, tools=TOOLS, approver=later) as session:
        async with trio.open_nursery() as clients:
            async with hypercorn_serving(http_app(session), grace=0) as url:
                async def call() -> None:
                    try:
                        async with Client(url, mode=mode) as client:
                            await client.call_tool("wipe", {})
                    except Exception as exc:  # the server went away under it
                        failures.append(exc)

                clients.start_soon(call)
                await later.asked.wait()
                assert session.pending_approvals()[0].call_id == "h0"
            # the server has stopped: hypercorn cancelled the request, the SDK its sessions
            assert session.calls["h0"].status == "cancelled"
            clients.cancel_scope.cancel()
    state = fold(await store.read(session.session_id))
    assert state.calls["h0"].status == "cancelled"
    assert state.open_calls == () and state.pending_approvals == ()


@pytest.mark.parametrize("mode", MODES)
async def test_a_host_that_cancels_its_server_leaves_the_call_in_flight_cancelled(
    mode: str,
) -> None:
    store = MemoryStore()
    later = Later()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.loglevel = "WARNING"
    async with Session.open(store, tools=TOOLS, approver=later) as session:
        async with trio.open_nursery() as nursery:
            [address] = await nursery.start(serve, http_app(session), config)

            async def call() -> None:
                try:
                    async with Client(f"{address}/mcp", mode=mode) as client:
                        await client.call_tool("wipe", {})
                except Exception:  # the server went away under it
                    pass

            nursery.start_soon(call)
            await later.asked.wait()
            nursery.cancel_scope.cancel()  # the server, its lifespan and the client with it
        assert session.calls["h0"].status == "cancelled"
    state = fold(await store.read(session.session_id))
    assert state.calls["h0"].status == "cancelled"
    assert state.open_calls == () and state.pending_approvals == ()
