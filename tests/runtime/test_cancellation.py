"""Cancellation at any point of a call, by the host or a timeout, on real sessions: every call
still ends exactly once, the log stays consistent and the session goes on.

Tests that could hang if the engine were wrong run on trio's autojump clock under
``fail_after``, so a deadlock fails at once instead of hanging the suite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio
import trio.testing

from engine import (
    ApprovalRequest,
    Session,
    ToolCallDraft,
    ToolResult,
    fold,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import (
    Record,
    ToolCallCancelled,
    ToolExecutionStarted,
)
from tests.runtime.batching import (
    DEADLOCK,
    SAFE,
    Watcher,
    assert_all_cancelled_in_transcript,
    events_of,
    index_of,
)


# -- cancellation at any point --------------------------------------------------------------


async def _cancelled_prompt(
    session: Session, trigger: trio.Event, text_: str = "go"
) -> None:
    """Run a prompt inside a host cancel scope that is cancelled once ``trigger`` is set."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            async def cancel_when_triggered() -> None:
                await trigger.wait()
                scope.cancel()

            nursery.start_soon(cancel_when_triggered)
            await session.prompt(text_)
            raise AssertionError("the prompt ended before it was cancelled")
    assert scope.cancelled_caught


async def _check_after_cancel(session: Session, store: MemoryStore, model: FauxModel,
                              calls: Sequence[str], nested: Sequence[str] = ()) -> None:
    assert session.state.open_calls == ()
    assert session.state.pending_approvals == ()
    for call_id in (*calls, *nested):
        assert session.calls[call_id].status == "cancelled", call_id
        assert any(isinstance(e, ToolCallCancelled) for e in events_of(session.records, call_id))
    assert_all_cancelled_in_transcript(session, 1, len(calls))
    # the log in the store says the same
    stored = await store.read(session.session_id)
    assert fold(stored).snapshot() == session.state.snapshot()
    # and the session can prompt again
    result = await session.prompt("again")
    assert result.stop == "end_turn" and result.text == "recovered"
    model.assert_complete()


async def test_cancel_while_the_approver_is_waiting(autojump_clock: Any) -> None:
    asked = trio.Event()

    async def slow_approver(request: ApprovalRequest) -> bool:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool()  # no annotations: needs approval
    async def risky(call: Any, ctx: Any) -> ToolResult:
        raise AssertionError("must not run")

    @tool(annotations=SAFE)
    async def safe(call: Any, ctx: Any) -> ToolResult:
        raise AssertionError("must not run: gating never finished")

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("risky"), faux_tool_call("safe")], faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[risky, safe],
                                approver=slow_approver) as session:
            await _cancelled_prompt(session, asked)
            await _check_after_cancel(session, store, model, ["1.0", "1.1"])


async def test_cancel_while_tool_bodies_run(autojump_clock: Any) -> None:
    started = 0
    both_running = trio.Event()

    @tool(annotations=SAFE)
    async def hang(call: Any, ctx: Any) -> ToolResult:
        nonlocal started
        started += 1
        if started == 2:
            both_running.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("hang"), faux_tool_call("hang")], faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[hang]) as session:
            await _cancelled_prompt(session, both_running)
            for call_id in ("1.0", "1.1"):
                assert session.calls[call_id].started
            await _check_after_cancel(session, store, model, ["1.0", "1.1"])


async def test_cancel_keeps_a_sibling_that_already_completed(autojump_clock: Any) -> None:
    watcher = Watcher()
    quick_done = watcher.terminal("1.1")

    @tool(annotations=SAFE)
    async def hang(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE)
    async def quick(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("quick")])

    model = FauxModel([[faux_tool_call("hang"), faux_tool_call("quick")], faux_text("x")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(MemoryStore(), model=model, tools=[hang, quick]) as session:
                nursery.start_soon(watcher.run, session)
                await _cancelled_prompt(session, quick_done)
    assert session.calls["1.0"].status == "cancelled"
    assert session.calls["1.1"].status == "completed"
    results = [e for e in session.transcript if isinstance(e, ToolResultEntry)]
    assert [(e.call_id, e.result.is_error) for e in results] == [("1.0", True), ("1.1", False)]
    assert session.state.open_calls == ()


async def test_cancel_while_a_nested_call_runs(autojump_clock: Any) -> None:
    nested_running = trio.Event()

    @tool(annotations=SAFE, exposure="hidden")
    async def inner(call: Any, ctx: Any) -> ToolResult:
        nested_running.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE)
    async def outer(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("inner")
        raise AssertionError("unreachable: execute_tool raises when cancelled")

    @tool(annotations=SAFE)
    async def waiting(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("outer"), faux_tool_call("waiting")],
                       faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[outer, inner, waiting]) as session:
            await _cancelled_prompt(session, nested_running)
            records = session.records
            assert index_of(records, ToolCallCancelled, "1.0/0") < index_of(
                records, ToolCallCancelled, "1.0")
            assert session.calls["1.0/0"].parent_id == "1.0"
            await _check_after_cancel(session, store, model, ["1.0", "1.1"], nested=["1.0/0"])


async def test_cancel_during_gating_of_the_second_call(autojump_clock: Any) -> None:
    gating_second = trio.Event()
    ran: list[str] = []

    @tool(annotations=SAFE)
    async def work(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        return ToolResult(content=[text("work")])

    async def slow_handler(draft: ToolCallDraft) -> None:
        if draft.call_id == "1.1":
            gating_second.set()
            await trio.sleep_forever()

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("work")] * 3, faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[work]) as session:
            session.on_tool_call(slow_handler)
            await _cancelled_prompt(session, gating_second)
            # the first call was allowed but never started; the third was never gated
            assert ran == []
            assert not session.calls["1.0"].started
            assert session.calls["1.0"].policy is not None
            assert session.calls["1.2"].policy is None
            await _check_after_cancel(session, store, model, ["1.0", "1.1", "1.2"])


async def test_cancel_just_after_a_batch_was_handed_to_its_task(autojump_clock: Any) -> None:
    # The host cancels the prompt from inside the loop (a handler of the second turn's call),
    # and the loop, which runs in a task of the session's, never waits on its own: the prompt
    # must stop it at its next checkpoint (the call may get to run first), not let it run the
    # whole script, and every call must end, never be left running.
    ran: list[str] = []
    host = trio.CancelScope()

    @tool(annotations=SAFE)
    async def work(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        return ToolResult(content=[text("work")])

    def cancel_on_the_second_turn(draft: ToolCallDraft) -> None:
        if draft.call_id == "2.0":
            host.cancel()  # lands at the prompt's next checkpoint: after the batch started

    store = MemoryStore()
    model = FauxModel([faux_tool_call("work"), faux_tool_call("work"), faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[work]) as session:
            session.on_tool_call(cancel_on_the_second_turn)
            with host:
                await session.prompt("go")
            assert host.cancelled_caught
            second = session.calls["2.0"].status
            assert second in ("completed", "cancelled")
            assert ran == (["1.0", "2.0"] if second == "completed" else ["1.0"])
            assert session.state.open_calls == ()
            assert fold(await store.read(session.session_id)).snapshot() == session.state.snapshot()
            result = await session.prompt("again")
            assert result.stop == "end_turn" and result.text == "recovered"


class WritingStore(MemoryStore):
    """A MemoryStore whose ``append`` waits while it writes the batch that starts a tool, as
    a store doing real I/O (a database, a socket) waits: a cancellation can arrive then."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = trio.Event()
        self.proceed = trio.Event()

    async def append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        if not self.writing.is_set() and any(
            isinstance(r.event, ToolExecutionStarted) for r in records
        ):
            self.writing.set()
            await self.proceed.wait()
        await super().append(session_id, records, expected_seq)


async def test_cancel_while_the_store_writes(autojump_clock: Any) -> None:
    # a cancellation is not a failure of the store: it must neither lose the batch being
    # written nor break the session
    @tool(annotations=SAFE)
    async def hang(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    store = WritingStore()
    model = FauxModel([faux_tool_call("hang"), faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[hang]) as session:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    async def cancel_while_writing() -> None:
                        await store.writing.wait()
                        scope.cancel()
                        store.proceed.set()

                    nursery.start_soon(cancel_while_writing)
                    await session.prompt("go")
            assert scope.cancelled_caught
            await _check_after_cancel(session, store, model, ["1.0"])


async def test_cancel_while_the_model_is_thinking(autojump_clock: Any) -> None:
    asked = trio.Event()

    class SlowModel:
        def __init__(self) -> None:
            self.inner = FauxModel([faux_text("recovered")])

        async def complete(self, request: Any) -> Any:
            if not asked.is_set():
                asked.set()
                await trio.sleep_forever()
            return await self.inner.complete(request)

    store = MemoryStore()
    model = SlowModel()
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model) as session:  # type: ignore[arg-type]
            await _cancelled_prompt(session, asked)
            assert session.state.open_calls == ()
            assert session.state.turn == 0
            result = await session.prompt("again")
            assert result.text == "recovered"
    assert fold(await store.read(session.session_id)).snapshot() == session.state.snapshot()
