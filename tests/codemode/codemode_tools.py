"""Faux tools for code-mode tests: what each did is counted, so a test can say a call ran
exactly once."""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine import Annotations, ToolResult, text, tool

SAFE = Annotations(read_only=True, open_world=False)
RAN: Counter[str] = Counter()


@tool(annotations=SAFE, exposure="codemode",
      input_schema={"type": "object", "properties": {"n": {"type": "integer",
                                                           "description": "A number."}},
                    "required": ["n"]},
      output_schema={"type": "object", "properties": {"double": {"type": "integer"}},
                     "required": ["double"]})
async def double(call: Any, ctx: Any) -> ToolResult:
    """Twice n."""
    RAN[f"double {call.arguments['n']}"] += 1
    return ToolResult(content=[text("ok")], structured_content={"double": 2 * call.arguments["n"]})


@tool(annotations=SAFE, exposure="codemode",
      input_schema={"type": "object", "properties": {"word": {"type": "string"}},
                    "required": ["word"]})
async def shout(call: Any, ctx: Any) -> ToolResult:
    """The word in capitals."""
    RAN[f"shout {call.arguments['word']}"] += 1
    return ToolResult(content=[text(call.arguments["word"].upper())])


@tool(annotations=SAFE, exposure="codemode")
async def boom(call: Any, ctx: Any) -> ToolResult:
    """Always fails."""
    RAN["boom"] += 1
    raise RuntimeError("kaput")


@tool(annotations=Annotations(destructive=True), exposure="codemode",
      input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]})
async def wipe(call: Any, ctx: Any) -> ToolResult:
    """Deletes a file: needs approval."""
    RAN[f"wipe {call.arguments['path']}"] += 1
    return ToolResult(content=[text(f"wiped {call.arguments['path']}")])


@tool(annotations=SAFE, exposure="hidden")
async def secret(call: Any, ctx: Any) -> ToolResult:
    """A hidden tool."""
    RAN["secret"] += 1
    return ToolResult(content=[text("secret")])


@tool(annotations=SAFE, exposure="model-only")
async def chat(call: Any, ctx: Any) -> ToolResult:
    """A model-only tool."""
    RAN["chat"] += 1
    return ToolResult(content=[text("chat")])


CODEMODE = [double, shout, boom, wipe]
