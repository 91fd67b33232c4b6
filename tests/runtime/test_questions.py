"""A tool asks the person (``ctx.ask``): answered at once, declined by default, failed closed,
paused with LATER and answered by the host, in this process and after a restart."""

from __future__ import annotations

from typing import Any

import pytest

from engine import (
    LATER,
    Annotations,
    Answer,
    InvalidAnswer,
    Question,
    QuestionNotPending,
    SchemaError,
    Session,
    SessionPaused,
    ToolResult,
    approve_all,
    at_once,
    fold,
    text,
)
from engine.core.reducers import ToolResultEntry
from engine.core.tools import tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import QuestionAnswered, QuestionAsked, ToolCallFailed
from tests.conftest import events_of, run_session

BRANCH = {"type": "object", "properties": {"branch": {"type": "string", "minLength": 1}},
          "required": ["branch"]}
SID = "s"


class Asking:
    """Tools that ask: ``deploy`` asks which branch; ``outer`` has ``deploy`` asked through a
    nested call. ``runs`` counts the bodies' runs, ``answers`` what each body read."""

    def __init__(self, *, idempotent: bool = False) -> None:
        self.runs: list[str] = []
        self.answers: list[Answer] = []
        hints = Annotations(read_only=True, open_world=False, idempotent=idempotent)

        @tool(annotations=hints)
        async def deploy(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(f"deploy {call.call_id}")
            answer = await ctx.ask("Which branch?", BRANCH)
            self.answers.append(answer)
            if not answer.accepted:
                return ToolResult(content=[text(f"not deployed: {answer.action}")])
            return ToolResult(content=[text(f"deployed {answer.content['branch']}")])

        @tool(annotations=hints)
        async def outer(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(f"outer {call.call_id}")
            outcome = await ctx.execute_tool("deploy")
            return ToolResult(content=[text(f"outer saw: {outcome.result.text}")])

        self.specs = [deploy, outer]


def results(session: Session) -> list[tuple[str, str]]:
    return [(e.call_id, e.result.text) for e in session.transcript
            if isinstance(e, ToolResultEntry)]


async def later(question: Question) -> Any:
    return LATER


async def test_an_answer_is_recorded_and_read_by_the_body_but_not_by_the_model() -> None:
    tools = Asking()
    asked: list[Question] = []

    async def asker(question: Question) -> Answer:
        asked.append(question)
        return Answer(action="accept", content={"branch": "main"})

    state, records, model = await run_session(
        tools.specs, [faux_tool_call("deploy"), faux_text("ok")], asker=asker)
    assert [(q.question_id, q.call_id, q.name, q.message) for q in asked] == [
        ("1.0#1", "1.0", "deploy", "Which branch?")]
    assert asked[0].schema == BRANCH
    assert events_of(records, QuestionAsked) == [
        QuestionAsked(call_id="1.0", question_id="1.0#1", message="Which branch?", schema=BRANCH)]
    assert events_of(records, QuestionAnswered) == [
        QuestionAnswered(call_id="1.0", question_id="1.0#1", action="accept",
                         content={"branch": "main"})]
    assert tools.answers == [Answer(action="accept", content={"branch": "main"})]
    assert state.calls["1.0"].result.text == "deployed main"
    view = state.calls["1.0"]
    assert [(q.question_id, q.pending, q.answer.action if q.answer else None)
            for q in view.questions] == [("1.0#1", False, "accept")]
    # the model reads the result, never the question: the transcript is unchanged
    words = repr(model.requests[1].transcript)
    assert "Which branch?" not in words and "deployed main" in words


async def test_without_an_asker_every_question_is_declined_at_once_with_a_reason() -> None:
    tools = Asking()
    state, records, _ = await run_session(tools.specs, [faux_tool_call("deploy"), faux_text("ok")])
    [answer] = events_of(records, QuestionAnswered)
    assert answer.action == "decline" and answer.content is None
    assert answer.reason is not None and "no asker" in answer.reason
    assert tools.answers[0].action == "decline" and tools.answers[0].reason == answer.reason
    assert state.calls["1.0"].result.text == "not deployed: decline"


@pytest.mark.parametrize("reply", [
    "main",  # not an Answer
    Answer(action="accept", content={"branch": ""}),  # does not fit: minLength 1
    Answer(action="accept", content={"branch": "main", "force": True}),  # not a field
])
async def test_an_asker_that_does_not_answer_cancels_the_question_with_its_error(
    reply: Any,
) -> None:
    tools = Asking()

    async def asker(question: Question) -> Any:
        return reply

    state, records, _ = await run_session(tools.specs, [faux_tool_call("deploy"), faux_text("ok")],
                                          asker=asker)
    [answer] = events_of(records, QuestionAnswered)
    assert answer.action == "cancel" and answer.error is not None
    assert answer.reason is not None and answer.reason.startswith("the asker failed")
    assert tools.answers[0].action == "cancel"  # nothing was accepted: fail closed
    assert state.calls["1.0"].result.text == "not deployed: cancel"


async def test_an_asker_that_raises_cancels_the_question() -> None:
    tools = Asking()

    def asker(question: Question) -> Answer:  # a plain function answers as it returns
        raise RuntimeError("the form broke")

    _, records, _ = await run_session(tools.specs, [faux_tool_call("deploy"), faux_text("ok")],
                                      asker=asker)
    [answer] = events_of(records, QuestionAnswered)
    assert answer.action == "cancel" and answer.error is not None
    assert answer.error.type == "RuntimeError" and "the form broke" in answer.error.message


async def test_a_form_that_is_not_flat_fails_the_body_saying_what_is_allowed() -> None:
    seen: list[str] = []

    @tool(annotations=Annotations(read_only=True, open_world=False))
    async def nested_form(call: Any, ctx: Any) -> ToolResult:
        try:
            await ctx.ask("Where?", {"type": "object", "properties": {
                "address": {"type": "object", "properties": {}}}})
        except SchemaError as exc:
            seen.append(str(exc))
            raise
        return ToolResult(content=[text("asked")])

    state, records, _ = await run_session([nested_form], [faux_tool_call("nested_form"),
                                                          faux_text("ok")])
    assert "field 'address' has type 'object'" in seen[0] and "flat object schema" in seen[0]
    [failed] = events_of(records, ToolCallFailed)
    assert failed.kind == "raised" and not events_of(records, QuestionAsked)


async def test_later_pauses_the_prompt_and_the_host_answers_once() -> None:
    tools = Asking()
    store = MemoryStore()
    model = FauxModel([faux_tool_call("deploy"), faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, asker=later,
                            session_id=SID, create=True) as session:
        paused = await session.prompt("go")
        assert paused.stop == "paused" and paused.pending == ()
        [question] = paused.questions
        assert (question.question_id, question.message) == ("1.0#1", "Which branch?")
        assert session.pending_questions() == paused.questions
        with pytest.raises(SessionPaused, match="answer_question"):
            await session.prompt("again")
        with pytest.raises(InvalidAnswer, match="lacks the required field 'branch'"):
            await session.answer_question("1.0#1", "accept", {})
        with pytest.raises(QuestionNotPending, match="did not ask|no call"):
            await session.answer_question("1.0#2", "decline")
        await session.answer_question("1.0#1", "accept", {"branch": "v2"})
        with pytest.raises(QuestionNotPending, match="answered"):
            await session.answer_question("1.0#1", "decline")
        done = await session.resume()
        assert done.stop == "end_turn"
        assert results(session) == [("1.0", "deployed v2")]
        assert tools.runs == ["deploy 1.0"]  # the body waited; it ran once
    records = await store.read(SID)
    [answer] = events_of(records, QuestionAnswered)
    assert answer.later is True and answer.content == {"branch": "v2"}
    assert fold(records).snapshot() == session.state.snapshot()


async def test_a_nested_call_that_asks_later_pauses_and_goes_on_when_answered() -> None:
    tools = Asking()
    store = MemoryStore()
    model = FauxModel([faux_tool_call("outer"), faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, asker=later,
                            session_id=SID, create=True) as session:
        paused = await session.prompt("go")
        assert [q.question_id for q in paused.questions] == ["1.0/0#1"]
        assert paused.questions[0].parent_id == "1.0"
        await session.answer_question("1.0/0#1", "decline")
        done = await session.resume()
        assert done.stop == "end_turn"
        assert results(session) == [("1.0", "outer saw: not deployed: decline")]


async def test_a_question_paused_in_one_process_is_answered_in_another() -> None:
    store = MemoryStore()
    first = Asking(idempotent=True)
    async with Session.open(store, model=FauxModel([faux_tool_call("outer")]),
                            tools=first.specs, asker=later, session_id=SID,
                            create=True) as session:
        assert (await session.prompt("go")).stop == "paused"
    # the process stopped here: another one answers from the log alone
    second = Asking(idempotent=True)
    asked: list[Question] = []

    async def asker(question: Question) -> Answer:
        asked.append(question)
        return Answer(action="cancel")

    async with Session.open(store, model=FauxModel([faux_text("done")]), tools=second.specs,
                            asker=asker, session_id=SID) as session:
        [waiting] = session.pending_questions()
        assert waiting.question_id == "1.0/0#1"
        await session.answer_question("1.0/0#1", "accept", {"branch": "main"})
        done = await session.resume()
        assert done.stop == "end_turn"
        assert results(session) == [("1.0", "outer saw: deployed main")]
        # the bodies ran again; the question was answered from the log, its asker not asked
        assert second.runs == ["outer 1.0", "deploy 1.0/0"] and asked == []
        assert second.answers == [Answer(action="accept", content={"branch": "main"})]
    records = await store.read(SID)
    assert len(events_of(records, QuestionAsked)) == 1
    assert len(events_of(records, QuestionAnswered)) == 1


async def test_a_body_that_may_not_run_again_ends_interrupted_with_its_question() -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_tool_call("deploy")]),
                            tools=Asking().specs, asker=later, session_id=SID,
                            create=True) as session:
        await session.prompt("go")
    second = Asking()
    async with Session.open(store, model=FauxModel([faux_text("done")]), tools=second.specs,
                            session_id=SID) as session:
        assert [q.question_id for q in session.pending_questions()] == ["1.0#1"]
        await session.resume()
        assert second.runs == []
        assert session.state.calls["1.0"].status == "failed"
        assert session.pending_questions() == ()  # an ended call's question waits no more
        with pytest.raises(QuestionNotPending, match="call ended"):
            await session.answer_question("1.0#1", "decline")


async def test_an_asker_declared_at_once_that_says_later_cancels_the_question() -> None:
    tools = Asking()
    state, records, _ = await run_session(
        tools.specs, [faux_tool_call("deploy"), faux_text("ok")], asker=at_once(later),
        approver=approve_all)
    [answer] = events_of(records, QuestionAnswered)
    assert answer.action == "cancel" and answer.error is not None
    assert "declared to answer at once" in answer.error.message
    assert state.calls["1.0"].result.text == "not deployed: cancel"


async def test_the_call_tree_and_the_export_show_each_question_and_its_answer() -> None:
    from rich.console import Console

    from engine.present.export import session_json
    from engine.present.render import render_calls

    tools = Asking()
    store = MemoryStore()
    model = FauxModel([[faux_tool_call("deploy"), faux_tool_call("outer")], faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, asker=later,
                            session_id=SID, create=True) as session:
        await session.prompt("go")
        await session.answer_question("1.0#1", "accept", {"branch": "main"})
        state = session.state
    console = Console(width=200, record=True, color_system=None)
    console.print(render_calls(state))
    shown = console.export_text()
    assert "Which branch? → accepted {\"branch\": \"main\"}" in shown
    assert "Which branch? → waiting for an answer" in shown  # 1.1/0's
    exported = session_json(state)
    assert exported["pending_questions"] == ["1.1/0#1"]
    [call] = [c for c in exported["calls"] if c["call_id"] == "1.0"]
    assert call["questions"] == [{"question_id": "1.0#1", "message": "Which branch?",
                                  "schema": BRANCH, "answer": {"action": "accept",
                                                               "content": {"branch": "main"},
                                                               "reason": None}}]
