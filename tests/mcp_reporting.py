"""Progress over MCP, for tests/mcp/test_mcp_progress.py: a server built with the official SDK
whose tool reports progress, and a session whose tools do, to serve.

``reporter()`` is an ``MCPServer`` named "reporter": ``count(n)`` reports ``i`` of ``n`` with a
message for each step, then answers; ``ramble(n)`` reports messages with no total;
``shout(size)`` reports a message of ``size`` characters, then a short one. Run from the
project's root as ``python -m tests.mcp_reporting``, it serves ``reporter()`` over stdio. ``session()`` is what ``toolledger serve
mcp_reporting:session`` serves: a session on the JSONL log named by ``SERVED_LOG`` whose
``review`` tool runs ``checks`` and ``lint`` as nested calls and forwards their progress.
"""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from typing import Any

import mcp_types as types
import trio
from mcp.server.mcpserver import Context, MCPServer

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from events import JsonlStore

READ_ONLY = types.ToolAnnotations(read_only_hint=True)


def reporter() -> MCPServer:
    """A server named "reporter", version "1.0"."""
    server = MCPServer("reporter", version="1.0")

    @server.tool(annotations=READ_ONLY)
    async def count(n: int, ctx: Context) -> str:
        """Count to n, reporting each step."""
        for step in range(1, n + 1):
            await ctx.report_progress(step, n, f"step {step} of {n}")
        return f"counted to {n}"

    @server.tool(annotations=READ_ONLY)
    async def ramble(n: int, ctx: Context) -> str:
        """Say n things, with no total."""
        for step in range(1, n + 1):
            await ctx.report_progress(step * 10, None, f"thing {step}")
        return "said"

    @server.tool(annotations=READ_ONLY)
    async def shout(size: int, ctx: Context) -> str:
        """Report a message of ``size`` characters, then a short one."""
        await ctx.report_progress(1, 2, "!" * size)
        await ctx.report_progress(2, 2, "done shouting")
        return "hoarse"

    return server


SAFE = Annotations(read_only=True, open_world=False)


def checker(name: str, steps: int) -> Any:
    """A local tool that reports ``steps`` updates of ``steps``, with numbers."""

    @tool(name=name, annotations=SAFE)
    async def body(call: Any, ctx: Any) -> ToolResult:
        for step in range(1, steps + 1):
            ctx.report_progress(f"{name} {step}/{steps}", {"step": step}, progress=step,
                                total=steps)
            await trio.lowlevel.checkpoint()
        return ToolResult(content=[text(f"{name} ok")])

    return body


@tool(annotations=SAFE)
async def review(call: Any, ctx: Any) -> ToolResult:
    """Run the checks and the linter, passing their progress on."""
    ctx.report_progress("reviewing")
    await ctx.execute_tool("checks", {}, on_progress=ctx.forward_progress)
    await ctx.execute_tool("lint", {}, on_progress=ctx.forward_progress)
    return ToolResult(content=[text("reviewed")])


TOOLS = [review, checker("checks", 3), checker("lint", 2)]


def session() -> AbstractAsyncContextManager[Session]:
    return Session.open(JsonlStore(os.environ["SERVED_LOG"]), tools=TOOLS, approver=approve_all)


if __name__ == "__main__":
    reporter().run()
