"""A batch: the tool calls of one assistant message, gated in order, then run together.

:meth:`Batch.settle` works from the log, so it serves a fresh batch and one being resumed
alike: it requests the calls the log does not have yet, gates each open one in the
assistant's order (every approval the batch needs is asked in that order), then starts the
allowed ones in the session's nursery (together, or one after another if any of their tools
is ``sequential``) and returns once nothing can move without an approval. A call that fails
becomes that call's own error result: it never cancels its siblings.

The running calls live in the session's nursery, not in the caller's task, so a prompt can
return "paused" while a nested call waits for the host's answer, and the call goes on when it
comes. Cancelling the caller cancels the batch: every call of it is closed as cancelled.
"""

from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Literal

import trio

from events.types import ModelToolCall, ToolCallRequested

from .calls import CallRunner
from .lifecycle import CallState

__all__ = ["Batch"]

RUNNABLE = (CallState.ALLOWED, CallState.RUNNING)


class Batch:
    """Runs the current batch of one session."""

    def __init__(self, runner: CallRunner, nursery: trio.Nursery) -> None:
        self._runner = runner
        self._nursery = nursery
        self._scopes: set[trio.CancelScope] = set()

    def _current(self) -> list[tuple[str, ModelToolCall]]:
        message = self._runner.recorder.projection.last_message
        if message is None:
            return []
        return [(f"{message.turn}.{i}", call) for i, call in enumerate(message.tool_calls)]

    def open(self) -> bool:
        """Whether the current batch has calls without their terminal event."""
        calls = self._runner.recorder.projection.calls
        return any(cid not in calls or not calls[cid].closed for cid, _ in self._current())

    async def settle(self) -> Literal["done", "paused"]:
        """Carry every call of the batch as far as it goes; ``"paused"`` if some wait for an
        approval (the batch is done when all have ended)."""
        runner = self._runner
        batch = self._current()
        if not batch:
            return "done"
        calls = runner.recorder.projection.calls
        try:
            await trio.lowlevel.checkpoint()  # a cancelled caller is cancelled here, always
            for call_id, call in batch:
                if call_id not in calls:
                    runner.recorder.record(_request(call_id, call))
                    if self._refuse_unsafe(call_id, call, batch):
                        continue
                if calls[call_id].closed or call_id in runner.live:
                    continue
                await runner.guard(call_id, partial(runner.advance, call_id, wait=False,
                                                    gate_only=True))
            runnable = [cid for cid, _ in batch
                        if calls[cid].state in RUNNABLE and cid not in runner.live]
            if runnable:
                await self._nursery.start(self._run, runnable)
            await runner.settled()
        except BaseException as exc:
            reason = "cancelled" if isinstance(exc, trio.Cancelled) else (
                f"interrupted by {type(exc).__name__}")
            with trio.CancelScope(shield=True):
                await self.cancel(reason)
            raise
        return "paused" if self.open() else "done"

    async def cancel(self, reason: str) -> None:
        """Cancel the batch: stop its running calls, then close every call of it, requesting
        the ones gating never reached, so the transcript has a result for each."""
        runner = self._runner
        for scope in self._scopes:
            scope.cancel()
        while runner.live:
            await runner.next_change()
        calls = runner.recorder.projection.calls
        for call_id, call in self._current():
            if call_id not in calls:
                runner.recorder.record(_request(call_id, call))
            runner.close_open(call_id, reason)
        await runner.recorder.flush()

    async def suspend(self) -> None:
        """The session is closing with calls in flight: stop them without recording
        anything, so the log reads as if the process had stopped here (resumable)."""
        self._runner.suspending = True
        for scope in self._scopes:
            scope.cancel()

    async def _run(self, call_ids: list[str], *, task_status: trio.TaskStatus[None]) -> None:
        runner = self._runner
        specs = runner.registry.specs
        calls = runner.recorder.projection.calls
        sequential = any(
            (spec := specs.get(calls[cid].name)) is not None and spec.execution_mode == "sequential"
            for cid in call_ids
        )
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                if sequential:
                    runner.live[call_ids[0]] = None
                    task_status.started()
                    for index, call_id in enumerate(call_ids):
                        # the next call is live before this one ends: no gap a waiter could see
                        await self._run_one(call_id, next_id=call_ids[index + 1]
                                            if index + 1 < len(call_ids) else None)
                else:
                    runner.live.update(dict.fromkeys(call_ids))
                    task_status.started()
                    async with trio.open_nursery() as nursery:
                        for call_id in call_ids:
                            nursery.start_soon(self._run_one, call_id)
            finally:
                self._scopes.discard(scope)
                for call_id in call_ids:
                    runner.live.pop(call_id, None)
                runner.changed()

    async def _run_one(self, call_id: str, next_id: str | None = None) -> None:
        runner = self._runner
        runner.live[call_id] = None
        try:
            await runner.guard(call_id, partial(runner.advance, call_id, wait=True))
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
        if Counter(c.id for _, c in batch)[call.id] > 1:
            runner.fail(
                call_id, "duplicate_call_id",
                f"{call.name} was not run: the model used the call id {call.id!r} twice in one "
                f"message, so its results could not be paired",
            )
            return True
        return False


def _request(call_id: str, call: ModelToolCall) -> ToolCallRequested:
    return ToolCallRequested(call_id=call_id, name=call.name, arguments=call.arguments,
                             origin="model", model_call_id=call.id)
