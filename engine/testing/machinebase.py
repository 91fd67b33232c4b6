"""What :class:`~engine.testing.machine.SessionMachine` stands on: the session it holds
between steps, and the check it makes after every step.

:class:`SessionMachineBase` holds the machine's settings (the class attributes a subclass sets),
its hooks, the trio loop the session lives in (:meth:`~SessionMachineBase.run` hands it one
step), what the machine knows of the session (is a batch open, which approvals wait), and the
invariant that checks the store's log and the live session after every step
(:mod:`engine.testing.invariants`). It has no rules: the steps a host takes are
:mod:`engine.testing.machine`'s, so the one file reads as the list of what a host may do.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant

from events.stores import EventStore, MemoryStore
from events.types import Record

from ..core.approvals import ApprovalRequest, Approver
from ..core.handlers import ToolCallHandler, ToolResultHandler
from ..core.policy import PolicyRules
from ..core.questions import Asker, Question
from ..core.toolcontext import CallOutcome
from ..core.tools import ToolSpec
from ..models import FauxToolCall
from ..runtime.session import Session
from .arguments import invalid_arguments, valid_arguments, weighted
from .catalogue import NestRecord
from .host import (
    MACHINE_ANSWERS,
    QUESTION_ANSWERS,
    HeldSession,
    ScriptModel,
    scripted_answer,
    scripted_reply,
)
from .invariants import check_log, check_stored
from .loop import LoopThread
from .strategies import nesting_calls, tool_calls
from .tools import BodyRuns, counting_clock

__all__ = ["SessionMachineBase", "class_attribute"]

T = TypeVar("T")


def class_attribute(cls: type, name: str) -> Any:
    """A class attribute as written (a function stays a function, not a bound method)."""
    value = inspect.getattr_static(cls, name)
    return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


class SessionMachineBase(RuleBasedStateMachine):
    """The session a :class:`~engine.testing.machine.SessionMachine` drives, and the check
    after every step; its settings are documented there."""

    tools: ClassVar[Sequence[ToolSpec]] = ()
    call_handlers: ClassVar[Sequence[ToolCallHandler]] = ()
    result_handlers: ClassVar[Sequence[ToolResultHandler]] = ()
    policy: PolicyRules = PolicyRules()
    approver: ClassVar[Approver | None] = None
    nest_tool_name: ClassVar[str | None] = "nest"
    #: the name of a tool the machine adds beside your tools that asks the person (``None``,
    #: the default: none; the catalogue always has one, ``ask``)
    ask_tool_name: ClassVar[str | None] = None
    asker: ClassVar[Asker | None] = None
    #: what the machine's own asker may answer, drawn at each prompt
    question_answers: ClassVar[tuple[str, ...]] = QUESTION_ANSWERS
    #: what the machine's own approver may answer, drawn per tool at each prompt
    answers: ClassVar[tuple[str, ...]] = MACHINE_ANSWERS
    #: whether the approver and the host may edit arguments when they grant: an edit is the
    #: approver's own answer, validated again but not put to the ``tool_call`` handlers
    edits: ClassVar[bool] = True
    #: calls in one assistant message, and messages with calls in one prompt
    max_calls: ClassVar[int] = 3
    max_turns: ClassVar[int] = 2
    #: how deep the nesting tool's plans go
    nest_depth: ClassVar[int] = 2
    max_depth: ClassVar[int] = 8
    session_id: ClassVar[str] = "machine-session"
    virtual_time: ClassVar[bool] = True
    step_timeout: ClassVar[float] = 600.0

    def __init__(self) -> None:
        super().__init__()
        self.runs = BodyRuns()
        self.asked: list[str] = []
        #: the questions the asker was asked, by id, in order
        self.questioned: list[str] = []
        self._question_answer = "later"
        self.records: tuple[Record, ...] = ()
        self.store: EventStore = self.make_store()
        self.model = ScriptModel()
        self.nested = NestRecord()
        self._loop = LoopThread(virtual_time=self.virtual_time, step_timeout=self.step_timeout)
        self._clock = counting_clock()
        self._specs: list[ToolSpec] = []
        self._answers: dict[str, str] = {}
        self._edits: dict[str, Any] = {}
        self._closed_log = True
        self._held = HeldSession(self._opener, self.setup_session)
        #: the host calls' outcomes, and the host calls a task of the machine carries now
        self.host_outcomes: dict[str, CallOutcome] = {}
        self._carried: set[str] = set()
        self._host_raised: list[BaseException] = []
        self._call_handlers: list[ToolCallHandler] = list(self.call_handlers)
        self._result_handlers: list[ToolResultHandler] = list(self.result_handlers)

    # -- hooks ------------------------------------------------------------------------------

    def make_tools(self) -> Sequence[ToolSpec]:
        """The tools to register (default: the class attribute ``tools``). Override to build
        fresh ones for each run, e.g. tools that share a fake file system."""
        return list(self.tools)

    def make_store(self) -> EventStore:
        """The store the session writes to (default: a new :class:`~events.MemoryStore`)."""
        return MemoryStore()

    def setup_session(self, session: Session) -> None:
        """Called after each open of the session (the first, and each restart): installs the
        handlers."""
        for handler in self._call_handlers:
            session.on_tool_call(handler)
        for result_handler in self._result_handlers:
            session.on_tool_result(result_handler)

    def model_calls(self) -> st.SearchStrategy[FauxToolCall]:
        """What the model calls: the tools with arguments drawn from their input schemas
        (mostly valid), an unknown tool, and plans for the nesting tool."""
        nest = self.nest_tool_name
        plain = [spec for spec in self._specs if spec.name != nest]
        if nest is None or not any(s.name == nest for s in self._specs):
            return tool_calls(plain)
        return nesting_calls(tool_calls(plain), nest, self.nest_depth)

    # -- running things in the session's loop ----------------------------------------------------

    def run(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await function(*args)`` in the session's trio loop as one step (it returns
        once every task there waits again)."""
        return self._loop.step(function, *args, name=getattr(function, "__name__", "step"))

    @property
    def live(self) -> Session:
        """The open session."""
        assert self.session is not None, "the session is not open"
        return self.session

    def _approver(self) -> Approver:
        given = class_attribute(type(self), "approver")
        if given is not None:
            return given  # type: ignore[no-any-return]
        return self._scripted_approver

    async def _scripted_approver(self, request: ApprovalRequest) -> Any:
        return scripted_answer(self._answers.get(request.name, "later"), request,
                               self._edits.get(request.name))

    async def _scripted_asker(self, question: Question) -> Any:
        return scripted_reply(self._question_answer, question, len(self.questioned))

    def _opener(self) -> AbstractAsyncContextManager[Session]:
        approver = self._approver()
        asker = class_attribute(type(self), "asker") or self._scripted_asker

        async def asked(request: ApprovalRequest) -> Any:
            self.asked.append(request.call_id)
            reply = approver(request)
            return await reply if inspect.isawaitable(reply) else reply

        async def questioned(question: Question) -> Any:
            self.questioned.append(question.question_id)
            reply = asker(question)
            return await reply if inspect.isawaitable(reply) else reply

        return Session.open(self.store, model=self.model, tools=self._specs, approver=asked,
                            asker=questioned, rules=self.policy, session_id=self.session_id,
                            create=True, clock=self._clock, max_depth=self.max_depth)

    async def _open(self) -> None:
        await self._held.open(self._loop.nursery)

    @property
    def session(self) -> Session | None:
        """The open session, or ``None`` (between a restart's close and open)."""
        return self._held.session

    # -- what the machine knows ---------------------------------------------------------------

    def batch_open(self) -> bool:
        """Whether a prompt must wait for ``resume()``: the current batch has calls without
        their terminal event (the session is paused, or a nested call resumed by an answer is
        still on its way), or the last prompt or resume paused (``Session.paused``)."""
        if self.session is None:
            return False
        if self.session.paused:
            return True
        state = self.session.state
        message = state.last_message
        if message is None:
            return False
        calls = state.calls
        return any(f"{message.turn}.{i}" not in calls or not calls[f"{message.turn}.{i}"].closed
                   for i in range(len(message.tool_calls)))

    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The approval requests waiting for an answer."""
        return () if self.session is None else self.session.pending_approvals()

    def pending_questions(self) -> tuple[Question, ...]:
        """The tools' questions waiting for an answer."""
        return () if self.session is None else self.session.pending_questions()

    def _schema(self, name: str) -> Mapping[str, Any]:
        snapshot = self.live.state.tools.get(name)
        return snapshot.input_schema if snapshot is not None else {"type": "object"}

    def _arguments(self, name: str) -> st.SearchStrategy[Any]:
        schema = self._schema(name)
        try:
            bad = invalid_arguments(schema)
        except ValueError:
            return valid_arguments(schema)
        return weighted((2, valid_arguments(schema)), (1, bad))

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def log_invariants_hold(self) -> None:
        """Every invariant of :mod:`engine.testing.invariants`, on the store's log and the
        live session: the fold equals the live state, one terminal event per call (none open
        once a prompt ended or was cancelled), nesting, the transcript, the bodies that ran,
        availability, approvals, and the codec and store round trips."""
        if self.session is None:
            return
        self.run(self._check)

    async def _check(self) -> None:
        session = self.live
        stored = tuple(await self.store.read(session.session_id))
        check_stored(session.records, stored)
        check_log(stored, state=session.state, transcript=session.transcript,
                  body_runs=self.runs, rules=self.policy, asked=self.asked,
                  closed=self._closed_log)
        assert self.nested.raised == [], f"ctx.execute_tool raised {self.nested.raised!r}"
        again = sorted({q for q in self.questioned if self.questioned.count(q) > 1})
        assert not again, f"the asker was asked {again} again (a question is asked once)"
        calls = session.state.calls
        for call_id, outcome in self.nested.outcomes.items():
            logged = calls[call_id].result
            assert outcome.result == logged, (
                f"ctx.execute_tool gave {call_id}'s parent {outcome.result!r}; the log says "
                f"{logged!r}")
        assert self._host_raised == [], f"a host call raised {self._host_raised!r}"
        for call_id, outcome in self.host_outcomes.items():
            logged = calls[call_id].result
            assert outcome.result == logged, (
                f"call_tool gave {outcome.result!r} for {call_id}; the log says {logged!r}")
        self.records = stored

    def teardown(self) -> None:
        """Close the session and stop its loop."""
        try:
            if self.session is not None:
                self.run(self._held.close)
        finally:
            self._loop.close()
