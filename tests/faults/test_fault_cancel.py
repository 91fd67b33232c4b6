"""A host cancel scope around a busy session (tests/faults/busy.py), cancelled at a random
point: afterwards no call is open, the stored log folds to the live state, and the session
prompts again.

Hypothesis picks the tick at which the host's scope is cancelled, a moment of virtual time
(MockClock, autojumping) as its deadline, or the record after which a task of the host's own
(one that follows the log) cancels it. The cancellation thus lands while the model is asked,
while a handler or the approver runs, in the middle of a batch's gating, inside tool bodies at
any depth, between two steps of the engine's tasks, between a pause and the resume. The
batches that pause run alone too, so the moments around a pause are drawn often.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from engine import LATER, ApprovalRequest, Session, ToolResult, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from tests.faults.busy import PAUSING, SID, Busy, count_records, count_ticks, drive
from tests.faults.checks import DEADLOCK, SAFE, assert_consistent

#: About how many ticks and records an uncancelled run makes (the control test below keeps it
#: honest), so the cancel points Hypothesis draws cover the whole run, and a few fall after its
#: end; the same for the run of the batches that pause alone.
TICKS, RECORDS = 220, 300
PAUSING_TICKS, PAUSING_RECORDS = 30, 55


@given(cancel_at=st.integers(1, TICKS), later=st.booleans())
def test_a_host_cancel_at_any_tick_leaves_a_consistent_log_and_a_usable_session(
    cancel_at: int, later: bool
) -> None:
    busy = Busy(cancel_at, later)
    trio.run(drive, busy, None, clock=MockClock(autojump_threshold=0))


@given(at_record=st.integers(1, RECORDS), later=st.booleans())
def test_a_host_task_cancelling_at_any_record_leaves_a_consistent_log_and_a_usable_session(
    at_record: int, later: bool
) -> None:
    """The host's own task (a UI following the log) cancels: between two steps of the
    engine's tasks, where a tick's cancellation, raised inside one of them, never lands."""
    busy = Busy(None, later)
    trio.run(drive, busy, None, at_record, clock=MockClock(autojump_threshold=0))


@settings(max_examples=2 * (PAUSING_TICKS + PAUSING_RECORDS))  # a small space: most of it
@given(point=st.one_of(st.tuples(st.just("tick"), st.integers(1, PAUSING_TICKS)),
                       st.tuples(st.just("record"), st.integers(1, PAUSING_RECORDS))))
def test_a_host_cancel_as_a_batch_pauses_closes_the_batch(point: tuple[str, int]) -> None:
    """The batches that pause, alone (so each cancel point is drawn often): a cancellation
    at the approver's last tick or as the last running call ends closes the batch."""
    kind, at = point
    busy = Busy(at if kind == "tick" else None, True, PAUSING)
    trio.run(drive, busy, None, at if kind == "record" else None,
             clock=MockClock(autojump_threshold=0))


@given(deadline=st.floats(0, 30), later=st.booleans())
def test_a_host_deadline_at_any_moment_leaves_a_consistent_log_and_a_usable_session(
    deadline: float, later: bool
) -> None:
    busy = Busy(None, later)
    trio.run(drive, busy, deadline, clock=MockClock(autojump_threshold=0))


def test_the_busy_session_is_busy() -> None:
    """The control: uncancelled, the scene makes every kind of call it claims to, and about
    as many ticks as the cancel points are drawn from."""
    for later in (False, True):
        assert TICKS * 3 // 4 < count_ticks(later) < TICKS
        assert PAUSING_TICKS // 2 < count_ticks(later, PAUSING) < PAUSING_TICKS
        assert RECORDS * 3 // 4 < count_records(later) < RECORDS
        assert PAUSING_RECORDS // 2 < count_records(later, PAUSING) < PAUSING_RECORDS
    busy = Busy(None, True)
    trio.run(drive, busy, None, clock=MockClock(autojump_threshold=0))
    assert busy.blocked and busy.denied
    assert any(call_id.count("/") == 2 for call_id in busy.ran)


async def test_a_pause_waits_until_nothing_else_can_move(autojump_clock: Any) -> None:
    """docs/resume.md: the prompt returns paused "once nothing else can move". Here one nested
    call waits for the host (LATER) while its sibling's approver is still deciding: the pause
    must wait for that answer, and list only what waits for the host."""
    ran: list[Any] = []

    @tool()  # needs approval
    async def risky(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.arguments["who"])
        return ToolResult(content=[text("risky done")])

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ctx.execute_tool, "risky", {"who": "deferred"})
            nursery.start_soon(ctx.execute_tool, "risky", {"who": "deliberated"})
        return ToolResult(content=[text("parent done")])

    deliberating = trio.Event()

    async def approver(request: ApprovalRequest) -> Any:
        if request.arguments["who"] == "deferred":
            return LATER
        deliberating.set()
        await trio.sleep(1)  # the approver takes its time, and then grants
        return True

    store = MemoryStore()
    model = FauxModel([faux_tool_call("parent"), faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[risky, parent], approver=approver,
                                session_id=SID, create=True) as session:
            paused = await session.prompt("go")
            assert paused.stop == "paused"
            assert deliberating.is_set()
            listed = {request.arguments["who"] for request in paused.pending}
            assert listed == {"deferred"}, f"the pause lists {listed}"
            assert ran == ["deliberated"], "the prompt paused while a call could still move"
            for request in paused.pending:
                await session.resolve_approval(request.call_id, False, reason="not now")
            assert (await session.resume()).stop == "end_turn"
            assert session.calls["1.0"].status == "completed"
    await assert_consistent(store, SID, session.state)


async def test_cancelling_a_resume_stops_the_loop_a_pause_left_behind(autojump_clock: Any) -> None:
    """A prompt that paused left the call whose nested call waits for the host running in a
    task of the session's (engine/runtime/batch.py). The host answers and resumes, and cancels the
    resume while that call still works: the resume must stop that call too and raise only once
    every call of the batch is closed, not leave the call to write after it."""

    @tool()  # needs approval
    async def risky(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("risky done")])

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("risky", {})
        await trio.sleep(60)  # still working when the host gives up
        return ToolResult(content=[text("parent done")])

    async def approver(request: ApprovalRequest) -> Any:
        return LATER

    store = MemoryStore()
    model = FauxModel([faux_tool_call("parent"), faux_text("done"), faux_text("again")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[risky, parent], approver=approver,
                                session_id=SID, create=True) as session:
            paused = await session.prompt("go")
            assert paused.stop == "paused"
            [request] = paused.pending
            assert request.call_id == "1.0/0"
            await session.resolve_approval(request.call_id, True)
            with trio.move_on_after(5) as host:
                await session.resume()
            assert host.cancelled_caught
            # raised only once everything was closed: nothing is written after it
            records = len(session.records)
            assert session.state.open_calls == ()
            await trio.sleep(120)
            assert len(session.records) == records
            assert session.calls["1.0/0"].status == "completed"
            assert session.calls["1.0"].status == "cancelled"
            assert len(model.requests) == 1  # the model was not asked again
            again = await session.prompt("again")
            assert again.stop == "end_turn" and again.text == "done"
    await assert_consistent(store, SID, session.state)


# -- a cancellation the loop has no checkpoint left to notice -------------------------------


@pytest.mark.parametrize("batch", [
    [faux_tool_call("risky")],
    # the calls after the cancelled one are refused without a checkpoint: unknown, duplicates
    [faux_tool_call("risky"), faux_tool_call("no_such_tool"), faux_tool_call("no_such_tool")],
    [faux_tool_call("risky"), faux_tool_call("risky", id="twice"),
     faux_tool_call("risky", id="twice")],
], ids=["alone", "then-unknown-tools", "then-duplicate-ids"])
async def test_a_cancel_that_lands_as_the_approver_defers_closes_the_batch(
    batch: list[Any], autojump_clock: Any
) -> None:
    """The host's scope is cancelled while the approver decides the batch's first call (its
    own approval UI gives up on the whole prompt), and the approver answers LATER without
    yielding again; nothing after it in the batch checkpoints. The prompt must not return
    paused, nor raise its cancellation with the batch still open: every call is closed as
    cancelled, and no other call is put to the approver once the host gave up."""
    host = trio.CancelScope()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> Any:
        asked.append(request.call_id)
        host.cancel()
        return LATER

    @tool()  # needs approval
    async def risky(call: Any, ctx: Any) -> ToolResult:
        raise AssertionError("must not run: the host cancelled the prompt")

    store = MemoryStore()
    model = FauxModel([batch, faux_text("recovered")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=[risky], approver=approver,
                                session_id=SID, create=True) as session:
            with host:
                await session.prompt("go")
            assert host.cancelled_caught
            assert asked == ["1.0"]
            assert session.state.open_calls == ()
            assert session.state.pending_approvals == ()
            # the calls after it were neither gated nor refused: the host had given up
            for call_id in (f"1.{i}" for i in range(len(batch))):
                assert session.calls[call_id].status == "cancelled", call_id
            await assert_consistent(store, SID, session.state)
            again = await session.prompt("again")
            assert again.stop == "end_turn" and again.text == "recovered"
    await assert_consistent(store, SID, session.state)
