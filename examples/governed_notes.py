"""The session the governed examples serve to other agent frameworks (docs/frameworks.md):
three tools over a few notes, served by ``toolledger serve`` over MCP.

    toolledger serve examples.governed_notes:session --approvals notes.sock

- ``read_note`` declares itself read-only: the policy lets it run;
- ``delete_note`` declares itself destructive: the policy asks the approver, and the
  approver leaves it for a person (``LATER``), who answers from another process with
  ``toolledger approve notes.sock CALL_ID`` or ``deny``, while the agent's call waits;
- ``drop_notes`` is refused by a deny rule, whatever it declares.

Every call is recorded in the JSONL log ``NOTES_LOG`` names (``notes.jsonl`` by default), for
``toolledger show``. The notes live in the serving process, so each serve starts afresh.
"""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from typing import Any

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    PolicyRules,
    Session,
    ToolResult,
    text,
    tool,
)
from events import JsonlStore

NOTES = {"groceries": "eggs, milk", "todo": "write the docs"}

TITLE = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}


@tool(input_schema=TITLE, annotations=Annotations(read_only=True))
async def read_note(call: Any, ctx: Any) -> ToolResult:
    """Read a note by its title."""
    return ToolResult(content=[text(NOTES.get(call.arguments["title"], "no such note"))])


@tool(input_schema=TITLE, annotations=Annotations(destructive=True))
async def delete_note(call: Any, ctx: Any) -> ToolResult:
    """Delete a note by its title."""
    found = NOTES.pop(call.arguments["title"], None)
    return ToolResult(content=[text("deleted" if found is not None else "no such note")])


@tool(annotations=Annotations(destructive=True))
async def drop_notes(call: Any, ctx: Any) -> ToolResult:
    """Delete every note."""
    NOTES.clear()
    return ToolResult(content=[text("dropped")])


def ask_a_person(request: ApprovalRequest) -> Any:
    """Every call the policy asks about waits for a person (``toolledger approve``)."""
    return LATER


def session() -> AbstractAsyncContextManager[Session]:
    """The served session: what ``toolledger serve examples.governed_notes:session`` opens."""
    return Session.open(JsonlStore(os.environ.get("NOTES_LOG", "notes.jsonl")),
                        tools=[read_note, delete_note, drop_notes],
                        rules=PolicyRules(deny=["drop_*"]), approver=ask_a_person)
