"""The event catalogue: every fact a session can record, as frozen values.

The classes made on every call (the record and the call's events) are built by
:func:`~events.fastinit.fast_init` and have no ``__weakref__`` slot: a session keeps five of
each per call, and values are not weakly referenced.

A session's log is a sequence of :class:`Record`\\ s, each wrapping one event. Events say what
happened and nothing else: no behaviour, no I/O, no clock (the record's ``time`` comes from the
clock the runtime was given). The lifecycle of one call, and which event may follow which, is
the transition table in :mod:`engine.lifecycle`; the JSON shape is in :mod:`events.codec`.

Events about a call carry the engine's ``call_id`` (``"{turn}.{index}"`` for the model's
calls, ``"h{n}"`` for the host's, ``"{parent}/{n}"`` for nested ones). ``arguments`` and ``structured_content`` are JSON
values; the engine checks that before it records them.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import attrs

from .fastinit import fast_init
from .models import (
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ProviderContent,
    SystemPromptSet,
)
from .results import ErrorInfo, FailureDetail, JsonPath, NotJsonProblem, ToolResult

__all__ = [
    "SCHEMA_VERSION",
    "ActiveToolsSet",
    "Annotations",
    "ApprovalRequested",
    "ApprovalResolved",
    "AssistantMessage",
    "CallEvent",
    "Event",
    "Exposure",
    "ExecutionMode",
    "FailureDetail",
    "JsonPath",
    "NotJsonProblem",
    "ModelEvent",
    "ModelFailed",
    "ModelRequested",
    "ModelResponded",
    "ModelToolCall",
    "ProviderContent",
    "SystemPromptSet",
    "Origin",
    "PolicyDecided",
    "Record",
    "ResultHandlerFailed",
    "SessionSettings",
    "SessionStarted",
    "TERMINAL_EVENTS",
    "ToolCallBlocked",
    "ToolCallCancelled",
    "ToolCallCompleted",
    "ToolCallDenied",
    "ToolCallFailed",
    "ToolCallRequested",
    "ToolCallRewritten",
    "ToolExecutionStarted",
    "ToolProgress",
    "ToolRegistered",
    "ToolSnapshot",
    "ToolSource",
    "ToolsActivated",
    "UserMessage",
]

#: Version of the record format this code writes. A record with a newer version is refused;
#: older ones are read through :data:`events.codec.UPCASTERS`. 1: the first format.
#: 2: each stored line carries the hash chain's ``"hash"`` (see :mod:`events.integrity`).
#: 3: facts carry their data: a session's settings on its start, a failure's detail, the rule
#: a decision names, whether an answer was given at a pause (see :mod:`events.upcasters`).
SCHEMA_VERSION = 3

Exposure = Literal["direct", "model-only", "codemode", "deferred", "hidden"]
ExecutionMode = Literal["parallel", "sequential"]
#: Who asked for a call: the model (a tool call in its message), a running tool
#: (``ctx.execute_tool``), or the host (``session.call_tool``).
Origin = Literal["model", "nested", "host"]
Decision = Literal["allow", "deny", "ask"]
Scope = Literal["once", "session"]
FailureKind = Literal[
    "unavailable",  # unknown tool, or one the caller may not call (exposure)
    "invalid_arguments",  # input schema violation, before or after a rewrite
    "duplicate_call_id",  # two calls with one model id in one message: unpairable
    "truncated",  # the message stopped for length: arguments may be cut short
    "depth_limit",  # nested calls too deep
    "raised",  # the tool body raised
    "timeout",  # the tool's timeout passed
    "invalid_output",  # output schema violation, or no structured content where required
    "not_serialisable",  # the result is not JSON
    "interrupted",  # the process stopped while a non-idempotent body ran
    "mismatch",  # a body run again asked a tool for other arguments than its first run did
    "too_large",  # arguments or result over the session's size limits
]


@attrs.frozen(kw_only=True, cache_hash=True)  # the policy looks decisions up by it
class Annotations:
    """MCP's hints about a tool's behaviour; ``None`` means "not declared".

    Undeclared hints take MCP's defaults: not read-only, destructive, not idempotent,
    open-world. So a tool that declares nothing is treated as dangerous. These are hints from
    the tool's author: nothing verifies them. They inform the approval policy; they are not a
    sandbox.
    """

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


@attrs.frozen(kw_only=True)
class ToolSource:
    """Where a tool's code runs when it is not in this process: a tool of an MCP server
    mounted into the session (:mod:`engine.mcp`).

    ``server`` and ``version`` are the server's own name and version from its handshake (the
    host's name for it when the server gives none); ``tool`` is the tool's name on that server,
    which the session may know under a prefixed name. Recorded with the tool's registration, so
    every call of the tool names the server that answered it, and a server that comes back as
    another version registers the tool again."""

    server: str
    version: str | None = None
    tool: str


@attrs.frozen(kw_only=True)
class ToolSnapshot:
    """Everything about a tool except its code, as registered: what replay needs to judge it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: Annotations = Annotations()
    exposure: Exposure = "direct"
    execution_mode: ExecutionMode = "parallel"
    timeout: float | None = None
    #: a mounted MCP server's tool: which server, and its name there (None: a local tool)
    source: ToolSource | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ModelToolCall:
    """One tool call as the model wrote it; ``id`` is the model's, used only for pairing."""

    id: str
    name: str
    arguments: Any


@attrs.frozen(kw_only=True)
class SessionSettings:
    """What a session was opened with that decides what it does: its limits. A replay opens
    the session again with them; nothing reads them out of a message."""

    max_turns: int
    max_depth: int
    max_argument_bytes: int
    max_result_bytes: int


# -- session-level events ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionStarted:
    """The first record of every session: its metadata, and the settings it was opened with
    (``None`` in logs written before they were recorded)."""

    metadata: dict[str, Any] = attrs.field(factory=dict)
    settings: SessionSettings | None = None


@attrs.frozen(kw_only=True)
class ToolRegistered:
    """A tool became known to the session, with its full spec snapshot."""

    spec: ToolSnapshot


@attrs.frozen(kw_only=True)
class ActiveToolsSet:
    """``set_active_tools`` replaced the active set. (Logs written before hidden tools could
    be activated never hold a hidden name here.)"""

    names: tuple[str, ...]


@attrs.frozen(kw_only=True)
class ToolsActivated:
    """Tools joined the active set, and none left it: by the host (``session.activate``;
    ``call_id`` is ``None``) or by a running tool (``ctx.activate``, the search tool's way;
    ``call_id`` is that call's). They are declared to the model from its next request on."""

    names: tuple[str, ...]
    call_id: str | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class UserMessage:
    """The user's prompt."""

    text: str


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class AssistantMessage:
    """What the model answered in ``turn`` (1-based): text, tool calls and why it stopped.

    ``provider_content``: the message as its provider gave it, when it holds blocks toolledger
    does not interpret (reasoning, thinking, citations), for the adapter to send back
    unchanged (:class:`~events.models.ProviderContent`)."""

    turn: int
    text: str = ""
    tool_calls: tuple[ModelToolCall, ...] = ()
    stop_reason: str = "stop"
    provider_content: ProviderContent | None = None


# -- call events ------------------------------------------------------------------------


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallRequested:
    """A call was asked for: by the model, by the host (``origin="host"``, no transcript
    entry), or by a running tool (``parent_id`` set)."""

    call_id: str
    name: str
    arguments: Any
    origin: Origin = "model"
    parent_id: str | None = None
    model_call_id: str | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallRewritten:
    """A ``tool_call`` handler (or the approver) replaced the arguments."""

    call_id: str
    arguments: Any
    by: str


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class PolicyDecided:
    """The approval policy judged the final arguments. ``rule`` is the host's name pattern
    that decided, if one did (``None``: a session-wide answer or the annotation rule);
    logs written before it was recorded read as ``None``."""

    call_id: str
    decision: Decision
    reason: str
    rule: str | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ApprovalRequested:
    """The policy said ask: the approver was asked."""

    call_id: str
    reason: str


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ApprovalResolved:
    """The approver answered, for this call only or for every later call of the tool.
    ``later``: the approver said "later" and the host answered at a pause
    (``session.resolve_approval``); ``None`` in logs written before it was recorded."""

    call_id: str
    granted: bool
    scope: Scope = "once"
    reason: str | None = None
    later: bool | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolExecutionStarted:
    """The tool body is about to run. Recorded (and stored) before any side effect."""

    call_id: str


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolProgress:
    """A progress update the running tool reported."""

    call_id: str
    message: str | None = None
    data: Any = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ResultHandlerFailed:
    """A ``tool_result`` handler raised; it was skipped and the chain went on."""

    call_id: str
    handler: str
    error: ErrorInfo


# -- terminal events: exactly one per call ------------------------------------------------


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallCompleted:
    """The body returned. ``result`` is what the model sees (after result handlers);
    ``returned`` is what the tool returned, when a handler changed it."""

    call_id: str
    result: ToolResult
    returned: ToolResult | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallFailed:
    """The call ended in an error the engine produced; ``kind`` says which, ``detail`` the
    data behind the message where a program needs it (:class:`FailureDetail`)."""

    call_id: str
    kind: FailureKind
    message: str
    result: ToolResult
    error: ErrorInfo | None = None
    returned: ToolResult | None = None
    detail: FailureDetail | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallBlocked:
    """A ``tool_call`` handler blocked the call (or raised, which blocks: fail closed).

    ``error``: the handler raised; its exception, which the model is not shown."""

    call_id: str
    reason: str
    by: str
    result: ToolResult
    error: ErrorInfo | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallDenied:
    """The policy denied the call, or the approver refused it. ``rule`` is the deny rule
    that matched, if one did: when the call was judged, or when its body was about to run
    (a deny rule is checked again then, whatever the log had decided).

    ``error``: the approver raised (which refuses); its exception, which the model is not
    shown."""

    call_id: str
    reason: str
    by: Literal["policy", "approver"]
    result: ToolResult
    rule: str | None = None
    error: ErrorInfo | None = None


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallCancelled:
    """The call was cancelled (its session, its batch or its parent was)."""

    call_id: str
    reason: str
    result: ToolResult


CallEvent = Union[
    ToolCallRequested,
    ToolCallRewritten,
    PolicyDecided,
    ApprovalRequested,
    ApprovalResolved,
    ToolExecutionStarted,
    ToolProgress,
    ResultHandlerFailed,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallBlocked,
    ToolCallDenied,
    ToolCallCancelled,
]
ModelEvent = Union[SystemPromptSet, ModelRequested, ModelResponded, ModelFailed]
Event = Union[
    SessionStarted, ToolRegistered, ActiveToolsSet, UserMessage, AssistantMessage, ModelEvent,
    CallEvent, ToolsActivated,
]
TerminalEvent = Union[
    ToolCallCompleted, ToolCallFailed, ToolCallBlocked, ToolCallDenied, ToolCallCancelled
]
TERMINAL_EVENTS: tuple[type[Any], ...] = (
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallBlocked,
    ToolCallDenied,
    ToolCallCancelled,
)


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class Record:
    """One line of the log: an event with where and when it happened.

    ``seq`` is contiguous from 1 within a session; ``time`` is seconds since the epoch from the
    runtime's injected clock; ``version`` is the record format's version: :data:`SCHEMA_VERSION`
    for records made now, and for a record read from a log the version it was written in
    (its fields are always the current version's). Stores write current-version records only.
    The chain hash is not here: it belongs to the stored line, not to the fact.
    """

    session_id: str
    seq: int
    time: float
    event: Event
    version: int = SCHEMA_VERSION
