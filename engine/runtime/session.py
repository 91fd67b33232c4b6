"""The session: one log stream, the agent loop that writes it, and the host's hold on it.

:class:`Session` is one class: its life (opening, closing), what the host reads of it (views of
its state and log, following its records and the model's deltas) and what the host changes
besides prompting (handlers, tools, the system prompt and the active set, its own calls, the
answers to pending approvals). Each change is recorded and flushed before it returns, and
refused once the session has closed (it no longer owns its log). ``prompt`` and ``resume`` run
the agent loop, :class:`~engine.runtime.loop.AgentLoop`, which the session holds: the model,
the ``tool_call`` handlers and the approver run in the caller's task; the tool bodies run in
copies of its context. The rules of one call live in :mod:`engine.runtime.calls`, which event
may follow which in :mod:`engine.core.lifecycle`, the session's fixed setup in
:mod:`engine.core.environment`, and what this process is doing about its calls in
:mod:`engine.runtime.inflight`.

The session runs inside the host's trio loop: it starts no loop and no thread, and leaves no
task behind when :meth:`Session.open`'s block ends. Sync code, which has no loop, prompts it
with :meth:`Session.run_sync`: a trio run per call (:mod:`engine.runtime.fromsync`).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import MappingProxyType
from typing import Any, Literal, TypeVar

import trio

from events.errors import SessionNotFound
from events.modelturns import SystemPromptSet
from events.renamed import renamed_attribute, warn_renamed
from events.results import ModelView
from events.stores import EventStore
from events.types import (
    ActiveToolsSet,
    Annotations,
    Record,
    SessionSettings,
    SessionStarted,
    ToolRegistered,
    ToolSnapshot,
    ToolsActivated,
)

from ..core.approvals import ApprovalAnswer, ApprovalRequest, Approver, deny_all
from ..core.environment import Environment
from ..core.errors import ApprovalNotPending, CallNotFound, SessionClosed
from ..core.handlers import ToolCallHandler, ToolResultHandler
from ..core.jsonvalues import copy_json, ensure_json, own_json
from ..core.lifecycle import CallStage
from ..core.limits import Limits
from ..core.policy import PolicyRules
from ..core.questions import Action, Answer, Asker, Question, decline_all
from ..core.reducers import CallView, Projection, TranscriptView, fold
from ..core.registry import Registry
from ..core.toolcontext import CallOutcome
from ..core.tools import ToolSpec
from ..models import Model
from . import hostcalls, questions
from .batch import Batch
from .deltas import DeltaStream, Deltas
from .fromsync import run_from_sync
from .gate import resolve
from .inflight import InFlight
from .loop import AgentLoop, PromptResult
from .progress import ProgressListener, listener_checked
from .recorder import Recorder

__all__ = ["PromptResult", "Session", "closed_error"]

#: Public names renamed since they shipped: the old name still works, with a warning naming
#: the new one (docs/concepts.md, "Words"). ``SessionControls`` was the half of
#: :class:`Session` that ``engine.runtime.controls`` held, joined into it.
_RENAMED = {
    "SessionControls": "Session",
}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)


def closed_error(doing: str) -> SessionClosed:
    """What a closed session raises when the host asks it to ``doing``: what is wrong, and
    what to do instead."""
    return SessionClosed(f"the session is closed: open it again with Session.open() to {doing}")


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


#: what a session waits for: an approval request or a question
W = TypeVar("W")


class Session:
    """One agent session over one log stream. Open it with :meth:`Session.open`."""

    def __init__(self, env: Environment, recorder: Recorder, model: Model | None) -> None:
        self._env = env
        self._recorder = recorder
        self._inflight = InFlight()
        self._batch = Batch(recorder, self._inflight)
        self._deltas = Deltas()
        self._loop = AgentLoop(recorder=recorder, batch=self._batch, inflight=self._inflight,
                               deltas=self._deltas, model=model)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        store: EventStore,
        *,
        model: Model | None = None,
        tools: Iterable[ToolSpec] = (),
        approver: Approver = deny_all,
        asker: Asker = decline_all,
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
        model_view: ModelView | None = None,
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
        default refuses, so nothing dangerous runs unless the host says so. The asker answers
        a running tool's questions (``ctx.ask``); the default declines them all, at once.
        ``limits`` bounds
        the JSON one call may bring into the log (:class:`~engine.core.limits.Limits`). ``clock`` and
        ``new_session_id`` are injected so that tests and replays are deterministic.

        ``model`` may be left out for a session that only serves its tools (over MCP, say) or
        takes host calls: ``prompt()`` and ``resume()`` then raise
        :class:`~engine.core.errors.NoModel` and record nothing.

        ``system_prompt`` is the instructions the model gets with every request, recorded
        (:class:`~events.modelturns.SystemPromptSet`) when it differs from what the log holds;
        ``None`` keeps what the log holds (none, for a new session).

        ``model_view`` (a :class:`~events.results.ModelView`) is how much of a result the model
        reads, for the tools that set none: the head and tail of a longer one, with a marked
        gap; the whole is kept (docs/tools.md, "Long outputs").
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
                          asker=asker, max_depth=max_depth, max_turns=max_turns, clock=clock,
                          model_view=model_view)  # or ValueError
        started = SessionStarted(  # or ValueError
            metadata=own_json(dict(metadata)) if metadata else {},
            settings=SessionSettings(max_turns=max_turns, max_depth=max_depth,
                                     max_argument_bytes=limits.max_argument_bytes,
                                     max_result_bytes=limits.max_result_bytes,
                                     max_artifact_bytes=limits.max_artifact_bytes,
                                     model_view=model_view))

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

    @classmethod
    def run_sync(cls, store: EventStore, text: str, **options: Any) -> PromptResult:
        """Open a session on ``store`` with :meth:`open`'s arguments, prompt it with ``text``,
        close it, and return how the prompt ended: from sync code (a script, a notebook cell)
        that runs no trio. Each call is a trio run of its own, which ends with the session
        (:mod:`engine.runtime.fromsync`): in this thread, or, if it runs an asyncio loop (a
        notebook), in a worker thread while this one waits. A conversation goes on through
        the log: pass ``session_id=`` (with ``create=True`` the first time) and each call
        reopens the session where the last one left it::

            result = Session.run_sync(JsonlStore("chat.jsonl"), "how big is the README?",
                                      model=model, tools=[stat_file], approver=approve_all,
                                      session_id="chat", create=True)

        Refused in trio code, where the session is awaited instead (a ``RuntimeError``)."""

        async def prompted() -> PromptResult:
            async with cls.open(store, **options) as session:
                return await session.prompt(text)

        return run_from_sync(prompted, doing="Session.run_sync()")

    # -- the loop -------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the last prompt or resume returned ``"paused"`` and no :meth:`resume` has
        finished its batch since: :meth:`prompt` is refused until one has."""
        return self._loop.paused

    async def prompt(self, text: str) -> PromptResult:
        """Send the user's ``text`` and run the agent loop, in this task, until the model stops
        calling tools, ``max_turns`` assistant messages, or a pause for approval or for a
        tool's question (``stop="paused"``, with the pending requests and questions: answer
        them with :meth:`resolve_approval` and :meth:`answer_question`, then :meth:`resume`). Cancelling it (a host cancel scope)
        closes every open call as cancelled before the cancellation propagates. If the
        session closes while it runs (it was called from a task outside ``Session.open``'s
        block), it stops, leaves its calls open in the log as a stopped process would, and
        raises :class:`~engine.core.errors.SessionClosed` (a ``RuntimeError``): open the session
        again and :meth:`resume` (docs/resume.md).

        After a pause, a prompt is refused (:class:`~engine.core.errors.SessionPaused`) until
        :meth:`resume` has finished the paused batch, so that the model sees the batch's
        results before the next user message (see docs/resume.md)."""
        self._check_open("prompt or resume it")
        return await self._loop.prompt(text, env=self._current_env,
                                       pending=self.pending_approvals,
                                       questions=self.pending_questions)

    async def resume(self) -> PromptResult:
        """Go on from where the log stands: finish the current batch (calls approved since the
        pause run; a call interrupted by a stopped process runs again if its tool is
        idempotent, else ends "interrupted"), then continue the loop. Returns like
        :meth:`prompt`; a session with nothing left to do returns at once."""
        self._check_open("prompt or resume it")
        return await self._loop.resume(env=self._current_env, pending=self.pending_approvals,
                                       questions=self.pending_questions)

    def _current_env(self) -> Environment:
        """The session's setup as it is now: a handler added or a tool registered while the
        loop runs counts from its next batch."""
        return self._env

    # -- what the host reads ----------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """This session's id in the store."""
        return self._recorder.session_id

    @property
    def state(self) -> Projection:
        """The session's derived state (read-only views): equal to a fold of its log."""
        return self._recorder.projection

    @property
    def transcript(self) -> TranscriptView:
        """What the model saw: messages and one result per top-level call, nothing nested."""
        return self._recorder.projection.transcript

    @property
    def calls(self) -> Mapping[str, CallView]:
        """The call tree: every call by id, nested ones included (see ``CallView.parent_id``
        and ``session.state.children(call_id)``)."""
        return self._recorder.projection.calls

    @property
    def specs(self) -> Mapping[str, ToolSpec]:
        """The tools this process can run, by name: their specs, code included (read-only).
        ``state.tools`` is what the log says was registered; a tool an earlier process
        registered is there, and here only once it is registered again."""
        return MappingProxyType(self._env.registry.specs)

    @property
    def records(self) -> Sequence[Record]:
        """The session's log as recorded so far (read-only)."""
        return tuple(self._recorder.history)

    def follow(self, after: int = 0) -> AsyncIterator[Record]:
        """Iterate over the session's records (``seq > after``), live, until it closes.

        A slow follower reads at its own pace and misses nothing; it never slows the session.
        Each record comes as the session records it, before it is written. To watch a session
        from another process, follow its store instead: ``store.follow(session_id)``, or
        ``toolledger tail LOG --session ID --follow`` (it sees what is stored, by anyone).
        """
        return self._recorder.follow(after)

    def deltas(self) -> AbstractAsyncContextManager[DeltaStream]:
        """Subscribe to the pieces of the model's messages as they stream in, live::

            async with session.deltas() as stream:
                async for delta in stream:  # ModelDelta: text, or a call's arguments
                    print(delta.text, end="")

        Deltas are never written to the log (the whole message is recorded once, when it is
        complete); a subscriber gets those published while its block is open, and its
        iteration ends when the session closes. Only a model that streams sends any
        (docs/models.md, "Streaming").
        """
        return self._deltas.subscribe()

    # -- what the host changes ----------------------------------------------------------------

    def on_tool_call(self, handler: ToolCallHandler) -> ToolCallHandler:
        """Add a ``tool_call`` handler (runs in registration order). Usable as a decorator."""
        self._check_open("add a handler")
        env = self._env
        self._env = env.evolve(call_handlers=(*env.call_handlers, handler))
        return handler

    def on_tool_result(self, handler: ToolResultHandler) -> ToolResultHandler:
        """Add a ``tool_result`` handler (chained in registration order). Usable as a decorator."""
        self._check_open("add a handler")
        env = self._env
        self._env = env.evolve(result_handlers=(*env.result_handlers, handler))
        return handler

    def on_progress(self, handler: ProgressListener) -> ProgressListener:
        """Hear every progress update of the session's calls, nested calls' included, live:
        ``handler`` is called with each ``tool_progress`` as it is recorded (a copy of the
        :class:`~events.types.ToolProgress`: ``call_id`` is the call whose record it is,
        ``source`` the nested call a forwarded update came from), in the log's order, in the
        task of the tool that reported it. A plain function (an ``async def`` is a
        ``TypeError``): keep it quick, and hand the update to a task of your own for I/O.
        One that raises is removed and its exception logged (logger ``engine.progress``):
        it is not the tool's failure. Usable as a decorator. To read progress as records,
        from any point of the log, :meth:`follow` the session."""
        self._check_open("add a progress handler")
        checked = listener_checked(handler, "on_progress()")
        if checked is None:
            raise TypeError("on_progress() takes a function called with each progress "
                            "update, not None")
        self._inflight.progress.add_handler(checked)
        return handler

    async def register(self, spec: ToolSpec) -> None:
        """Register another tool (or a new version of one) while the session is open."""
        self._check_open("register a tool")
        self._register(spec)  # checked before anything changes
        await self._recorder.flush()

    def _register(self, spec: ToolSpec) -> None:
        self._env = self._env.evolve(registry=self._env.registry.with_spec(spec))
        self._record_tool(spec)

    def _record_tool(self, spec: ToolSpec) -> None:
        """Record the tool's snapshot (as its registry checked it) unless the session's state
        has it so already."""
        snapshot = self._env.registry.recorded(spec.name)
        known = self.state.tools.get(spec.name)
        if known is None or known != snapshot:
            self._recorder.record(ToolRegistered(spec=snapshot))

    async def set_system_prompt(self, text: str | None) -> None:
        """Replace the system prompt the model gets from the next request on (``None``: none).
        Recorded; a prompt equal to the current one records nothing."""
        self._check_open("change its system prompt")
        if text is not None and not isinstance(text, str):
            raise TypeError(f"a system prompt is a string or None, not {type(text).__name__}")
        if text != self.state.system_prompt:
            self._recorder.record(SystemPromptSet(text=text))
            await self._recorder.flush()

    async def set_active_tools(self, names: Iterable[str]) -> None:
        """Replace the set of active tools: the ones declared to the model from its next
        request on. Any registered tool may be named, hidden ones included (this, and
        :meth:`activate`, is the only way a hidden tool becomes active); an unknown name is an
        error and nothing changes."""
        self._check_open("change its active tools")
        wanted = self._registered("set_active_tools", names)
        self._recorder.record(ActiveToolsSet(names=wanted))
        await self._recorder.flush()

    async def activate(self, names: Iterable[str]) -> None:
        """Add tools to the active set, keeping the ones already there (recorded as
        ``tools_activated``): :meth:`set_active_tools` without reading ``state.active_tools``
        first. Any registered tool may be named, hidden ones included; an unknown name is an
        error and nothing changes; naming only active tools records nothing."""
        self._check_open("activate tools")
        wanted = self._registered("activate", names)
        active = self.state.active_tools
        if added := tuple(name for name in wanted if name not in active):
            self._recorder.record(ToolsActivated(names=added))
            await self._recorder.flush()

    def _registered(self, caller: str, names: Iterable[str]) -> tuple[str, ...]:
        if isinstance(names, str):
            raise TypeError(f"{caller}() takes a list of tool names, not one string")
        wanted = tuple(dict.fromkeys(names))
        specs = self._env.registry.specs
        if unknown := [name for name in wanted if name not in specs]:
            raise ValueError(
                f"{caller}: no tool named {unknown[0]!r} is registered "
                f"(registered: {', '.join(sorted(specs)) or 'none'})"
            )
        return wanted

    def declared_tools(self) -> tuple[ToolSnapshot, ...]:
        """The tools declared to the model now: the active ones, in registration order."""
        return self.state.declared_tools

    # -- the host's own calls ----------------------------------------------------------------

    async def call_tool(self, name: str, arguments: Any = None, *,
                        on_progress: ProgressListener | None = None,
                        asker: Asker | None = None) -> CallOutcome:
        """Run a tool for the host: a call of origin ``"host"``, in this task.

        It takes the path a model's call takes (availability for a host call, input
        validation, the ``tool_call`` handlers, the policy, the approver, the body, the
        output check, the ``tool_result`` handlers) and is recorded the same way, under the
        id ``"h{n}"`` (``n`` counts the session's host calls from 0), but it adds nothing to
        the transcript. Like ``ctx.execute_tool`` it never raises for a tool failure: unknown
        tool, invalid arguments, blocked, denied, raised, invalid output all come back as an
        outcome with ``is_error=True``. Host calls may run concurrently with each other and
        with a prompt; the prompt does not wait for them.

        If the approver answers "later", this waits until the host answers the request
        (``resolve_approval(outcome's call id, ...)``, from another task; the id is in
        :meth:`pending_approvals`). Cancelling it ends the call as cancelled. If the session
        closes while it runs, it raises :class:`~engine.core.errors.SessionClosed` (a
        ``RuntimeError``) and the call stays open in the log, as if the process had stopped:
        :meth:`resume_call` takes it up in a reopened session.

        ``on_progress`` hears the call's progress updates as they are recorded, as
        ``ctx.execute_tool``'s does (what the tool reports, and what it forwards of its
        nested calls'); what it raises is raised here once the call has ended.

        ``asker`` answers the questions the call and its nested calls ask (``ctx.ask``)
        instead of the session's asker: the host that calls answers, as an MCP server's
        client does for the calls it makes (docs/mcp.md). It may answer ``LATER``: the call
        then waits until :meth:`answer_question` answers.
        """
        self._check_open("call its tools")
        listener = listener_checked(on_progress, "call_tool(on_progress=...)")
        return await hostcalls.call_tool(self._env, self._recorder, self._inflight, name,
                                         arguments, on_progress=listener, asker=asker)

    async def resume_call(self, call_id: str) -> CallOutcome:
        """Carry a host call on from where the log says it is, and return its outcome: the
        recorded one if it has ended, else it goes on as in :meth:`call_tool` (an approval
        answered since goes on; a pending one is waited for; a body interrupted by a stopped
        process runs again if its tool is idempotent, else the call ends "interrupted")."""
        self._check_open("call its tools")
        return await hostcalls.resume_call(self._env, self._recorder, self._inflight, call_id)

    def _check_open(self, doing: str) -> None:
        """Refuse ``doing`` once the session closes: its block has ended (or is ending), it
        has let go of its claim on the store, and another block or process may own the
        session now, so nothing may be recorded or changed here any more. Closing begins
        with :meth:`InFlight.suspend`, which stops what runs and marks it; every change the
        host makes, and every prompt and call, asks here first, before it records
        anything."""
        if self._inflight.suspending:
            raise closed_error(doing)

    # -- answering approvals ---------------------------------------------------------------

    async def resolve_approval(
        self,
        call_id: str,
        granted: bool | None = None,
        scope: Literal["once", "session"] = "once",
        *,
        arguments: Any = None,
        reason: str | None = None,
        approved: bool | None = None,
    ) -> None:
        """Answer a pending approval by the engine's call id: once per request.

        ``granted`` is the answer, the word :class:`ApprovalAnswer` and the recorded
        ``ApprovalResolved`` use (``approved=`` is its deprecated spelling).
        ``scope="session"`` also answers later calls of the tool (never one already resolved).
        ``arguments`` edits the call's arguments: recorded as a rewrite by the approver and
        validated again. A nested call or a host call waiting in this process goes on at once;
        a model's call runs at the next :meth:`resume` (a host call after a restart: at
        :meth:`resume_call`).
        """
        self._check_open("answer its approvals")
        if approved is not None:
            if granted is not None:
                raise TypeError("resolve_approval() takes granted= or its old name approved=, "
                                "not both")
            warn_renamed("resolve_approval(approved=...)", "resolve_approval(granted=...)")
            granted = approved
        if granted is None:
            raise TypeError("resolve_approval() needs the answer: granted=True or False")
        answer = ApprovalAnswer(granted=granted, scope=scope, arguments=arguments,
                                reason=reason)
        state = self.state
        view = state.live_calls.get(call_id)
        if self._inflight.asking(call_id):
            raise ApprovalNotPending(f"call {call_id}: its approver is still deciding; answer a "
                                     f"request only once it is pending "
                                     f"(session.pending_approvals())")
        if view is None or view.stage is not CallStage.AWAITING:
            status = "unknown" if view is None else view.status
            refused = CallNotFound if view is None else ApprovalNotPending
            raise refused(
                f"call {call_id} is not waiting for an approval (it is {status}); "
                f"pending: {', '.join(state.pending_approvals) or 'none'}"
            )
        if answer.granted and answer.arguments is not None:
            ensure_json(answer.arguments)
        resolve(self._env, self._recorder, call_id, answer, later=True)
        self._inflight.unpark(call_id)  # a nested call or a host call waiting here goes on
        await self._recorder.flush()

    async def wait_pending_approvals(self) -> tuple[ApprovalRequest, ...]:
        """Wait until an approval request waits for an answer, and return those that wait
        (:meth:`pending_approvals`; at once if some already do).

        For a host whose calls wait while a person elsewhere answers them: a server whose
        client waits on a call (``toolledger serve --approvals``, docs/frameworks.md), a
        web app that shows what waits. A request whose approver is still deciding does not
        count until the approver has said ``LATER``. Raises
        :class:`~engine.core.errors.SessionClosed` if the session closes first."""
        return await self._wait_for("wait for its approvals", self.pending_approvals)

    def pending_approvals(self) -> tuple[ApprovalRequest, ...]:
        """The approval requests waiting for an answer, in the order they were asked (not
        those whose approver is deciding right now)."""
        state = self.state
        requests = []
        for call_id in state.pending_approvals:
            if self._inflight.asking(call_id):
                continue
            view = state.calls[call_id]
            snapshot = state.tools.get(view.name)
            requests.append(ApprovalRequest(
                call_id=call_id, name=view.name, arguments=copy_json(view.arguments),
                reason=view.policy.reason if view.policy is not None else "",
                annotations=snapshot.annotations if snapshot is not None else Annotations(),
                origin=view.origin, parent_id=view.parent_id,
            ))
        return tuple(requests)

    # -- answering questions ---------------------------------------------------------------

    async def answer_question(self, question_id: str, action: Action = "accept",
                              content: Any = None, *, reason: str | None = None) -> None:
        """Answer a tool's pending question by its id (``"{call_id}#{n}"``, as
        :meth:`pending_questions` lists it): once per question.

        ``action`` is ``"accept"`` with ``content``, a dict of the form's fields (checked
        against the question's schema: :class:`~engine.core.errors.InvalidAnswer` names what
        does not fit, and nothing is recorded), ``"decline"`` or ``"cancel"``. A body waiting
        in this process goes on at once; after a restart, the call's body runs again at the
        next :meth:`resume` (if its tool is idempotent) and its question is answered from
        the log. A question that does not wait is
        :class:`~engine.core.errors.QuestionNotPending`."""
        self._check_open("answer its questions")
        given = Answer(action=action, content=content, reason=reason)
        questions.answer(self._recorder, self._inflight, question_id, given)
        await self._recorder.flush()

    async def wait_pending_questions(self) -> tuple[Question, ...]:
        """Wait until a tool's question waits for an answer, and return those that wait
        (:meth:`pending_questions`; at once if some already do): for a host that shows
        questions as they come. Raises :class:`~engine.core.errors.SessionClosed` if the
        session closes first."""
        return await self._wait_for("wait for its questions", self.pending_questions)

    async def _wait_for(self, doing: str, pending: Callable[[], tuple[W, ...]]) -> tuple[W, ...]:
        """What ``pending()`` lists, once it lists something: it changes only when the calls
        in flight do (an approver or asker that said ``LATER`` is such a change)."""
        while True:
            self._check_open(doing)
            found = pending()
            if found:
                return found
            await self._inflight.next_change()

    def pending_questions(self) -> tuple[Question, ...]:
        """The tools' questions waiting for an answer, in the order they were asked (not
        those whose asker is deciding right now)."""
        return questions.pending_questions(self._recorder, self._inflight)
