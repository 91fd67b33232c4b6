"""What the reducers hand out: read-only values and views of a session's derived state.

Nothing here changes state; :mod:`engine.core.reducers` builds these from the log.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any, Union, overload

import attrs

from events.fast.fastinit import fast_init
from events.modelturns import Usage
from events.renamed import renamed_attribute, warn_renamed
from events.results import ToolResult
from events.types import (
    ApprovalResolved,
    AssistantMessage,
    Origin,
    PolicyDecided,
    QuestionAnswered,
    QuestionAsked,
    TerminalEvent,
    ToolCallRewritten,
    ToolProgress,
    ToolSnapshot,
    UserMessage,
)

from .lifecycle import CallStage

__all__ = [
    "AskedQuestion",
    "CallView",
    "CallsView",
    "LiveCall",
    "StateSnapshot",
    "ToolResultEntry",
    "TranscriptEntry",
    "TranscriptView",
]


#: Public names renamed since they shipped: the old name still works, with a warning naming
#: the new one (docs/concepts.md, "Words").
_RENAMED = {
    "SessionState": "StateSnapshot",
}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)


class _CallStatus:
    """What :class:`CallView` and :class:`LiveCall` both answer from their fields: whether the
    call is closed, its result, its status."""

    __slots__ = ()
    stage: CallStage
    policy: PolicyDecided | None
    terminal: TerminalEvent | None

    @property
    def closed(self) -> bool:
        """Whether the call has its terminal event."""
        return self.terminal is not None

    @property
    def result(self) -> ToolResult | None:
        """The result the caller got, once the call is closed."""
        return None if self.terminal is None else self.terminal.result

    @property
    def status(self) -> str:
        """``completed``, ``failed``, ``blocked``, ``denied``, ``cancelled``, or the open stage."""
        if self.terminal is None:
            return self.stage.value
        return type(self.terminal).__name__.removeprefix("ToolCall").lower()

    @property
    def state(self) -> CallStage:
        """Deprecated: where the call is in its lifecycle is :attr:`CallView.stage`."""
        warn_renamed("CallView.state", "CallView.stage")
        return self.stage

    @property
    def outcome(self) -> TerminalEvent | None:
        """Deprecated: the call's terminal event is :attr:`CallView.terminal` (an outcome is
        what ``ctx.execute_tool`` returns)."""
        warn_renamed("CallView.outcome", "CallView.terminal")
        return self.terminal

    @property
    def verdict(self) -> PolicyDecided | None:
        """Deprecated: the policy's decision is :attr:`CallView.policy`."""
        warn_renamed("CallView.verdict", "CallView.policy")
        return self.policy


@attrs.frozen(kw_only=True, weakref_slot=False)
class AskedQuestion:
    """A question a call asked (``ctx.ask``), and its answer once it has one: what
    :attr:`CallView.questions` lists, in the order the call asked them."""

    asked: QuestionAsked
    answer: QuestionAnswered | None = None

    @property
    def question_id(self) -> str:
        """``"{call_id}#{n}"``: the call's ``n``-th question."""
        return self.asked.question_id

    @property
    def pending(self) -> bool:
        """Whether it waits for an answer (a call that ended leaves none waiting)."""
        return self.answer is None


# One of each per call, kept for the session's life: no ``__weakref__`` slot (8 bytes each).
@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class CallView(_CallStatus):
    """One call as the log tells it so far: a node of the call tree (its children are
    :meth:`Projection.children`)."""

    call_id: str
    name: str
    arguments: Any
    requested_arguments: Any
    origin: Origin
    parent_id: str | None
    model_call_id: str | None
    stage: CallStage = CallStage.REQUESTED
    rewrites: tuple[ToolCallRewritten, ...] = ()
    policy: PolicyDecided | None = None
    approval: ApprovalResolved | None = None
    started: bool = False
    progress_count: int = 0
    last_progress: ToolProgress | None = None
    terminal: TerminalEvent | None = None
    questions: tuple[AskedQuestion, ...] = ()


_CALL_FIELDS = tuple(field.name for field in attrs.fields(CallView))
_read_fields = attrgetter(*_CALL_FIELDS)


class LiveCall(_CallStatus):
    """The projection's own record of one call, changed in place as its events are folded in:
    the fast path beside :class:`CallView`, which the reducers would otherwise build anew for
    every event (a third more instructions per nested call, a fifth more per turn, that way:
    docs/performance.md, "One codec").

    It has exactly :class:`CallView`'s fields (its slots are taken from them). Only the
    reducers write it; the runtime reads it to carry the call forward. Everyone else is handed
    :meth:`view`: a frozen :class:`CallView` of the call as it is now, built when first asked
    for and kept until the call's next event, so a view handed out never changes and a call
    nobody looks at costs no view at all. tests/core/test_views.py checks, for random sessions, that
    every view equals the one a fold of frozen values builds.
    """

    __slots__ = _CALL_FIELDS

    def __init__(self, call_id: str, name: str, arguments: Any, origin: Origin,
                 parent_id: str | None, model_call_id: str | None) -> None:
        # what a ToolCallRequested says, and CallView's defaults for the rest
        self.call_id = call_id
        self.name = name
        self.arguments = arguments
        self.requested_arguments = arguments
        self.origin = origin
        self.parent_id = parent_id
        self.model_call_id = model_call_id
        self.stage = CallStage.REQUESTED
        self.rewrites: tuple[ToolCallRewritten, ...] = ()
        self.policy: PolicyDecided | None = None
        self.approval: ApprovalResolved | None = None
        self.started = False
        self.progress_count = 0
        self.last_progress: ToolProgress | None = None
        self.terminal: TerminalEvent | None = None
        self.questions: tuple[AskedQuestion, ...] = ()

    def view(self) -> CallView:
        """The call as it is now, as a new frozen value."""
        return CallView(**dict(zip(_CALL_FIELDS, _read_fields(self))))

    def __repr__(self) -> str:
        return f"LiveCall({self.call_id!r}, {self.name!r}, {self.status})"


class CallsView(Mapping[str, CallView]):
    """Every call by id, as frozen :class:`CallView`\\ s: a read-only view over the
    projection's live records (no copy is made). A call's view is built when asked for and kept
    in ``views`` until the call changes (the projection drops it then)."""

    __slots__ = ("_calls", "_views")

    def __init__(self, calls: Mapping[str, LiveCall], views: dict[str, CallView]) -> None:
        self._calls = calls
        self._views = views

    def __getitem__(self, call_id: str) -> CallView:
        view = self._views.get(call_id)
        if view is None:
            view = self._views[call_id] = self._calls[call_id].view()
        return view

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._calls

    def __iter__(self) -> Iterator[str]:
        return iter(self._calls)

    def __len__(self) -> int:
        return len(self._calls)

    def __repr__(self) -> str:
        return f"CallsView({dict(self)!r})"


@fast_init
@attrs.frozen(kw_only=True, weakref_slot=False)
class ToolResultEntry:
    """A top-level call's result in the transcript, paired by the model's own call id."""

    call_id: str
    model_call_id: str | None
    name: str
    result: ToolResult


TranscriptEntry = Union[UserMessage, AssistantMessage, ToolResultEntry]


class TranscriptView(Sequence[TranscriptEntry]):
    """A read-only view of the first ``len(self)`` transcript entries; no copy is made."""

    __slots__ = ("_entries", "_length")

    def __init__(self, entries: list[TranscriptEntry], length: int) -> None:
        self._entries = entries
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> TranscriptEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[TranscriptEntry]: ...
    def __getitem__(self, index: int | slice) -> TranscriptEntry | Sequence[TranscriptEntry]:
        if isinstance(index, slice):
            return tuple(self._entries[: self._length][index])
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("transcript index out of range")
        return self._entries[index]

    def __iter__(self) -> Iterator[TranscriptEntry]:
        entries = self._entries
        for i in range(self._length):
            yield entries[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"TranscriptView({list(self)!r})"


@attrs.frozen(kw_only=True)
class StateSnapshot:
    """A comparable snapshot of everything a projection derives (for tests and replay): what
    ``session.state.snapshot()`` returns. Formerly ``SessionState``."""

    session_id: str | None
    last_seq: int
    turn: int
    tools: Mapping[str, ToolSnapshot]
    active_tools: frozenset[str]
    session_grants: Mapping[str, bool]
    calls: Mapping[str, CallView]
    children: Mapping[str, tuple[str, ...]]
    open_calls: tuple[str, ...]
    pending_approvals: tuple[str, ...]
    transcript: tuple[TranscriptEntry, ...]
    system_prompt: str | None = None
    usage: Usage = Usage(input_tokens=0, output_tokens=0, cached_tokens=0)
    #: the "for the session" answers as recorded, by tool name
    session_answers: Mapping[str, ApprovalResolved] = attrs.field(factory=dict)
    #: the questions waiting for an answer, by id, in the order they were asked
    pending_questions: tuple[str, ...] = ()
