"""The fast readers of the events a call writes: requested, rewritten, decided, asked,
resolved, started, completed, failed (see :mod:`events.fast.readers`, which picks them).

These are the records a session writes on every call, so most of a log; a result's content
is read here too (text blocks only: any other kind goes to the converter). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, get_args

from ..results import ErrorInfo, KeptResult, TextContent, ToolResult
from ..types import (
    ApprovalRequested,
    ApprovalResolved,
    Decision,
    FailureDetail,
    FailureKind,
    Origin,
    PolicyDecided,
    Scope,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
)
from .fastinit import builder
from .readfields import FALLBACK, NESTED, exact_fields, strict_one_of, strict_opt_str, strict_str

__all__ = [
    "ASKED",
    "COMPLETED",
    "FAILED",
    "POLICY",
    "REQUESTED",
    "RESOLVED",
    "REWRITTEN",
    "STARTED",
    "approval_requested",
    "approval_resolved",
    "completed",
    "failed",
    "policy",
    "requested",
    "rewritten",
    "started",
]

# The builders of the classes made here (events.fast.fastinit): what calling the class makes, one
# call cheaper, for objects made on every line of a log.
_ToolCallRequested = builder(ToolCallRequested)
_PolicyDecided = builder(PolicyDecided)
_ToolExecutionStarted = builder(ToolExecutionStarted)
_ToolCallCompleted = builder(ToolCallCompleted)
_ToolCallFailed = builder(ToolCallFailed)
_ApprovalRequested = builder(ApprovalRequested)
_ApprovalResolved = builder(ApprovalResolved)
_ToolCallRewritten = builder(ToolCallRewritten)

_ORIGINS = frozenset(get_args(Origin))
_DECISIONS = frozenset(get_args(Decision))
_SCOPES = frozenset(get_args(Scope))
_KINDS = frozenset(get_args(FailureKind))
_TEXT, _RESULT, _ERROR = NESTED[TextContent], NESTED[ToolResult], NESTED[ErrorInfo]
# The slots of a result and of its text blocks, written directly: what their validators check
# (a string; a tuple of blocks, a real bool) is checked here first.
_set_text, _set_type = (TextContent.__dict__[name].__set__ for name in ("text", "type"))
_set_content, _set_structured, _set_is_error = (
    ToolResult.__dict__[name].__set__ for name in ("content", "structured_content", "is_error"))


def _result(data: Any) -> ToolResult:
    exact_fields(data, _RESULT)
    blocks = data["content"]
    if type(blocks) is not list or type(data["is_error"]) is not bool:
        raise FALLBACK
    content = []
    for block in blocks:  # text blocks only; any other kind goes to the converter
        exact_fields(block, _TEXT)
        if type(block["type"]) is not str or block["type"] != "text":
            raise FALLBACK
        text = object.__new__(TextContent)
        _set_text(text, strict_str(block["text"]))
        _set_type(text, "text")
        content.append(text)
    result: ToolResult = object.__new__(ToolResult)
    _set_content(result, tuple(content))
    _set_structured(result, data["structured_content"])
    _set_is_error(result, data["is_error"])
    return result


def _opt_result(data: Any) -> ToolResult | None:
    return None if data is None else _result(data)


REQUESTED = frozenset({"call_id", "name", "arguments", "origin", "parent_id", "model_call_id"})


def requested(data: Any) -> ToolCallRequested:
    """A record's data as ``ToolCallRequested``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, REQUESTED)
    return _ToolCallRequested(
        call_id=strict_str(data["call_id"]), name=strict_str(data["name"]),
        arguments=data["arguments"],
        origin=strict_one_of(data["origin"], _ORIGINS), parent_id=strict_opt_str(data["parent_id"]),
        model_call_id=strict_opt_str(data["model_call_id"]),
    )


POLICY = frozenset({"call_id", "decision", "reason", "rule"})
_POLICY_BARE = POLICY - {"rule"}


def policy(data: Any) -> PolicyDecided:
    """A record's data as ``PolicyDecided``; :data:`FALLBACK` for any other shape."""
    # ``rule`` is written only when a rule decided (and is absent from older logs)
    if type(data) is not dict or (data.keys() != _POLICY_BARE and data.keys() != POLICY):
        raise FALLBACK
    return _PolicyDecided(call_id=strict_str(data["call_id"]),
                          decision=strict_one_of(data["decision"], _DECISIONS),
                          reason=strict_str(data["reason"]), rule=strict_opt_str(data.get("rule")))


STARTED = frozenset({"call_id"})


def started(data: Any) -> ToolExecutionStarted:
    """A record's data as ``ToolExecutionStarted``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, STARTED)
    return _ToolExecutionStarted(call_id=strict_str(data["call_id"]))


COMPLETED = frozenset({"call_id", "result", "returned", "kept"})
_COMPLETED_WHOLE = COMPLETED - {"kept"}
_KEPT, _KEPT_CUT = NESTED[KeptResult], NESTED[KeptResult] - {"whole"}


def _kept(data: Any) -> KeptResult | None:
    if data is None:
        return None
    if type(data) is not dict or (data.keys() != _KEPT and data.keys() != _KEPT_CUT):
        raise FALLBACK
    size, sha256 = data["size"], data["sha256"]
    if type(size) is not int or type(sha256) is not str:
        raise FALLBACK
    try:
        return KeptResult(size=size, sha256=sha256, whole=_opt_result(data.get("whole")))
    except ValueError:
        raise FALLBACK from None  # the converter refuses it, in its words


def completed(data: Any) -> ToolCallCompleted:
    """A record's data as ``ToolCallCompleted``; :data:`FALLBACK` for any other shape."""
    # ``kept`` is written only for a result the model read cut
    if type(data) is not dict or (data.keys() != _COMPLETED_WHOLE and data.keys() != COMPLETED):
        raise FALLBACK
    return _ToolCallCompleted(call_id=strict_str(data["call_id"]), result=_result(data["result"]),
                              returned=_opt_result(data["returned"]), kept=_kept(data.get("kept")))


def _error(data: Any) -> ErrorInfo | None:
    if data is None:
        return None
    exact_fields(data, _ERROR)
    return ErrorInfo(type=strict_str(data["type"]), message=strict_str(data["message"]),
                     traceback=strict_str(data["traceback"]))


# (a detail with anything but a limit, a size or a type name, a path say, goes to the converter)
_DETAIL_SIMPLE = frozenset({"limit", "size", "type"})


def _detail(data: Any) -> FailureDetail | None:
    # written only when the failure has one, with only the fields its kind uses
    if data is None:
        return None
    if type(data) is not dict or not data.keys() <= _DETAIL_SIMPLE:
        raise FALLBACK
    limit, size = data.get("limit"), data.get("size")
    if (limit is not None and type(limit) is not int) or (
            size is not None and type(size) is not int):
        raise FALLBACK
    return FailureDetail(limit=limit, size=size, type=strict_opt_str(data.get("type")))


FAILED = frozenset({"call_id", "kind", "message", "result", "error", "returned", "detail"})
_FAILED_BARE = FAILED - {"detail"}


def failed(data: Any) -> ToolCallFailed:
    """A record's data as ``ToolCallFailed``; :data:`FALLBACK` for any other shape."""
    # ``detail`` is written only when the failure has one (and is absent from older logs)
    if type(data) is not dict or (data.keys() != _FAILED_BARE and data.keys() != FAILED):
        raise FALLBACK
    return _ToolCallFailed(
        call_id=strict_str(data["call_id"]), kind=strict_one_of(data["kind"], _KINDS),
        message=strict_str(data["message"]), result=_result(data["result"]),
        error=_error(data["error"]), returned=_opt_result(data["returned"]),
        detail=_detail(data.get("detail")),
    )


ASKED = frozenset({"call_id", "reason"})


def approval_requested(data: Any) -> ApprovalRequested:
    """A record's data as ``ApprovalRequested``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, ASKED)
    return _ApprovalRequested(call_id=strict_str(data["call_id"]),
                              reason=strict_str(data["reason"]))


RESOLVED = frozenset({"call_id", "granted", "scope", "reason", "later"})
_RESOLVED_BARE = RESOLVED - {"later"}


def approval_resolved(data: Any) -> ApprovalResolved:
    """A record's data as ``ApprovalResolved``; :data:`FALLBACK` for any other shape."""
    # ``later`` is absent from older logs
    if type(data) is not dict or (data.keys() != _RESOLVED_BARE and data.keys() != RESOLVED):
        raise FALLBACK
    granted, later = data["granted"], data.get("later")
    if type(granted) is not bool or (later is not None and type(later) is not bool):
        raise FALLBACK
    return _ApprovalResolved(call_id=strict_str(data["call_id"]), granted=granted,
                             scope=strict_one_of(data["scope"], _SCOPES),
                             reason=strict_opt_str(data["reason"]), later=later)


REWRITTEN = frozenset({"call_id", "arguments", "by"})


def rewritten(data: Any) -> ToolCallRewritten:
    """A record's data as ``ToolCallRewritten``; :data:`FALLBACK` for any other shape."""
    exact_fields(data, REWRITTEN)
    return _ToolCallRewritten(call_id=strict_str(data["call_id"]), arguments=data["arguments"],
                              by=strict_str(data["by"]))
