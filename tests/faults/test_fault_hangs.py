"""Tools that hang past their timeout, at any depth, and tools that hold off cancellation for a
while: every call still ends, with one terminal event, and the session goes on.

Time is trio's autojump clock: a tool that "hangs" sleeps in virtual time, and the clock jumps
to the next deadline as soon as every task waits, so nothing here waits for real. Each test runs
under ``fail_after``: an engine that never ended a call would fail at once instead of hanging.
tests/runtime/test_batches.py covers the plain timeout of a top-level call; this file adds the
fault angles: nested timeouts, timeouts at several levels, timeouts while a nested call waits for an
approval, and bodies that shield themselves from the cancellation.
"""

from __future__ import annotations

from typing import Any

import trio

from engine import LATER, Session, ToolResult, approve_all, text, tool
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore, Record
from events.types import (
    TERMINAL_EVENTS,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallFailed,
)
from tests.faults.checks import DEADLOCK, SAFE, assert_consistent


def ending(records: tuple[Record, ...] | list[Record], call_id: str) -> Any:
    [event] = [r.event for r in records
               if isinstance(r.event, TERMINAL_EVENTS) and r.event.call_id == call_id]
    return event


def position(records: tuple[Record, ...], call_id: str) -> int:
    return next(i for i, r in enumerate(records)
                if isinstance(r.event, TERMINAL_EVENTS) and r.event.call_id == call_id)


async def run(tools: list[Any], script: list[Any], **kwargs: Any) -> tuple[Session, MemoryStore]:
    store = MemoryStore()
    model = FauxModel([*script, faux_text("done"), faux_text("again")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=tools, session_id="s", create=True,
                                **kwargs) as session:
            result = await session.prompt("go")
            assert result.stop == "end_turn" and result.text == "done", result
            assert (await session.prompt("again")).text == "again"  # the session goes on
    await assert_consistent(store, "s", session.state)
    return session, store


async def test_a_nested_call_past_its_own_timeout_fails_alone(autojump_clock: Any) -> None:
    @tool(annotations=SAFE, timeout=3, exposure="hidden")
    async def stuck(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("stuck")
        again = await ctx.execute_tool("stuck")
        return ToolResult(content=[text("parent done")],
                          structured_content={"errors": [outcome.is_error, again.is_error],
                                              "text": outcome.result.text})

    @tool(annotations=SAFE)
    async def sibling(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep(100)  # outlives both nested timeouts
        return ToolResult(content=[text("sibling done")])

    session, _ = await run([stuck, parent, sibling],
                           [[faux_tool_call("parent"), faux_tool_call("sibling")]])
    for call_id in ("1.0/0", "1.0/1"):
        failed = ending(session.records, call_id)
        assert isinstance(failed, ToolCallFailed) and failed.kind == "timeout", failed
    parent_view = session.calls["1.0"]
    assert parent_view.status == "completed"
    assert parent_view.result is not None
    assert parent_view.result.structured_content == {
        "errors": [True, True], "text": "stuck timed out after 3 s"}
    assert session.calls["1.1"].status == "completed"


async def test_the_parents_timeout_cancels_a_nested_call_with_a_longer_one(
    autojump_clock: Any,
) -> None:
    @tool(annotations=SAFE, timeout=1_000, exposure="hidden")
    async def slow(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE, timeout=2)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("slow")
        raise AssertionError("unreachable: the parent's deadline comes first")

    session, _ = await run([slow, parent], [faux_tool_call("parent")])
    records = session.records
    assert isinstance(ending(records, "1.0/0"), ToolCallCancelled)
    failed = ending(records, "1.0")
    assert isinstance(failed, ToolCallFailed) and failed.kind == "timeout"
    assert position(records, "1.0/0") < position(records, "1.0")


async def test_timeouts_at_every_level_end_each_level_innermost_first(autojump_clock: Any) -> None:
    # level k waits for level k + 1, then hangs; each has a deadline, the inner ones shorter
    depth = 4
    reached: list[int] = []

    async def level(call: Any, ctx: Any) -> ToolResult:
        k = call.arguments["k"]
        reached.append(k)
        if k < depth:
            await ctx.execute_tool(f"level{k + 1}", {"k": k + 1})
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    levels = [tool(name=f"level{k}", annotations=SAFE, exposure="direct" if k == 1 else "hidden",
                   timeout=10.0 * (depth + 1 - k))(level) for k in range(1, depth + 1)]
    session, _ = await run(levels, [faux_tool_call("level1", {"k": 1})])
    assert reached == [1, 2, 3, 4]
    ids = ["1.0", "1.0/0", "1.0/0/0", "1.0/0/0/0"]
    for call_id in ids:
        failed = ending(session.records, call_id)
        assert isinstance(failed, ToolCallFailed) and failed.kind == "timeout", (call_id, failed)
    ends = [position(session.records, call_id) for call_id in ids]
    assert ends == sorted(ends, reverse=True)  # the innermost ended first


async def test_a_parent_times_out_while_its_nested_call_waits_for_an_approval(
    autojump_clock: Any,
) -> None:
    @tool()  # needs approval
    async def risky(call: Any, ctx: Any) -> ToolResult:
        raise AssertionError("never approved, never run")

    @tool(annotations=SAFE, timeout=5)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("risky")
        raise AssertionError("unreachable: the deadline passes while the approval waits")

    async def later(request: Any) -> Any:
        return LATER

    store = MemoryStore()
    model = FauxModel([faux_tool_call("parent"), faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[risky, parent], approver=later,
                                session_id="s", create=True) as session:
            paused = await session.prompt("go")
            assert paused.stop == "paused" and [r.call_id for r in paused.pending] == ["1.0/0"]
            await trio.sleep(10)  # the host is away; the parent's deadline passes
            assert session.pending_approvals() == ()
            assert session.calls["1.0/0"].status == "cancelled"
            failed = session.calls["1.0"].terminal
            assert isinstance(failed, ToolCallFailed) and failed.kind == "timeout"
            result = await session.resume()
            assert result.stop == "end_turn" and result.text == "done"
    await assert_consistent(store, "s", session.state)


async def test_a_body_that_shields_itself_past_its_timeout_still_ends(autojump_clock: Any) -> None:
    @tool(annotations=SAFE, timeout=5)
    async def stubborn(call: Any, ctx: Any) -> ToolResult:
        with trio.CancelScope(shield=True):
            await trio.sleep(60)  # the deadline passes in here
        await trio.lowlevel.checkpoint()  # and is delivered here
        raise AssertionError("unreachable")

    @tool(annotations=SAFE, timeout=5)
    async def finishes(call: Any, ctx: Any) -> ToolResult:
        with trio.CancelScope(shield=True):
            await trio.sleep(60)
        return ToolResult(content=[text("late but done")])  # no checkpoint: it returns

    @tool(annotations=SAFE, timeout=5)
    async def slow_cleanup(call: Any, ctx: Any) -> ToolResult:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(60)  # cleaning up, deaf to the cancellation
        raise AssertionError("unreachable")

    session, _ = await run(
        [stubborn, finishes, slow_cleanup],
        [[faux_tool_call("stubborn"), faux_tool_call("finishes"), faux_tool_call("slow_cleanup")]])
    for call_id in ("1.0", "1.2"):
        failed = ending(session.records, call_id)
        assert isinstance(failed, ToolCallFailed) and failed.kind == "timeout", (call_id, failed)
    # a body that returns before it meets the cancellation has returned: its result stands
    assert isinstance(ending(session.records, "1.1"), ToolCallCompleted)
    assert session.calls["1.1"].result.text == "late but done"  # type: ignore[union-attr]


async def test_a_body_that_swallows_its_cancellation_still_ends(autojump_clock: Any) -> None:
    @tool(annotations=SAFE, timeout=5)
    async def swallower(call: Any, ctx: Any) -> ToolResult:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            pass  # bad manners: the scope stays cancelled, so the next checkpoint raises again
        await trio.sleep(1)
        raise AssertionError("unreachable")

    session, _ = await run([swallower], [faux_tool_call("swallower")])
    failed = ending(session.records, "1.0")
    assert isinstance(failed, ToolCallFailed) and failed.kind == "timeout"


async def test_a_host_cancel_waits_for_a_shielded_body_then_closes_every_call(
    autojump_clock: Any,
) -> None:
    shielded = trio.Event()

    @tool(annotations=SAFE)
    async def stubborn(call: Any, ctx: Any) -> ToolResult:
        with trio.CancelScope(shield=True):
            shielded.set()
            await trio.sleep(60)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE)
    async def child(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("child")
        raise AssertionError("unreachable")

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("stubborn"), faux_tool_call("parent")],
                       faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[stubborn, child, parent],
                                session_id="s", create=True) as session:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    async def cancel_when_shielded() -> None:
                        await shielded.wait()
                        scope.cancel()
                    nursery.start_soon(cancel_when_shielded)
                    await session.prompt("go")
            assert scope.cancelled_caught
            for call_id in ("1.0", "1.1", "1.1/0"):
                assert session.calls[call_id].status == "cancelled", call_id
            assert session.state.open_calls == ()
            assert (await session.prompt("again")).text == "recovered"
    await assert_consistent(store, "s", session.state)


async def test_a_hanging_call_in_a_sequential_batch_times_out_and_the_rest_run(
    autojump_clock: Any,
) -> None:
    ran: list[str] = []

    @tool(annotations=SAFE, timeout=2, execution_mode="sequential")
    async def stuck(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE)
    async def quick(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        return ToolResult(content=[text("quick")])

    session, _ = await run(
        [stuck, quick], [[faux_tool_call("stuck"), faux_tool_call("quick"),
                          faux_tool_call("stuck")]], approver=approve_all)
    assert ran == ["1.0", "1.1", "1.2"]
    assert [session.calls[c].status for c in ("1.0", "1.1", "1.2")] == [
        "failed", "completed", "failed"]
    results = [e.call_id for e in session.transcript if isinstance(e, ToolResultEntry)]
    assert results[:3] == ["1.0", "1.1", "1.2"]
