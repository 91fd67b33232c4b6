"""A trio loop in a helper thread, driven one step at a time from synchronous code.

Hypothesis' state machines are synchronous, and a :class:`~engine.Session` lives inside a trio
loop: it must stay open between steps (a paused nested call waits in its parent's task) while
the state machine decides what to do next. :class:`LoopThread` runs ``trio.run`` in a daemon
thread whose main task only keeps a nursery open; :meth:`LoopThread.step` hands it one async
function with ``trio.from_thread.run`` and blocks until it has finished **and every task in the
loop is blocked again** (``trio.testing.wait_all_tasks_blocked``), so that when a step returns
nothing runs in the loop until the next one: the state machine reads the session from its own
thread with no race, and every step has the same effect on every run.

With ``virtual_time`` the loop runs on ``trio.testing.MockClock``. Its clock jumps ahead
(autojump) only while a step runs, so timeouts and sleeps inside a step take no real time, and
nothing sleeping across steps wakes up behind the state machine's back. Tools that wait for
threads or real I/O need real time (``virtual_time=False``): under autojump a thread's work
looks like idleness, and the clock would jump over it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
import trio.testing

__all__ = ["LoopThread", "StepHung"]

T = TypeVar("T")


class StepHung(AssertionError):
    """A step did not finish within its timeout: something in the loop waits forever."""


class LoopThread:
    """A trio loop in a daemon thread; :meth:`step` runs one async function in it."""

    def __init__(self, *, virtual_time: bool = True, step_timeout: float = 600.0) -> None:
        self.clock = trio.testing.MockClock(autojump_threshold=math.inf) if virtual_time else None
        self.step_timeout = step_timeout
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = threading.Event()
        self._crashed: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="toolledger-test-loop",
                                        daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._crashed is not None:
            raise RuntimeError("the test loop did not start") from self._crashed

    def _main(self) -> None:
        try:
            trio.run(self._host, clock=self.clock)
        except BaseException as exc:  # reported by the next step, or by close()
            self._crashed = exc
        finally:
            self._ready.set()

    async def _host(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await self._stop.wait()
            nursery.cancel_scope.cancel()

    @property
    def nursery(self) -> trio.Nursery:
        """The loop's long-lived nursery: start tasks that outlive a step here (from a step)."""
        assert self._nursery is not None
        return self._nursery

    def step(self, function: Callable[..., Awaitable[T]], *args: Any, name: str = "step") -> T:
        """Run ``await function(*args)`` in the loop, wait until every task is blocked, and
        return its result (or raise what it raised). Raises :class:`StepHung` if it takes
        longer than ``step_timeout`` seconds (virtual seconds with ``virtual_time``)."""
        if self._crashed is not None or self._token is None:
            raise RuntimeError("the test loop has stopped") from self._crashed
        return trio.from_thread.run(self._run_step, function, args, name, trio_token=self._token)

    async def _run_step(self, function: Callable[..., Awaitable[T]], args: tuple[Any, ...],
                        name: str) -> T:
        clock = self.clock
        if clock is not None:
            clock.autojump_threshold = 0
        try:
            with trio.move_on_after(self.step_timeout):
                result = await function(*args)
                await trio.testing.wait_all_tasks_blocked()
                return result
            raise StepHung(
                f"{name} did not finish within {self.step_timeout} s"
                f"{' of virtual time' if clock is not None else ''}: something waits forever "
                f"(a deadlock, or a tool that never returns and has no timeout)"
                + ("; a tool that waits for a thread or real I/O needs virtual_time=False"
                   if clock is not None else "")
            )
        finally:
            if clock is not None:
                clock.autojump_threshold = math.inf

    def close(self) -> None:
        """Stop the loop (cancelling whatever still runs in its nursery) and join the thread."""
        if self._token is not None and self._thread.is_alive() and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join()
        if self._crashed is not None:
            crashed, self._crashed = self._crashed, None
            raise RuntimeError("the test loop crashed") from crashed
