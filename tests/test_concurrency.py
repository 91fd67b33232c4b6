"""Batches, timeouts, cancellation and followers, on real sessions (FauxModel + MemoryStore).

Nothing here waits for time to pass or asserts on durations: concurrency is shown by the
order of the log's records and by trio events that only a concurrent sibling can set. Tests
that could hang if the engine were wrong run on trio's autojump clock under ``fail_after``,
so a deadlock fails at once instead of hanging the suite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio
import trio.testing

from engine import (
    Annotations,
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
    TERMINAL_EVENTS,
    Record,
    ToolCallCancelled,
    ToolCallFailed,
    ToolExecutionStarted,
)

SAFE = Annotations(read_only=True, open_world=False)
DEADLOCK = 60  # seconds of (virtual, autojumped) time after which a test counts as hung


# -- helpers ---------------------------------------------------------------------------------


def index_of(records: Sequence[Record], kind: type[Any] | tuple[type[Any], ...], call_id: str) -> int:
    """Position of the first record of ``kind`` about ``call_id``."""
    for i, record in enumerate(records):
        if isinstance(record.event, kind) and getattr(record.event, "call_id", None) == call_id:
            return i
    raise AssertionError(f"no {kind} for call {call_id}")


def events_of(records: Sequence[Record], call_id: str) -> list[Any]:
    return [r.event for r in records if getattr(r.event, "call_id", None) == call_id]


class Watcher:
    """Follows a session and sets a trio event when a matching record appears.

    Run :meth:`run` in a nursery that encloses the session's ``open`` block; it ends when the
    session closes.
    """

    def __init__(self) -> None:
        self._waits: list[tuple[Callable[[Record], bool], trio.Event]] = []
        self.seen: list[Record] = []

    def when(self, predicate: Callable[[Record], bool]) -> trio.Event:
        event = trio.Event()
        self._waits.append((predicate, event))
        return event

    def terminal(self, call_id: str) -> trio.Event:
        return self.when(lambda r: isinstance(r.event, TERMINAL_EVENTS)
                         and r.event.call_id == call_id)

    async def run(self, session: Session) -> None:
        async for record in session.follow():
            self.seen.append(record)
            for predicate, event in self._waits:
                if predicate(record):
                    event.set()


def assert_all_cancelled_in_transcript(session: Session, turn: int, count: int) -> None:
    """The transcript shows one error result per call of turn ``turn``, in order."""
    entries = [e for e in session.transcript if isinstance(e, ToolResultEntry)
               and e.call_id.startswith(f"{turn}.")]
    assert [e.call_id for e in entries] == [f"{turn}.{i}" for i in range(count)]
    for entry in entries:
        assert entry.result.is_error
        assert "cancelled" in entry.result.text
    assert all("/" not in e.call_id for e in session.transcript
               if isinstance(e, ToolResultEntry))


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


# -- followers ---------------------------------------------------------------------------------


async def test_a_follower_gets_every_record_in_order_and_ends_with_the_session(
    autojump_clock: Any,
) -> None:
    @tool(annotations=SAFE)
    async def work(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("half")
        return ToolResult(content=[text("done")])

    got: list[Record] = []
    follower_ended = trio.Event()

    async def follow(session: Session) -> None:
        async for record in session.follow():
            got.append(record)
        follower_ended.set()

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("work"), faux_tool_call("work")], faux_text("ok")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(store, model=model, tools=[work]) as session:
                nursery.start_soon(follow, session)
                await session.prompt("go")
                await trio.testing.wait_all_tasks_blocked()
                assert not follower_ended.is_set()  # still following an open session
            # leaving the session's block ends the follower; the nursery then exits
    assert follower_ended.is_set()
    stored = await store.read(session.session_id)
    assert got == stored
    assert [r.seq for r in got] == list(range(1, len(got) + 1))


async def test_a_slow_follower_misses_nothing_and_slows_nobody(autojump_clock: Any) -> None:
    @tool(annotations=SAFE)
    async def work(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("done")])

    got: list[Record] = []
    read_first = trio.Event()
    release = trio.Event()

    async def slow_follower(session: Session) -> None:
        async for record in session.follow():
            got.append(record)
            read_first.set()
            await release.wait()  # blocks until the session has finished its prompt
            await trio.lowlevel.checkpoint()

    store = MemoryStore()
    model = FauxModel([faux_tool_call("work"), [faux_tool_call("work")] * 2, faux_text("ok")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(store, model=model, tools=[work]) as session:
                nursery.start_soon(slow_follower, session)
                await read_first.wait()
                result = await session.prompt("go")
                # the prompt ran to its end while the follower sat on its first record
                assert result.stop == "end_turn"
                assert len(got) == 1
                total = len(session.records)
                assert total > 10
                release.set()
    stored = await store.read(session.session_id)
    assert len(stored) == total
    assert got == stored


async def test_a_follower_can_start_after_records(autojump_clock: Any) -> None:
    got: list[Record] = []

    async def follow(session: Session, after: int) -> None:
        async for record in session.follow(after):
            got.append(record)

    model = FauxModel([faux_text("one"), faux_text("two")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(MemoryStore(), model=model) as session:
                await session.prompt("first")
                after = len(session.records)
                nursery.start_soon(follow, session, after)
                await session.prompt("second")
    assert [r.seq for r in got] == list(range(after + 1, len(session.records) + 1))
    assert got == list(session.records[after:])
