"""A batch: the tool calls of one assistant message, gated in order, then run together.

:meth:`Batch.settle` works from the log, so it serves a fresh batch and one being resumed
alike: it requests the calls the log does not have yet, gates each open one in the
assistant's order (every approval the batch needs is asked in that order), then starts the
allowed ones in the session's nursery (together, or one after another if any of their tools
is ``sequential``) and returns once nothing can move without an approval. A call that fails
becomes that call's own error result: it never cancels its siblings.

The running calls live in a nursery of the session's (the *calls nursery*, held open by a task
of the session's nursery), not in the caller's task, so a prompt can return "paused" while a
nested call waits for the host's answer, and the call goes on when it comes. Cancelling the
caller cancels the batch: every call of it is closed as cancelled. Every running call belongs
to the current batch, so cancelling the batch is cancelling the calls nursery, whose one cancel
scope serves every batch of the session (a cancel scope per batch cost a tenth of a turn); a
new calls nursery is opened for the next batch.
"""

from __future__ import annotations

from typing import Literal

import trio

from events.types import ModelToolCall, ToolCallRequested

from .calls import CallRunner
from .lifecycle import CallState

__all__ = ["Batch"]

RUNNABLE = (CallState.ALLOWED, CallState.RUNNING)


class Batch:
    """Runs the current batch of one session."""

    def __init__(self, runner: CallRunner) -> None:
        self._runner = runner
        self._nursery: trio.Nursery | None = None
        self._calls: trio.Nursery | None = None  # the calls nursery, while it is open
        self._worker: trio.lowlevel.Task | None = None  # the holder, while it waits for work
        self._work: tuple[list[str], bool] | None = None  # what _start hands the worker
        self._escaped = False  # a call failed with a BaseException: see _stopping

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
        in this task the calls :meth:`_start` hands it, one batch at a time: a task of its
        own for every batch cost a tenth of a turn. (A batch that comes while this one still
        runs gets a task of its own.)"""
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
                    await self._run(*work)
        except BaseExceptionGroup as group:
            # what a call's task raised (a BaseException: an Exception is the call's result)
            # reaches the session's nursery as it would from a task of its own
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            if self._calls is nursery:
                self._calls = self._worker = None

    def _stop_calls(self) -> None:
        """Cancel every running call (they all belong to the current batch)."""
        if self._calls is not None:
            self._calls.cancel_scope.cancel()
            self._calls = self._worker = None

    def _current(self) -> list[tuple[str, ModelToolCall]]:
        message = self._runner.recorder.projection.last_message
        if message is None:
            return []
        return [(f"{message.turn}.{i}", call) for i, call in enumerate(message.tool_calls)]

    def open(self) -> bool:
        """Whether the current batch has calls without their terminal event."""
        calls = self._runner.recorder.projection.live_calls
        return any(cid not in calls or not calls[cid].closed for cid, _ in self._current())

    async def settle(self) -> Literal["done", "paused"]:
        """Carry every call of the batch as far as it goes; ``"paused"`` if some wait for an
        approval (the batch is done when all have ended)."""
        runner = self._runner
        batch = self._current()
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
            if runnable:
                await self._start(runnable)
            await runner.settled()
            if self._escaped:
                await self._stopping()
        except BaseException as exc:
            reason = "cancelled" if isinstance(exc, trio.Cancelled) else (
                f"interrupted by {type(exc).__name__}")
            with trio.CancelScope(shield=True):
                await self.cancel(reason)
            raise
        return "paused" if any(not calls[cid].closed for cid, _ in batch) else "done"

    async def _stopping(self) -> None:
        """A call failed with a BaseException (not an Exception: those are its result). It is
        on its way out of its task, and the session's nursery cancels everything when it gets
        there, a few passes of the scheduler from now: wait for that, so that the prompt ends
        here instead of asking the model again."""
        self._escaped = False
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
        for call_id, call in self._current():
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
        """Start the allowed calls, in the worker if it waits for work, else in a task of the
        calls nursery. They count as running from now on (``runner.live``), before the task
        is first scheduled."""
        nursery = await self._calls_nursery()
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
        worker = self._worker
        if worker is not None:
            self._worker, self._work = None, (call_ids, sequential)
            trio.lowlevel.reschedule(worker)
        else:
            nursery.start_soon(self._run, call_ids, sequential)

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
