"""Hand-written readers for the events a call writes: the hot path of folding a log.

Each reader takes only the exact shape :func:`events.codec.encode_record` writes, with the
strict types, and builds the event directly; anything else raises :class:`Fallback`, and the
codec's converter decides (and says what is wrong). So a reader can only accept what the
converter accepts, and :data:`FAST` leaves out any class whose fields no longer match the
names its reader was written for. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

import attrs

from .results import ErrorInfo, TextContent, ToolResult
from .types import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    Decision,
    FailureDetail,
    FailureKind,
    ModelToolCall,
    Origin,
    PolicyDecided,
    Scope,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
)

__all__ = ["FAST", "Fallback"]


class Fallback(Exception):
    """The fast reader cannot vouch for a value: the converter decides."""


_set = object.__setattr__


_FALLBACK = Fallback()


def _fields(data: Any, names: frozenset[str]) -> None:
    if type(data) is not dict or data.keys() != names:
        raise _FALLBACK


def _str(value: Any) -> str:
    if type(value) is not str:
        raise _FALLBACK
    return value


def _opt_str(value: Any) -> str | None:
    if value is not None and type(value) is not str:
        raise _FALLBACK
    return value


def _one_of(value: Any, allowed: frozenset[str]) -> Any:
    if type(value) is not str or value not in allowed:
        raise _FALLBACK
    return value


def _names(cls: type[Any]) -> frozenset[str]:
    return frozenset(field.name for field in attrs.fields(cls))


_ORIGINS = frozenset(get_args(Origin))
_DECISIONS = frozenset(get_args(Decision))
_SCOPES = frozenset(get_args(Scope))
_KINDS = frozenset(get_args(FailureKind))
_TEXT, _RESULT, _ERROR, _CALL = (_names(TextContent), _names(ToolResult), _names(ErrorInfo),
                                 _names(ModelToolCall))


def _result(data: Any) -> ToolResult:
    _fields(data, _RESULT)
    blocks = data["content"]
    if type(blocks) is not list or type(data["is_error"]) is not bool:
        raise _FALLBACK
    content = []
    for block in blocks:  # text blocks only; any other kind goes to the converter
        _fields(block, _TEXT)
        if type(block["type"]) is not str or block["type"] != "text":
            raise _FALLBACK
        content.append(TextContent(text=_str(block["text"])))
    # what ToolResult's validators check is checked above (a tuple of blocks, a real bool):
    # build it without running them again
    result: ToolResult = object.__new__(ToolResult)
    _set(result, "content", tuple(content))
    _set(result, "structured_content", data["structured_content"])
    _set(result, "is_error", data["is_error"])
    return result


def _opt_result(data: Any) -> ToolResult | None:
    return None if data is None else _result(data)


def _requested(data: Any) -> ToolCallRequested:
    _fields(data, _REQUESTED)
    return ToolCallRequested(
        call_id=_str(data["call_id"]), name=_str(data["name"]), arguments=data["arguments"],
        origin=_one_of(data["origin"], _ORIGINS), parent_id=_opt_str(data["parent_id"]),
        model_call_id=_opt_str(data["model_call_id"]),
    )


def _policy(data: Any) -> PolicyDecided:
    # ``rule`` is written only when a rule decided (and is absent from older logs)
    if type(data) is not dict or (data.keys() != _POLICY_BARE and data.keys() != _POLICY):
        raise _FALLBACK
    return PolicyDecided(call_id=_str(data["call_id"]),
                         decision=_one_of(data["decision"], _DECISIONS),
                         reason=_str(data["reason"]), rule=_opt_str(data.get("rule")))


def _started(data: Any) -> ToolExecutionStarted:
    _fields(data, _STARTED)
    return ToolExecutionStarted(call_id=_str(data["call_id"]))


def _completed(data: Any) -> ToolCallCompleted:
    _fields(data, _COMPLETED)
    return ToolCallCompleted(call_id=_str(data["call_id"]), result=_result(data["result"]),
                             returned=_opt_result(data["returned"]))


def _error(data: Any) -> ErrorInfo | None:
    if data is None:
        return None
    _fields(data, _ERROR)
    return ErrorInfo(type=_str(data["type"]), message=_str(data["message"]),
                     traceback=_str(data["traceback"]))


def _detail(data: Any) -> FailureDetail | None:
    # written only when the failure has one, with only the fields its kind uses; a path (or
    # anything else but a limit, a size or a type name) goes to the converter
    if data is None:
        return None
    if type(data) is not dict or not data.keys() <= _DETAIL_SIMPLE:
        raise _FALLBACK
    limit, size = data.get("limit"), data.get("size")
    if (limit is not None and type(limit) is not int) or (
            size is not None and type(size) is not int):
        raise _FALLBACK
    return FailureDetail(limit=limit, size=size, type=_opt_str(data.get("type")))


def _failed(data: Any) -> ToolCallFailed:
    # ``detail`` is written only when the failure has one (and is absent from older logs)
    if type(data) is not dict or (data.keys() != _FAILED_BARE and data.keys() != _FAILED):
        raise _FALLBACK
    return ToolCallFailed(
        call_id=_str(data["call_id"]), kind=_one_of(data["kind"], _KINDS),
        message=_str(data["message"]), result=_result(data["result"]),
        error=_error(data["error"]), returned=_opt_result(data["returned"]),
        detail=_detail(data.get("detail")),
    )


def _assistant(data: Any) -> AssistantMessage:
    _fields(data, _ASSISTANT)
    turn, calls = data["turn"], data["tool_calls"]
    if type(turn) is not int or type(calls) is not list:
        raise _FALLBACK
    tool_calls = []
    for call in calls:
        _fields(call, _CALL)
        tool_calls.append(ModelToolCall(id=_str(call["id"]), name=_str(call["name"]),
                                        arguments=call["arguments"]))
    return AssistantMessage(turn=turn, text=_str(data["text"]), tool_calls=tuple(tool_calls),
                            stop_reason=_str(data["stop_reason"]))


def _approval_requested(data: Any) -> ApprovalRequested:
    _fields(data, _ASKED)
    return ApprovalRequested(call_id=_str(data["call_id"]), reason=_str(data["reason"]))


def _approval_resolved(data: Any) -> ApprovalResolved:
    # ``later`` is absent from older logs
    if type(data) is not dict or (data.keys() != _RESOLVED_BARE and data.keys() != _RESOLVED):
        raise _FALLBACK
    granted, later = data["granted"], data.get("later")
    if type(granted) is not bool or (later is not None and type(later) is not bool):
        raise _FALLBACK
    return ApprovalResolved(call_id=_str(data["call_id"]), granted=granted,
                            scope=_one_of(data["scope"], _SCOPES),
                            reason=_opt_str(data["reason"]), later=later)


def _rewritten(data: Any) -> ToolCallRewritten:
    _fields(data, _REWRITTEN)
    return ToolCallRewritten(call_id=_str(data["call_id"]), arguments=data["arguments"],
                             by=_str(data["by"]))


# class -> (the field names its reader was written for, the reader)
_READERS: dict[type[Any], tuple[tuple[str, ...], Callable[[Any], Any]]] = {
    ToolCallRequested: (("call_id", "name", "arguments", "origin", "parent_id",
                         "model_call_id"), _requested),
    PolicyDecided: (("call_id", "decision", "reason", "rule"), _policy),
    ToolExecutionStarted: (("call_id",), _started),
    ToolCallCompleted: (("call_id", "result", "returned"), _completed),
    ToolCallFailed: (("call_id", "kind", "message", "result", "error", "returned", "detail"),
                     _failed),
    AssistantMessage: (("turn", "text", "tool_calls", "stop_reason"), _assistant),
    ApprovalRequested: (("call_id", "reason"), _approval_requested),
    ApprovalResolved: (("call_id", "granted", "scope", "reason", "later"), _approval_resolved),
    ToolCallRewritten: (("call_id", "arguments", "by"), _rewritten),
}
(_REQUESTED, _POLICY, _STARTED, _COMPLETED, _FAILED, _ASSISTANT, _ASKED, _RESOLVED,
 _REWRITTEN) = (frozenset(names) for names, _ in _READERS.values())
_POLICY_BARE = _POLICY - {"rule"}
_FAILED_BARE = _FAILED - {"detail"}
_RESOLVED_BARE = _RESOLVED - {"later"}
_DETAIL = _names(FailureDetail)
_DETAIL_SIMPLE = frozenset({"limit", "size", "type"})

#: The fast readers in use: those whose class still has exactly the fields they know, and
#: whose nested classes do too.
FAST: dict[type[Any], Callable[[Any], Any]] = (
    {
        cls: reader
        for cls, (names, reader) in _READERS.items()
        if tuple(field.name for field in attrs.fields(cls)) == names
    }
    if (_TEXT, _RESULT, _ERROR, _CALL, _DETAIL) == (
        frozenset({"text", "type"}),
        frozenset({"content", "structured_content", "is_error"}),
        frozenset({"type", "message", "traceback"}),
        frozenset({"id", "name", "arguments"}),
        frozenset({"limit", "size", "type", "path", "problem", "value"}),
    )
    else {}
)
