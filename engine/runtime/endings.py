"""Step 8 for a call that does not complete: the terminal events that end it early.

A call ends ``tool_call_completed`` only where its body's result is recorded
(:func:`engine.runtime.calls.execute`); every other ending — failed, blocked, denied, cancelled — is
written here, by whichever step decides it, so each has one shape and one message style. These
functions only record (through the session's :class:`~engine.runtime.recorder.Recorder`); none waits.
"""

from __future__ import annotations

from typing import Any

from events.results import ErrorInfo, ToolResult, error_result
from events.types import (
    FailureDetail,
    FailureKind,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallDenied,
    ToolCallFailed,
)

from ..core.refusals import blocked_result
from ..core.views import LiveCall
from .recorder import Recorder

__all__ = ["block", "close_open", "deny", "fail"]


def fail(recorder: Recorder, call_id: str, kind: FailureKind, message: str, *,
         text: str | None = None, error: ErrorInfo | None = None,
         returned: ToolResult | None = None, result: ToolResult | None = None,
         detail: FailureDetail | None = None) -> ToolResult:
    """End ``call_id`` as failed; ``text`` is what the caller reads (default: message)."""
    result = result or error_result(text or message)
    recorder.record(ToolCallFailed(call_id=call_id, kind=kind, message=message,
                                   result=result, error=error, returned=returned,
                                   detail=detail))
    return result


def close_open(recorder: Recorder, root: str, reason: str, *, include_root: bool = True) -> None:
    """Cancel the open calls below ``root`` (and ``root`` itself), the deepest first."""
    projection = recorder.projection
    prefix = root + "/"
    for call_id in reversed(projection.open_calls):
        if (include_root and call_id == root) or call_id.startswith(prefix):
            name = projection.live_calls[call_id].name
            recorder.record(ToolCallCancelled(
                call_id=call_id, reason=reason,
                result=error_result(f"{name} was cancelled ({reason})"),
            ))


def block(recorder: Recorder, view: LiveCall, reason: str, by: str,
          error: ErrorInfo | None = None) -> None:
    """End a call a ``tool_call`` handler blocked (``error``: the handler raised, and the model
    reads only that a handler failed)."""
    recorder.record(ToolCallBlocked(
        call_id=view.call_id, reason=reason, by=by, error=error,
        result=blocked_result(view.name, reason, failed=error is not None)))


def deny(recorder: Recorder, view: LiveCall, reason: str, by: Any, result: ToolResult, *,
         error: ErrorInfo | None = None, rule: str | None = None) -> None:
    """End a call the policy denied or the approver refused, with the result the model reads
    (:mod:`engine.core.refusals`); ``error``: the approver raised; ``rule``: the deny rule."""
    recorder.record(ToolCallDenied(call_id=view.call_id, reason=reason, by=by,
                                   result=result, error=error, rule=rule))
