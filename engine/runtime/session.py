"""The session: one log stream, and the agent loop that writes it.

``prompt`` reads top to bottom like the loop it runs, in the task that called it: record the
user's message, ask the model, record its answer, settle its tool calls as a batch
(:mod:`engine.runtime.batch`), repeat until a message without calls or ``max_turns``. The model, the
``tool_call`` handlers and the approver run in that task, so they see the caller's context
variables; the tool bodies run in tasks of the session's nursery that inherit a copy of them.
What the host reads and changes besides prompting (views, tools, handlers, its own calls,
answers to approvals) is :class:`~engine.runtime.controls.SessionControls`, which the session is built
on. The rules of one call live in :mod:`engine.runtime.calls`, which event may follow which in
:mod:`engine.core.lifecycle`, the session's fixed setup in :mod:`engine.core.environment`, and what this
process is doing about its calls in :mod:`engine.runtime.inflight`.

The session runs inside the host's trio loop: it starts no loop and no thread, and leaves no
task behind when :meth:`Session.open`'s block ends.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs
import trio

from events.errors import SessionNotFound
from events.modelturns import SystemPromptSet
from events.stores import EventStore
from events.types import (
    AssistantMessage,
    ModelToolCall,
    SessionSettings,
    SessionStarted,
    UserMessage,
)

from ..core.approvals import ApprovalRequest, Approver, deny_all
from ..core.environment import Environment
from ..core.errors import AlreadyRunning, SessionClosed, SessionPaused
from ..core.jsonvalues import own_json
from ..core.limits import Limits, admit, clip_name, not_json_marker
from ..core.policy import PolicyRules
from ..core.reducers import fold
from ..core.registry import Registry
from ..core.tools import ToolSpec
from ..models import Model
from .asking import ask_model, kept_content
from .controls import SessionControls
from .recorder import Recorder

__all__ = ["PromptResult", "Session"]


@attrs.frozen(kw_only=True)
class PromptResult:
    """How a prompt (or a resume) ended: ``"end_turn"`` (a message without calls),
    ``"max_turns"``, or ``"paused"`` with the approval requests that wait for an answer."""

    stop: Literal["end_turn", "max_turns", "paused"]
    turns: int
    text: str
    pending: tuple[ApprovalRequest, ...] = ()


def _admissible(arguments: Any, limits: Limits) -> Any:
    """A private copy of a model's arguments; a marker naming the problem if they are not JSON
    (the log holds only JSON; the call then fails saying why), a size marker if they are too
    large."""
    try:
        arguments = own_json(arguments)
    except ValueError as exc:
        return not_json_marker(exc)
    return admit(arguments, limits)


def _new_session_id() -> str:
    return uuid.uuid4().hex


def _interrupt(group: BaseExceptionGroup[Any]) -> BaseException | None:
    """The first ``KeyboardInterrupt`` or ``SystemExit`` inside ``group``, if any."""
    for exc in group.exceptions:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            return exc
        if isinstance(exc, BaseExceptionGroup) and (inner := _interrupt(exc)) is not None:
            return inner
    return None

class Session(SessionControls):
    """One agent session over one log stream. Open it with :meth:`Session.open`."""

    def __init__(self, env: Environment, recorder: Recorder, model: Model) -> None:
        super().__init__(env, recorder)
        self._model = model
        self._prompting = False
        #: the last prompt or resume returned "paused": resume() comes first
        self._paused = False

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        store: EventStore,
        *,
        model: Model,
        tools: Iterable[ToolSpec] = (),
        approver: Approver = deny_all,
        rules: PolicyRules = PolicyRules(),
        session_id: str | None = None,
        create: bool = False,
        max_turns: int = 50,
        max_depth: int = 8,
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.time,
        new_session_id: Callable[[], str] = _new_session_id,
        metadata: Mapping[str, Any] | None = None,
        system_prompt: str | None = None,
    ) -> AsyncIterator[Session]:
        """Open a session on ``store``: a new one, or the one ``session_id`` names.

        Without ``session_id`` the session is new, under an id from ``new_session_id`` (one
        the store already holds is a ``ValueError``). With it, the store must hold that session
        (else :class:`~events.errors.SessionNotFound`: a mistyped id must not start an empty
        session) unless ``create=True``, which opens it or starts it under that id.

        A session has one owner at a time: until the block ends, opening it again (in this
        process or another) raises :class:`~events.errors.SessionInUse`, through the store's
        :meth:`~events.stores.EventStore.claim`. When the block ends it lets go of the claim,
        after what runs from tasks outside the block has stopped and been written; from then
        on the session only reads, and every change raises
        :class:`~engine.core.errors.SessionClosed` (a ``RuntimeError``).

        Tools are checked before anything is written (a bad schema raises ``SchemaError``
        naming the tool and the keyword). The approver answers when the policy says ask; the
        default refuses, so nothing dangerous runs unless the host says so. ``limits`` bounds
        the JSON one call may bring into the log (:class:`~engine.core.limits.Limits`). ``clock`` and
        ``new_session_id`` are injected so that tests and replays are deterministic.

        ``system_prompt`` is the instructions the model gets with every request, recorded
        (:class:`~events.modelturns.SystemPromptSet`) when it differs from what the log holds;
        ``None`` keeps what the log holds (none, for a new session).
        """
        registry = Registry()
        specs = list(tools)
        for spec in specs:
            registry = registry.with_spec(spec)  # checked and compiled once, here
        names = [spec.name for spec in specs]
        if len(set(names)) < len(names):
            duplicated = next(name for name, count in Counter(names).items() if count > 1)
            raise ValueError(f"two tools are named {duplicated!r}: tool names must be unique")
        env = Environment(registry=registry, rules=rules, limits=limits, approver=approver,
                          max_depth=max_depth, max_turns=max_turns, clock=clock)  # or ValueError
        started = SessionStarted(  # or ValueError
            metadata=own_json(dict(metadata)) if metadata else {},
            settings=SessionSettings(max_turns=max_turns, max_depth=max_depth,
                                     max_argument_bytes=limits.max_argument_bytes,
                                     max_result_bytes=limits.max_result_bytes))

        sid = session_id if session_id is not None else new_session_id()
        # one owner at a time: SessionInUse if another block (or process) has it open
        claim = store.claim(sid)
        try:
            history = await store.read(sid)
            if not history and session_id is not None and not create:
                raise SessionNotFound(sid)
            if history and session_id is None:
                raise ValueError(f"new_session_id() returned {sid!r}, a session the store "
                                 f"already holds: pass session_id={sid!r} to open it, or draw "
                                 f"unique ids")
            projection = fold(history)
            recorder = Recorder(store, sid, projection, history, env.clock)
            session = cls(env, recorder, model)
            if not history:
                recorder.record(started)
            if system_prompt is not None and system_prompt != projection.system_prompt:
                recorder.record(SystemPromptSet(text=system_prompt))
            for spec in specs:
                session._record_tool(spec)
            await recorder.flush()
            raised: BaseException | None = None
            try:
                async with trio.open_nursery() as nursery:
                    session._batch.attach(nursery)
                    try:
                        yield session
                    except BaseException as exc:
                        raised = exc
                        raise
                    finally:
                        # calls still in flight (waiting for an approval) stop here without
                        # a word in the log, as if the process had stopped: resume() takes
                        # them up
                        await session._inflight.suspend()
                        session._batch.attach(None)
                        recorder.close()
                        session._deltas.close()
                        await recorder.flush_finally()
            except BaseExceptionGroup as group:
                # the nursery wraps what the host's block raised; give the host its own
                # exception
                if raised is not None and list(group.exceptions) == [raised]:
                    raise raised from None
                # a KeyboardInterrupt or SystemExit (a call's, say) comes out as itself, as
                # from asyncio's TaskGroup: a host's `except KeyboardInterrupt` must see it
                if (stop := _interrupt(group)) is not None:
                    raise stop from None
                raise
        finally:
            claim.release()  # after the last flush, and after the session's tasks ended

    # -- the loop -------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the last prompt or resume returned ``"paused"`` and no :meth:`resume` has
        finished its batch since: :meth:`prompt` is refused until one has."""
        return self._paused

    async def prompt(self, text: str) -> PromptResult:
        """Send the user's ``text`` and run the agent loop, in this task, until the model stops
        calling tools, ``max_turns`` assistant messages, or a pause for approval
        (``stop="paused"``, with the pending requests: answer them with
        :meth:`resolve_approval`, then :meth:`resume`). Cancelling it (a host cancel scope)
        closes every open call as cancelled before the cancellation propagates. If the
        session closes while it runs (it was called from a task outside ``Session.open``'s
        block), it stops, leaves its calls open in the log as a stopped process would, and
        raises :class:`~engine.core.errors.SessionClosed` (a ``RuntimeError``): open the session
        again and :meth:`resume` (docs/resume.md).

        After a pause, a prompt is refused (:class:`~engine.core.errors.SessionPaused`) until
        :meth:`resume` has finished the paused batch, so that the model sees the batch's
        results before the next user message (see docs/resume.md)."""
        self._enter()
        try:
            if self._paused or self._batch.open():
                raise SessionPaused(self._why_paused())
            self._recorder.record(UserMessage(text=text))
            return await self._loop_while_open()
        finally:
            self._prompting = False

    async def resume(self) -> PromptResult:
        """Go on from where the log stands: finish the current batch (calls approved since the
        pause run; a call interrupted by a stopped process runs again if its tool is
        idempotent, else ends "interrupted"), then continue the loop. Returns like
        :meth:`prompt`; a session with nothing left to do returns at once."""
        self._enter()
        try:
            return await self._loop_while_open()
        finally:
            self._prompting = False
    def _why_paused(self) -> str:
        pending = self.state.pending_approvals
        if pending:
            return (f"the session is paused: its last batch waits for approvals "
                    f"({', '.join(pending)}); answer them with resolve_approval(), then call "
                    f"resume() to finish the batch before a new prompt")
        return ("the session is paused: its last batch has not been finished since it paused "
                "(answered calls may still run, or a stopped process left calls open); call "
                "resume() to finish it, so the model sees its results, before a new prompt")

    def _enter(self) -> None:
        self._check_open("prompt or resume it")
        if self._prompting:
            raise AlreadyRunning("a prompt is already running in this session: await it first")
        self._prompting = True

    async def _loop_while_open(self) -> PromptResult:
        """:meth:`_loop` under a scope the session's closing cancels, as it does a host
        call's: a prompt from a task outside ``Session.open``'s block stops when the block
        ends (the log stays as a stopped process would leave it) and raises, instead of
        running on, unowned, after the session closed. What the prompt recorded is written
        as it ends, whatever happened."""
        scope = trio.CancelScope()
        self._inflight.prompting(scope)
        try:
            with scope:
                return await self._loop()
        finally:
            try:
                # what it recorded is written before the session's closing goes on (which
                # waits for this, then makes its last flush and releases its claim)
                await self._recorder.flush_finally()
            finally:
                self._inflight.prompting(None)
        raise SessionClosed(
            "the session closed while this prompt ran (from a task outside Session.open's "
            "block): its log stays as a stopped process would leave it; open the session "
            "again and call resume() to go on")

    async def _loop(self) -> PromptResult:
        """The agent loop, in the caller's task: settle the batch, ask the model, record its
        answer, repeat."""
        self._paused = False
        turns = 0
        while True:
            env = self._env  # a tool registered or a handler added counts from the next batch
            if await self._batch.settle(env) == "paused":
                self._paused = True
                return PromptResult(stop="paused", turns=turns, text="",
                                    pending=self.pending_approvals())
            last = self.state.last_message
            if turns and turns >= env.max_turns:
                return PromptResult(stop="max_turns", turns=turns, text="")
            if not turns and last is not None and not last.tool_calls and isinstance(
                self.transcript[-1], AssistantMessage
            ):
                return PromptResult(stop="end_turn", turns=0, text=last.text)
            reply = await ask_model(self._model, self._recorder, self._deltas)
            turns += 1
            limits = env.limits
            self._recorder.record(AssistantMessage(
                turn=self.state.turn + 1, text=reply.text, stop_reason=reply.stop_reason,
                tool_calls=tuple(ModelToolCall(
                    id=clip_name(call.id), name=clip_name(call.name),
                    arguments=_admissible(call.arguments, limits),
                    model_name=None if call.model_name is None else clip_name(call.model_name))
                    for call in reply.tool_calls),
                provider_content=kept_content(reply, limits),
            ))
            if not reply.tool_calls:
                return PromptResult(stop="end_turn", turns=turns, text=reply.text)
