"""A session's derived state as plain JSON values, for ``--json`` output and other programs.

The shapes are stable and documented in docs/cli.md: the transcript as a list of entries, the
calls as a flat list in request order (each with its ``parent_id``), and a summary.
"""

from __future__ import annotations

from typing import Any

from events.codec import converter
from events.types import AssistantMessage, ToolSource

from ..core.reducers import Projection, ToolResultEntry
from ..core.views import CallView

__all__ = ["call_json", "session_json", "transcript_json"]


def transcript_json(projection: Projection) -> list[dict[str, Any]]:
    """Each transcript entry with its ``kind``: ``user``, ``assistant`` or ``tool_result``."""
    entries: list[dict[str, Any]] = []
    for entry in projection.transcript:
        data = converter.unstructure(entry)
        if isinstance(entry, ToolResultEntry):
            kind = "tool_result"
        elif isinstance(entry, AssistantMessage):
            kind = "assistant"
        else:
            kind = "user"
        entries.append({"kind": kind, **data})
    return entries


def call_json(view: CallView, source: ToolSource | None = None) -> dict[str, Any]:
    """One call: who asked, what the policy and the approver said, how it ended, and for a
    mounted tool's call the server's ``source`` (:meth:`Projection.source`)."""
    policy = view.policy
    approval = view.approval
    terminal = view.terminal
    return {
        "call_id": view.call_id,
        "name": view.name,
        "parent_id": view.parent_id,
        "origin": view.origin,
        "status": view.status,
        "requested_arguments": view.requested_arguments,
        "arguments": view.arguments,
        "rewrites": [{"by": r.by, "arguments": r.arguments} for r in view.rewrites],
        "policy": None if policy is None else {"decision": policy.decision,
                                               "reason": policy.reason},
        "approval": None if approval is None else {"granted": approval.granted,
                                                    "scope": approval.scope,
                                                    "reason": approval.reason},
        "progress": view.progress_count,
        "questions": [{"question_id": q.question_id, "message": q.asked.message,
                       "schema": q.asked.schema,
                       "answer": None if q.answer is None else {
                           "action": q.answer.action, "content": q.answer.content,
                           "reason": q.answer.reason}}
                      for q in view.questions],
        "outcome": None if terminal is None else converter.unstructure(terminal),
        "source": None if source is None else converter.unstructure(source),
    }


def session_json(projection: Projection) -> dict[str, Any]:
    """The whole session: id, counts, transcript and calls."""
    return {
        "session_id": projection.session_id,
        "records": projection.last_seq,
        "turns": projection.turn,
        "open_calls": list(projection.open_calls),
        "pending_approvals": list(projection.pending_approvals),
        "pending_questions": list(projection.pending_questions),
        "usage": converter.unstructure(projection.usage),
        "transcript": transcript_json(projection),
        "calls": [call_json(view, projection.source(call_id))
                  for call_id, view in projection.calls.items()],
    }
