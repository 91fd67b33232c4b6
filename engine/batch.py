"""A batch: the tool calls of one assistant message, gated in order, then run together.

:meth:`Batch.settle` works from the log, so it serves a fresh batch and one being resumed
alike: it requests the calls the log does not have yet, gates each open one in the
assistant's order (every approval the batch needs is asked in that order), then runs the
allowed ones (together, or one after another if any of their tools is ``sequential``) and
returns once nothing can move without an approval. A call that fails becomes that call's own
error result: it never cancels its siblings.

The session's loop does not run in the prompt's task: :meth:`Batch.drive` hands it to a task of
the session's (the one that holds the *calls nursery* open, or a new task of that nursery when
that one is busy), and the loop runs each batch's calls in its own task. So a prompt can return
"paused" while a nested call waits for the host's answer (the loop's task waits with the call,
and the call goes on when the answer comes), and a turn costs no trip through the scheduler:
the prompt's task hands the loop over once per prompt, not once per batch. Cancelling the
prompt cancels the loop and its batch: every call of it is closed as cancelled. Every running
call belongs to the current batch, so cancelling the batch is cancelling the calls nursery,
whose one cancel scope serves every batch of the session; a new calls nursery is opened for the
next prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, Literal, NoReturn, TypeVar

import trio

from events.types import ModelToolCall, ToolCallRequested

from .calls import CallRunner
from .lifecycle import CallState

__all__ = ["Batch", "Drive"]

RUNNABLE = (CallState.ALLOWED, CallState.RUNNING)

T = TypeVar("T")


class Drive(Generic[T]):
    """One run of the session's loop, handed by :meth:`Batch.drive` to a task of the session."""

    __slots__ = ("job", "prompt", "done", "result", "error", "stops_session", "detached",
                 "in_calls", "stopped")

    def __init__(self, job: Callable[[Drive[T]], Awaitable[T | None]]) -> None:
        self.job = job
        self.prompt: trio.lowlevel.Task | None = None  # the task waiting for it
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None  # for the prompt to raise
        self.stops_session = False  # a call failed with a BaseException: see Batch._stopping
        #: the prompt returned "paused" while this loop waits with a call: it ends after it
        self.detached = False
        self.in_calls = False  # settling the batch's calls (running them, or waiting for them)
        self.stopped: BaseException | None = None  # the prompt's cancellation, to raise there


class Batch:
    """Runs the current batch of one session."""

    def __init__(self, runner: CallRunner) -> None:
        self._runner = runner
        self._nursery: trio.Nursery | None = None
        self._calls: trio.Nursery | None = None  # the calls nursery, while it is open
        self._worker: trio.lowlevel.Task | None = None  # the holder, while it waits for work
        self._work: Drive[Any] | None = None  # what drive() hands the worker
        self._drives = 0  # loops running in tasks of the calls nursery
        self._escaped = False  # a call failed with a BaseException: see _stopping
        self._stop_reason: str | None = None  # why the prompt stopped the calls
        self._waiting: Drive[Any] | None = None  # the loop a prompt waits for
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
        """Hold the calls nursery open until it is cancelled (:meth:`_stop_calls`), and run
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
            # what a call's task raised (a BaseException: an Exception is the call's result)
            # reaches the session's nursery as it would from a task of its own
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
            self._stop_reason = "cancelled" if isinstance(drive.stopped, trio.Cancelled) else (
                f"interrupted by {type(drive.stopped).__name__}")
            self._stop_calls()
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
            self._stop_reason = None
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
            if self._escaped or drive.detached:
                # a call's BaseException, or anything with no prompt to hear it: it reaches
                # the session's nursery, as it would from the call's own task
                self._escaped = False
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

    def _stop_calls(self) -> None:
        """Cancel every running call (they all belong to the current batch)."""
        if self._calls is not None:
            self._calls.cancel_scope.cancel()
            self._calls = self._worker = None

    def _batch(self) -> list[tuple[str, ModelToolCall]]:
        message = self._runner.recorder.projection.last_message
        if message is None:
            return []
        return [(f"{message.turn}.{i}", call) for i, call in enumerate(message.tool_calls)]

    def open(self) -> bool:
        """Whether the current batch has calls without their terminal event."""
        calls = self._runner.recorder.projection.live_calls
        return any(cid not in calls or not calls[cid].closed for cid, _ in self._batch())

    async def settle(self, drive: Drive[T]) -> Literal["done", "paused"]:
        """Carry every call of the batch as far as it goes, from the loop ``drive`` (in its
        task); ``"paused"`` if some wait for an approval (the batch is done when all have
        ended)."""
        runner = self._runner
        batch = self._batch()
        if not batch:
            return "done"
        calls = runner.recorder.projection.live_calls
        try:
            await trio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller is cancelled here
            for call_id, call in batch:
                if call_id not in calls:
                    runner.recorder.record(_request(call_id, call))
                    if self._refuse_unsafe(call_id, call, batch):
                        continue
                if calls[call_id].closed or call_id in runner.live:
                    continue
                await runner.advance(call_id, wait=False, gate_only=True)
            runnable = [cid for cid, _ in batch
                        if calls[cid].state in RUNNABLE and cid not in runner.live]
            drive.in_calls = True
            if runnable:
                await self._start(runnable)
            await runner.settled()
            drive.in_calls = False
        except BaseException as exc:
            drive.in_calls = False
            if not runner.suspending:  # the session is closing: leave the log as it is
                reason = self._stop_reason or ("cancelled" if isinstance(exc, trio.Cancelled)
                                               else f"interrupted by {type(exc).__name__}")
                with trio.CancelScope(shield=True):
                    await self.cancel(reason)
            raise
        return "paused" if any(not calls[cid].closed for cid, _ in batch) else "done"

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

    async def cancel(self, reason: str) -> None:
        """Cancel the batch: stop its running calls, then close every call of it, requesting
        the ones gating never reached, so the transcript has a result for each."""
        runner = self._runner
        self._stop_calls()
        while runner.live:
            await runner.next_change()
        calls = runner.recorder.projection.live_calls
        for call_id, call in self._batch():
            if call_id not in calls:
                runner.recorder.record(_request(call_id, call))
            runner.close_open(call_id, reason)
        await runner.recorder.flush()

    async def suspend(self) -> None:
        """The session is closing with calls in flight: stop them without recording
        anything, so the log reads as if the process had stopped here (resumable)."""
        self._runner.suspending = True
        self._stop_calls()

    async def _start(self, call_ids: list[str]) -> None:
        """Run the allowed calls in this task (the loop's). They count as running from now on
        (``runner.live``)."""
        runner = self._runner
        specs = runner.registry.specs
        calls = runner.recorder.projection.live_calls
        sequential = len(call_ids) == 1 or any(
            (spec := specs.get(calls[cid].name)) is not None and spec.execution_mode == "sequential"
            for cid in call_ids
        )
        if sequential:
            runner.live[call_ids[0]] = None
        else:
            runner.live.update(dict.fromkeys(call_ids))
        await self._run(call_ids, sequential)

    async def _run(self, call_ids: list[str], sequential: bool) -> None:
        runner = self._runner
        try:
            if sequential:  # one call, or a batch with a sequential tool: no nursery
                for index, call_id in enumerate(call_ids):
                    # the next call is live before this one ends: no gap a waiter could see
                    await self._run_one(call_id, next_id=call_ids[index + 1]
                                        if index + 1 < len(call_ids) else None)
            else:
                async with trio.open_nursery() as nursery:
                    for call_id in call_ids:
                        nursery.start_soon(self._run_one, call_id)
        finally:
            for call_id in call_ids:
                runner.live.pop(call_id, None)
            runner.changed()

    async def _run_one(self, call_id: str, next_id: str | None = None) -> None:
        runner = self._runner
        runner.live[call_id] = None
        try:
            await runner.advance(call_id, wait=True)
        except BaseException as exc:
            # it will cancel the session's nursery once it is out of this task: settle() must
            # give it that moment before it asks the model again
            if _stops_session(exc):
                self._escaped = True
            raise
        finally:
            if next_id is not None:
                runner.live[next_id] = None
            runner.live.pop(call_id, None)
            runner.changed()

    def _refuse_unsafe(
        self, call_id: str, call: ModelToolCall, batch: list[tuple[str, ModelToolCall]]
    ) -> bool:
        """End a call that must not run whatever the policy says; False if it may go on."""
        runner = self._runner
        message = runner.recorder.projection.last_message
        assert message is not None
        if message.stop_reason == "length":
            runner.fail(
                call_id, "truncated",
                f"{call.name} was not run: the model's message was cut off (stop reason "
                f"'length'), so its arguments may be truncated",
            )
            return True
        if len(batch) > 1 and sum(1 for _, c in batch if c.id == call.id) > 1:
            runner.fail(
                call_id, "duplicate_call_id",
                f"{call.name} was not run: the model used the call id {call.id!r} twice in one "
                f"message, so its results could not be paired",
            )
            return True
        return False


def _abort(raise_cancel: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.SUCCEEDED  # the worker waits for nothing but work


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is, or carries, a ``trio.Cancelled``."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(trio.Cancelled) is not None
    return isinstance(exc, trio.Cancelled)


def _stops_session(exc: BaseException) -> bool:
    """Whether ``exc``, leaving a call's task, will cancel the session's nursery: anything
    but a cancellation (which the batch's own cancel scope takes)."""
    if isinstance(exc, trio.Cancelled):
        return False
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is not None
    return True


def _request(call_id: str, call: ModelToolCall) -> ToolCallRequested:
    return ToolCallRequested(call_id=call_id, name=call.name, arguments=call.arguments,
                             origin="model", model_call_id=call.id)
