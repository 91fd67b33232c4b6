"""Replay reproduces the progress a recorded tool reported, forwarded updates included, and
shows a tool whose progress changed as a divergence of its call."""

from __future__ import annotations

from typing import Any

import attrs
import trio

from engine import Annotations, ToolResult, approve_all, text, tool
from engine.models import faux_text, faux_tool_call
from engine.replay import redrive
from events.types import ToolProgress
from tests.replay.replaying import explain, record_session, same_calls

SAFE = Annotations(read_only=True, open_world=False)


def reporting(name: str, count: int, word: str = "step") -> Any:
    @tool(name=name, annotations=SAFE)
    async def body(call: Any, ctx: Any) -> ToolResult:
        for n in range(count):
            ctx.report_progress(f"{word} {n}", {"n": n})
            await trio.lowlevel.checkpoint()
        return ToolResult(content=[text(f"{name} done")])

    return body


def review_diff(forward: bool = True) -> Any:
    @tool(name="review_diff", annotations=SAFE)
    async def body(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("reviewing")
        await ctx.execute_tool("run_checks", {},
                               on_progress=ctx.forward_progress if forward else None)
        await ctx.execute_tool("failing_tests", {})  # its progress stays its own
        return ToolResult(content=[text("reviewed")])

    return body


TOOLS = [review_diff(), reporting("run_checks", 3), reporting("failing_tests", 2)]
SCRIPT = [faux_tool_call("review_diff", {}), faux_text("done")]


async def recorded() -> list[Any]:
    records = await record_session(TOOLS, SCRIPT, approver=approve_all)
    forwarded = [r.event for r in records
                 if isinstance(r.event, ToolProgress) and r.event.source is not None]
    assert [(u.call_id, u.source) for u in forwarded] == [("1.0", "1.0/0")] * 3
    return records


async def test_a_session_whose_tool_forwarded_progress_replays_with_recorded_tools() -> None:
    records = await recorded()
    report = await redrive(records)
    assert report.ok, explain(report)
    same_calls(records, report.replayed)


async def test_a_session_whose_tool_forwarded_progress_replays_with_its_live_tools() -> None:
    records = await recorded()
    report = await redrive(records, tools=TOOLS, tool_mode="live", unverified=True)
    assert report.ok, explain(report)
    same_calls(records, report.replayed)


async def test_a_child_whose_progress_changed_diverges_and_so_does_the_parent_that_forwarded_it(
) -> None:
    records = await recorded()
    tools = [TOOLS[0], reporting("run_checks", 3, word="phase"), TOOLS[2]]
    report = await redrive(records, tools=tools, tool_mode="live", unverified=True)
    calls = {d.subject: d for d in report.by_scope("call")}
    assert sorted(calls) == ["1.0", "1.0/0"], explain(report)
    for call_id in ("1.0", "1.0/0"):
        divergence = calls[call_id]
        assert (divergence.event, divergence.field) == ("tool_progress", "message")
        assert (divergence.recorded, divergence.now) == ("step 0", "phase 0")


async def test_a_parent_that_no_longer_forwards_diverges_at_its_first_forwarded_update() -> None:
    records = await recorded()
    tools = [review_diff(forward=False), *TOOLS[1:]]
    report = await redrive(records, tools=tools, tool_mode="live", unverified=True)
    calls = report.by_scope("call")
    assert [d.subject for d in calls] == ["1.0"], explain(report)
    # the parent's events: requested, decided, started, its own update, then the forwarded
    # ones (recorded) where the replay has its terminal event
    assert calls[0].index == 4 and calls[0].recorded["type"] == "tool_progress"
    assert calls[0].recorded["data"]["source"] == "1.0/0"


async def test_recorded_tools_forward_what_the_log_says_and_nothing_else() -> None:
    records = await recorded()
    # a log whose parent forwarded only the first update: the replay forwards only that one
    cut = [r for r in records if not (isinstance(r.event, ToolProgress)
                                      and r.event.source is not None and r.event.data != {"n": 0})]
    cut = [attrs.evolve(r, seq=i + 1) for i, r in enumerate(cut)]
    report = await redrive(cut)
    assert report.ok, explain(report)
    same_calls(cut, report.replayed)


def streaming(name: str) -> Any:
    @tool(name=name, annotations=SAFE)
    async def body(call: Any, ctx: Any) -> ToolResult:
        for n in range(3):
            ctx.report_progress(content=[text(f"line {n}\n")])
            await trio.lowlevel.checkpoint()
        return ToolResult(content=[text("ran")])

    return body


async def test_streamed_output_replays_as_recorded_and_a_changed_stream_diverges() -> None:
    tools = [review_diff(), streaming("run_checks"), reporting("failing_tests", 1)]
    records = await record_session(tools, SCRIPT, approver=approve_all)
    streamed = [r.event for r in records if isinstance(r.event, ToolProgress) and r.event.content]
    assert [(u.call_id, u.source) for u in streamed] == [("1.0/0", None), ("1.0", "1.0/0")] * 3
    report = await redrive(records)  # the recorded tools stream what the log holds
    assert report.ok, explain(report)
    same_calls(records, report.replayed)
    quiet = [tools[0], reporting("run_checks", 3), tools[2]]
    report = await redrive(records, tools=quiet, tool_mode="live", unverified=True)
    calls = {d.subject: d for d in report.by_scope("call")}
    assert sorted(calls) == ["1.0", "1.0/0"], explain(report)
    assert calls["1.0/0"].event == "tool_progress"
