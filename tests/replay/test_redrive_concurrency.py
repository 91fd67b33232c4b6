"""Re-drive replay of sessions that paused, were cancelled by the host, or whose concurrent calls
share a session grant: each replays as recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
import trio

from engine import (
    LATER,
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    Session,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.models import FauxStep, faux_text, faux_tool_call
from engine.replay import ReplayReport, redrive
from events import Record
from events.types import (
    ApprovalRequested,
    ApprovalResolved,
)
from tests.replay.replaying import SAFE, explain, record_session, same_calls, virtual
from tests.strategies import counting_clock


@tool(annotations=Annotations(destructive=True))
async def wipe(call: Any, ctx: Any) -> ToolResult:
    """Needs approval."""
    return ToolResult(content=[text("wiped")])


@tool(annotations=SAFE)
async def slow(call: Any, ctx: Any) -> ToolResult:
    """Takes its time."""
    ctx.report_progress("starting")
    await trio.sleep(100)
    return ToolResult(content=[text("slow done")])


@tool(annotations=SAFE)
async def impatient(call: Any, ctx: Any) -> ToolResult:
    """Gives up on ``slow`` after a second (its own cancel scope), then wipes."""
    with trio.move_on_after(1):
        await ctx.execute_tool("slow", {})
    wiped = await ctx.execute_tool("wipe", {})
    return ToolResult(content=[text(f"gave up; {wiped.result.text}")])


@tool(annotations=SAFE)
async def nest(call: Any, ctx: Any) -> ToolResult:
    """Calls ``slow``."""
    await ctx.execute_tool("slow", {})
    return ToolResult(content=[text("nest done")])


@tool(annotations=SAFE, timeout=3)
async def hurried(call: Any, ctx: Any) -> ToolResult:
    """Times out while ``slow`` runs under it."""
    await ctx.execute_tool("slow", {})
    return ToolResult(content=[text("never")])


@tool(annotations=SAFE)
async def wipe_twice(call: Any, ctx: Any) -> ToolResult:
    """Two nested wipes."""
    first = await ctx.execute_tool("wipe", {})
    second = await ctx.execute_tool("wipe", {})
    return ToolResult(content=[text(f"{first.result.text}, {second.result.text}")])


TOOLS = [wipe, slow, impatient, nest, hurried, wipe_twice]


async def replay_ok(records: Sequence[Record], **options: Any) -> ReplayReport:
    """Re-drive with recorded tools; it must match the log, call by call (and not hang: the
    virtual clock jumps to the deadline if nothing else can happen)."""
    with trio.fail_after(1_000_000):
        report = await redrive(records, clock=counting_clock(), **options)
    assert report.ok, explain(report)
    same_calls(records, report.replayed)
    return report


def test_a_session_that_paused_and_resumed_replays_as_recorded() -> None:
    async def later(request: ApprovalRequest) -> Any:
        return LATER

    async def drive(session: Session) -> None:
        result = await session.prompt("go")
        assert [p.call_id for p in result.pending] == ["1.0", "1.3", "1.2/0"]
        await session.resolve_approval("1.0", True)
        await session.resolve_approval("1.3", False, "session", reason="no more")
        result = await session.resume()
        assert [p.call_id for p in result.pending] == ["1.2/0"]
        await session.resolve_approval("1.2/0", True, "session")
        assert (await session.resume()).stop == "end_turn"
        await session.prompt("again")

    async def main() -> None:
        script: list[FauxStep] = [
            [faux_tool_call("wipe"), faux_tool_call("nest"), faux_tool_call("wipe_twice"),
             faux_tool_call("wipe")], faux_text("done"), faux_tool_call("wipe_twice"),
            faux_text("end")]
        records = await record_session(TOOLS, script, approver=later, drive=drive)
        await replay_ok(records)
        # a log that ends paused replays to the same pause
        pending = next(r.seq for r in records if isinstance(r.event, ApprovalResolved))
        report = await replay_ok(records[: pending - 1])
        assert any("paused" in note for note in report.notes)

    virtual(main)


def test_a_prompt_the_host_cancelled_replays_as_recorded() -> None:
    """While an approver waited, and while bodies ran; with a nested call its parent gave
    up on (its own cancel scope) and one its parent's timeout cancelled."""
    async def human(request: ApprovalRequest) -> bool:
        if request.call_id == "2.1":
            await trio.sleep_forever()  # nobody answers; the host gives up
        return True

    async def drive(session: Session) -> None:
        with trio.move_on_after(10):
            await session.prompt("go")
        await session.prompt("again")

    async def main() -> None:
        for second_batch in (["slow", "wipe", "nest"], ["slow", "nest", "hurried"]):
            script: list[FauxStep] = [
                [faux_tool_call("impatient"), faux_tool_call("hurried")],
                [faux_tool_call(name) for name in second_batch],
                faux_text("not reached"), faux_text("after")]
            records = await record_session(TOOLS, script, approver=human, drive=drive)
            reasons = [r.event.reason for r in records if type(r.event).__name__ ==
                       "ToolCallCancelled"]
            assert len(reasons) >= 4 and set(reasons) == {"cancelled"}
            await replay_ok(records)

    virtual(main)


def shared_grant_session(order: str, sequential_now: bool = False) -> Callable[[], Any]:
    """Two top-level calls run at once, each with a nested ``wipe`` that asks; the answers
    are "for the session". ``order`` says which comes first in the recording: the first
    call's grant, or the second call's policy decision (the grant was slow to come)."""
    first_done, first_asked, second_asked = trio.Event(), trio.Event(), trio.Event()

    @tool(annotations=SAFE)
    async def noop(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("nothing")])

    # replayed, nothing waits: the call that makes three nested calls first comes to its
    # wipe last, the other way round from the recording
    busy = "first" if order == "grant first" else "second"

    @tool(annotations=SAFE)
    async def first(call: Any, ctx: Any) -> ToolResult:
        for _ in range(3 if busy == "first" else 0):
            await ctx.execute_tool("noop", {})
        outcome = await ctx.execute_tool("wipe", {})
        first_done.set()
        return ToolResult(content=[text(outcome.result.text)])

    @tool(annotations=SAFE)
    async def second(call: Any, ctx: Any) -> ToolResult:
        await (first_done if order == "grant first" else first_asked).wait()
        for _ in range(3 if busy == "second" else 0):
            await ctx.execute_tool("noop", {})
        outcome = await ctx.execute_tool("wipe", {})
        return ToolResult(content=[text(outcome.result.text)])

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        if request.call_id.startswith("1.0/"):
            first_asked.set()
            if order == "decision first":  # second's wipe is judged before this answer
                await second_asked.wait()
        else:
            second_asked.set()
        return ApprovalAnswer(granted=True, scope="session")

    async def main() -> None:
        records = await record_session(
            [first, second, wipe, noop], [[faux_tool_call("first"), faux_tool_call("second")],
                                          faux_text("done")], approver=approver)
        asked = [r.event.call_id for r in records if isinstance(r.event, ApprovalRequested)]
        assert asked == (["1.0/3"] if order == "grant first" else ["1.0/0", "1.1/3"])
        if not sequential_now:
            await replay_ok(records)
            return
        # today the first tool is sequential: the batch runs one call after the other, so
        # the recorded order between them cannot be kept; the replay says so, and ends
        with trio.fail_after(1_000_000):
            report = await redrive(records, tools=[
                attrs.evolve(first, execution_mode="sequential"), second, wipe, noop])
        assert [(d.scope, d.subject, d.field) for d in report.by_scope("tool")] == [
            ("tool", "first", "execution_mode")]
        assert [d.subject for d in report.by_scope("call")] == ["1.1/3"], explain(report)

    return main


@pytest.mark.parametrize("order", ["grant first", "decision first"])
def test_concurrent_calls_that_share_a_session_grant_replay_in_the_recorded_order(
    order: str,
) -> None:
    """The recorded tools do not sleep, so without keeping the recorded order the other
    nested call would be judged before (or after) the session-wide grant."""
    virtual(shared_grant_session(order))


def test_a_batch_that_runs_one_call_after_another_now_is_not_held_to_the_recorded_order() -> None:
    virtual(shared_grant_session("decision first", sequential_now=True))


def test_values_that_were_not_json_are_rebuilt_so_the_engine_says_the_same() -> None:
    @tool(annotations=SAFE)
    async def sloppy(call: Any, ctx: Any) -> Any:
        kind = call.arguments.get("kind")
        if kind == "set":
            return ToolResult(structured_content={"items": [1, {2, 3}]})
        if kind == "nan":
            return ToolResult(structured_content={"x": float("nan")})
        if kind == "key":
            return ToolResult(structured_content={"a": {1: "one"}})
        if kind == "raw":
            return "just text"
        if kind == "none":
            return None
        outcome = await ctx.execute_tool("wipe", {"when": {"now"}})
        raise KeyError(f"no {outcome.is_error}")

    async def main() -> None:
        kinds = ["set", "nan", "key", "raw", "none", "nested"]
        records = await record_session(
            [sloppy, wipe], [[faux_tool_call("sloppy", {"kind": k}) for k in kinds],
                             faux_text("done")], approver=approve_all)
        failures = [r.event.kind for r in records if type(r.event).__name__ == "ToolCallFailed"]
        assert failures.count("not_serialisable") == 3 and failures.count("invalid_output") == 2
        assert "raised" in failures and "invalid_arguments" in failures
        await replay_ok(records)

    virtual(main)
