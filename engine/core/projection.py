"""What a session's derived state holds, and the read-only views it hands out.

:class:`ProjectionState` is the data side of :class:`~engine.core.reducers.Projection`: the
session's tools and active set, its grants, its calls and their tree, the transcript, the
current batch, the model's usage, each kept as the fold needs it, and the properties that hand
them out. What it hands out is read-only: mappings are ``MappingProxyType``\\ s and the
transcript is a :class:`TranscriptView` over the shared list (a prefix, so a model handed the
transcript of turn N holds a view, not a copy). JSON payloads inside events (arguments,
structured content) are shared too: treat them as read-only. How a record changes the state is
:mod:`engine.core.reducers`' (the fold); nothing here changes it.

No I/O, no clock, no trio: this module is part of the pure core.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from events.modelturns import Usage
from events.types import (
    ApprovalResolved,
    AssistantMessage,
    ModelToolCall,
    ToolSnapshot,
    ToolSource,
)

from .views import (
    CallView,
    CallsView,
    LiveCall,
    SessionState,
    ToolResultEntry,
    TranscriptEntry,
    TranscriptView,
)

__all__ = ["ProjectionState"]


class ProjectionState:
    """A session's derived state and its read-only views; :class:`~engine.core.reducers.Projection`
    folds records into it."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.last_seq = 0
        self.turn = 0
        self._tools: dict[str, ToolSnapshot] = {}
        self._active: dict[str, None] = {}
        # what the two change only with the tools: kept, not rebuilt on every turn
        self._active_set: frozenset[str] = frozenset()
        self._declared: tuple[ToolSnapshot, ...] = ()
        self._grants: dict[str, bool] = {}
        self._grants_view = MappingProxyType(self._grants)
        self._answers: dict[str, ApprovalResolved] = {}
        self._answers_view = MappingProxyType(self._answers)
        self._calls: dict[str, LiveCall] = {}
        self._views: dict[str, CallView] = {}  # views handed out, until their call changes
        self._calls_view = CallsView(self._calls, self._views)
        self._live_view = MappingProxyType(self._calls)
        self._children: dict[str, list[str]] = {}
        self._sources: dict[str, ToolSource] = {}  # calls of mounted tools only
        self._open: dict[str, None] = {}
        self._pending: dict[str, None] = {}
        self._transcript: list[TranscriptEntry] = []
        # the latest assistant message's calls, and the results waiting for their turn
        self._message: AssistantMessage | None = None
        self._batch: dict[str, ModelToolCall] = {}
        self._batch_order: list[str] = []
        self._batch_results: dict[str, ToolResultEntry] = {}
        self._batch_next = 0
        self._host_calls = 0
        self.system_prompt: str | None = None
        # the model turn asked for and not yet answered, if any
        self._asking: int | None = None
        self._usage = Usage(input_tokens=0, output_tokens=0, cached_tokens=0)

    # -- read-only views ------------------------------------------------------------------

    @property
    def tools(self) -> Mapping[str, ToolSnapshot]:
        """Registered tools by name, as their registration recorded them."""
        return MappingProxyType(self._tools)

    @property
    def active_tools(self) -> frozenset[str]:
        """Names of the active tools: the ones declared to the model."""
        return self._active_set

    @property
    def declared_tools(self) -> tuple[ToolSnapshot, ...]:
        """The active tools' snapshots, in registration order: what the model is told."""
        return self._declared

    @property
    def session_grants(self) -> Mapping[str, bool]:
        """The approver's "for the session" answers by tool name (True granted)."""
        return self._grants_view

    @property
    def session_answers(self) -> Mapping[str, ApprovalResolved]:
        """The same answers as the log recorded them, by tool name (the last one given for
        each): whether it granted, and the reason a refusal gave, which the policy quotes to
        every later call the refusal refuses."""
        return self._answers_view

    @property
    def calls(self) -> Mapping[str, CallView]:
        """Every call by id, nested ones included; the tree is in ``parent_id``/``children``."""
        return self._calls_view

    @property
    def live_calls(self) -> Mapping[str, LiveCall]:
        """The reducers' own record of each call, which changes as events arrive: for the
        runtime, which carries calls forward from it. Read it, never write it; hold on to a
        :attr:`calls` view instead if you need the call as it was."""
        return self._live_view

    @property
    def open_calls(self) -> tuple[str, ...]:
        """Ids of the calls without a terminal event, in the order they were requested."""
        return tuple(self._open)

    @property
    def pending_approvals(self) -> tuple[str, ...]:
        """Ids of the calls waiting for the approver."""
        return tuple(self._pending)

    @property
    def host_calls(self) -> int:
        """How many calls the host asked for (``session.call_tool``): the next one is
        ``"h{host_calls}"``."""
        return self._host_calls

    @property
    def transcript(self) -> TranscriptView:
        """What the model sees: messages and one result per top-level call, nothing nested."""
        return TranscriptView(self._transcript, len(self._transcript))

    @property
    def last_message(self) -> AssistantMessage | None:
        """The latest assistant message: its calls are the current batch."""
        return self._message

    @property
    def usage(self) -> Usage:
        """The tokens every model turn so far used, summed (a turn that did not say counts
        as zero)."""
        return self._usage

    @property
    def model_asked(self) -> int | None:
        """The turn the model was asked for and has not answered yet (a request in flight,
        or one a stopped process left unanswered), if any."""
        return self._asking

    def children(self, call_id: str) -> tuple[str, ...]:
        """Ids of the nested calls ``call_id`` made, in the order it made them."""
        return tuple(self._children.get(call_id, ()))

    def source(self, call_id: str) -> ToolSource | None:
        """The MCP server a call's tool was mounted from (its name and version, the tool's
        name there, its hints and whether the host trusted them), as the tool was registered
        when the call was requested; ``None`` for a local tool."""
        return self._sources.get(call_id)

    def roots(self) -> list[CallView]:
        """The top-level calls (the model's and the host's), in the order they were
        requested."""
        calls = self._calls_view
        return [calls[c.call_id] for c in self._calls.values() if c.parent_id is None]

    def snapshot(self) -> SessionState:
        """Everything derived, as one comparable value."""
        return SessionState(
            session_id=self.session_id,
            last_seq=self.last_seq,
            turn=self.turn,
            tools=dict(self._tools),
            active_tools=self._active_set,
            session_grants=dict(self._grants),
            session_answers=dict(self._answers),
            calls=dict(self._calls_view),
            children={k: tuple(v) for k, v in self._children.items()},
            open_calls=tuple(self._open),
            pending_approvals=tuple(self._pending),
            transcript=tuple(self._transcript),
            system_prompt=self.system_prompt,
            usage=self._usage,
        )
