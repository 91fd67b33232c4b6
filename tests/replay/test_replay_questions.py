"""Replay answers the questions a tool asked from the log: answered at once, or by the host at
a pause; a tool that now asks something else diverges at its question."""

from __future__ import annotations

from typing import Any

from engine import LATER, Annotations, Answer, Question, Session, ToolResult, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from events import MemoryStore, Record
from events.types import QuestionAnswered
from tests.conftest import counting_clock
from tests.replay.replaying import explain, same_calls

SAFE = Annotations(read_only=True, open_world=False)
FORM = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"]}


def counting(question: str = "How many?") -> Any:
    @tool(name="count", annotations=SAFE)
    async def body(call: Any, ctx: Any) -> ToolResult:
        answer = await ctx.ask(question, FORM)
        ctx.report_progress(f"answer: {answer.action}")
        n = answer.content["n"] if answer.accepted else 0
        return ToolResult(content=[text(f"counted {n}")])

    return body


@tool(annotations=SAFE)
async def outer(call: Any, ctx: Any) -> ToolResult:
    outcome = await ctx.execute_tool("count")
    return ToolResult(content=[text(f"outer: {outcome.result.text}")])


TOOLS = [counting(), outer]


async def record(asker: Any, *, later: bool = False) -> list[Record]:
    store = MemoryStore()
    script = [[faux_tool_call("count"), faux_tool_call("outer")], faux_text("done")]
    async with Session.open(store, model=FauxModel(script), tools=TOOLS, asker=asker,
                            session_id="s", create=True, clock=counting_clock()) as session:
        result = await session.prompt("go")
        if later:
            assert result.stop == "paused"
            await session.answer_question("1.0#1", "accept", {"n": 2})
            await session.answer_question("1.1/0#1", "decline")
            assert (await session.resume()).stop == "end_turn"
    return await store.read("s")


async def answer_three(question: Question) -> Answer:
    return Answer(action="accept", content={"n": 3})


async def test_questions_answered_at_once_replay_with_recorded_and_live_tools() -> None:
    records = await record(answer_three)
    assert len([r for r in records if isinstance(r.event, QuestionAnswered)]) == 2
    for options in ({}, {"tools": TOOLS, "tool_mode": "live", "unverified": True}):
        report = await redrive(records, **options)
        assert report.ok, explain(report)
        same_calls(records, report.replayed)


async def test_questions_the_host_answered_at_a_pause_are_answered_there_again() -> None:
    async def later(question: Question) -> Any:
        return LATER

    records = await record(later, later=True)
    answers = [r.event for r in records if isinstance(r.event, QuestionAnswered)]
    assert [(a.question_id, a.action, a.later) for a in answers] == [
        ("1.0#1", "accept", True), ("1.1/0#1", "decline", True)]
    for options in ({}, {"tools": TOOLS, "tool_mode": "live", "unverified": True}):
        report = await redrive(records, **options)
        assert report.ok, explain(report)
        same_calls(records, report.replayed)


async def test_a_tool_that_asks_something_else_diverges_at_its_question() -> None:
    records = await record(answer_three)
    report = await redrive(records, tools=[counting("How many now?"), outer], tool_mode="live",
                           unverified=True)
    calls = {d.subject: d for d in report.by_scope("call")}
    assert {"1.0", "1.1/0"} <= set(calls), explain(report)
    divergence = calls["1.0"]
    assert (divergence.event, divergence.field) == ("question_asked", "message")
    assert (divergence.recorded, divergence.now) == ("How many?", "How many now?")
