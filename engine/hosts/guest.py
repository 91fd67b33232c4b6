"""trio's guest mode on an asyncio loop: the bridge under :mod:`engine.hosts.aio`.

trio allows one run per thread, so every session open on an asyncio loop shares one guest run
(:func:`trio.lowlevel.start_guest_run`): :func:`acquire` starts it for the first session
opened, :func:`release` ends it after the last one closed (a host loop must not stop under a
live guest run). trio's ticks run as the loop's callbacks, on its thread: a trio task and an
asyncio task never run at the same time, so the trio side resolves asyncio futures directly,
and the asyncio side reaches into trio only through the run's token (``run_sync_soon``, which
also wakes trio when it waits).

A :class:`Job` is one call from asyncio into trio: a trio task, started in a copy of the
asyncio caller's context, under a cancel scope the caller cancels when it is cancelled, its
outcome (a value, the exception itself, or :data:`CANCELLED`) delivered to an asyncio future.
A :class:`Held` is a trio async context manager held open for an asyncio block the same way:
entered and exited in one trio task, each half's outcome delivered to a future of its own.
:func:`from_asyncio` is the way back: trio code awaiting an asyncio coroutine on the same
loop. :class:`HostLoopModel` takes that way for every model request: the host's model
(and the SDK client under it, with its pooled connections) lives on asyncio.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Generic, TypeVar

import attrs
import trio

from ..core.errors import SessionClosed
from ..models import Model, ModelDelta, ModelInfo, ModelMessage, ModelRequest, model_info

__all__ = ["CANCELLED", "Bridge", "Held", "HostLoopModel", "Job", "acquire", "from_asyncio",
           "release", "wait_through_cancellation"]

T = TypeVar("T")


class Cancelled:
    """The outcome of a job whose own cancel scope (the asyncio caller's cancellation) ended
    it."""


CANCELLED = Cancelled()


class Job(Generic[T]):
    """One call from asyncio into trio: ``fn`` in a trio task, under a cancel scope the
    asyncio side cancels, its outcome delivered to an asyncio future (on the loop's thread:
    guest ticks run as the loop's callbacks)."""

    def __init__(self, fn: Callable[[], Awaitable[T]], future: asyncio.Future[Any]) -> None:
        self.fn = fn
        self.future = future
        self.scope = trio.CancelScope()

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)

    async def run(self) -> None:
        try:
            with self.scope:
                value: Any = await self.fn()
            if self.scope.cancelled_caught:
                value = CANCELLED
        except trio.Cancelled:
            # cancelled from outside the job (the guest run is ending): the caller sees a
            # cancellation, and trio's own goes on
            self.fail(asyncio.CancelledError())
            raise
        except BaseException as exc:  # the caller's error, not the bridge's
            self.fail(exc)
        else:
            if not self.future.done():
                self.future.set_result(value)


class Held(Generic[T]):
    """A trio async context manager held open for an asyncio block: one trio task enters the
    manager ``enter()`` makes, hands its value to ``entered``, waits until the block has
    ended (``leave``), and exits it with what the block raised (``raised``), handing whether
    the manager swallowed that to ``exited``. Entering and exiting in one task, under one
    cancel scope the asyncio side cancels when it is cancelled, is what trio asks of a
    manager that opens a nursery or a cancel scope."""

    def __init__(self, enter: Callable[[], AbstractAsyncContextManager[T]],
                 loop: asyncio.AbstractEventLoop) -> None:
        self.enter = enter
        self.entered: asyncio.Future[Any] = loop.create_future()
        self.exited: asyncio.Future[Any] = loop.create_future()
        self.leave = trio.Event()
        self.raised: BaseException | None = None
        self.scope = trio.CancelScope()

    def fail(self, exc: BaseException) -> None:
        """The outcome of whichever half is under way: ``exc``."""
        future = self.exited if self.entered.done() else self.entered
        if not future.done():
            future.set_exception(exc)

    async def run(self) -> None:
        try:
            with self.scope:
                manager = self.enter()
                self.entered.set_result(await manager.__aenter__())
                await self.leave.wait()
                raised = self.raised
                swallowed = await manager.__aexit__(
                    None if raised is None else type(raised), raised,
                    None if raised is None else raised.__traceback__)
                self.exited.set_result(bool(swallowed))
            if self.scope.cancelled_caught:
                for future in (self.entered, self.exited):
                    if not future.done():
                        future.set_result(CANCELLED)
        except trio.Cancelled:  # the guest run is ending: see Job.run
            self.fail(asyncio.CancelledError())
            raise
        except BaseException as exc:  # the manager's own error, the caller's to see
            self.fail(exc)


class Bridge:
    """The guest run on one asyncio loop: started by the first session opened on it, ended
    by the last one closed."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.users = 0
        #: the last session closed: a session opened now waits for this run to end
        self.closing = False
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self.ready: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[None] = loop.create_future()
        self.stop: trio.Event | None = None

    def start(self) -> None:
        trio.lowlevel.start_guest_run(
            self._main,
            run_sync_soon_threadsafe=self.loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=self.loop.call_soon,
            done_callback=self._done,
            host_uses_signal_set_wakeup_fd=True,  # asyncio's loop does
        )

    async def _main(self) -> None:
        self.stop = trio.Event()
        self.token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self.ready.set_result(None)
            await self.stop.wait()
        self.nursery = None

    def _done(self, outcome: Any) -> None:
        if BRIDGES.get(self.loop) is self:
            del BRIDGES[self.loop]
        try:
            outcome.unwrap()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            self.finished.set_exception(exc)
        else:
            self.finished.set_result(None)

    def spawn(self, fn: Callable[[], Awaitable[None]],
              on_error: Callable[[BaseException], None] | None = None) -> None:
        """Start ``fn`` in a task of the bridge's nursery, in a copy of the calling asyncio
        task's context. Called from asyncio code."""
        assert self.token is not None
        context = contextvars.copy_context()

        def start() -> None:
            target = self.nursery
            try:
                if target is None:
                    raise SessionClosed("the session is closed")
                context.run(target.start_soon, fn)
            except RuntimeError as exc:  # a closed nursery: tell the caller, not trio
                if on_error is None:
                    raise
                on_error(exc)

        self.token.run_sync_soon(start)

    def soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` in trio soon (waking it if it waits): how asyncio code sets a trio
        event or cancels a trio scope."""
        assert self.token is not None
        self.token.run_sync_soon(fn)

    async def answer(self, future: asyncio.Future[Any], scope: trio.CancelScope) -> Any:
        """What the trio side hands ``future`` (a :class:`Job`'s, a :class:`Held`'s), awaited
        from asyncio: cancelling the awaiting task meanwhile cancels ``scope`` and waits for
        the trio side to answer before ``CancelledError`` goes on."""
        try:
            value = await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done():  # the trio side answered as the cancellation came
                raise
            self.soon(scope.cancel)
            await wait_through_cancellation(future)
            raise
        if value is CANCELLED:  # cancelled by the caller's cancellation: unreachable above
            raise asyncio.CancelledError()
        return value

    @asynccontextmanager
    async def hold(self, held: Held[T]) -> AsyncIterator[T]:
        """Hold ``held``'s manager open for this asyncio block (see :class:`Held`)."""
        self.spawn(held.run, on_error=held.fail)
        value: T = await self.answer(held.entered, held.scope)
        try:
            yield value
        except BaseException as exc:
            held.raised = exc
            if not await self._left(held):
                raise
        else:
            await self._left(held)

    async def _left(self, held: Held[Any]) -> bool:
        """Let ``held``'s manager exit, and wait for it: whether it swallowed what the block
        raised."""
        if not held.exited.done():  # else the session closed, and the manager exited with it
            self.soon(held.leave.set)
        swallowed: bool = await self.answer(held.exited, held.scope)
        return swallowed


#: the guest run of each loop that has one
BRIDGES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Bridge] = (
    weakref.WeakKeyDictionary())


async def acquire() -> Bridge:
    """The running loop's guest run, started if need be; :func:`release` it after."""
    loop = asyncio.get_running_loop()
    while (bridge := BRIDGES.get(loop)) is not None and bridge.closing:
        await asyncio.shield(bridge.finished)  # the last one is ending: start anew after it
    if bridge is None:
        bridge = Bridge(loop)
        BRIDGES[loop] = bridge
        try:
            bridge.start()
        except RuntimeError as exc:
            del BRIDGES[loop]
            raise RuntimeError(
                f"engine.hosts.aio could not start trio on this asyncio loop ({exc}): another trio "
                f"run is active on this thread; use engine.Session directly inside trio"
            ) from exc
    bridge.users += 1
    try:
        await asyncio.shield(bridge.ready)
    except BaseException:
        await release(bridge)
        raise
    return bridge


async def release(bridge: Bridge) -> None:
    """Let go of ``bridge``: the last user ends its guest run and waits for the end."""
    bridge.users -= 1
    if bridge.users:
        return
    bridge.closing = True
    if bridge.ready.done() and not bridge.ready.exception():
        assert bridge.stop is not None
        bridge.soon(bridge.stop.set)
    await wait_through_cancellation(bridge.finished)


async def wait_through_cancellation(future: asyncio.Future[T]) -> T:
    """Wait for ``future``, which the trio side resolves, through any cancellation of the
    waiting task; the cancellation is raised after, unless the future failed."""
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None and not future.exception():
        raise cancelled
    return future.result()


async def from_asyncio(async_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Await an asyncio coroutine function from trio code running on the host's loop (a
    tool, a handler or an approver of an :mod:`engine.hosts.aio` session): ``async_fn(*args)``
    runs as an asyncio task, in a copy of this task's context, and its result or exception
    comes back. Cancelling the trio side cancels the asyncio task and waits for it to end.
    """
    loop = asyncio.get_running_loop()  # the host's: guest ticks run as its callbacks
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    coroutine: Any = async_fn(*args)
    task = loop.create_task(coroutine, context=contextvars.copy_context())
    task.add_done_callback(lambda _: token.run_sync_soon(done.set))
    try:
        await done.wait()
    except trio.Cancelled:
        task.cancel()
        with trio.CancelScope(shield=True):
            await done.wait()
        raise
    result: T = task.result()
    return result


class HostLoopModel:
    """The host's model, asked on the host's asyncio loop: each request is an asyncio task
    (:func:`from_asyncio`), in a copy of the asking trio task's context, cancelled when the
    turn is.

    A model client opened by asyncio code (``async with AsyncOpenAI() as client``) keeps a
    pool of connections that belongs to the library that opened each one: httpx opens a
    connection with whatever library runs the request (through anyio). Asked from trio, the
    connections would be trio sockets, which only trio may close, and the host's asyncio code
    closes the client. Asked here, every connection is the host's, opened and closed on its
    loop, and a model written for asyncio (an aiohttp client, say) works as it is.

    The model's deltas go back to the session's subscribers in trio, in the order it sent
    them, before its answer does (``run_sync_soon`` keeps its callbacks in order)."""

    def __init__(self, model: Model) -> None:
        self.model = model

    @property
    def info(self) -> ModelInfo:
        """The host's model's :class:`ModelInfo`, recorded with each request."""
        return model_info(self.model)

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The host's model's answer to ``request``, asked on the host's loop."""
        token = trio.lowlevel.current_trio_token()
        publish = request.on_delta

        def on_delta(delta: ModelDelta) -> None:
            token.run_sync_soon(publish, delta)

        return await from_asyncio(self.model.complete, attrs.evolve(request, on_delta=on_delta))
