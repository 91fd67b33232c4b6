"""A batch: the tool calls of one assistant message, gated in order, then run together.

:meth:`Batch.settle` works from the log, so it serves a fresh batch and one being resumed
alike: it requests the calls the log does not have yet, gates each open one in the
assistant's order (every approval the batch needs is asked in that order), then runs the
allowed ones in the loop's task (together in a nursery, or one after another if any of their
tools is ``sequential``) and returns once nothing can move without an approval. A call that
fails becomes that call's own error result: it never cancels its siblings. Where the loop runs,
and how a prompt stops it, is :mod:`engine.looptask`.
"""

from __future__ import annotations

from typing import Any, Literal

import trio

from events.types import ModelToolCall, ToolCallRequested

from .calls import CallRunner
from .lifecycle import CallState
from .looptask import Drive, LoopTask
from .models import truncated

__all__ = ["Batch"]

RUNNABLE = (CallState.ALLOWED, CallState.RUNNING)


class Batch:
    """Runs the current batch of one session, in the task of its loop (``task``)."""

    def __init__(self, runner: CallRunner, task: LoopTask) -> None:
        self._runner = runner
        self._task = task

    def _batch(self) -> list[tuple[str, ModelToolCall]]:
        message = self._runner.recorder.projection.last_message
        if message is None:
            return []
        return [(f"{message.turn}.{i}", call) for i, call in enumerate(message.tool_calls)]

    def open(self) -> bool:
        """Whether the current batch has calls without their terminal event."""
        calls = self._runner.recorder.projection.live_calls
        return any(cid not in calls or not calls[cid].closed for cid, _ in self._batch())

    async def settle(self, drive: Drive[Any]) -> Literal["done", "paused"]:
        """Carry every call of the batch as far as it goes, from the loop ``drive`` (in its
        task); ``"paused"`` if some wait for an approval (the batch is done when all have
        ended)."""
        runner = self._runner
        batch = self._batch()
        if not batch:
            return "done"
        calls = runner.recorder.projection.live_calls
        try:
            for call_id, call in batch:
                # a cancelled caller is cancelled here: gating a call need not checkpoint (an
                # unknown tool, an approver that answers at once), so it is not left to chance
                await trio.lowlevel.checkpoint_if_cancelled()
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
            # nor is returning: a cancellation that landed after the last checkpoint (the last
            # call ended, the approver deferred) must close the batch, not leave it paused
            await trio.lowlevel.checkpoint_if_cancelled()
            drive.in_calls = False
        except BaseException as exc:
            drive.in_calls = False
            if not runner.suspending:  # the session is closing: leave the log as it is
                reason = self._task.stop_reason or ("cancelled" if isinstance(exc, trio.Cancelled)
                                               else f"interrupted by {type(exc).__name__}")
                with trio.CancelScope(shield=True):
                    await self.cancel(reason)
            raise
        return "paused" if any(not calls[cid].closed for cid, _ in batch) else "done"

    async def cancel(self, reason: str) -> None:
        """Cancel the batch: stop its running calls, then close every call of it, requesting
        the ones gating never reached, so the transcript has a result for each."""
        runner = self._runner
        self._task.stop_calls()
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
        self._task.stop_calls()

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
            # not the call's result: the loop's task passes it on to the session's nursery
            # (LoopTask._run_drive), and the prompt waits for that (LoopTask._stopping)
            if _stops_session(exc):
                self._task.call_escaped = True
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
        if truncated(message.stop_reason):
            runner.fail(
                call_id, "truncated",
                f"{call.name} was not run: the model's message was cut off (stop reason "
                f"{message.stop_reason!r}), so its arguments may be truncated",
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


def _stops_session(exc: BaseException) -> bool:
    """Whether ``exc``, leaving a call, stops the session: anything but a cancellation (which
    the scope that was cancelled takes)."""
    if isinstance(exc, trio.Cancelled):
        return False
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is not None
    return True


def _request(call_id: str, call: ModelToolCall) -> ToolCallRequested:
    return ToolCallRequested(call_id=call_id, name=call.name, arguments=call.arguments,
                             origin="model", model_call_id=call.id)
