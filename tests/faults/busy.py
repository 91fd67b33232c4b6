"""The busy session the cancellation properties run (tests/faults/test_fault_cancel.py), and
the host around it.

The session is busy on purpose: batches of parallel calls, a sequential batch, nested calls
two levels deep (in parallel), calls that wait for the approver (which takes its time, refuses
some, and may answer ``LATER`` so the host has to resolve and resume, top-level calls
included), handlers that take their time and block some calls, calls the batch refuses without
running (an unknown tool, a model id used twice), a call that times out, the model thinking.
Every one of them *ticks* (a checkpoint that counts), and the host cancels its scope at a given
tick, at a given moment of virtual time, or from a task of its own once a given record is
written (:func:`drive`).

A cancellation that lands between two calls of the host (while it resolves an approval) leaves
the batch paused, as designed; the host then closes it with a cancelled ``resume()``. One that
lands inside a prompt or a resume must close the batch before it propagates
(:func:`host_step`).
"""

from __future__ import annotations

from typing import Any

import trio
from trio.testing import MockClock

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    Block,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolResultDraft,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import ModelMessage, ModelRequest
from events import MemoryStore
from events.types import ModelToolCall
from tests.faults.checks import DEADLOCK, SAFE, assert_consistent

SID = "busy"


def calls(*names_args: tuple[str, dict[str, Any]]) -> ModelMessage:
    return ModelMessage(tool_calls=tuple(
        ModelToolCall(id=f"m{i}", name=name, arguments=args)
        for i, (name, args) in enumerate(names_args)))


def with_refused(message: ModelMessage) -> ModelMessage:
    """``message`` followed by calls the batch refuses without a checkpoint: an unknown tool,
    and two calls that share one model id."""
    return ModelMessage(tool_calls=(
        *message.tool_calls,
        ModelToolCall(id="unknown", name="no_such_tool", arguments={}),
        ModelToolCall(id="twice", name="work", arguments={"n": 1}),
        ModelToolCall(id="twice", name="work", arguments={"n": 1}),
    ))


#: The batches that pause: a top-level call the approver defers (in ``later`` mode) followed
#: only by calls refused without a checkpoint, so a cancellation at the approver's last tick
#: has no checkpoint left to land on; then one deferred beside calls that run, so the batch
#: pauses the moment the last of them ends (a host task that follows the log may cancel then).
PAUSING = [
    with_refused(calls(("risky", {"n": 3}))),
    calls(("work", {"n": 1}), ("risky", {"n": 5}), ("work", {"n": 2})),
    ModelMessage(text="done"),
]
BUSY = [
    calls(("work", {"n": 2}), ("parent", {"n": 1}), ("risky", {"n": 0}),
          ("nap", {"n": 3}), ("timed", {"n": 1}), ("work", {"n": 5})),
    calls(("parent", {"n": 2}), ("ordered", {"n": 1}), ("work", {"n": 1})),
    calls(("parent", {"n": 4})),
    *PAUSING,
]


class Busy:
    """The busy session; ``tick()`` is where the host's cancellation may land."""

    def __init__(self, cancel_at: int | None, later: bool,
                 script: list[ModelMessage] = BUSY) -> None:
        self.cancel_at = cancel_at
        self.later = later
        self.ticks = 0
        self.scope = trio.CancelScope()
        self.ran: list[str] = []
        self.blocked: set[str] = set()
        self.denied: set[str] = set()
        self.deferred: set[str] = set()  # the approver answered LATER: the host answers
        self.recovering = False
        self.records = 0  # how many the log held once the host's prompting ended
        self.script = list(script)

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
        # deferred: nested calls of even n, top-level calls of odd n
        if self.later and n % 2 == (1 if request.origin == "model" else 0):
            self.deferred.add(request.call_id)
            return LATER
        if n % 3 == 2:
            self.denied.add(request.call_id)
            return False
        return True

    async def call_handler(self, draft: ToolCallDraft) -> Block | None:
        await self.tick()
        if draft.name == "work" and draft.arguments.get("n") == 5:
            self.blocked.add(draft.call_id)
            return Block("five is too many")
        return None

    async def result_handler(self, draft: ToolResultDraft) -> None:
        await self.tick()

    async def complete(self, request: ModelRequest) -> ModelMessage:
        await self.tick(2)
        if self.recovering:
            return ModelMessage(text="recovered")
        return self.script.pop(0)


async def cancel_at_record(session: Session, seq: int, scope: trio.CancelScope) -> None:
    """The host's own task (a UI following the log) cancels ``scope`` once the record ``seq``
    is written: between two steps of the engine's tasks, not inside one of them."""
    async for record in session.follow():
        if record.seq >= seq:
            scope.cancel()
            return


async def host_step(session: Session, action: Any) -> Any:
    """``await action()`` (a prompt or a resume); if it raises its cancellation, it must have
    closed its batch first (unlike a cancellation between two of the host's calls)."""
    try:
        return await action()
    except trio.Cancelled:
        assert session.state.open_calls == (), (
            f"the cancelled prompt left {session.state.open_calls} open")
        raise


async def run_host(busy: Busy, session: Session) -> None:
    """Prompt, answer what the approver deferred, resume, until the turn ends."""
    result = await host_step(session, lambda: session.prompt("go"))
    while result.stop == "paused":
        # only the requests the approver deferred: a pause can list one that the approver
        # is still deciding (test_fault_cancel.py: a pause waits until nothing else can move)
        for request in result.pending:
            if request.call_id in busy.deferred:
                busy.deferred.discard(request.call_id)
                await busy.tick()
                await session.resolve_approval(
                    request.call_id, granted=request.arguments["n"] % 4 != 0)
        result = await host_step(session, session.resume)
    assert result.stop == "end_turn", result


async def drive(busy: Busy, deadline: float | None, at_record: int | None = None) -> None:
    """Run the busy session under the host's scope, cancelled at ``busy.cancel_at`` ticks, at
    ``deadline`` (virtual seconds) or once record ``at_record`` is written; then check it."""
    store = MemoryStore()
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=busy, tools=busy.tools(),  # type: ignore[arg-type]
                                approver=busy.approver, session_id=SID, create=True) as session:
            session.on_tool_call(busy.call_handler)
            session.on_tool_result(busy.result_handler)
            if deadline is not None:
                busy.scope.deadline = trio.current_time() + deadline
            async with trio.open_nursery() as host:
                if at_record is not None:
                    host.start_soon(cancel_at_record, session, at_record, busy.scope)
                with busy.scope:
                    await run_host(busy, session)
                host.cancel_scope.cancel()
            busy.records = session.state.last_seq

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


def count_ticks(later: bool, script: list[ModelMessage] = BUSY) -> int:
    busy = Busy(None, later, script)
    trio.run(drive, busy, None, clock=MockClock(autojump_threshold=0))
    return busy.ticks


def count_records(later: bool, script: list[ModelMessage] = BUSY) -> int:
    """How many records the run writes (the host's task cancels at none of them)."""
    busy = Busy(None, later, script)
    trio.run(drive, busy, None, clock=MockClock(autojump_threshold=0))
    return busy.records
