"""A host cancel scope around a busy session, cancelled at a random point: afterwards no call is
open, the stored log folds to the live state, and the session prompts again.

The session is busy on purpose: batches of parallel calls, a sequential batch, nested calls
two levels deep (in parallel), calls that wait for the approver (which takes its time, refuses
some, and may answer ``LATER`` so the host has to resolve and resume), handlers that take their
time and block some calls, a call that times out, the model thinking. Every one of them
*ticks* (a checkpoint that counts); Hypothesis picks the tick at which the host's scope is
cancelled, or instead a moment of virtual time (MockClock, autojumping) as its deadline. The
cancellation thus lands while the model is asked, while a handler or the approver runs, in the
middle of a batch's gating, inside tool bodies at any depth, between a pause and the resume.

A cancellation that lands between two calls of the host (while it resolves an approval) leaves
the batch paused, as designed; the host then closes it with a cancelled ``resume()``.
"""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st
from trio.testing import MockClock

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    Block,
    Session,
    ToolCallEvent,
    ToolResult,
    ToolResultEvent,
    text,
    tool,
)
from engine.models import (
    FauxModel,
    ModelMessage,
    ModelRequest,
    faux_text,
    faux_tool_call,
)
from engine.reducers import ToolResultEntry
from events import MemoryStore
from events.types import ModelToolCall
from tests.faults.checks import DEADLOCK, SAFE, assert_consistent

SID = "busy"


def calls(*names_args: tuple[str, dict[str, Any]]) -> ModelMessage:
    return ModelMessage(tool_calls=tuple(
        ModelToolCall(id=f"m{i}", name=name, arguments=args)
        for i, (name, args) in enumerate(names_args)))


class Busy:
    """The busy session; ``tick()`` is where the host's cancellation may land."""

    def __init__(self, cancel_at: int | None, later: bool) -> None:
        self.cancel_at = cancel_at
        self.later = later
        self.ticks = 0
        self.scope = trio.CancelScope()
        self.ran: list[str] = []
        self.blocked: set[str] = set()
        self.denied: set[str] = set()
        self.deferred: set[str] = set()  # the approver answered LATER: the host answers
        self.recovering = False
        self.script = [
            calls(("work", {"n": 2}), ("parent", {"n": 1}), ("risky", {"n": 0}),
                  ("nap", {"n": 3}), ("timed", {"n": 1}), ("work", {"n": 5})),
            calls(("parent", {"n": 2}), ("ordered", {"n": 1}), ("work", {"n": 1})),
            calls(("risky", {"n": 3}), ("parent", {"n": 4})),
            ModelMessage(text="done"),
        ]

    async def tick(self, count: int = 1) -> None:
        for _ in range(count):
            await trio.lowlevel.checkpoint()
            self.ticks += 1
            if self.ticks == self.cancel_at:
                self.scope.cancel()

    def tools(self) -> list[Any]:
        busy = self

        @tool(annotations=SAFE)
        async def work(call: Any, ctx: Any) -> ToolResult:
            busy.ran.append(call.call_id)
            for step in range(call.arguments.get("n", 1)):
                ctx.report_progress(f"step {step}")
                await busy.tick()
            return ToolResult(content=[text("worked")])

        @tool(annotations=SAFE)
        async def nap(call: Any, ctx: Any) -> ToolResult:
            busy.ran.append(call.call_id)
            await trio.sleep(call.arguments.get("n", 1))
            await busy.tick()
            return ToolResult(content=[text("rested")])

        @tool(annotations=SAFE, timeout=2)
        async def timed(call: Any, ctx: Any) -> ToolResult:
            busy.ran.append(call.call_id)
            await busy.tick()
            await trio.sleep(10)
            raise AssertionError("unreachable: the timeout comes first")

        @tool(annotations=Annotations(destructive=True))
        async def risky(call: Any, ctx: Any) -> ToolResult:
            busy.ran.append(call.call_id)
            await busy.tick()
            return ToolResult(content=[text("risky done")])

        @tool(annotations=SAFE, execution_mode="sequential")
        async def ordered(call: Any, ctx: Any) -> ToolResult:
            busy.ran.append(call.call_id)
            await busy.tick(2)
            return ToolResult(content=[text("in order")])

        @tool(annotations=SAFE)
        async def parent(call: Any, ctx: Any) -> ToolResult:
            busy.ran.append(call.call_id)
            n = call.arguments.get("n", 1)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ctx.execute_tool, "work", {"n": n})
                nursery.start_soon(ctx.execute_tool, "risky", {"n": n})
                if call.call_id.count("/") < 2:
                    nursery.start_soon(ctx.execute_tool, "parent", {"n": n + 1})
            await busy.tick()
            await ctx.execute_tool("nap", {"n": 1})
            return ToolResult(content=[text("parent done")])

        return [work, nap, timed, risky, ordered, parent]

    async def approver(self, request: ApprovalRequest) -> Any:
        await self.tick(2)
        n = request.arguments.get("n", 0)
        if self.later and request.origin == "nested" and n % 2 == 0:
            self.deferred.add(request.call_id)
            return LATER
        if n % 3 == 2:
            self.denied.add(request.call_id)
            return False
        return True

    async def call_handler(self, event: ToolCallEvent) -> Block | None:
        await self.tick()
        if event.name == "work" and event.arguments.get("n") == 5:
            self.blocked.add(event.call_id)
            return Block("five is too many")
        return None

    async def result_handler(self, event: ToolResultEvent) -> None:
        await self.tick()

    async def complete(self, request: ModelRequest) -> ModelMessage:
        await self.tick(2)
        if self.recovering:
            return ModelMessage(text="recovered")
        return self.script.pop(0)


async def drive(busy: Busy, deadline: float | None) -> None:
    store = MemoryStore()
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=busy, tools=busy.tools(),  # type: ignore[arg-type]
                                approver=busy.approver, session_id=SID, create=True) as session:
            session.on_tool_call(busy.call_handler)
            session.on_tool_result(busy.result_handler)
            if deadline is not None:
                busy.scope.deadline = trio.current_time() + deadline
            with busy.scope:
                result = await session.prompt("go")
                while result.stop == "paused":
                    # only the requests the approver deferred: a pause can list one that
                    # the approver is still deciding (see the test at the end of this file)
                    for request in result.pending:
                        if request.call_id in busy.deferred:
                            busy.deferred.discard(request.call_id)
                            await busy.tick()
                            await session.resolve_approval(
                                request.call_id, approved=request.arguments["n"] % 4 != 0)
                    result = await session.resume()
                assert result.stop == "end_turn", result

            if session.state.open_calls:  # cancelled between the host's calls: still paused
                assert busy.scope.cancelled_caught
                with trio.CancelScope() as closing:
                    closing.cancel()
                    await session.resume()
            assert session.state.open_calls == ()
            assert session.state.pending_approvals == ()
            await assert_consistent(store, SID, session.state)

            # nothing that was stopped ran
            assert not (busy.blocked | busy.denied) & set(busy.ran)
            for call_id in busy.ran:
                assert session.calls[call_id].started, call_id
            # every top-level call has its result in the transcript, in the assistant's order
            results = [e.call_id for e in session.transcript if isinstance(e, ToolResultEntry)]
            assert results == sorted(results, key=lambda cid: tuple(map(int, cid.split("."))))

            busy.recovering = True
            again = await session.prompt("again")
            assert again.stop == "end_turn" and again.text == "recovered"
    await assert_consistent(store, SID, session.state)


def count_ticks(later: bool) -> int:
    busy = Busy(None, later)
    trio.run(drive, busy, None, clock=MockClock(autojump_threshold=0))
    return busy.ticks


#: About how many ticks an uncancelled run makes (the control test below keeps it honest), so
#: the cancel points Hypothesis draws cover the whole run, and a few fall after its end.
TICKS = 200


@given(cancel_at=st.integers(1, TICKS), later=st.booleans())
def test_a_host_cancel_at_any_tick_leaves_a_consistent_log_and_a_usable_session(
    cancel_at: int, later: bool
) -> None:
    busy = Busy(cancel_at, later)
    trio.run(drive, busy, None, clock=MockClock(autojump_threshold=0))


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
    task of the session's (engine/batch.py). The host answers and resumes, and cancels the
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
