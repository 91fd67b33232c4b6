"""What ``toolledger serve asking_served:session`` serves in tests/cli/test_cli_answer.py: a
session on the JSONL log named by ``SERVED_LOG`` whose one tool asks the person which branch to
deploy (``ctx.ask``), and says what it was answered."""

from __future__ import annotations

import json
import os
from contextlib import AbstractAsyncContextManager
from typing import Any

from engine import Annotations, Session, ToolResult, text, tool
from events import JsonlStore

FORM = {"type": "object",
        "properties": {"branch": {"type": "string", "minLength": 1},
                       "replicas": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["branch"]}


@tool(annotations=Annotations(read_only=True, open_world=False))
async def deploy(call: Any, ctx: Any) -> ToolResult:
    """Deploy the branch the person names."""
    answer = await ctx.ask(call.arguments.get("message", "Which branch?"), FORM)
    if answer.accepted:
        return ToolResult(content=[text(f"deployed {json.dumps(answer.content)}")])
    return ToolResult(content=[text(f"not deployed: {answer.action} ({answer.reason})")])


def session() -> AbstractAsyncContextManager[Session]:
    return Session.open(JsonlStore(os.environ["SERVED_LOG"]), tools=[deploy])
