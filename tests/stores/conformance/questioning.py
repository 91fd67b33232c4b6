"""What the conformance test of questions runs in two processes: the tools, the session, and
the second process's step (answer the pending question from the log alone, then resume)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from engine import LATER, Annotations, Answer, Question, Session, ToolResult, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from tests.stores.conformance.backends import reopen

FORM = {"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]}
AGAIN = Annotations(read_only=True, open_world=False, idempotent=True)
SID = "asking"


def tools(runs: list[str]) -> list[Any]:
    """``release`` asks which branch, through a nested ``pick``; both may run again."""

    @tool(annotations=AGAIN)
    async def pick(call: Any, ctx: Any) -> ToolResult:
        runs.append(call.call_id)
        answer = await ctx.ask("Which branch?", FORM)
        return ToolResult(content=[text(answer.content["branch"] if answer.accepted
                                        else answer.action)])

    @tool(annotations=AGAIN)
    async def release(call: Any, ctx: Any) -> ToolResult:
        runs.append(call.call_id)
        outcome = await ctx.execute_tool("pick")
        return ToolResult(content=[text(f"released {outcome.result.text}")])

    return [pick, release]


async def later(question: Question) -> Any:
    return LATER


async def pause(kind: str, directory: Path) -> list[str]:
    """The first process: prompt until the nested call's question pauses the session."""
    runs: list[str] = []
    store = reopen(kind, directory)
    try:
        async with Session.open(store, model=FauxModel([faux_tool_call("release")]),
                                tools=tools(runs), asker=later, session_id=SID,
                                create=True) as session:
            result = await session.prompt("release it")
            assert result.stop == "paused", result
            assert [q.question_id for q in result.questions] == ["1.0/0#1"]
    finally:
        store.close()
    return runs


async def answer_and_resume(kind: str, directory: Path) -> dict[str, Any]:
    """Another process: answer what waits, from the log alone, and resume."""
    runs: list[str] = []
    asked: list[str] = []

    async def asker(question: Question) -> Answer:
        asked.append(question.question_id)
        return Answer(action="decline")

    store = reopen(kind, directory)
    try:
        async with Session.open(store, model=FauxModel([faux_text("released")]),
                                tools=tools(runs), asker=asker, session_id=SID) as session:
            waiting = [q.question_id for q in session.pending_questions()]
            for question_id in waiting:
                await session.answer_question(question_id, "accept", {"branch": "main"})
            result = await session.resume()
            text_ = session.state.calls["1.0"].result.text
    finally:
        store.close()
    return {"waiting": waiting, "stop": result.stop, "runs": runs, "asked": asked,
            "result": text_}


if __name__ == "__main__":
    print(json.dumps(trio.run(answer_and_resume, sys.argv[1], Path(sys.argv[2]))))
