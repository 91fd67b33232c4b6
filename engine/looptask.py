"""The session's own task: where the agent loop and its calls run.

A prompt does not run the agent loop in its own task: :meth:`LoopTask.drive` hands the loop to
a task of the session's, the one that holds the *calls nursery* open (or, when that one is
busy, a new task of that nursery), and waits for it. The loop runs each batch's calls itself
(:class:`~engine.batch.Batch`), so:

- a prompt can return "paused" while a nested call waits for the host's answer: the loop's
  task waits with the call, and the call goes on when the answer comes (the loop then ends
  without going on: the host's :meth:`~engine.session.Session.resume` continues);
- a turn costs no trip through trio's scheduler: the prompt's task hands the loop over once
  per prompt, where handing each batch to another task and being woken at its end cost two
  passes of the scheduler per turn;
- cancelling the prompt stops the loop at once: the prompt waits parked with an abort function
  that cancels the calls nursery, and raises its cancellation once every loop has closed its
  batch.

Every running call belongs to the current batch, so stopping the calls is cancelling the calls
nursery, whose one cancel scope serves every batch of the session; a new calls nursery is
opened for the next prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, NoReturn, TypeVar

import trio

from .calls import CallRunner

__all__ = ["Drive", "LoopTask"]

T = TypeVar("T")


class Drive(Generic[T]):
    """One run of the session's loop, handed by :meth:`LoopTask.drive` to a task of the session."""

    __slots__ = ("job", "prompt", "done", "result", "error", "stops_session", "detached",
                 "in_calls", "stopped")

    def __init__(self, job: Callable[[Drive[T]], Awaitable[T | None]]) -> None:
        self.job = job
        self.prompt: trio.lowlevel.Task | None = None  # the task waiting for it
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None  # for the prompt to raise
        self.stops_session = False  # a call failed with a BaseException: see LoopTask._stopping
        #: the prompt returned "paused" while this loop waits with a call: it ends after it
        self.detached = False
        self.in_calls = False  # settling the batch's calls (running them, or waiting for them)
        self.stopped: BaseException | None = None  # the prompt's cancellation, to raise there


class LoopTask:
    """Runs one session's agent loop, and with it the calls, in a task of the session's."""

    def __init__(self, runner: CallRunner) -> None:
        self._runner = runner
        self._nursery: trio.Nursery | None = None
        self._calls: trio.Nursery | None = None  # the calls nursery, while it is open
        self._worker: trio.lowlevel.Task | None = None  # the holder, while it waits for work
        self._work: Drive[Any] | None = None  # what drive() hands the worker
        self._drives = 0  # loops running in tasks of the calls nursery
        self._waiting: Drive[Any] | None = None  # the loop a prompt waits for
        #: a call failed with a BaseException (set by the batch): see :meth:`_stopping`
        self.call_escaped = False
        #: why the prompt stopped the calls (its cancellation), for the batch's records
        self.stop_reason: str | None = None
        runner.on_change = self._watch

    def attach(self, nursery: trio.Nursery | None) -> None:
        """Run calls under ``nursery`` (the session's), or under none once the session closed."""
        self._nursery = nursery

    async def _calls_nursery(self) -> trio.Nursery:
        """The open calls nursery; opened (in a task of the session's nursery) if there is
        none."""
        if self._calls is None:
            if self._nursery is None:
                raise RuntimeError("the session is closed: open it again to run its calls")
            await self._nursery.start(self._hold)
        assert self._calls is not None
        return self._calls

    async def _hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the calls nursery open until it is cancelled (:meth:`stop_calls`), and run
        in this task the loops :meth:`drive` hands it, one at a time. (A loop that comes while
        this one still runs one gets a task of its own.)"""
        nursery: trio.Nursery | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._calls = nursery
                task_status.started()
                while self._calls is nursery:  # until it is stopped
                    self._worker = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(_abort)
                    # handed work (a stop cancels a worker that waits, never one handed work)
                    work, self._work = self._work, None
                    assert work is not None
                    await self._run_drive(work)
        except BaseExceptionGroup as group:
            # what the loop passes on (a call's BaseException, see _run_drive) reaches the
            # session's nursery as it would from a task of its own
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            if self._calls is nursery:
                self._calls = self._worker = None

    async def drive(self, job: Callable[[Drive[T]], Awaitable[T | None]]) -> T | None:
        """Run the session's loop ``job`` in a task of the calls nursery and return what it
        returns, or ``None`` once the batch is paused with the loop's task inside it (a call
        whose nested call waits for the host's answer, and nothing else can move): the loop
        then ends after that call, without going on (``drive.detached``).

        What the loop raises is raised here; but a call that failed with a ``BaseException``
        stops the session, as it would from a task of its own (:meth:`_stopping`). Cancelling
        this (or interrupting it) stops the loop at once, at its next checkpoint, and the
        cancellation is raised here once every loop has closed its batch."""
        nursery = await self._calls_nursery()
        drive = Drive(job)
        worker = self._worker
        self._drives += 1
        if worker is not None:
            self._worker, self._work = None, drive
            trio.lowlevel.reschedule(worker)
        else:
            nursery.start_soon(self._run_drive, drive)

        def abort(raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
            # called at once when the prompt is cancelled: stop the loop and its calls now,
            # and wake the prompt with its cancellation when they have all ended (_wake)
            try:
                raise_cancel()
            except BaseException as exc:
                drive.stopped = exc
            self.stop_reason = "cancelled" if isinstance(drive.stopped, trio.Cancelled) else (
                f"interrupted by {type(drive.stopped).__name__}")
            self.stop_calls()
            return trio.lowlevel.Abort.FAILED

        runner = self._runner
        drive.prompt = trio.lowlevel.current_task()
        try:
            while True:
                self._waiting = drive
                await trio.lowlevel.wait_task_rescheduled(abort)
                if drive.done or drive.stopped is not None:
                    break
                # woken by _watch: a pause, unless something moved since (a task it started)
                if drive.in_calls and runner.live and runner.quiet():
                    drive.detached = True
                    break
        finally:
            self._waiting = None
        if drive.stopped is not None:
            self.stop_reason = None
            raise drive.stopped
        if drive.detached:
            return None
        if drive.stops_session:
            await self._stopping()
        if drive.error is not None:
            error, drive.error = drive.error, None
            raise error
        return drive.result

    def _watch(self) -> None:
        """At every change of which calls run or wait: wake the prompt once a call of its loop
        waits for an answer and nothing else seems to move (no call running: the loop goes on
        by itself). The prompt looks again when it runs, after the tasks started meanwhile
        have run: then it is a pause."""
        drive = self._waiting
        if drive is not None and drive.in_calls and drive.stopped is None:
            runner = self._runner
            if runner.live and runner.quiet():
                self._wake(drive)

    def _wake(self, drive: Drive[Any]) -> None:
        if self._waiting is drive and drive.prompt is not None:
            self._waiting = None
            trio.lowlevel.reschedule(drive.prompt)

    async def _run_drive(self, drive: Drive[T]) -> None:
        try:
            drive.result = await drive.job(drive)
        except BaseException as exc:
            if _cancelled(exc):
                raise  # the calls nursery's, or the session's: never handed to another task
            if self.call_escaped or drive.detached:
                # a call's BaseException, or anything with no prompt to hear it: it reaches
                # the session's nursery, as it would from the call's own task
                self.call_escaped = False
                drive.stops_session = True
                raise
            drive.error = exc
        finally:
            drive.done = True
            self._drives -= 1
            waiting = self._waiting
            # a stopped prompt waits for every loop (one it left paused too) to close its batch
            if waiting is not None and waiting.done and (
                waiting.stopped is None or not self._drives
            ):
                self._wake(waiting)

    def stop_calls(self) -> None:
        """Cancel every running call (they all belong to the current batch)."""
        if self._calls is not None:
            self._calls.cancel_scope.cancel()
            self._calls = self._worker = None

    async def _stopping(self) -> None:
        """A call failed with a BaseException (not an Exception: those are its result). It is
        on its way out of the loop's task, and the session's nursery cancels everything when
        it gets there, a few passes of the scheduler from now: wait for that, so that the
        prompt ends here instead of returning as if the batch had ended."""
        nursery = self._nursery
        for _ in range(1_000):
            if nursery is None or nursery.cancel_scope.cancel_called:
                break
            await trio.lowlevel.checkpoint()
        else:
            return  # it stopped nothing after all (something caught it): carry on
        await trio.lowlevel.checkpoint_if_cancelled()  # a prompt inside the session's block
        raise RuntimeError(
            "the session is closing: a tool call failed with an exception that stops the "
            "session (the session's block raises it)"
        )


def _abort(raise_cancel: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.SUCCEEDED  # the worker waits for nothing but work


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is, or carries, a ``trio.Cancelled``."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(trio.Cancelled) is not None
    return isinstance(exc, trio.Cancelled)
