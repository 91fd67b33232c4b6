"""Reducers: session state, the model's transcript and the call tree, derived from the log.

A :class:`Projection` is one session's derived state, in one class: what it holds, the
read-only views it hands out, and the fold that changes it. :meth:`Projection.apply` folds one
record into it, in place, at a cost that does not depend on how long the log is; the live
session and a fold from scratch (:func:`fold`) run this same code, so they cannot disagree.
Every call event goes through the lifecycle table (:mod:`engine.core.lifecycle`) first: a record it
does not allow, a gap in the sequence, a nested call whose parent is not running, a model call
that its assistant message did not ask for, each is a :class:`LogInconsistency` naming the
record, and the projection is left as it was before that record.

What it hands out is read-only: mappings are ``MappingProxyType``\\ s and the transcript is a
:class:`TranscriptView` over the shared list (a prefix, so a model handed the transcript of turn
N holds a view, not a copy). JSON payloads inside events (arguments, structured content) are
shared too: treat them as read-only.

No I/O, no clock, no trio: this module is part of the pure core.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from events.fast.fastinit import builder
from events.modelturns import Usage
from events.renamed import renamed_attribute
from events.types import (
    TERMINAL_EVENTS,
    ActiveToolsSet,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ModelToolCall,
    PolicyDecided,
    ProgramSuspended,
    QuestionAnswered,
    QuestionAsked,
    Record,
    SessionStarted,
    SystemPromptSet,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistered,
    ToolSnapshot,
    ToolSource,
    ToolsActivated,
    UserMessage,
)

from .callids import host_call_id
from .codemode import declared
from .forms import content_problem, form_schema
from .lifecycle import CallStage, LifecycleError, next_stage
from .questions import question_id
from .tools import active_on_registration
from .views import (
    AskedQuestion,
    CallView,
    CallsView,
    LiveCall,
    StateSnapshot,
    ToolResultEntry,
    TranscriptEntry,
    TranscriptView,
)

__all__ = [
    "CallView",
    "LogInconsistency",
    "Projection",
    "StateSnapshot",
    "ToolResultEntry",
    "TranscriptEntry",
    "TranscriptView",
    "fold",
]

#: Public names renamed since they shipped: the old name still works, with a warning naming
#: the new one (docs/concepts.md, "Words"). ``ProjectionState`` was the data half of
#: :class:`Projection` (in ``engine.core.projection``), joined into it; ``SessionState`` is
#: what :meth:`Projection.snapshot` returns, a snapshot of ``session.state``.
_RENAMED = {
    "ProjectionState": "Projection",
    "SessionState": "StateSnapshot",
}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)


class LogInconsistency(LifecycleError):
    """A record that cannot follow the ones before it. The message names the record."""


class Projection:
    """One session's derived state, updated in place by :meth:`apply`: the session's tools and
    active set, its grants, its calls and their tree, the transcript, the current batch, the
    model's usage, each kept as the fold needs it, and the properties that hand them out."""

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
        self._questions: dict[str, str] = {}  # pending questions: their calls, by id
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
        """The active tools' snapshots, in registration order: what the model is told (with
        the code tool, the codemode tools as its functions: :mod:`engine.core.codemode`)."""
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
    def pending_questions(self) -> tuple[str, ...]:
        """Ids of the questions waiting for an answer, in the order they were asked."""
        return tuple(self._questions)

    def question(self, question_id: str) -> AskedQuestion | None:
        """The question ``question_id`` names (``"{call_id}#{n}"``), with its answer if it
        has one; ``None`` if no call asked it."""
        call = self._calls.get(question_id.rpartition("#")[0])
        for asked in call.questions if call is not None else ():
            if asked.question_id == question_id:
                return asked
        return None

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

    def snapshot(self) -> StateSnapshot:
        """Everything derived, as one comparable value."""
        return StateSnapshot(
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
            pending_questions=tuple(self._questions),
            transcript=tuple(self._transcript),
            system_prompt=self.system_prompt,
            usage=self._usage,
        )

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
        self._declared = declared([spec for name, spec in self._tools.items()
                                   if name in self._active])

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
            if event.origin != "nested" or parent is None or parent.stage is not CallStage.RUNNING:
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
        call.stage = next_stage(call.stage, event, call_id=call_id)
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
            if call.questions:  # an ended call's questions no longer wait
                for asked in call.questions:
                    self._questions.pop(asked.question_id, None)
            if call.parent_id is None and call.origin != "host":
                self._enter_result(call)
        elif isinstance(event, ToolProgress):
            source = event.source
            if source is not None and (
                    not source.startswith(f"{call_id}/") or source not in self._calls):
                # the table let it through: the call's stage is as it was
                raise LifecycleError(f"call {call_id} forwarded progress from {source!r}, "
                                     f"which is not a call nested under it")
            call.progress_count += 1
            call.last_progress = event
        elif isinstance(event, QuestionAsked):
            self._question_asked(call, event)
        elif isinstance(event, QuestionAnswered):
            self._question_answered(call, event)
        elif isinstance(event, ProgramSuspended):
            self._program_suspended(call, event)
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

    # the table let these through (the call runs): its stage is as it was if they are refused
    def _question_asked(self, call: LiveCall, event: QuestionAsked) -> None:
        expected = question_id(call.call_id, len(call.questions) + 1)
        if event.question_id != expected:
            raise LifecycleError(f"call {call.call_id} asked question {event.question_id!r}; "
                                 f"its next question is {expected!r}")
        if not isinstance(event.message, str):
            raise LifecycleError(f"question {expected}: its message is not text")
        try:
            form_schema(event.schema)
        except ValueError as exc:
            raise LifecycleError(f"question {expected}: {exc}") from None
        call.questions = (*call.questions, AskedQuestion(asked=event))
        self._questions[expected] = call.call_id

    def _question_answered(self, call: LiveCall, event: QuestionAnswered) -> None:
        asked_id = event.question_id
        for index, asked in enumerate(call.questions):
            if asked.question_id == asked_id:
                break
        else:
            raise LifecycleError(f"an answer to question {asked_id!r}, which call "
                                 f"{call.call_id} did not ask")
        if asked.answer is not None:
            raise LifecycleError(f"question {asked_id} was answered already")
        if event.action == "accept":
            problem = content_problem(asked.asked.schema, event.content)
            if problem is not None:
                raise LifecycleError(f"question {asked_id}: {problem}")
        elif event.content is not None:
            raise LifecycleError(f"question {asked_id}: a {event.action} has no content")
        questions = list(call.questions)
        questions[index] = AskedQuestion(asked=asked.asked, answer=event)
        call.questions = tuple(questions)
        self._questions.pop(asked_id, None)

    def _program_suspended(self, call: LiveCall, event: ProgramSuspended) -> None:
        children = self._children.get(call.call_id, ())
        if len(event.program_calls) != len(event.waits_for):
            raise LifecycleError(f"call {call.call_id}: a suspended program names "
                                 f"{len(event.waits_for)} calls it waits for but "
                                 f"{len(event.program_calls)} ids of the sandbox's")
        for waited in event.waits_for:
            if waited not in children:
                raise LifecycleError(f"call {call.call_id}: its suspended program waits for "
                                     f"{waited!r}, which is not a call nested under it")

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
