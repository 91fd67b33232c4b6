"""MCP servers built with the official SDK, for the tests of engine.mcp.

``calculator()`` is an ``MCPServer`` whose tools cover what a mount must handle: a read-only
tool with structured output, one that declares no hints, one that fails, one whose output
breaks its own schema, one that never answers and one that kills its process. Run as a
script it serves ``calculator()`` over stdio, or with ``http`` over streamable HTTP on a
free loopback port (uvicorn names the URL on stderr).
``remote_ref_server()`` lists a tool whose schema a session must refuse.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field


class Total(BaseModel):
    total: int


class Count(BaseModel):
    # the schema says minimum 0; pydantic does not enforce json_schema_extra, so the server
    # answers what its own schema forbids (the client notices)
    count: int = Field(json_schema_extra={"minimum": 0})


def calculator() -> MCPServer:
    """A server named "calculator", version "1.2.0"."""
    server = MCPServer("calculator", version="1.2.0")

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True, title="Add"))
    def add(a: int, b: int) -> Total:
        """Add two integers."""
        return Total(total=a + b)

    @server.tool()
    def write_note(text: str) -> str:
        """Write a note (declares no hints: destructive and open-world by MCP's defaults)."""
        return f"noted: {text}"

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    def fail() -> str:
        """Fail with an error result."""
        raise ToolError("the disk is full")

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    def bad_count() -> Count:
        """Answer structured content that breaks the declared output schema."""
        return Count(count=-1)

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    async def hang() -> str:
        """Never answer."""
        await anyio.sleep_forever()
        return "never"

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    def die() -> str:
        """End the server's process in the middle of the call."""
        os._exit(3)

    return server


def remote_ref_server() -> Server[Any]:
    """A low-level server with one tool whose input schema refers to a remote document."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name="fetchy", input_schema={
                "type": "object",
                "properties": {"x": {"$ref": "https://example.com/schema.json"}}}),
            types.Tool(name="plain", input_schema={"type": "object"}),
        ])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=params.name)])

    return Server("refs", version="0.1", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:  # streamable HTTP on a free loopback port, named on stderr
        calculator().run("streamable-http", host="127.0.0.1", port=0)
    else:
        calculator().run()
