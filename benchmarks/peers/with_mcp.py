"""The MCP SDK: ``add`` through ``MCPServer.call_tool``, and through a ``Client`` connected to
the server in memory.

``MCPServer.call_tool`` is the server's own path: the tool manager validates the arguments
against a pydantic model of the signature, runs the function and converts its result to
``CallToolResult`` content. The client's path adds the protocol: a JSON-RPC request and
response over the SDK's in-memory streams to the low-level server in the same event loop. MCP
has no agent loop, so it has no row there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mcp import Client
from mcp.server.mcpserver import MCPServer

from .tool import ARGS, add

__all__ = ["client_call", "handler_beside", "served_beside", "tool_path"]

US = 1e6


def _server() -> MCPServer:
    server: MCPServer = MCPServer("bench")
    server.tool()(add)
    return server


def tool_path(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per ``await server.call_tool("add", ARGS)``."""
    return asyncio.run(_timed_tool_calls(calls, clock)) / calls * US


def handler_beside(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """:func:`tool_path` under trio: the part of a served call that is ``MCPServer``'s own
    (what its ``tools/call`` handler runs), beside toolledger's served call."""
    import trio

    return trio.run(_timed_tool_calls, calls, clock) / calls * US


async def _timed_tool_calls(calls: int, clock: Callable[[], float]) -> float:
    """Seconds for ``calls`` awaits of ``server.call_tool("add", ARGS)`` on a fresh
    ``MCPServer``, after one untimed call that must succeed."""
    call = _server().call_tool
    first = await call("add", ARGS)
    if getattr(first, "is_error", True):
        raise RuntimeError(f"the MCP server's add failed: {first}")
    start = clock()
    for _ in range(calls):
        await call("add", ARGS)
    return clock() - start


async def _timed_calls(calls: int, clock: Callable[[], float]) -> float:
    """Seconds for ``calls`` awaits of ``client.call_tool("add", ARGS)`` to a fresh
    ``MCPServer`` in memory, after one untimed call that must succeed."""
    async with Client(_server()) as client:
        first = await client.call_tool("add", ARGS)
        if first.is_error:
            raise RuntimeError(f"the MCP client's add failed: {first}")
        start = clock()
        for _ in range(calls):
            await client.call_tool("add", ARGS)
        return clock() - start


def client_call(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per ``await client.call_tool("add", ARGS)`` over the in-memory transport."""
    return asyncio.run(_timed_calls(calls, clock)) / calls * US


def served_beside(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per ``await client.call_tool("add", ARGS)`` to ``MCPServer`` in memory,
    under trio: the baseline of toolledger's served call (:func:`.ledger.served_call`), which
    runs in the same loop, through the same client and transport."""
    import trio

    return trio.run(_timed_calls, calls, clock) / calls * US
