"""What ``toolledger serve mcp_served_asking:served_session`` serves in
tests/mcp/test_mcp_question_rounds.py: a session on the JSONL log named by ``SERVED_LOG``
whose tool ``deploy`` asks twice."""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from typing import Any

from engine import Annotations, Session, ToolResult, text, tool
from events import JsonlStore


@tool(annotations=Annotations(read_only=True, open_world=False))
async def deploy(call: Any, ctx: Any) -> ToolResult:
    """Ask for a branch, then whether to deploy it."""
    branch = await ctx.ask("Which branch?", {
        "type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]})
    name = branch.content["branch"] if branch.accepted else "nothing"
    sure = await ctx.ask(f"Deploy {name}?", {
        "type": "object", "properties": {"sure": {"type": "boolean"}}, "required": ["sure"]})
    return ToolResult(content=[text(f"{name} {sure.action}")])


def served_session() -> AbstractAsyncContextManager[Session]:
    return Session.open(JsonlStore(os.environ["SERVED_LOG"]), tools=[deploy])
