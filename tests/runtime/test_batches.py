"""Batches and timeouts, on real sessions (FauxModel + MemoryStore).

Nothing here waits for time to pass or asserts on durations: concurrency is shown by the
order of the log's records and by trio events that only a concurrent sibling can set. Tests
that could hang if the engine were wrong run on trio's autojump clock under ``fail_after``,
so a deadlock fails at once instead of hanging the suite.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from engine import (
    Session,
    ToolResult,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import (
    TERMINAL_EVENTS,
    ToolCallCancelled,
    ToolCallFailed,
    ToolExecutionStarted,
)
from tests.runtime.batching import DEADLOCK, SAFE, Watcher, events_of, index_of


# -- a batch runs in parallel ---------------------------------------------------------------


async def test_parallel_calls_are_in_flight_together(autojump_clock: Any) -> None:
    started = 0
    everyone_started = trio.Event()

    @tool(annotations=SAFE)
    async def rendezvous(call: Any, ctx: Any) -> ToolResult:
        # each call waits for an event only the last-started sibling sets: run one after
        # another, the first would wait forever
        nonlocal started
        started += 1
        if started == 3:
            everyone_started.set()
        await everyone_started.wait()
        return ToolResult(content=[text(call.call_id)])

    model = FauxModel([[faux_tool_call("rendezvous")] * 3, faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(MemoryStore(), model=model, tools=[rendezvous]) as session:
            await session.prompt("go")
    records = session.records
    ids = ["1.0", "1.1", "1.2"]
    last_start = max(index_of(records, ToolExecutionStarted, i) for i in ids)
    first_end = min(index_of(records, TERMINAL_EVENTS, i) for i in ids)
    assert last_start < first_end
    assert all(session.calls[i].status == "completed" for i in ids)


async def test_results_enter_the_transcript_in_the_assistants_order(autojump_clock: Any) -> None:
    watcher = Watcher()
    second_done = watcher.terminal("1.1")
    seen_by_first: list[list[str]] = []
    session: Session

    @tool(annotations=SAFE)
    async def slow(call: Any, ctx: Any) -> ToolResult:
        await second_done.wait()
        # the second call has ended, yet its result waits for this one
        seen_by_first.append([e.call_id for e in session.transcript
                              if isinstance(e, ToolResultEntry)])
        return ToolResult(content=[text("slow")])

    @tool(annotations=SAFE)
    async def fast(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("fast")])

    model = FauxModel([[faux_tool_call("slow", id="a"), faux_tool_call("fast", id="b")],
                       faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(MemoryStore(), model=model, tools=[slow, fast]) as session:
                nursery.start_soon(watcher.run, session)
                await session.prompt("go")
    records = session.records
    assert index_of(records, TERMINAL_EVENTS, "1.1") < index_of(records, TERMINAL_EVENTS, "1.0")
    assert seen_by_first == [[]]
    results = [e for e in session.transcript if isinstance(e, ToolResultEntry)]
    assert [(e.call_id, e.model_call_id, e.result.text) for e in results] == [
        ("1.0", "a", "slow"), ("1.1", "b", "fast")]
    # and the model was given them in that order
    assert [getattr(e, "model_call_id", None) for e in model.requests[1].transcript][2:] == ["a", "b"]


async def test_a_sequential_tool_serialises_its_whole_batch(autojump_clock: Any) -> None:
    running = 0
    overlaps: list[str] = []

    async def body(call: Any, ctx: Any) -> ToolResult:
        nonlocal running
        running += 1
        if running > 1:
            overlaps.append(call.call_id)
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        running -= 1
        return ToolResult(content=[text(call.call_id)])

    parallel = tool(name="par", annotations=SAFE)(body)
    sequential = tool(name="seq", annotations=SAFE, execution_mode="sequential")(body)
    model = FauxModel([
        [faux_tool_call("par"), faux_tool_call("par"), faux_tool_call("seq"), faux_tool_call("par")],
        faux_text("done"),
    ])
    with trio.fail_after(DEADLOCK):
        async with Session.open(MemoryStore(), model=model, tools=[parallel, sequential]) as session:
            await session.prompt("go")
    records = session.records
    ids = ["1.0", "1.1", "1.2", "1.3"]
    for before, after in zip(ids, ids[1:]):
        assert index_of(records, TERMINAL_EVENTS, before) < index_of(records, ToolExecutionStarted, after)
    assert overlaps == []
    assert all(session.calls[i].status == "completed" for i in ids)


async def test_without_a_sequential_tool_the_same_bodies_overlap(autojump_clock: Any) -> None:
    # the control for the test above: the same bodies do overlap when nothing is sequential
    running = 0
    overlaps: list[str] = []

    @tool(annotations=SAFE)
    async def par(call: Any, ctx: Any) -> ToolResult:
        nonlocal running
        running += 1
        if running > 1:
            overlaps.append(call.call_id)
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        running -= 1
        return ToolResult(content=[text(call.call_id)])

    model = FauxModel([[faux_tool_call("par")] * 3, faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(MemoryStore(), model=model, tools=[par]) as session:
            await session.prompt("go")
    assert overlaps != []


async def test_a_call_that_raises_never_cancels_its_siblings(autojump_clock: Any) -> None:
    watcher = Watcher()
    boom_ended = watcher.terminal("1.0")

    @tool(annotations=SAFE)
    async def boom(call: Any, ctx: Any) -> ToolResult:
        raise RuntimeError("kaboom")

    @tool(annotations=SAFE)
    async def patient(call: Any, ctx: Any) -> ToolResult:
        await boom_ended.wait()  # still running after its sibling failed
        for _ in range(3):
            await trio.lowlevel.checkpoint()
        return ToolResult(content=[text("still here")])

    model = FauxModel([[faux_tool_call("boom"), faux_tool_call("patient"), faux_tool_call("boom")],
                       faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(MemoryStore(), model=model, tools=[boom, patient]) as session:
                nursery.start_soon(watcher.run, session)
                result = await session.prompt("go")
    assert result.stop == "end_turn"
    for call_id in ("1.0", "1.2"):
        terminal = session.calls[call_id].terminal
        assert isinstance(terminal, ToolCallFailed)
        assert terminal.kind == "raised"
        assert terminal.error is not None and terminal.error.type == "RuntimeError"
        assert "kaboom" in terminal.result.text and terminal.result.is_error
    assert session.calls["1.1"].status == "completed"
    assert session.calls["1.1"].result.text == "still here"  # type: ignore[union-attr]
    assert not any(isinstance(r.event, ToolCallCancelled) for r in session.records)


# -- timeouts --------------------------------------------------------------------------------


async def test_a_timeout_fails_the_call_and_cancels_its_nested_calls(autojump_clock: Any) -> None:
    @tool(annotations=SAFE, exposure="hidden")
    async def hang(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE, exposure="hidden")
    async def deep(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("hang")
        raise AssertionError("unreachable")

    nested_running = trio.Event()
    outcomes: list[Any] = []

    @tool(annotations=SAFE, timeout=5)
    async def slow(call: Any, ctx: Any) -> ToolResult:
        quick = await ctx.execute_tool("deep_ok")  # a nested call that ends before the timeout
        outcomes.append(quick)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ctx.execute_tool, "hang")
            nursery.start_soon(ctx.execute_tool, "deep")
            nested_running.set()
        raise AssertionError("unreachable")

    @tool(annotations=SAFE, exposure="hidden")
    async def deep_ok(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("ok")])

    model = FauxModel([faux_tool_call("slow"), faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(MemoryStore(), model=model,
                                tools=[slow, hang, deep, deep_ok]) as session:
            result = await session.prompt("go")
    assert result.stop == "end_turn"
    assert nested_running.is_set()
    terminal = session.calls["1.0"].terminal
    assert isinstance(terminal, ToolCallFailed)
    assert terminal.kind == "timeout"
    assert terminal.result.is_error
    assert session.calls["1.0/0"].status == "completed"
    assert not outcomes[0].is_error
    # every nested call in flight got its own terminal cancelled event, the deepest first
    records = session.records
    # the two tasks start in either order, so find the ids by name
    by_name = {view.name: view.call_id for view in session.calls.values()
               if view.parent_id == "1.0" and view.name != "deep_ok"}
    hang_id, deep_id = by_name["hang"], by_name["deep"]
    assert {hang_id, deep_id} == {"1.0/1", "1.0/2"}
    assert session.state.children(deep_id) == (f"{deep_id}/0",)
    assert session.calls[f"{deep_id}/0"].name == "hang"
    for call_id in (hang_id, deep_id, f"{deep_id}/0"):
        [terminal] = [e for e in events_of(records, call_id) if isinstance(e, TERMINAL_EVENTS)]
        assert isinstance(terminal, ToolCallCancelled), call_id
        assert terminal.result.is_error
        assert index_of(records, ToolCallCancelled, call_id) < index_of(records, ToolCallFailed, "1.0")
    assert index_of(records, ToolCallCancelled, f"{deep_id}/0") < index_of(
        records, ToolCallCancelled, deep_id)
    assert session.state.open_calls == ()
    results = [e for e in session.transcript if isinstance(e, ToolResultEntry)]
    assert [e.call_id for e in results] == ["1.0"]


async def test_a_timeout_leaves_the_session_usable(autojump_clock: Any) -> None:
    @tool(annotations=SAFE, timeout=1)
    async def hang(call: Any, ctx: Any) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    model = FauxModel([faux_tool_call("hang"), faux_text("one"),
                       faux_tool_call("hang"), faux_text("two")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(MemoryStore(), model=model, tools=[hang]) as session:
            first = await session.prompt("go")
            second = await session.prompt("again")
    assert (first.text, second.text) == ("one", "two")
    for call_id in ("1.0", "3.0"):
        assert session.calls[call_id].terminal.kind == "timeout"  # type: ignore[union-attr]
    model.assert_complete()
