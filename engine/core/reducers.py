"""Reducers: session state, the model's transcript and the call tree, derived from the log.

A :class:`Projection` is one session's derived state. :meth:`Projection.apply` folds one
record into it, in place, at a cost that does not depend on how long the log is; the live
session and a fold from scratch (:func:`fold`) run this same code, so they cannot disagree.
Every call event goes through the lifecycle table (:mod:`engine.core.lifecycle`) first: a record it
does not allow, a gap in the sequence, a nested call whose parent is not running, a model call
that its assistant message did not ask for, each is a :class:`LogInconsistency` naming the
record, and the projection is left as it was before that record.

What the projection holds, and the read-only views it hands out, are
:class:`~engine.core.projection.ProjectionState`'s; here is the fold that changes it.

No I/O, no clock, no trio: this module is part of the pure core.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from events.fast.fastinit import builder
from events.modelturns import Usage
from events.types import (
    TERMINAL_EVENTS,
    ActiveToolsSet,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    PolicyDecided,
    Record,
    SessionStarted,
    SystemPromptSet,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistered,
    ToolsActivated,
    UserMessage,
)

from .callids import host_call_id
from .lifecycle import CallState, LifecycleError, next_state
from .projection import ProjectionState
from .tools import active_on_registration
from .views import (
    CallView,
    LiveCall,
    SessionState,
    ToolResultEntry,
    TranscriptEntry,
    TranscriptView,
)

__all__ = [
    "CallView",
    "LogInconsistency",
    "Projection",
    "SessionState",
    "ToolResultEntry",
    "TranscriptEntry",
    "TranscriptView",
    "fold",
]


class LogInconsistency(LifecycleError):
    """A record that cannot follow the ones before it. The message names the record."""


class Projection(ProjectionState):
    """One session's derived state, updated in place by :meth:`apply`."""

    # -- folding --------------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        """Fold one record in. Raises :class:`LogInconsistency` (state unchanged) if the
        record cannot follow the ones before it."""
        if record.seq != self.last_seq + 1:
            raise LogInconsistency(f"{_where(record)}: expected seq {self.last_seq + 1}")
        event = record.event
        if self.session_id is None:
            if not isinstance(event, SessionStarted):
                raise LogInconsistency(
                    f"{_where(record)}: a session must start with session_started")
        elif record.session_id != self.session_id:
            raise LogInconsistency(f"{_where(record)}: belongs to another session")
        try:
            _HANDLERS.get(type(event), Projection._call_event)(self, event)
        except LifecycleError as exc:
            raise LogInconsistency(f"{_where(record)}: {exc}") from None
        self.session_id = record.session_id
        self.last_seq = record.seq

    def _session_started(self, event: SessionStarted) -> None:
        if self.session_id is not None:
            raise LifecycleError("the session has already started")

    def _tool_registered(self, event: ToolRegistered) -> None:
        spec = event.spec
        known = spec.name in self._tools
        self._tools[spec.name] = spec
        if spec.exposure == "hidden":
            self._active.pop(spec.name, None)
        elif not known and active_on_registration(spec.exposure):
            # a new version of a known tool keeps its place in the active set
            self._active[spec.name] = None
        self._tools_changed()

    def _active_tools_set(self, event: ActiveToolsSet) -> None:
        for name in event.names:
            if name not in self._tools:
                raise LifecycleError(f"{name!r} is not a registered tool that can be active")
        self._active = dict.fromkeys(event.names)
        self._tools_changed()

    def _tools_activated(self, event: ToolsActivated) -> None:
        for name in event.names:
            spec = self._tools.get(name)
            # a tool may activate what the host could, but hidden tools: they wait for the host
            if spec is None or (event.call_id is not None and spec.exposure == "hidden"):
                raise LifecycleError(f"{name!r} is not a registered tool that "
                                     f"{'a tool' if event.call_id else 'the host'} can activate")
        if event.call_id is not None:
            self._call_event(event)  # the call must be running: the table says so
        for name in event.names:
            self._active[name] = None
        self._tools_changed()

    def _tools_changed(self) -> None:
        self._active_set = frozenset(self._active)
        self._declared = tuple(spec for name, spec in self._tools.items() if name in self._active)

    def _system_prompt_set(self, event: SystemPromptSet) -> None:
        self.system_prompt = event.text

    # A model turn: requested, then responded (and the assistant message follows) or failed.
    # A request may follow one that was never answered: the process that asked stopped.
    def _model_requested(self, event: ModelRequested) -> None:
        if event.turn != self.turn + 1:
            raise LifecycleError(f"model request for turn {event.turn}, expected {self.turn + 1}")
        self._asking = event.turn

    def _model_answered(self, event: ModelResponded | ModelFailed) -> None:
        if self._asking != event.turn:
            raise LifecycleError(f"a model answer for turn {event.turn}, which was not asked for")
        if isinstance(event, ModelFailed):
            self._asking = None
            return
        self._asking = None
        usage = event.usage
        if usage is not None:
            total = self._usage
            self._usage = Usage(
                input_tokens=(total.input_tokens or 0) + (usage.input_tokens or 0),
                output_tokens=(total.output_tokens or 0) + (usage.output_tokens or 0),
                cached_tokens=(total.cached_tokens or 0) + (usage.cached_tokens or 0))

    def _user_message(self, event: UserMessage) -> None:
        self._transcript.append(event)

    def _assistant_message(self, event: AssistantMessage) -> None:
        if event.turn != self.turn + 1:
            raise LifecycleError(f"assistant message for turn {event.turn}, expected {self.turn + 1}")
        if self._batch_next < len(self._batch_order):
            raise LifecycleError("an assistant message before every call of the last one ended")
        self.turn = event.turn
        self._asking = None
        self._transcript.append(event)
        order = [f"{event.turn}.{i}" for i in range(len(event.tool_calls))]
        self._message = event
        self._batch = dict(zip(order, event.tool_calls))
        self._batch_order = order
        self._batch_results = {}
        self._batch_next = 0

    def _call_requested(self, event: ToolCallRequested) -> None:
        call_id = event.call_id
        if call_id in self._calls:
            raise LifecycleError(f"call {call_id} was already requested")
        if event.origin == "host":
            if event.parent_id is not None or event.model_call_id is not None or (
                call_id != host_call_id(self._host_calls)
            ):
                raise LifecycleError(f"host call {call_id}: the host's next call is "
                                     f"{host_call_id(self._host_calls)}, with no parent")
            self._host_calls += 1
        elif event.parent_id is None:
            asked = self._batch.get(call_id)
            if event.origin != "model" or asked is None:
                raise LifecycleError(f"call {call_id} was not asked for by the assistant")
            if asked.name != event.name or asked.id != event.model_call_id:
                raise LifecycleError(f"call {call_id} does not match the assistant's call")
        else:
            parent = self._calls.get(event.parent_id)
            if event.origin != "nested" or parent is None or parent.state is not CallState.RUNNING:
                raise LifecycleError(
                    f"nested call {call_id}: its parent {event.parent_id} is not running"
                )
            if not call_id.startswith(f"{event.parent_id}/"):
                raise LifecycleError(f"nested call {call_id} is not named after its parent")
            self._children.setdefault(parent.call_id, []).append(call_id)
        self._calls[call_id] = LiveCall(call_id, event.name, event.arguments, event.origin,
                                        event.parent_id, event.model_call_id)
        self._open[call_id] = None
        tool = self._tools.get(event.name)
        if tool is not None and tool.source is not None:  # a mounted server's, as it is now
            self._sources[call_id] = tool.source

    def _call_event(self, event: Any) -> None:
        call_id = event.call_id
        call = self._calls.get(call_id)
        if call is None:
            raise LifecycleError(f"call {call_id} was never requested")
        # the table first: a record it refuses changes nothing
        call.state = next_state(call.state, event, call_id=call_id)
        if self._views:
            self._views.pop(call_id, None)  # a view handed out keeps the call as it was
        if isinstance(event, PolicyDecided):
            call.policy = event
        elif isinstance(event, ToolExecutionStarted):
            call.started = True
        elif isinstance(event, TERMINAL_EVENTS):
            call.terminal = event
            self._open.pop(call_id, None)
            self._pending.pop(call_id, None)
            if call.parent_id is None and call.origin != "host":
                self._enter_result(call)
        elif isinstance(event, ToolProgress):
            call.progress_count += 1
            call.last_progress = event
        elif isinstance(event, ToolCallRewritten):
            call.arguments = event.arguments
            call.rewrites = (*call.rewrites, event)
        elif isinstance(event, ApprovalRequested):
            self._pending[call_id] = None
        elif isinstance(event, ApprovalResolved):
            call.approval = event
            self._pending.pop(call_id, None)
            if event.scope == "session":
                self._grants[call.name] = event.granted
                self._answers[call.name] = event

    def _enter_result(self, call: LiveCall) -> None:
        assert call.terminal is not None
        self._batch_results[call.call_id] = _ToolResultEntry(
            call_id=call.call_id,
            model_call_id=call.model_call_id,
            name=call.name,
            result=call.terminal.result,
        )
        # results enter in the assistant's order, whatever order the calls finished in
        order, results = self._batch_order, self._batch_results
        while self._batch_next < len(order) and order[self._batch_next] in results:
            self._transcript.append(results.pop(order[self._batch_next]))
            self._batch_next += 1


# what ToolResultEntry(...) makes, one call cheaper (see events.fast.fastinit)
_ToolResultEntry = builder(ToolResultEntry)

_HANDLERS: dict[type[Any], Any] = {
    SessionStarted: Projection._session_started,
    ToolRegistered: Projection._tool_registered,
    ActiveToolsSet: Projection._active_tools_set,
    ToolsActivated: Projection._tools_activated,
    UserMessage: Projection._user_message,
    AssistantMessage: Projection._assistant_message,
    ToolCallRequested: Projection._call_requested,
    SystemPromptSet: Projection._system_prompt_set,
    ModelRequested: Projection._model_requested,
    ModelResponded: Projection._model_answered,
    ModelFailed: Projection._model_answered,
}


def _where(record: Record) -> str:
    return f"record seq {record.seq} of session {record.session_id!r}"


def fold(records: Iterable[Record]) -> Projection:
    """A projection built from scratch: what a live session would hold after ``records``."""
    projection = Projection()
    for record in records:
        projection.apply(record)
    return projection
