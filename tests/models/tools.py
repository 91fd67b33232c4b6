"""The tools the recorded payloads call."""

from __future__ import annotations

from typing import Any

from engine import Annotations, ToolResult, text, tool

SAFE = Annotations(read_only=True, open_world=False)


@tool(input_schema={"type": "object", "properties": {"key": {"type": "string"}},
                    "required": ["key"]}, annotations=SAFE)
async def lookup(call: Any, ctx: Any) -> ToolResult:
    """The value of a key."""
    return ToolResult(content=[text(f"value of {call.arguments['key']}")])


@tool(output_schema={"type": "object", "properties": {"count": {"type": "integer"}},
                     "required": ["count"]}, annotations=SAFE)
async def stats(call: Any, ctx: Any) -> ToolResult:
    """How many keys there are."""
    return ToolResult(structured_content={"count": 3})


@tool(annotations=SAFE)
async def broken(call: Any, ctx: Any) -> ToolResult:
    """Always fails."""
    raise RuntimeError("disk on fire")


TOOLS = [lookup, stats, broken]
