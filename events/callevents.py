"""The events of one tool call, from its request to the one terminal event that ends it.

A call is asked for (:class:`ToolCallRequested`), maybe rewritten by a handler, decided by the
policy, put to the approver, started, and ended by exactly one of :data:`TERMINAL_EVENTS`.
Which event may follow which is the transition table in :mod:`engine.core.lifecycle`. Each carries
the engine's ``call_id``. The classes made on every call are built by
:func:`~events.fast.fastinit.fast_init` (see :mod:`events.types`). Re-exported by
:mod:`events.types`, the whole catalogue; import them from there.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import attrs

from .fast.fastinit import fast_init
from .results import ContentBlock, ErrorInfo, FailureDetail, KeptResult, ToolResult

__all__ = [
    "TERMINAL_EVENTS",
    "ApprovalRequested",
    "ApprovalResolved",
    "CallEvent",
    "Decision",
    "FailureKind",
    "Origin",
    "PolicyDecided",
    "ProgramSuspended",
    "QuestionAction",
    "QuestionAnswered",
    "QuestionAsked",
    "ResultHandlerFailed",
    "Scope",
    "TerminalEvent",
    "ToolCallBlocked",
    "ToolCallCancelled",
    "ToolCallCompleted",
    "ToolCallDenied",
    "ToolCallFailed",
    "ToolCallRequested",
    "ToolCallRewritten",
    "ToolExecutionStarted",
    "ToolProgress",
]

#: Who asked for a call: the model (a tool call in its message), a running tool
#: (``ctx.execute_tool``), or the host (``session.call_tool``).
Origin = Literal["model", "nested", "host"]
Decision = Literal["allow", "deny", "ask"]
#: What a person did with a question (MCP's elicitation actions).
QuestionAction = Literal["accept", "decline", "cancel"]
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


@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolProgress:
    """A progress update the running tool reported.

    ``source``: the update is a nested call's, which the tool forwarded as its own
    (``ctx.forward_progress``): the call that first reported it, at any depth below this one;
    ``None`` for the tool's own (and in logs written before forwarding was recorded).
    ``progress`` and ``total``: how far the tool is, as numbers (MCP's ``progress`` and
    ``total``), when it said so; ``None`` otherwise, and in logs written before.
    ``content``: output the tool streamed while it runs (``report_progress(content=...)``),
    as content blocks, for people and programs watching; never the model's. Empty for an
    update that streams nothing, and in logs written before."""

    call_id: str
    message: str | None = None
    data: Any = None
    source: str | None = None
    progress: float | None = None
    total: float | None = None
    content: tuple[ContentBlock, ...] = ()


@attrs.frozen(kw_only=True, weakref_slot=False)
class QuestionAsked:
    """The running tool asked the person (``ctx.ask``): ``message`` for the person, and
    ``schema``, the flat form an answer fills in. ``question_id`` is ``"{call_id}#{n}"``, the
    call's ``n``-th question, counted from 1. Only a running call asks."""

    call_id: str
    question_id: str
    message: str
    schema: Any


@attrs.frozen(kw_only=True, weakref_slot=False)
class QuestionAnswered:
    """The question was answered: accepted with ``content`` (the form's fields, checked
    against its schema), declined, or cancelled. ``reason``: why a question was declined or
    cancelled, when the engine knows (no asker, a client that cannot show forms);
    ``error``: the asker failed (raised, or answered what is not an answer), which cancels.
    ``later``: the asker said "later" and the host answered at a pause
    (``session.answer_question``)."""

    call_id: str
    question_id: str
    action: QuestionAction
    content: Any = None
    reason: str | None = None
    error: ErrorInfo | None = None
    later: bool = False


@attrs.frozen(kw_only=True, weakref_slot=False)
class ProgramSuspended:
    """The code tool's program stopped while every call it waits for waits for a person
    (docs/codemode.md, "Pause and resume"): its state is kept here, and its sandbox released.

    ``state`` is the sandbox's dump of the stopped program (base64), ``sha256`` the SHA-256 of
    the dump's bytes, and ``sandbox`` the sandbox release that made it (a dump loads only in
    the same). ``waits_for`` are the nested calls the program has made and not yet been
    answered, by the engine's ids; ``program_calls`` the sandbox's ids of the same calls, in
    the same order, which the program is answered by when it goes on. ``printed`` is what the
    program printed so far (the part kept), ``printed_cut`` how many characters of it were
    cut. The call stays running: a ``resume()`` loads the latest state and goes on."""

    call_id: str
    waits_for: tuple[str, ...]
    program_calls: tuple[int, ...]
    state: str
    sha256: str
    sandbox: str
    printed: str = ""
    printed_cut: int = 0


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
    ``returned`` is what the tool returned, when a handler changed it.

    ``kept``: the model read a cut of the result (its head and tail, a :class:`ModelView`'s
    worth, or the result was too large for the log): ``result`` is that cut, and ``kept``
    says where the whole is, in this record or in an artifact the store holds
    (:class:`~events.results.KeptResult`). ``None`` when the model read it whole."""

    call_id: str
    result: ToolResult
    returned: ToolResult | None = None
    kept: KeptResult | None = None


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


@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolCallBlocked:
    """A ``tool_call`` handler blocked the call (or raised, which blocks: fail closed).

    ``error``: the handler raised; its exception, which the model is not shown."""

    call_id: str
    reason: str
    by: str
    result: ToolResult
    error: ErrorInfo | None = None


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
    QuestionAsked,
    QuestionAnswered,
    ProgramSuspended,
    ResultHandlerFailed,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallBlocked,
    ToolCallDenied,
    ToolCallCancelled,
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


