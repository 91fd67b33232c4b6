"""What an MCP client sees of a session's tools served over HTTP, and what the session's log
then holds: shared by tests/mcp/test_mcp_http.py (``engine.mcp.http_app``) and
tests/mcp/test_mcp_serve_http.py (``toolledger serve --http``), whose sessions both have the
tools ``stat`` (the size of a path's name, read-only) and ``wipe`` (which needs approval; the
default approver refuses it). ``uvicorn_serving`` serves an ASGI app under asyncio on a free
loopback port."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types
import pytest
import uvicorn
from mcp import Client, MCPError

from engine import fold
from events import Record

#: how the official client speaks: the single-exchange requests it tries first, and the
#: handshake's stateful sessions
MODES = ["auto", "legacy"]


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
async def uvicorn_serving(app: Any, path: str = "/mcp") -> AsyncIterator[str]:
    """``app`` served by uvicorn under asyncio on a free loopback port, for the block: the
    endpoint's URL. The socket listens before the server starts, so the client may connect
    at once; a request still running when the block ends has a second to finish. A lifespan
    that raises fails the block."""
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
    # a lifespan that raised (on startup or shutdown) fails the block, not just uvicorn's log
    assert not server.lifespan.error_occurred, "the app's lifespan raised: see uvicorn's log"
