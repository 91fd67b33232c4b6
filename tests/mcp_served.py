"""What ``toolledger serve mcp_served:session`` serves in tests/mcp/test_mcp_serve.py: a session on
the JSONL log named by ``SERVED_LOG``, with a read-only tool and one that needs approval (the
default approver refuses it). ``mcp_served:slow_session`` (tests/mcp/test_mcp_http.py) has a
third tool, which says on stderr that it runs and never answers."""

from __future__ import annotations

import os
import sys
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from engine import Annotations, Session, ToolResult, text, tool
from engine.models import FauxModel
from events import JsonlStore


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
    """Wipe everything."""
    return ToolResult(content=[text("wiped")])


def session() -> AbstractAsyncContextManager[Session]:
    return Session.open(JsonlStore(os.environ["SERVED_LOG"]), model=FauxModel([]),
                        tools=[stat, wipe])


@tool(annotations=Annotations(read_only=True))
async def hang(call: Any, ctx: Any) -> ToolResult:
    """Say so on stderr, then never answer."""
    print("hang: running", file=sys.stderr, flush=True)
    await trio.sleep_forever()
    raise AssertionError("unreachable")


def slow_session() -> AbstractAsyncContextManager[Session]:
    return Session.open(JsonlStore(os.environ["SERVED_LOG"]), model=FauxModel([]),
                        tools=[stat, wipe, hang])
