"""The official MCP client calls a session's tools over streamable HTTP, served by
``engine.mcp.http_app`` (or an ``MCPEndpoint`` in a host's app) behind a real HTTP server:
hypercorn under trio for a trio session, uvicorn under asyncio for an ``engine.hosts.aio``
session. The client speaks both eras of the protocol: the handshake's stateful sessions
(``mode="legacy"``) and the single-exchange requests it tries first (``mode="auto"``).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import mcp_types
import pytest
import trio
import uvicorn
from hypercorn.config import Config
from hypercorn.trio import serve
from mcp import Client, MCPError
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from engine import LATER, Annotations, ApprovalRequest, Session, ToolResult, fold, text, tool
from engine.hosts.aio import Session as AioSession
from engine.mcp import LOOPBACK_ONLY, MCPEndpoint, http_app
from events import JsonlStore, MemoryStore, Record

MODES = ["auto", "legacy"]
ROOT = Path(__file__).resolve().parents[2]


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


async def exercise(url: str, mode: str) -> dict[str, Any]:
    """What a client sees of the tools at ``url``: their listing, a call, a call the policy
    refuses, one with invalid arguments, and one of a tool the server does not have."""
    async with Client(url, mode=mode) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        done = await client.call_tool("stat", {"path": "abc"})
        denied = await client.call_tool("wipe", {})
        invalid = await client.call_tool("stat", {"path": 5})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nosuch", {})
        server = client.server_info
    return {"listed": listed, "done": done, "denied": denied, "invalid": invalid,
            "unknown": unknown.value.error, "server": server}


def check_what_the_client_saw(seen: dict[str, Any], name: str = "toolledger",
                              listed: tuple[str, ...] = ("stat", "wipe")) -> None:
    assert seen["server"] is not None and seen["server"].name == name
    assert seen["listed"] == list(listed)
    assert seen["done"].structured_content == {"size": 3} and not seen["done"].is_error
    assert seen["denied"].is_error
    assert seen["denied"].content[0].text == "wipe was not approved"
    assert seen["invalid"].is_error and "Invalid arguments" in seen["invalid"].content[0].text
    assert seen["unknown"].code == mcp_types.INVALID_PARAMS
    assert seen["unknown"].message == "Unknown tool: nosuch"


def check_the_log(records: list[Record], *more: tuple[str, str]) -> None:
    """Every call the client made is in the log, ended; the unknown tool is not a call.
    ``more``: the name and status of each call after those :func:`exercise` makes."""
    state = fold(records)
    ended = [("stat", "completed"), ("wipe", "denied"), ("stat", "failed"), *more]
    assert {call_id: (call.name, call.origin, call.status)
            for call_id, call in state.calls.items()} == {
        f"h{n}": (name, "host", status) for n, (name, status) in enumerate(ended)}
    assert state.open_calls == () and state.pending_approvals == ()


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


@asynccontextmanager
async def uvicorn_serving(app: Any, path: str = "/mcp") -> AsyncIterator[str]:
    """``app`` served by uvicorn under asyncio on a free loopback port, for the block: the
    endpoint's URL. The socket listens before the server starts, so the client may connect
    at once; a request still running when the block ends has a second to finish."""
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning",
                                           timeout_graceful_shutdown=1))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        server.should_exit = True
        await serving
        listening.close()


@pytest.mark.parametrize("mode", MODES)
async def test_a_trio_session_served_by_hypercorn_under_trio(mode: str) -> None:
    store = MemoryStore()
    async with Session.open(store, tools=TOOLS) as session:
        async with hypercorn_serving(http_app(session)) as url:
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


class Lines:
    """What a process writes to a stream, read as it comes."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.seen = b""

    async def until(self, pattern: bytes) -> re.Match[bytes]:
        """Read until ``pattern`` matches a line; what matched (the stream ending first fails
        the test, showing what was read)."""
        while (found := re.search(pattern, self.seen, re.MULTILINE)) is None:
            chunk = await self.stream.receive_some()
            assert chunk, self.seen.decode()
            self.seen += chunk
        self.seen = self.seen[found.end():]
        return found


async def read_log(path: Path) -> list[Record]:
    store = JsonlStore(str(path))
    try:
        [session_id] = await store.sessions()
        return await store.read(session_id)
    finally:
        store.close()


@asynccontextmanager
async def toolledger_serve_http(log: Path, *args: str) -> AsyncIterator[tuple[Any, Lines, str]]:
    """``toolledger serve mcp_served:slow_session --http 0 ARGS`` in a subprocess, for the
    block: the process, its stderr and the endpoint's URL it printed there."""
    command = [sys.executable, "-m", "engine.cli", "serve", "mcp_served:slow_session",
               "--http", "0", *args]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(partial(
            trio.run_process, command, stderr=subprocess.PIPE, check=False,
            cwd=str(ROOT / "tests"),
            env={**os.environ, "PYTHONPATH": str(ROOT), "SERVED_LOG": str(log)}))
        try:
            stderr = Lines(process.stderr)
            printed = await stderr.until(
                rb"^toolledger: serving (\S+) over MCP at (http://127\.0\.0\.1:\d+/mcp) "
                rb"\(Ctrl-C stops\)$")
            yield process, stderr, printed.group(2).decode()
        finally:
            if process.returncode is None:
                process.kill()


async def test_toolledger_serve_http_serves_until_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "served.jsonl"
    async with toolledger_serve_http(log, "--name", "served") as (process, stderr, url):
        check_what_the_client_saw(await exercise(url, "auto"), name="served",
                                  listed=("stat", "wipe", "hang"))
        process.send_signal(signal.SIGINT)
        await process.wait()
    assert process.returncode == 0
    check_the_log(await read_log(log))


@pytest.mark.parametrize("mode", MODES)
async def test_toolledger_serve_http_stopped_twice_cancels_the_call_in_flight(
    tmp_path: Path, mode: str,
) -> None:
    log = tmp_path / "served.jsonl"
    failures: list[BaseException] = []
    async with toolledger_serve_http(log) as (process, stderr, url):
        async with trio.open_nursery() as clients:
            async def call() -> None:
                try:
                    async with Client(url, mode=mode) as client:
                        await client.call_tool("hang", {})
                except Exception as exc:  # the server went away under it
                    failures.append(exc)

            clients.start_soon(call)
            await stderr.until(rb"^hang: running$")
            process.send_signal(signal.SIGINT)
            await stderr.until(rb"^toolledger: stopping: calls in flight have 3 s to finish "
                               rb"\(Ctrl-C again cancels them now\)$")
            process.send_signal(signal.SIGINT)
            await process.wait()
            clients.cancel_scope.cancel()
    assert process.returncode == 0
    state = fold(await read_log(log))
    assert {call_id: call.status for call_id, call in state.calls.items()} == {
        "h0": "cancelled"}
    assert state.open_calls == ()


@pytest.mark.parametrize(("args", "says"), [
    (["--http", "port"], "'port' is not a port: give a number from 1 to 65535, or 0"),
    (["--http", "65536"], "'65536' is not a port"),
])
def test_toolledger_serve_http_refuses_what_is_not_a_port(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli import main

    assert main(["serve", "mcp_served:session", *args]) == 2
    assert says in capsys.readouterr().err


def test_toolledger_serve_http_on_a_port_in_use_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli import main

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "mcp_served:session", "--http", str(port)]) == 1
    err = capsys.readouterr().err
    assert err == (f"toolledger: error: cannot listen on 127.0.0.1 port {port}: Address "
                   f"already in use (choose another --http PORT, 0 for any free one, or "
                   f"another --host)\n")
