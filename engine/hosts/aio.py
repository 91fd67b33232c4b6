"""asyncio hosts: a session driven from asyncio code, through trio's guest mode.

A FastAPI or Starlette application runs on asyncio; the engine runs on trio. Calling
:meth:`engine.Session.prompt` from a coroutine fails ("must be called from async context"),
and running trio in a thread loses the two things a host needs most: cancelling the request
must cancel the prompt, and the request's context variables must reach the handlers and
tools. This module keeps both by running trio *on the host's own loop*
(:func:`trio.lowlevel.start_guest_run`): trio's scheduler takes turns with asyncio's on one
thread, so a trio task and an asyncio task never run at the same time, and plain attribute
reads (``session.transcript``, ``session.calls``) need no lock.

:class:`Session` mirrors :class:`engine.Session`: ``async with Session.open(store, ...)``
opens it, ``await session.prompt(text)``, ``resume()``, ``resolve_approval()``,
``call_tool()``, ``resume_call()``, ``set_active_tools()``, ``activate()``,
``set_system_prompt()``, ``register()``; ``async for record in session.follow()`` follows
its records, ``async with session.deltas() as stream`` a streaming model's deltas, and
``async with session.in_trio(enter)`` holds a trio context manager built on the session. What
crosses the bridge:

- **Cancellation, inward.** Each call runs in a trio task under its own cancel scope.
  Cancelling the asyncio task that awaits it cancels that scope, then waits (whatever more
  cancellations arrive) until the trio side has closed every open call and recorded it as
  cancelled, exactly as a trio host's cancel scope would; only then does ``CancelledError``
  propagate. ``asyncio.timeout`` and a client that disconnects work the same way.
- **Errors, outward.** What the trio side raises is raised to the asyncio caller: the same
  exception object.
- **Context, inward.** A call's trio task starts in a copy of the asyncio caller's context,
  so the model, the ``tool_call`` handlers and the approver see the caller's context
  variables, and tool bodies a copy of them, as under trio (docs/hosts.md).

**One guest run per event loop.** trio allows one run per thread, so the sessions open on a
loop share one guest run: the first to open starts it, the last to close ends it (a host
loop must not stop under a live guest run). A guest run per call is impossible (a session's
nursery lives across calls); one per session would allow only one open session per loop.
The cost of the choice: opening the first session on an idle loop starts trio (a few
milliseconds: ``python -m benchmarks.hosts``), and while trio waits for a timeout it parks
one worker thread in its I/O wait, as guest mode does. The bridge is :mod:`engine.hosts.guest`.

The model runs on the host's loop: each request is an asyncio task
(:class:`~engine.hosts.guest.HostLoopModel`), so an SDK client the host opened with ``async
with`` keeps connections the host can close. The tools, handlers and approver run in trio
tasks: they must be trio code, or code that works under both (httpx, anyio). A tool that needs
the host's asyncio resources (a database pool) awaits them through :func:`from_asyncio`.
:func:`engine.mcp.mount` takes this session too, held open in its trio run for an asyncio
block by :meth:`Session.in_trio`.
"""
from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, TypeVar

import trio

from events.stores import EventStore
from events.types import Record, ToolSnapshot

from ..core.approvals import ApprovalRequest
from ..core.handlers import ToolCallHandler, ToolResultHandler
from ..core.questions import Action, Answer, Asker, Question
from ..core.reducers import CallView, Projection, TranscriptView
from ..core.toolcontext import CallOutcome
from ..core.tools import ToolSpec
from ..models import ModelDelta
from ..runtime import session as trio_session
from ..runtime.progress import ProgressListener
from ..runtime.session import PromptResult, closed_error
from .guest import (
    Bridge,
    Held,
    HostLoopModel,
    Job,
    acquire,
    from_asyncio,
    release,
    wait_through_cancellation,
)

__all__ = ["Session", "from_asyncio"]

T = TypeVar("T")


class Session:
    """:class:`engine.Session`, driven from asyncio. Open it with :meth:`Session.open`; the
    reading side (``state``, ``transcript``, ``calls``, ``records``, ``pending_approvals()``)
    is the trio session's, the calls that run the session are awaited from asyncio."""

    def __init__(self, bridge: Bridge, session: trio_session.Session,
                 closed: asyncio.Future[None]) -> None:
        self._bridge = bridge
        self._session = session
        self._closed = closed  # done once the trio session's block has ended
        #: the trio managers held open for asyncio blocks (:meth:`in_trio`)
        self._holding: set[Held[Any]] = set()

    @classmethod
    @asynccontextmanager
    async def open(cls, store: EventStore, **options: Any) -> AsyncIterator[Session]:
        """Open a session on ``store`` with :meth:`engine.Session.open`'s arguments
        (``model``, ``tools``, ``approver``, ``session_id``, ...), from asyncio code.

        The session closes as under trio: a prompt or a host call another asyncio task still
        awaits when the block ends is stopped with it, raises ``SessionClosed`` (a
        ``RuntimeError``), and leaves its calls open in the log for a reopened session (a
        trio task outside the block would see the same)."""
        if options.get("model") is not None:
            options = {**options, "model": HostLoopModel(options["model"])}
        bridge = await acquire()
        try:
            loop = bridge.loop
            opened: asyncio.Future[Session] = loop.create_future()
            closed: asyncio.Future[None] = loop.create_future()
            close = trio.Event()

            async def own() -> None:
                """The trio task that holds the session open until ``close``."""
                hosted: Session | None = None
                try:
                    async with trio_session.Session.open(store, **options) as session:
                        hosted = cls(bridge, session, closed)
                        opened.set_result(hosted)
                        await close.wait()
                except BaseException as exc:
                    (closed if opened.done() else opened).set_exception(exc)
                    if isinstance(exc, trio.Cancelled):
                        raise
                finally:
                    if not closed.done():
                        closed.set_result(None)
                    if hosted is not None:  # a manager still held lets go with the session
                        for held in hosted._holding:
                            held.leave.set()

            bridge.spawn(own)
            try:
                yield await wait_through_cancellation(opened)
            finally:
                bridge.soon(close.set)
                await wait_through_cancellation(closed)
        finally:
            await release(bridge)

    @asynccontextmanager
    async def in_trio(
        self, enter: Callable[[trio_session.Session], AbstractAsyncContextManager[T]],
    ) -> AsyncIterator[T]:
        """Hold a trio async context manager of the session's open for this asyncio block:
        ``enter(session)`` is called with the trio session, and the manager it returns is
        entered and exited in one trio task on the host's loop, the block's value being what
        it gives. :func:`engine.mcp.mount` goes through here when given this session; any
        other trio code built on a session can be held the same way::

            async with session.in_trio(lambda trio_session: mount(trio_session, server)):
                await session.prompt("...")

        What crosses is what crosses for a call: the trio task starts in a copy of this
        task's context; cancelling this task while the manager enters or exits cancels that
        half and waits for it to end; what the manager raises is raised here, as it is, and
        what the block raises is handed to the manager's exit (which may swallow it). A
        manager still held when the session closes is exited then, as if its block had
        ended."""
        if self._closed.done():
            raise closed_error("hold a trio context manager in it")
        held: Held[T] = Held(lambda: enter(self._session), self._bridge.loop)
        self._holding.add(held)
        try:
            async with self._bridge.hold(held) as value:
                yield value
        finally:
            self._holding.discard(held)

    async def _run(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` in a trio task of the bridge's, in a copy of this task's context;
        cancelling this task cancels it and waits for it to end. The end of the session's
        block stops it as it stops a trio task's call from outside the block (its asyncio
        caller is outside the block's trio task): a prompt or a host call raises, its calls
        left open; anything else refuses a closed session."""
        future: asyncio.Future[Any] = self._bridge.loop.create_future()
        job: Job[T] = Job(fn, future)
        self._bridge.spawn(job.run, on_error=job.fail)
        result: T = await self._bridge.answer(future, job.scope)
        return result

    async def _change(self, fn: Callable[[], Awaitable[T]]) -> T:
        """:meth:`_run` for what changes the session. Once it has closed (its guest run may
        have ended with it) nothing is started: the trio session's refusal is raised here."""
        if self._closed.done():
            raise closed_error("go on")
        return await self._run(fn)

    # -- what the host reads: the trio session's --------------------------------------------

    @property
    def session_id(self) -> str:
        """This session's id in the store."""
        return self._session.session_id

    @property
    def state(self) -> Projection:
        """The session's derived state (read-only views)."""
        return self._session.state

    @property
    def transcript(self) -> TranscriptView:
        """What the model saw."""
        return self._session.transcript

    @property
    def calls(self) -> Mapping[str, CallView]:
        """The call tree: every call by id, nested ones included."""
        return self._session.calls

    @property
    def specs(self) -> Mapping[str, ToolSpec]:
        """The tools this process can run, by name: their specs, code included (read-only)."""
        return self._session.specs

    @property
    def paused(self) -> bool:
        """Whether the last prompt or resume paused for approvals."""
        return self._session.paused

    @property
    def records(self) -> Sequence[Record]:
        """The session's log as recorded so far."""
        return self._session.records

    def pending_approvals(self) -> tuple[ApprovalRequest, ...]:
        """The approval requests waiting for an answer."""
        return self._session.pending_approvals()

    async def wait_pending_approvals(self) -> tuple[ApprovalRequest, ...]:
        """:meth:`engine.Session.wait_pending_approvals`, awaited from asyncio."""
        return await self._change(self._session.wait_pending_approvals)

    def pending_questions(self) -> tuple[Question, ...]:
        """The tools' questions waiting for an answer."""
        return self._session.pending_questions()

    async def wait_pending_questions(self) -> tuple[Question, ...]:
        """:meth:`engine.Session.wait_pending_questions`, awaited from asyncio."""
        return await self._change(self._session.wait_pending_questions)

    def declared_tools(self) -> tuple[ToolSnapshot, ...]:
        """The tools declared to the model now."""
        return self._session.declared_tools()

    def on_tool_call(self, handler: ToolCallHandler) -> ToolCallHandler:
        """Add a ``tool_call`` handler (it runs in trio: plain or trio code)."""
        return self._session.on_tool_call(handler)

    def on_tool_result(self, handler: ToolResultHandler) -> ToolResultHandler:
        """Add a ``tool_result`` handler (it runs in trio: plain or trio code)."""
        return self._session.on_tool_result(handler)

    def on_progress(self, handler: ProgressListener) -> ProgressListener:
        """:meth:`engine.Session.on_progress`: hear every call's progress as it is recorded.
        The handler is called in the trio task of the tool that reported it, on the loop's
        own thread (guest mode), so it may hand the update to asyncio code directly
        (``queue.put_nowait``)."""
        return self._session.on_progress(handler)

    # -- what runs the session ----------------------------------------------------------------

    async def prompt(self, text: str) -> PromptResult:
        """:meth:`engine.Session.prompt`, awaited from asyncio."""
        return await self._change(lambda: self._session.prompt(text))

    async def resume(self) -> PromptResult:
        """:meth:`engine.Session.resume`, awaited from asyncio."""
        return await self._change(self._session.resume)

    async def resolve_approval(
        self, call_id: str, granted: bool | None = None,
        scope: Literal["once", "session"] = "once", *, arguments: Any = None,
        reason: str | None = None,
    ) -> None:
        """:meth:`engine.Session.resolve_approval`, awaited from asyncio."""
        await self._change(lambda: self._session.resolve_approval(
            call_id, granted, scope, arguments=arguments, reason=reason))

    async def answer_question(self, question_id: str, action: Action = "accept",
                              content: Any = None, *, reason: str | None = None) -> None:
        """:meth:`engine.Session.answer_question`, awaited from asyncio."""
        await self._change(lambda: self._session.answer_question(
            question_id, action, content, reason=reason))

    async def call_tool(self, name: str, arguments: Any = None, *,
                        on_progress: ProgressListener | None = None,
                        asker: Asker | None = None) -> CallOutcome:
        """:meth:`engine.Session.call_tool`, awaited from asyncio: a host call, governed and
        recorded like a model's. Cancelling the awaiting task ends the call as cancelled.
        ``on_progress`` is called as :meth:`on_progress`'s handler is, with this call's
        updates. ``asker`` answers the call's questions, an asyncio coroutine function (or a
        plain one): it runs as an asyncio task (:func:`from_asyncio`)."""
        hop = None if asker is None else _on_asyncio(asker)
        return await self._change(lambda: self._session.call_tool(
            name, arguments, on_progress=on_progress, asker=hop))

    async def resume_call(self, call_id: str) -> CallOutcome:
        """:meth:`engine.Session.resume_call`, awaited from asyncio."""
        return await self._change(lambda: self._session.resume_call(call_id))

    async def set_active_tools(self, names: Iterable[str]) -> None:
        """:meth:`engine.Session.set_active_tools`, awaited from asyncio."""
        wanted = _names(names)
        await self._change(lambda: self._session.set_active_tools(wanted))

    async def activate(self, names: Iterable[str]) -> None:
        """:meth:`engine.Session.activate`, awaited from asyncio."""
        wanted = _names(names)
        await self._change(lambda: self._session.activate(wanted))

    async def set_system_prompt(self, text: str | None) -> None:
        """:meth:`engine.Session.set_system_prompt`, awaited from asyncio."""
        await self._change(lambda: self._session.set_system_prompt(text))

    async def register(self, spec: ToolSpec) -> None:
        """:meth:`engine.Session.register`, awaited from asyncio."""
        await self._change(lambda: self._session.register(spec))

    async def follow(self, after: int = 0) -> AsyncIterator[Record]:
        """The session's records (``seq > after``), then each new one as it is recorded,
        until the session closes; like :meth:`engine.Session.follow`, a slow reader misses
        nothing and slows nobody down."""
        index = after
        while True:
            ended = self._closed.done()  # then every record it wrote is in what follows
            history = self._session.records
            while index < len(history):
                yield history[index]
                index += 1
            if ended or not await self._run(functools.partial(self._next_record, index)):
                return  # the session has closed, and every record it wrote was read

    @asynccontextmanager
    async def deltas(self) -> AsyncIterator[AsyncIterator[ModelDelta]]:
        """:meth:`engine.Session.deltas`, from asyncio: the pieces of the model's messages as
        they stream in, published while the block is open::

            async with session.deltas() as stream:
                async for delta in stream:
                    print(delta.text, end="")

        A trio task holds the subscription for the block and hands each delta to an asyncio
        queue (publishing still never waits); iteration ends when the session closes, and
        leaving the block ends the subscription."""
        queue: asyncio.Queue[ModelDelta | None] = asyncio.Queue()
        if self._closed.done():  # nothing more is published: a stream that has ended
            queue.put_nowait(None)
            yield _drained(queue)
            return
        subscribed: asyncio.Future[None] = self._bridge.loop.create_future()

        async def forward() -> None:
            try:
                async with self._session.deltas() as stream:
                    subscribed.set_result(None)
                    async for delta in stream:
                        queue.put_nowait(delta)
            finally:
                queue.put_nowait(None)  # the end, however it came

        future: asyncio.Future[Any] = self._bridge.loop.create_future()
        job: Job[None] = Job(forward, future)
        self._bridge.spawn(job.run, on_error=job.fail)
        try:
            await asyncio.wait((subscribed, future), return_when=asyncio.FIRST_COMPLETED)
            if not subscribed.done():
                future.result()  # it could not subscribe: why
            yield _drained(queue)
        finally:
            if not future.done():  # still subscribed (else the run may have ended)
                self._bridge.soon(job.scope.cancel)
            await wait_through_cancellation(future)

    async def _next_record(self, index: int) -> bool:
        """Wait in trio until the session holds a record past ``index`` (``True``) or has
        closed (``False``)."""
        records = self._session.follow(index)
        try:
            async for _ in records:
                return True
            return False
        finally:
            if isinstance(records, AsyncGenerator):
                await records.aclose()


def _names(names: Iterable[str]) -> Iterable[str]:
    """``names`` as a list, taken in the caller's task; one string stays one string, for the
    trio session to refuse with its message."""
    return names if isinstance(names, str) else list(names)


async def _drained(queue: asyncio.Queue[ModelDelta | None]) -> AsyncIterator[ModelDelta]:
    while (delta := await queue.get()) is not None:
        yield delta


def _on_asyncio(asker: Asker) -> Asker:
    """``asker`` (asyncio code) as an asker the trio side awaits: each question is answered
    in an asyncio task on the host's loop."""

    async def answer(question: Question) -> Any:
        reply = asker(question)
        return await reply if inspect.isawaitable(reply) else reply

    async def hop(question: Question) -> Answer | Any:
        return await from_asyncio(answer, question)

    return hop
