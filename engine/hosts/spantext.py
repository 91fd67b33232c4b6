"""What a span says in words: ours by default, what others wrote only with content capture.

A session's records keep text that others wrote: the message of an exception a tool raised,
a handler's block reason (or its exception), an approver's refusal, a provider's error, a
result handler's exception, the name of a tool the model made up. It may hold anything a tool
read, a secret included. Spans leave the process (to a collector, a vendor's backend, people
who may not read the log), so such text goes on a span only with ``capture_content=True``.
By default a span carries the error's type (``error.type``, ``exception.type``) and one of the
fixed sentences here, chosen by the record's kind, never the record's text.

:mod:`engine.hosts.spanrules` asks this module for every piece of text it puts on a span that is
not an attribute of the conventions it fills from ours (ids, names of registered tools, the
host's settings): the same rule live and from a log. Pure: no OpenTelemetry import, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.modelturns import ModelFailed, ModelFailureKind
from events.results import ErrorInfo
from events.types import (
    FailureKind,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
)

__all__ = ["CALL_FAILURES", "MODEL_FAILURES", "exception_attributes", "said_by_default",
           "status_description", "tool_name"]

#: What a span says by default about a call that failed, by the failure's kind.
CALL_FAILURES: Mapping[FailureKind, str] = {
    "unavailable": "the tool is not available to its caller",
    "invalid_arguments": "the arguments do not match the tool's input schema",
    "duplicate_call_id": "two calls of one message have the same model call id",
    "truncated": "the model's message was cut short, so its arguments may be",
    "depth_limit": "the nested calls went deeper than the session allows",
    "raised": "the tool raised an exception",
    "timeout": "the tool did not finish within its timeout",
    "invalid_output": "the tool's result does not match its output schema",
    "not_serialisable": "the tool's result is not JSON",
    "interrupted": "the process stopped while the tool ran",
    "mismatch": "the tool, run again, asked for another call than on its first run",
    "too_large": "the arguments or the result are over the session's size limits",
}

#: What a span says by default about a model turn that failed, by the failure's kind.
MODEL_FAILURES: Mapping[ModelFailureKind, str] = {
    "rate_limited": "the provider limited the rate of requests",
    "server_error": "the provider failed to answer",
    "timeout": "the model did not answer in time",
    "connection": "the provider could not be reached",
    "refused": "the model declined to answer",
    "bad_request": "the provider refused the request",
    "cancelled": "the turn was cancelled before the answer came",
    "error": "the model raised an exception",
}


def said_by_default(event: Any) -> str:
    """The fixed sentence a span's error status says about ``event`` (a terminal event of a
    call, or :class:`~events.modelturns.ModelFailed`) without content capture."""
    if isinstance(event, ToolCallFailed):
        return CALL_FAILURES.get(event.kind, "the call failed")
    if isinstance(event, ToolCallBlocked):
        if event.error is not None:
            return "a tool_call handler raised, which blocks the call"
        return "a tool_call handler blocked the call"
    if isinstance(event, ToolCallDenied):
        return ("the approver refused the call" if event.by == "approver"
                else "the policy denied the call")
    if isinstance(event, ToolCallCancelled):
        return "the call was cancelled"
    if isinstance(event, ToolCallCompleted):
        return "the tool marked its result as an error"
    if isinstance(event, ModelFailed):
        return MODEL_FAILURES.get(event.kind, "the model turn failed")
    raise TypeError(f"{type(event).__name__} ends no span as an error")


def status_description(event: Any, capture_content: bool) -> str:
    """What a span's error status says about ``event``: the text the record holds (the
    failure's message, the block's or refusal's reason, the provider's message) with
    ``capture_content``, else :func:`said_by_default`."""
    if capture_content:
        if isinstance(event, ModelFailed):
            return event.error.message
        recorded = getattr(event, "message", None) or getattr(event, "reason", None)
        if recorded:
            return str(recorded)
    return said_by_default(event)


def tool_name(name: str, registered: bool, capture_content: bool) -> str | None:
    """The tool name a call's span may carry: a tool the session registered is named by its
    declaration; any other name is the model's text, carried only with ``capture_content``."""
    return name if registered or capture_content else None


def exception_attributes(error: ErrorInfo, capture_content: bool) -> dict[str, str]:
    """A recorded exception as span event attributes: its type, and its message only with
    ``capture_content`` (never its traceback, which quotes the code and its values)."""
    attributes = {"exception.type": error.type}
    if capture_content:
        attributes["exception.message"] = error.message
    return attributes
