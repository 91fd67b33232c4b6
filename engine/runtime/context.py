"""What a running tool gets besides its arguments: a way to call other tools and to report
progress, scoped to its own call.

``ctx.execute_tool`` is step 1 of a nested call (DESIGN's "one call, in order"): it records
the request, in the parent's task, and carries it through the same steps as a model's call
(:func:`engine.runtime.calls.advance`, handed in by the step that runs the body, so that this module
does not import the one that imports it)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import trio

from events.results import ContentBlock, ToolResult, text
from events.types import (
    ProgramSuspended,
    ToolCallRequested,
    ToolProgress,
    ToolSnapshot,
    ToolsActivated,
)

from ..core.environment import Environment
from ..core.errors import CallNotFound
from ..core.lifecycle import CallStage
from ..core.jsonvalues import NotJson, copy_json, ensure_json, own_json, own_result
from ..core.limits import Limits, admit, json_size, result_size
from ..core.nested import NestedCalls, first_difference
from ..core.questions import Answer, AskedBefore
from ..core.toolcontext import CallOutcome, ToolContext
from ..core.tools import ToolCall
from . import questions, suspending
from .bodytasks import BodyTasks
from .endings import close_open, fail
from .inflight import InFlight
from .keeping import whole_result
from .progress import ProgressListener, listener_checked
from .recorder import Recorder


class Advance(Protocol):
    """:func:`engine.runtime.calls.advance`'s signature: how a ctx carries a nested call forward."""

    def __call__(self, env: Environment, recorder: Recorder, inflight: InFlight, call_id: str,
                 *, wait: bool, gate_only: bool = False) -> Awaitable[ToolResult | None]: ...

__all__ = ["CallContext", "CallOutcome", "ToolContext", "admitted", "refuse_unreadable"]

T = TypeVar("T")


def admitted(arguments: Any, limits: Limits) -> tuple[Any, ValueError | None]:
    """Step 1 for arguments a program hands over (a tool's ``ctx``, the host): a private
    JSON copy (``{}`` for ``None``), or a size marker if too large; ``(None, problem)`` if they
    are not JSON, for :func:`refuse_unreadable` once the request is recorded."""
    try:
        return admit(own_json({} if arguments is None else arguments), limits), None
    except ValueError as exc:
        return None, exc


def refuse_unreadable(recorder: Recorder, call_id: str, name: str,
                      problem: ValueError) -> ToolResult:
    """End a requested call whose arguments were not JSON (:func:`admitted`)."""
    return fail(recorder, call_id, "invalid_arguments",
                f"Invalid arguments for {name}: not JSON ({problem})",
                detail=problem.detail if isinstance(problem, NotJson) else None)


def _finite(name: str, value: Any) -> None:
    """Refuse a progress number that is not a finite int or float (``None`` passes)."""
    if value is None:
        return
    if type(value) not in (int, float):
        raise TypeError(f"report_progress({name}=...) takes a number (an int or a float), "
                        f"not {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"report_progress({name}=...) takes a finite number, not {value}")


def _streamed(content: Any) -> tuple[ContentBlock, ...]:
    """``report_progress(content=...)`` as the blocks an update records, copied: a string is
    one text block; anything else must be content blocks (``TypeError`` saying what to write
    otherwise)."""
    if isinstance(content, str):
        return (text(content),) if content else ()
    try:
        blocks = tuple(content)
    except TypeError:
        raise TypeError(f"report_progress(content=...) takes a string or a list of content "
                        f"blocks ([text('...')]), not {type(content).__name__}") from None
    if not blocks:
        return ()
    return own_result(ToolResult(content=blocks)).content  # checks the blocks, copies


class CallContext(ToolContext):
    """The runtime's :class:`~engine.core.toolcontext.ToolContext`: handed to
    ``execute(call, ctx)`` for one call, and valid only while that call runs. Made in the task
    that runs the body, just before it starts (:class:`~engine.runtime.bodytasks.BodyTasks`)."""

    def __init__(self, call: ToolCall, env: Environment, recorder: Recorder, inflight: InFlight,
                 advance: Advance) -> None:
        self._call = call
        self._env = env
        self._recorder = recorder
        self._inflight = inflight
        self._advance = advance
        self._nested: NestedCalls | None = None  # made at the first nested call
        self._asked: AskedBefore | None = None  # made at the first question
        self._tasks = BodyTasks()
        self._open = True
        #: the body recorded its state and stops (:meth:`suspend`)
        self.suspended = False

    @property
    def call_id(self) -> str:
        """The engine's id of the running call."""
        return self._call.call_id

    @property
    def session_id(self) -> str:
        """The session the call belongs to."""
        return self._recorder.session_id

    async def execute_tool(self, name: str, arguments: Any = None, *,
                           on_progress: ProgressListener | None = None) -> CallOutcome:
        """Run another tool as a nested call of this one.

        The nested call passes the same gate as the model's (availability, input validation,
        ``tool_call`` handlers, policy, approval) and the same ``tool_result`` handlers. It
        never raises for a tool failure: check ``outcome.is_error``. It raises only when the
        call is cancelled (and then the nested call is recorded as cancelled), or with what
        ``on_progress`` raised.

        ``on_progress`` hears the nested call's progress as it is recorded: a plain function
        called with each update (a :class:`~events.types.ToolProgress`: ``call_id`` names the
        nested call), synchronously, before the nested tool goes on. Pass
        :meth:`forward_progress` to report the updates as this call's own. If it raises, it
        hears nothing more, the nested call goes on, and its exception is raised here once
        the nested call has ended (docs/tools.md, "Progress").

        A body that runs again after a restart gets, for each request, the call its first run
        recorded with the same tool name and arguments, continued from where it was
        (:mod:`engine.core.nested`); a request that differs from a recorded call of the same tool
        waits until every other task the body started is blocked, and is then a ``mismatch``
        error outcome if that call is still unanswered, never the recorded call's result.
        """
        if not self._open:
            raise RuntimeError(
                f"call {self.call_id} has ended: a tool's ctx can only be used while the tool "
                f"runs (don't keep it in a background task)"
            )
        on_progress = listener_checked(on_progress, "execute_tool(on_progress=...)")
        call_id, refused = await self._request(name, arguments)
        if refused is not None:
            return refused
        # 2.-8., in this task: one frame between the body and the steps (engine.core.limits)
        inflight = self._inflight
        inflight.begin(call_id)
        if on_progress is not None:
            inflight.progress.listen(call_id, on_progress)
        try:
            ended = await self._advance(self._env, self._recorder, inflight, call_id, wait=True)
        finally:
            inflight.end(call_id)
            heard = None if on_progress is None else inflight.progress.unlisten(call_id)
        if heard is not None:
            raise heard  # the listener's own failure, now that the call has ended
        assert ended is not None
        return self._outcome(call_id, own_result(ended))

    async def _request(self, name: str, arguments: Any) -> tuple[str, CallOutcome | None]:
        """Step 1: the nested call a request is (recorded now, or by a first run of the
        body), and its outcome if it ends here (arguments that are not JSON, a mismatch)."""
        env, recorder = self._env, self._recorder
        arguments, problem = admitted(arguments, env.limits)
        name = str(name)
        nested = self._nested or self._nested_calls()
        new = nested.new_call()  # a first run of the body: every request is a new call
        recorded, differs_from = False, None
        if new is None:  # the log holds calls of this body unanswered: which one is it?
            match = nested.match(name, arguments, decide=False)
            if match is None:
                # another call of this tool is recorded unanswered: a sibling of this request
                # may be about to ask for it (engine.core.nested). Only the body's own tasks
                # can be that sibling: wait until every other one is blocked, then decide.
                await self._tasks.wait_blocked()
                match = nested.match(name, arguments, decide=True)
                assert match is not None
            new, recorded, differs_from = match.call_id, match.recorded, match.differs_from
        call_id = new
        if not recorded:
            recorder.record(ToolCallRequested(call_id=call_id, name=name, arguments=arguments,
                                              origin="nested", parent_id=self._call.call_id))
            if problem is not None:
                return call_id, self._outcome(
                    call_id, refuse_unreadable(recorder, call_id, name, problem))
            if differs_from is not None:
                return call_id, self._outcome(
                    call_id, self._mismatch(call_id, differs_from, arguments))
        return call_id, None

    async def nested_call(self, name: str, arguments: Any = None, *,
                          hold: bool = False) -> tuple[str, CallOutcome | None]:
        """:meth:`execute_tool`, returning the nested call's id too. With ``hold``, a call
        that waits for a person's approval is not waited for: ``(its id, None)`` is
        returned, and the call waits in the log (:meth:`continue_nested` takes it up)."""
        call_id, refused = await self._request(name, arguments)
        if refused is not None:
            return call_id, refused
        return call_id, await self.continue_nested(call_id, hold=hold)

    async def continue_nested(self, call_id: str, *, hold: bool = False) -> CallOutcome | None:
        """Carry the recorded nested call ``call_id`` from where the log says it is to its
        end (2.-8.), and its outcome; with ``hold``, ``None`` while it waits for a person's
        approval."""
        inflight = self._inflight
        inflight.begin(call_id)
        try:
            ended = await self._advance(self._env, self._recorder, inflight, call_id,
                                        wait=not hold)
        finally:
            inflight.end(call_id)
        return None if ended is None else self._outcome(call_id, own_result(ended))

    def _outcome(self, call_id: str, result: ToolResult) -> CallOutcome:
        return CallOutcome(call_id=call_id, result=result,
                           status=self._recorder.projection.live_calls[call_id].status)

    def _mismatch(self, call_id: str, recorded_id: str, arguments: Any) -> ToolResult:
        """End a request of a body that runs again, which differs from what its first run
        asked that tool: neither the recorded result nor a new run answers it."""
        parent = self._call
        recorded = self._recorder.projection.live_calls[recorded_id]
        name = recorded.name
        return fail(
            self._recorder, call_id, "mismatch",
            f"{name} was not run: when {parent.name} ({parent.call_id}) first ran, it asked "
            f"{name} for other arguments (call {recorded_id}), "
            f"{first_difference(recorded.requested_arguments, arguments)}. A body that runs "
            f"again after a restart must ask for the same nested calls; a recorded result "
            f"answers only the same call, and this one may repeat what {recorded_id} did",
        )

    @property
    def tools(self) -> Mapping[str, ToolSnapshot]:
        """The session's registered tools (as their registration recorded them), by name."""
        return self._recorder.projection.tools

    @property
    def active_tools(self) -> frozenset[str]:
        """The names of the tools declared to the model now."""
        return self._recorder.projection.active_tools

    def activate(self, names: Iterable[str]) -> tuple[str, ...]:
        """Add tools to the active set for the model's next request (recorded as
        ``tools_activated`` with this call's id), and return the names that were not active
        yet. A tool may activate any registered tool but a hidden one (those wait for the
        host); another name is a ``ValueError`` and nothing changes. This is how the search
        tool (:func:`engine.core.search.search_tool`) brings deferred tools in."""
        if isinstance(names, str):
            raise TypeError("activate() takes a list of tool names, not one string")
        if not self._open:
            raise RuntimeError(f"call {self.call_id} has ended: a tool's ctx can only be used "
                               f"while the tool runs")
        wanted = tuple(dict.fromkeys(str(name) for name in names))
        tools = self.tools
        if refused := [n for n in wanted if n not in tools or tools[n].exposure == "hidden"]:
            raise ValueError(f"activate: {refused[0]!r} is not a registered tool that a tool "
                             f"may activate (hidden tools wait for the host's "
                             f"set_active_tools or activate)")
        active = self.active_tools
        added = tuple(name for name in wanted if name not in active)
        if added:
            self._recorder.record(ToolsActivated(names=added, call_id=self.call_id))
        return added

    def report_progress(self, message: str | None = None, data: Any = None, *,
                        progress: float | None = None, total: float | None = None,
                        content: str | Iterable[ContentBlock] = ()) -> None:
        """Record a progress update. Updates after the tool returned are dropped.

        ``message`` is text or ``None``; ``data`` any JSON value (``ValueError`` otherwise);
        each may take up to the session's result size limit (bytes of JSON, as a result is
        measured). ``progress`` and ``total`` say how far the tool is as numbers (finite ints
        or floats), as MCP's progress notifications do: ``progress`` should grow with each
        update, ``total`` is what it grows to, if known (docs/mcp.md says how they are
        served). ``content`` streams output while the tool runs: content blocks, as a
        result's (``[text("line\\n")]``), or a string for one text block; up to the result
        size limit too. Whoever watches sees it as it comes; the model never does, it reads
        only the result. The update is handed at once to whoever listens: the session's
        progress handlers, and this call's caller if it asked (``execute_tool(...,
        on_progress=...)``, ``session.call_tool(..., on_progress=...)``)."""
        self._report(message, data, None, progress, total, content)

    def forward_progress(self, update: ToolProgress) -> None:
        """Report a nested call's progress update as this call's own: recorded as this call's
        ``tool_progress`` with ``source`` naming the call that first reported it (the update's
        own ``source`` if it was forwarded already), and handed on like any update of this
        call. Made to be passed as ``execute_tool(..., on_progress=ctx.forward_progress)``, as
        the seed's tools pass ``onUpdate`` down. An update that is not from a call nested
        under this one is a ``ValueError``, and nothing is recorded."""
        if not isinstance(update, ToolProgress):
            raise TypeError(f"forward_progress() takes a progress update (ToolProgress), as "
                            f"on_progress hands it, not {type(update).__name__}")
        source = update.source if update.source is not None else update.call_id
        if not (isinstance(source, str) and source.startswith(f"{self.call_id}/")
                and source in self._recorder.projection.live_calls):
            raise ValueError(f"call {self.call_id} can forward the progress of its own nested "
                             f"calls only, not of {source!r}: pass forward_progress as "
                             f"on_progress of the execute_tool that makes the call")
        self._report(update.message, update.data, source, update.progress, update.total,
                     update.content)

    def _report(self, message: Any, data: Any, source: str | None, progress: Any,
                total: Any, content: Any) -> None:
        if message is not None and not isinstance(message, str):
            raise TypeError(f"a progress message is text, not {type(message).__name__}")
        _finite("progress", progress)
        _finite("total", total)
        ensure_json(data)
        blocks = _streamed(content)
        limit = self._env.limits.max_result_bytes
        if data is not None and json_size(data) > limit:
            raise ValueError(f"progress data over the size limit of {limit} bytes")
        if message is not None and json_size(message) > limit:
            raise ValueError(f"a progress message over the size limit of {limit} bytes")
        if blocks and result_size(ToolResult(content=blocks)) > limit:
            raise ValueError(f"progress content over the size limit of {limit} bytes: stream "
                             f"it in smaller pieces, one update each")
        if self._open:
            update = ToolProgress(call_id=self.call_id, message=message, data=copy_json(data),
                                  source=source, progress=progress, total=total,
                                  content=blocks)
            self._recorder.record(update)
            self._inflight.progress.reported(update)

    async def whole_result(self, call_id: str) -> ToolResult:
        """The whole result of a call of this session that completed, also one the model
        read cut: its record's, or the artifact the store keeps
        (:class:`~events.errors.ArtifactError` if that is missing or changed).
        :class:`~engine.core.errors.CallNotFound` for a call that has no completed result."""
        whole = await whole_result(self._recorder, str(call_id))
        if whole is None:
            raise CallNotFound(f"no call {call_id!r} of this session has completed: give the "
                               f"id a cut's marker names")
        return own_result(whole)

    async def ask(self, message: str, schema: Any) -> Answer:
        """Ask the person something, and wait for the answer (docs/tools.md, "Asking the
        person").

        ``message`` is what the person reads; ``schema`` the form an answer fills in: a flat
        object schema, as MCP's elicitation allows (:mod:`engine.core.forms`; anything else is
        a :class:`~engine.core.schemas.SchemaError` saying what is allowed). The session's
        asker answers (``Session.open(..., asker=...)``): an :class:`~engine.core.questions.Answer`
        that accepts with ``content`` (checked against the form), declines or cancels. The
        question and its answer are recorded (``question_asked``, ``question_answered``);
        the model never sees them. With no asker every question is declined at once.

        An asker that answers ``LATER`` leaves the question pending: this waits, the prompt
        returns ``paused`` (``session.pending_questions()``), and the host answers with
        ``session.answer_question``. A body that runs again after a restart gets the
        recorded answer of the same question (same message and form) without asking
        again."""
        if not self._open:
            raise RuntimeError(f"call {self.call_id} has ended: a tool's ctx can only be used "
                               f"while the tool runs")
        if self._asked is None:
            # what the log holds of this call's questions (a body that runs again), taken
            # before this run asks anything
            self._asked = AskedBefore(
                self._recorder.projection.live_calls[self.call_id].questions)
        return await questions.ask(self._env, self._recorder, self._inflight, self._call,
                                   self._asked, message, schema)

    async def run_in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in one of trio's worker threads (in a copy of this task's
        context variables), for blocking code; a sync typed tool's body runs here.

        The wait is abandoned when the call is cancelled (its timeout, the prompt's
        cancellation, the session closing): the call ends at once, as any call does, and the
        thread runs on until ``function`` returns by itself, which Python cannot stop; what
        it returns or raises then is dropped. So a sync tool's side effects may happen after
        its call was recorded as timed out or cancelled (docs/tools.md, "Sync tools")."""
        return await trio.to_thread.run_sync(function, *args, abandon_on_cancel=True)

    # -- a body that stops with its state recorded (the code tool's program) ------------------

    @property
    def may_suspend(self) -> bool:
        """Whether this call's body may stop with its state recorded (:meth:`suspend`): a
        model's call in a session whose approver may answer later (a paused session resumes
        it)."""
        return self._call.origin == "model" and self._env.may_defer

    async def suspend(self, event: ProgramSuspended) -> None:
        """Record and write the state the body stops with; it then raises
        :class:`~engine.core.toolcontext.BodySuspended`, and the call stays running in the
        log for the next ``resume()`` (which runs the body again, to go on from it)."""
        if not self.may_suspend or event.call_id != self.call_id:
            raise RuntimeError(f"call {self.call_id} cannot stop with its state recorded: only "
                               f"a model's call may, in a session whose approver may answer "
                               f"later")
        self._recorder.record(event)
        await self._recorder.flush()
        self.suspended = True

    def last_suspension(
        self,
    ) -> tuple[ProgramSuspended, tuple[str, ...], Mapping[str, str]] | None:
        """The state this call's body recorded when it last stopped, with the nested calls
        requested before it and their tools' names (:mod:`engine.runtime.suspending`)."""
        return suspending.last_suspension(self._recorder, self.call_id)

    def go_on_from(self, taken: Iterable[str]) -> None:
        """This run of the body goes on from a recorded state, to which the nested calls
        ``taken`` belong: no request is matched to them (:meth:`continue_nested` takes them
        up by id). Call it before the first nested call."""
        self._nested = suspending.nested_after(self._recorder, self.call_id, taken)

    def awaits_approval(self, call_id: str) -> bool:
        """Whether the call ``call_id`` waits for an answer to its approval request."""
        call = self._recorder.projection.live_calls.get(call_id)
        return call is not None and call.stage is CallStage.AWAITING

    def close_nested(self, call_id: str, reason: str) -> None:
        """Cancel the nested call ``call_id`` if it is still open (one the body no longer
        waits for), and the calls below it."""
        if call_id.startswith(f"{self.call_id}/"):
            close_open(self._recorder, call_id, reason)

    def close(self) -> tuple[str, ...]:
        """The call's body has returned: nothing more may be recorded through this ctx.
        Returns the nested calls the log held for it that this run of the body did not ask
        for again (:meth:`engine.core.nested.NestedCalls.unanswered`)."""
        self._open = False
        if self._nested is None:  # the body asked for nothing: none of the log's is answered
            return self._recorder.projection.children(self._call.call_id)
        return self._nested.unanswered()

    def _nested_calls(self) -> NestedCalls:
        if self._nested is None:
            # what the log holds under this call (a body that runs again after a restart),
            # taken before this run asks for anything
            projection = self._recorder.projection
            calls = projection.live_calls
            self._nested = NestedCalls(self.call_id, (
                (child, calls[child].name, calls[child].requested_arguments)
                for child in projection.children(self.call_id)))
        return self._nested
