"""What a session's log recorded, arranged for re-driving it: the values.

:func:`engine.replay.reading.read_log` turns one session's records into a
:class:`RecordedSession`: the prompts and the assistant's messages turn by turn, every call's
events, the approver's answers by call id, the ``tool_call`` handlers' verdicts, and what the
log implies about the setup that wrote it (:mod:`engine.replay.implied`). Nothing here runs
anything: no trio, no I/O.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import attrs

from events.modelturns import ModelRequested, ModelResponded, SystemPromptSet
from events.results import ErrorInfo, ModelView
from events.types import (
    ActiveToolsSet,
    AssistantMessage,
    QuestionAnswered,
    QuestionAsked,
    Record,
    ResultHandlerFailed,
    TerminalEvent,
    ToolCallCancelled,
    ToolCallRequested,
    ToolProgress,
    ToolRegistered,
    ToolSnapshot,
    ToolsActivated,
)

from ..core.callids import from_host
from ..core.limits import Limits
from ..core.policy import PolicyRules

__all__ = [
    "Answer",
    "RecordedCall",
    "RecordedPrompt",
    "RecordedSession",
    "RecordedTurn",
    "ReplayError",
    "SessionAction",
    "Verdict",
    "Waiter",
    "root_of",
    "turn_of",
]

#: What the host did between turns that the replay does again: a tool registered, the active
#: tools set or added to (``ToolsActivated`` without a call id), the system prompt replaced, a
#: host call asked for (``ToolCallRequested`` of origin ``"host"``).
SessionAction = Union[ToolRegistered, ActiveToolsSet, ToolsActivated, SystemPromptSet,
                      ToolCallRequested]
WaitKind = Literal["approval", "body"]
WaitCause = Literal["host", "timeout", "scope"]

#: The depth limit a session has unless told otherwise (``Session.open``'s default).
DEFAULT_MAX_DEPTH = 8


class ReplayError(Exception):
    """The log cannot be re-driven as asked (not one session, an inconsistent log, a tool the
    live mode has no code for). The message says what to change."""


def root_of(call_id: str) -> str:
    """The top-level call a call belongs to: ``"2.0"`` for ``"2.0/1/0"``."""
    return call_id.split("/", 1)[0]


def turn_of(call_id: str) -> int:
    """The turn whose assistant message asked for the call's top-level ancestor; 0 for a
    host call and the calls under it (no turn asked for them)."""
    if from_host(call_id):
        return 0
    return int(call_id.split(".", 1)[0])


@attrs.frozen(kw_only=True)
class RecordedTurn:
    """One assistant message, the session changes the log holds just before it, and the
    model turn that produced it (absent from logs written before model turns were
    recorded)."""

    message: AssistantMessage
    seq: int
    before: tuple[SessionAction, ...] = ()
    #: host calls asked for after this message, while its batch ran: the replay asks for them
    #: again once it has recorded the message
    during: tuple[ToolCallRequested, ...] = ()
    requested: ModelRequested | None = None
    responded: ModelResponded | None = None


@attrs.frozen(kw_only=True)
class RecordedPrompt:
    """One user message and the assistant's messages up to the next one."""

    text: str
    seq: int
    before: tuple[SessionAction, ...] = ()
    turns: tuple[RecordedTurn, ...] = ()


@attrs.frozen(kw_only=True)
class Answer:
    """The approver's recorded answer about one call.

    ``later``: the answer came after the session paused (another call's events lie between
    the request and the answer), so the replay answers "later" too and resolves it at the
    pause; ``group`` numbers the answers the host gave together at one pause. ``error``: the
    approver raised (which refused); the replay's approver raises it again.
    """

    granted: bool
    scope: Literal["once", "session"]
    reason: str | None
    arguments: Any
    seq: int
    later: bool = False
    group: int = 0
    error: ErrorInfo | None = None


@attrs.frozen(kw_only=True)
class Verdict:
    """A ``tool_call`` handler's recorded verdict: a rewrite, or a block with its reason
    (``error``: the handler raised, which blocked)."""

    by: str
    block: str | None = None
    rewrite: Any = None
    error: ErrorInfo | None = None


@attrs.frozen(kw_only=True)
class Waiter:
    """A place where the recorded session waited until something outside stopped it."""

    call_id: str
    kind: WaitKind
    cause: WaitCause


@attrs.define(kw_only=True)
class RecordedCall:
    """Everything the log holds about one call (filled in while reading, then read only)."""

    call_id: str
    name: str
    parent_id: str | None
    requested: ToolCallRequested
    events: list[Any] = attrs.field(factory=list)
    #: the body's own doings in order: progress reports, tools it activated, questions it
    #: asked and nested calls' requests
    body: list[ToolProgress | ToolsActivated | QuestionAsked | ToolCallRequested] = attrs.field(
        factory=list)
    #: the answers its questions got, by question id
    answers: dict[str, QuestionAnswered] = attrs.field(factory=dict)
    started: bool = False
    asked_seq: int | None = None
    decided_seq: int | None = None
    decision: str | None = None
    answer: Answer | None = None
    verdicts: list[Verdict] = attrs.field(factory=list)
    result_failures: list[ResultHandlerFailed] = attrs.field(factory=list)
    terminal: TerminalEvent | None = None

    @property
    def stuck(self) -> bool:
        """Stopped from outside: cancelled, or still open where the log ends."""
        return self.terminal is None or isinstance(self.terminal, ToolCallCancelled)

    @property
    def cancelled(self) -> bool:
        """Ended as cancelled."""
        return isinstance(self.terminal, ToolCallCancelled)


@attrs.frozen(kw_only=True)
class RecordedSession:
    """One session's log, read for a replay (see the module docstring)."""

    session_id: str
    records: tuple[Record, ...]
    metadata: dict[str, Any]
    system_prompt: str | None
    initial_tools: tuple[ToolSnapshot, ...]
    prompts: tuple[RecordedPrompt, ...]
    trailing: tuple[SessionAction, ...]
    calls: dict[str, RecordedCall]
    registered: dict[str, ToolSnapshot]
    rules: PolicyRules
    max_depth: int
    max_turns: int
    limits: Limits
    #: how much of a result the model read, for a tool that set none (the settings')
    model_view: ModelView | None = None
    handler_names: tuple[str, ...]
    result_handler_names: tuple[str, ...]
    waiters: dict[str, Waiter]
    #: the turn whose batch the log ends in the middle of (paused or stopped), if any
    cut_turn: int | None
    decision_deps: dict[str, tuple[str, ...]]
    grant_deps: dict[str, tuple[tuple[str, str], ...]]
    #: each host call, by the turn whose batch the replay has begun when it asks for it again
    #: (a host call asked for after the last message: one past it)
    host_turns: dict[str, int] = attrs.field(factory=dict)

    def chain_waiter(self, call_id: str) -> Waiter | None:
        """Where a stuck call's subtree waits: the call itself, or (its body blocked in its
        last nested call) the place that nested call waits."""
        while True:
            if call_id in self.waiters:
                return self.waiters[call_id]
            call = self.calls.get(call_id)
            if call is None or not call.cancelled or not call.body:
                return None
            last = call.body[-1]
            if not isinstance(last, ToolCallRequested) or not self.calls[last.call_id].cancelled:
                return None
            call_id = last.call_id

    def host_waiters(self, turn: int) -> tuple[Waiter, ...]:
        """The waiters of the batch of ``turn`` that the host stopped."""
        return tuple(w for w in self.waiters.values()
                     if w.cause == "host" and turn_of(w.call_id) == turn)

    def ended(self, turn: int) -> tuple[str, ...]:
        """The calls of the batch of ``turn`` that ended by themselves (not cancelled): if
        the host stopped the batch, they ended before it did."""
        return tuple(c.call_id for c in self.calls.values()
                     if turn_of(c.call_id) == turn and c.terminal is not None
                     and not c.cancelled)


