"""Hand-written readers for the events a call writes, and those a session opens with: the
fast path of decoding.

The converter in :mod:`events.codec` is the reference: it decides what a record means and says
what is wrong with one. Folding a log decodes every line, and the converter's general
machinery (tagged unions, validators, detailed errors) makes that about a fifth slower than
these readers (docs/performance.md, "One codec"), so the events written on every call have one;
so do those a session opens with (its start, its tools, the user's message), whose encoding
a store must otherwise prove by decoding the line again.

Each reader takes only the exact shape :func:`events.codec.encode_record` writes, with the
strict types, and builds the event directly; anything else raises :class:`Fallback`, and the
converter decides. The one place that picks the path is the codec's ``_structure``.

:data:`READERS` lists every event class, with its reader or ``None`` (the converter alone, on
purpose). The codec's tests check, for every event class and with values of every field set
and unset, that a reader returns exactly what the converter does and does not fall back on a
record the codec wrote; :func:`drift` names a field a reader was not written for. At run time
a class that drifted is left to the converter (still correct, only slower). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, get_args

import attrs

from .models import Usage
from .results import ErrorInfo, TextContent, ToolResult
from .types import (
    ActiveToolsSet,
    Annotations,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    Decision,
    ExecutionMode,
    Exposure,
    FailureDetail,
    FailureKind,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ModelToolCall,
    Origin,
    PolicyDecided,
    ProviderContent,
    ResultHandlerFailed,
    Scope,
    SessionSettings,
    SessionStarted,
    SystemPromptSet,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistered,
    ToolsActivated,
    ToolSnapshot,
    ToolSource,
    UserMessage,
)

__all__ = ["FAST", "NESTED", "READERS", "Fallback", "Reader", "drift"]


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


def _int(value: Any) -> int:
    if type(value) is not int:
        raise _FALLBACK
    return value


def _opt_bool(value: Any) -> bool | None:
    if value is not None and type(value) is not bool:
        raise _FALLBACK
    return value


def _object(value: Any) -> dict[str, Any]:
    """A JSON object whose values are anyone's (a field of type ``dict[str, Any]``)."""
    if type(value) is not dict or any(type(key) is not str for key in value):
        raise _FALLBACK
    return value


def _one_of(value: Any, allowed: frozenset[str]) -> Any:
    if type(value) is not str or value not in allowed:
        raise _FALLBACK
    return value


_ORIGINS = frozenset(get_args(Origin))
_DECISIONS = frozenset(get_args(Decision))
_SCOPES = frozenset(get_args(Scope))
_KINDS = frozenset(get_args(FailureKind))
_EXPOSURES = frozenset(get_args(Exposure))
_MODES = frozenset(get_args(ExecutionMode))

#: The classes inside events that the readers build themselves, with the fields they read.
NESTED: dict[type[Any], frozenset[str]] = {
    ModelToolCall: frozenset({"id", "name", "arguments"}),
    ToolResult: frozenset({"content", "structured_content", "is_error"}),
    TextContent: frozenset({"text", "type"}),
    ErrorInfo: frozenset({"type", "message", "traceback"}),
    FailureDetail: frozenset({"limit", "size", "type", "path", "problem", "value"}),
    SessionSettings: frozenset({"max_turns", "max_depth", "max_argument_bytes",
                                "max_result_bytes"}),
    ToolSnapshot: frozenset({"name", "description", "input_schema", "output_schema",
                             "annotations", "exposure", "execution_mode", "timeout", "source"}),
    Annotations: frozenset({"title", "read_only", "destructive", "idempotent", "open_world"}),
    ToolSource: frozenset({"server", "version", "tool"}),
    ProviderContent: frozenset({"api", "items"}),
    Usage: frozenset({"input_tokens", "output_tokens", "cached_tokens"}),
}
_TEXT, _RESULT, _ERROR, _CALL = (NESTED[TextContent], NESTED[ToolResult], NESTED[ErrorInfo],
                                 NESTED[ModelToolCall])


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


_REQUESTED = frozenset({"call_id", "name", "arguments", "origin", "parent_id", "model_call_id"})


def _requested(data: Any) -> ToolCallRequested:
    _fields(data, _REQUESTED)
    return ToolCallRequested(
        call_id=_str(data["call_id"]), name=_str(data["name"]), arguments=data["arguments"],
        origin=_one_of(data["origin"], _ORIGINS), parent_id=_opt_str(data["parent_id"]),
        model_call_id=_opt_str(data["model_call_id"]),
    )


_POLICY = frozenset({"call_id", "decision", "reason", "rule"})
_POLICY_BARE = _POLICY - {"rule"}


def _policy(data: Any) -> PolicyDecided:
    # ``rule`` is written only when a rule decided (and is absent from older logs)
    if type(data) is not dict or (data.keys() != _POLICY_BARE and data.keys() != _POLICY):
        raise _FALLBACK
    return PolicyDecided(call_id=_str(data["call_id"]),
                         decision=_one_of(data["decision"], _DECISIONS),
                         reason=_str(data["reason"]), rule=_opt_str(data.get("rule")))


_STARTED = frozenset({"call_id"})


def _started(data: Any) -> ToolExecutionStarted:
    _fields(data, _STARTED)
    return ToolExecutionStarted(call_id=_str(data["call_id"]))


_COMPLETED = frozenset({"call_id", "result", "returned"})


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


# (a detail with anything but a limit, a size or a type name, a path say, goes to the converter)
_DETAIL_SIMPLE = frozenset({"limit", "size", "type"})


def _detail(data: Any) -> FailureDetail | None:
    # written only when the failure has one, with only the fields its kind uses
    if data is None:
        return None
    if type(data) is not dict or not data.keys() <= _DETAIL_SIMPLE:
        raise _FALLBACK
    limit, size = data.get("limit"), data.get("size")
    if (limit is not None and type(limit) is not int) or (
            size is not None and type(size) is not int):
        raise _FALLBACK
    return FailureDetail(limit=limit, size=size, type=_opt_str(data.get("type")))


_FAILED = frozenset({"call_id", "kind", "message", "result", "error", "returned", "detail"})
_FAILED_BARE = _FAILED - {"detail"}


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


_ASSISTANT = frozenset({"turn", "text", "tool_calls", "stop_reason", "provider_content"})
_ASSISTANT_BARE = _ASSISTANT - {"provider_content"}
_PROVIDER = NESTED[ProviderContent]


def _provider_content(value: Any) -> ProviderContent | None:
    if value is None:
        return None
    _fields(value, _PROVIDER)
    return ProviderContent(api=_str(value["api"]), items=value["items"])


def _assistant(data: Any) -> AssistantMessage:
    # ``provider_content`` is written only when the message has some (and older logs lack it)
    if type(data) is not dict or (data.keys() != _ASSISTANT_BARE and data.keys() != _ASSISTANT):
        raise _FALLBACK
    turn, calls = data["turn"], data["tool_calls"]
    if type(turn) is not int or type(calls) is not list:
        raise _FALLBACK
    tool_calls = []
    for call in calls:
        _fields(call, _CALL)
        tool_calls.append(ModelToolCall(id=_str(call["id"]), name=_str(call["name"]),
                                        arguments=call["arguments"]))
    return AssistantMessage(turn=turn, text=_str(data["text"]), tool_calls=tuple(tool_calls),
                            stop_reason=_str(data["stop_reason"]),
                            provider_content=_provider_content(data.get("provider_content")))


_ASKED = frozenset({"call_id", "reason"})


def _approval_requested(data: Any) -> ApprovalRequested:
    _fields(data, _ASKED)
    return ApprovalRequested(call_id=_str(data["call_id"]), reason=_str(data["reason"]))


_RESOLVED = frozenset({"call_id", "granted", "scope", "reason", "later"})
_RESOLVED_BARE = _RESOLVED - {"later"}


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


# -- the events a session opens with ---------------------------------------------------------

_SESSION = frozenset({"metadata", "settings"})
_SESSION_BARE = _SESSION - {"settings"}
_SETTINGS = NESTED[SessionSettings]


def _session_started(data: Any) -> SessionStarted:
    # ``settings`` is written only when there are some (and is absent from older logs)
    if type(data) is not dict or (data.keys() != _SESSION_BARE and data.keys() != _SESSION):
        raise _FALLBACK
    settings = data.get("settings")
    if settings is not None:
        _fields(settings, _SETTINGS)
        settings = SessionSettings(
            max_turns=_int(settings["max_turns"]), max_depth=_int(settings["max_depth"]),
            max_argument_bytes=_int(settings["max_argument_bytes"]),
            max_result_bytes=_int(settings["max_result_bytes"]))
    return SessionStarted(metadata=_object(data["metadata"]), settings=settings)


_REGISTERED = frozenset({"spec"})
_SNAPSHOT, _ANNOTATIONS = NESTED[ToolSnapshot], NESTED[Annotations]
_SNAPSHOT_LOCAL, _SOURCE = _SNAPSHOT - {"source"}, NESTED[ToolSource]


def _registered(data: Any) -> ToolRegistered:
    _fields(data, _REGISTERED)
    spec = data["spec"]
    # ``source`` is written only for a tool that runs elsewhere (a mounted MCP server's)
    if type(spec) is not dict or (spec.keys() != _SNAPSHOT_LOCAL and spec.keys() != _SNAPSHOT):
        raise _FALLBACK
    source = spec.get("source")
    if source is not None:
        _fields(source, _SOURCE)
        source = ToolSource(server=_str(source["server"]), version=_opt_str(source["version"]),
                            tool=_str(source["tool"]))
    hints, output, timeout = spec["annotations"], spec["output_schema"], spec["timeout"]
    _fields(hints, _ANNOTATIONS)
    if timeout is not None and type(timeout) is not float:
        raise _FALLBACK
    return ToolRegistered(spec=ToolSnapshot(
        name=_str(spec["name"]), description=_str(spec["description"]),
        input_schema=_object(spec["input_schema"]),
        output_schema=None if output is None else _object(output),
        annotations=Annotations(
            title=_opt_str(hints["title"]), read_only=_opt_bool(hints["read_only"]),
            destructive=_opt_bool(hints["destructive"]),
            idempotent=_opt_bool(hints["idempotent"]),
            open_world=_opt_bool(hints["open_world"])),
        exposure=_one_of(spec["exposure"], _EXPOSURES),
        execution_mode=_one_of(spec["execution_mode"], _MODES), timeout=timeout,
        source=source))


_USER = frozenset({"text"})


def _user(data: Any) -> UserMessage:
    _fields(data, _USER)
    return UserMessage(text=_str(data["text"]))


_REWRITTEN = frozenset({"call_id", "arguments", "by"})


def _rewritten(data: Any) -> ToolCallRewritten:
    _fields(data, _REWRITTEN)
    return ToolCallRewritten(call_id=_str(data["call_id"]), arguments=data["arguments"],
                             by=_str(data["by"]))


_MODEL_REQUESTED = frozenset({"turn", "provider", "model", "api", "settings", "stream"})


def _model_requested(data: Any) -> ModelRequested:
    _fields(data, _MODEL_REQUESTED)
    turn, settings, stream = data["turn"], data["settings"], data["stream"]
    if type(turn) is not int or type(settings) is not dict or type(stream) is not bool:
        raise _FALLBACK
    if any(type(key) is not str for key in settings):
        raise _FALLBACK
    return ModelRequested(turn=turn, provider=_str(data["provider"]), model=_str(data["model"]),
                          api=_opt_str(data["api"]), settings=settings, stream=stream)


_MODEL_RESPONDED = frozenset({"turn", "stop_reason", "model", "response_id", "usage"})
_USAGE = NESTED[Usage]


def _opt_int(value: Any) -> int | None:
    if value is not None and type(value) is not int:
        raise _FALLBACK
    return value


def _usage(data: Any) -> Usage | None:
    if data is None:
        return None
    _fields(data, _USAGE)
    return Usage(input_tokens=_opt_int(data["input_tokens"]),
                 output_tokens=_opt_int(data["output_tokens"]),
                 cached_tokens=_opt_int(data["cached_tokens"]))


def _model_responded(data: Any) -> ModelResponded:
    _fields(data, _MODEL_RESPONDED)
    turn = data["turn"]
    if type(turn) is not int:
        raise _FALLBACK
    return ModelResponded(turn=turn, stop_reason=_str(data["stop_reason"]),
                          model=_opt_str(data["model"]),
                          response_id=_opt_str(data["response_id"]), usage=_usage(data["usage"]))


class Reader(NamedTuple):
    """A fast reader, and the names of the fields it was written for."""

    fields: frozenset[str]
    read: Callable[[Any], Any]


#: Every event class, with its fast reader or ``None``: ``None`` leaves that class to the
#: converter on purpose (it is written neither on every call nor when a session opens, so a
#: reader would not pay). A new
#: event class needs an entry here, and a new field of a class with a reader needs the reader
#: to read it: the codec's tests fail, naming the class and the field, until they have one.
READERS: dict[type[Any], Reader | None] = {
    SessionStarted: Reader(_SESSION, _session_started),
    ToolRegistered: Reader(_REGISTERED, _registered),
    ActiveToolsSet: None,
    UserMessage: Reader(_USER, _user),
    AssistantMessage: Reader(_ASSISTANT, _assistant),
    ToolCallRequested: Reader(_REQUESTED, _requested),
    ToolCallRewritten: Reader(_REWRITTEN, _rewritten),
    PolicyDecided: Reader(_POLICY, _policy),
    ApprovalRequested: Reader(_ASKED, _approval_requested),
    ApprovalResolved: Reader(_RESOLVED, _approval_resolved),
    ToolExecutionStarted: Reader(_STARTED, _started),
    ToolProgress: None,
    ResultHandlerFailed: None,
    ToolCallCompleted: Reader(_COMPLETED, _completed),
    ToolCallFailed: Reader(_FAILED, _failed),
    ToolCallBlocked: None,
    ToolCallDenied: None,
    ToolCallCancelled: None,
    ToolsActivated: None,
    # a model turn writes these two every turn (measured: docs/performance.md)
    ModelRequested: Reader(_MODEL_REQUESTED, _model_requested),
    ModelResponded: Reader(_MODEL_RESPONDED, _model_responded),
    SystemPromptSet: None,
    ModelFailed: None,
}


def drift() -> list[str]:
    """Every field a reader was not written for, and every field it reads that its class no
    longer has, as sentences that name the class and the field; empty while the readers are in
    step with the classes."""
    declared = {cls: reader.fields for cls, reader in READERS.items() if reader is not None}
    problems = []
    for cls, names in {**declared, **NESTED}.items():
        table = "READERS" if cls in declared else "NESTED"
        fields = [field.name for field in attrs.fields(cls)]
        problems += [f"{cls.__name__}.{name} has no entry in the fast path: read it in "
                     f"events/readers.py and add it to {cls.__name__}'s field names in {table}"
                     for name in fields if name not in names]
        problems += [f"{cls.__name__}.{name} is read by the fast path (events/readers.py, "
                     f"{table}) but is no longer a field of {cls.__name__}"
                     for name in names if name not in fields]
    return problems


def _in_step(cls: type[Any], names: frozenset[str]) -> bool:
    return {field.name for field in attrs.fields(cls)} == names


#: The readers in use, by class: those in step with their class, while the classes they build
#: inside events are in step too. A class that drifted (see :func:`drift`) is left out, so
#: the converter reads it.
FAST: dict[type[Any], Callable[[Any], Any]] = (
    {cls: reader.read for cls, reader in READERS.items()
     if reader is not None and _in_step(cls, reader.fields)}
    if all(_in_step(cls, names) for cls, names in NESTED.items())
    else {}
)
