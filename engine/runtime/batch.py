"""A batch: the tool calls of one assistant message, gated in order, then run together.

:meth:`Batch.settle` runs in the task that called ``prompt()`` or ``resume()``, and works from
the log, so it serves a fresh batch and one being resumed alike:

1. it records ``tool_call_requested`` for each call the log does not have yet (refusing, unrun,
   the calls of a message cut off for ``length`` and calls whose model id is used twice);
2.-5. it gates each open call in the assistant's order, in this task (the ``tool_call``
   handlers, the policy and the approver see the caller's context variables), so every
   approval the batch needs is asked in that order;
6.-8. it hands the allowed calls to tasks of the session's nursery — one task per call, or one
   task for the whole batch if any of its tools is ``sequential`` — started from this task, so
   each inherits a copy of the caller's context (and every body, wherever it runs, runs in a
   copy of its own: :mod:`engine.runtime.copied`); and it waits, on an ordinary ``trio.Event``
   (:meth:`engine.runtime.inflight.InFlight.settled`), until no call can move without the host. A
   batch of one fresh call runs in this task instead when the session's approver never
   answers later (:attr:`engine.core.environment.Environment.may_defer`): then nothing the call
   does can wait for the host, whatever the host changes while it runs, and the log is the
   one a task of the nursery would write.

It returns ``"paused"`` if some call waits for an approval. A call whose nested call waits for
the host keeps waiting in its task after the prompt returned, and goes on when the host
answers; the next ``resume()`` waits for it. A call that fails becomes that call's own error
result: it never cancels its siblings. Cancelling the caller cancels every call of the batch,
and each gets its terminal event before the cancellation propagates. Closing the session stops
them without a word in the log (:meth:`engine.runtime.inflight.InFlight.suspend`), wherever they run.
"""

from __future__ import annotations

from typing import Literal

import trio

from events.types import ModelToolCall, ToolCallRequested

from ..core.environment import Environment
from ..core.errors import SessionClosed
from ..core.lifecycle import CallStage
from ..core.tools import runs_in_order
from ..models import truncated
from .calls import advance
from .endings import close_open, fail
from .inflight import InFlight
from .recorder import Recorder

__all__ = ["Batch"]

RUNNABLE = (CallStage.ALLOWED, CallStage.RUNNING)


class Batch:
    """The current batch of one session: what the log says it is, and where its calls run."""

    def __init__(self, recorder: Recorder, inflight: InFlight) -> None:
        self._recorder = recorder
        self._inflight = inflight
        self._nursery: trio.Nursery | None = None

    def attach(self, nursery: trio.Nursery | None) -> None:
        """Run calls in ``nursery`` (the session's), or in none once the session closed."""
        self._nursery = nursery

    def calls(self) -> list[tuple[str, ModelToolCall]]:
        """The calls of the last assistant message, with their engine ids."""
        message = self._recorder.projection.last_message
        if message is None:
            return []
        return [(f"{message.turn}.{i}", call) for i, call in enumerate(message.tool_calls)]

    def open(self) -> bool:
        """Whether the current batch has calls without their terminal event."""
        calls = self._recorder.projection.live_calls
        return any(cid not in calls or not calls[cid].closed for cid, _ in self.calls())

    async def settle(self, env: Environment) -> Literal["done", "paused"]:
        """Carry every call of the batch as far as it goes; ``"paused"`` if some wait for an
        approval (the batch is done when all have ended)."""
        batch = self.calls()
        if not batch:
            return "done"
        recorder, inflight = self._recorder, self._inflight
        calls = recorder.projection.live_calls
        try:
            for call_id, call in batch:
                # a cancelled caller is cancelled here: gating a call need not checkpoint (an
                # unknown tool, an approver that answers at once), so it is not left to chance
                await trio.lowlevel.checkpoint_if_cancelled()
                if call_id not in calls:  # 1.
                    recorder.record(_request(call_id, call))
                    if self._refuse_unsafe(call_id, call, batch):
                        continue
                if calls[call_id].closed or inflight.owned(call_id):
                    continue
                await advance(env, recorder, inflight, call_id, wait=False, gate_only=True)  # 2.-5.
            runnable = [cid for cid, _ in batch
                        if calls[cid].stage in RUNNABLE and not inflight.owned(cid)]
            if len(runnable) == 1 and not env.may_defer and (
                calls[runnable[0]].stage is CallStage.ALLOWED
            ):
                # 6.-8. here: nothing this call does can wait for the host, so the prompt never
                # has to return while it runs, and it saves two trips through the scheduler.
                # That rests on what cannot change while it runs: the approver never answers
                # later, and the call is fresh (no recorded nested call of it waits). Not on
                # which tools the policy asks about: the host may register one mid-call, and
                # a nested call is gated with it. Nothing runs between its end and the loop's
                # next flush (before the model is asked, or as the prompt returns): its end is
                # written with that one. The session's closing stops it with the prompt
                # (InFlight.suspend), whichever task prompted
                inflight.hand_over(runnable, None)
                await self._run(env, runnable, write_ends=False)
            elif runnable:
                self._start(env, runnable)  # 6.-8., in tasks of the session's
            await inflight.settled()
            # nor is returning: a cancellation that landed after the last checkpoint (the last
            # call ended, the approver deferred) must close the batch, not leave it paused
            await trio.lowlevel.checkpoint_if_cancelled()
        except BaseException as exc:
            if not inflight.suspending:  # the session is closing: leave the log as it is
                reason = "cancelled" if isinstance(exc, trio.Cancelled) else (
                    f"interrupted by {type(exc).__name__}")
                with trio.CancelScope(shield=True):
                    await self.cancel(reason)
            raise
        if inflight.escaped:
            # a call failed with a BaseException: it is on its way to the session's nursery,
            # which cancels the session's block (a prompt inside it is cancelled here)
            await trio.sleep(0)
            raise SessionClosed(
                "the session is closing: a tool call failed with an exception that stops the "
                "session (the session's block raises it)"
            )
        return "paused" if any(not calls[cid].closed for cid, _ in batch) else "done"

    async def cancel(self, reason: str) -> None:
        """Cancel the batch: stop its running calls, then close every call of it, requesting
        the ones gating never reached, so the transcript has a result for each."""
        recorder, inflight = self._recorder, self._inflight
        inflight.stop()
        await inflight.stopped()
        calls = recorder.projection.live_calls
        for call_id, call in self.calls():
            if call_id not in calls:
                recorder.record(_request(call_id, call))
            close_open(recorder, call_id, reason)
        await recorder.flush()

    def _start(self, env: Environment, call_ids: list[str]) -> None:
        """Hand the allowed calls to tasks of the session's nursery, started from this task
        (so each inherits a copy of its context variables)."""
        assert self._nursery is not None, "a closed session was prompted"
        specs = env.registry.specs
        calls = self._recorder.projection.live_calls
        in_order = runs_in_order([
            spec.execution_mode if (spec := specs.get(calls[cid].name)) is not None else None
            for cid in call_ids
        ])
        groups = [call_ids] if in_order else [[cid] for cid in call_ids]
        for group in groups:
            # shielded: what stops a call is what would stop it in the prompt's own task, the
            # prompt's cancellation (cancel) or the session's closing (InFlight.suspend), not
            # whichever of two tasks a host's cancel scope around the session reaches first
            scope = trio.CancelScope(shield=True)
            self._inflight.hand_over(group, scope)
            self._nursery.start_soon(self._run_task, env, group, scope)

    async def _run_task(self, env: Environment, call_ids: list[str],
                        scope: trio.CancelScope) -> None:
        """A task of the session's nursery: run ``call_ids`` under ``scope``, which
        :meth:`cancel` cancels."""
        try:
            with scope:
                await self._run(env, call_ids, write_ends=True)
        except BaseException as exc:
            # not the call's result (that is recorded): it reaches the session's nursery, as
            # from any task, and the prompt stops (settle)
            if _stops_session(exc):
                self._inflight.escape()
            raise

    async def _run(self, env: Environment, call_ids: list[str], *, write_ends: bool) -> None:
        """Run ``call_ids`` one after another in this task (one call, or a sequential batch).
        With ``write_ends``, each call's end is written as it ends (its siblings may run on
        for long); else the caller's next flush writes it."""
        recorder, inflight = self._recorder, self._inflight
        try:
            for call_id in call_ids:
                # the next call begins before this one ends (no checkpoint between): no gap in
                # which a waiter could see the batch as settled
                inflight.begin(call_id)
                try:
                    await advance(env, recorder, inflight, call_id, wait=True)
                    if write_ends:
                        await recorder.flush()
                finally:
                    inflight.end(call_id)
        finally:
            inflight.release(call_ids)

    def _refuse_unsafe(
        self, call_id: str, call: ModelToolCall, batch: list[tuple[str, ModelToolCall]]
    ) -> bool:
        """End a call that must not run whatever the policy says; False if it may go on."""
        recorder = self._recorder
        message = recorder.projection.last_message
        assert message is not None
        if truncated(message.stop_reason):
            fail(recorder, call_id, "truncated",
                 f"{call.name} was not run: the model's message was cut off (stop reason "
                 f"{message.stop_reason!r}), so its arguments may be truncated")
            return True
        if len(batch) > 1 and sum(1 for _, c in batch if c.id == call.id) > 1:
            fail(recorder, call_id, "duplicate_call_id",
                 f"{call.name} was not run: the model used the call id {call.id!r} twice in one "
                 f"message, so its results could not be paired")
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
