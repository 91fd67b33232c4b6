"""A served tool's questions to a client of MCP 2026-07-28 (the official client's default),
asked in rounds: the ``tools/call`` answers with an input-required result carrying an
elicitation request and a sealed ``requestState``, and the client's retry with the answer
answers the question while the call's body keeps waiting in the serving process.

The happy paths go through the SDK's own client loop (``Client.call_tool``); the retries that
must be refused are driven by hand (``client.session.call_tool(..., allow_input_required=True)``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp import Client, MCPError, StdioServerParameters
from mcp_http_clients import MODES, uvicorn_serving

from engine import Annotations, Answer, Question, Session, ToolResult, approve_all, text, tool
from engine.hosts.aio import Session as AioSession
from engine.mcp import http_app, mcp_server
from engine.mcp.questions import NO_BACK_CHANNEL, NO_ELICITATION
from engine.mcp.rounds import NO_RETRY
from engine.testing.invariants import check_log
from events import JsonlStore, MemoryStore
from events.types import QuestionAnswered, QuestionAsked

ROOT = Path(__file__).resolve().parents[2]
SAFE = Annotations(read_only=True, open_world=False)
FORM = {"type": "object", "properties": {"branch": {"type": "string", "title": "Branch"}},
        "required": ["branch"]}
SURE = {"type": "object", "properties": {"sure": {"type": "boolean"}}, "required": ["sure"]}


def text_of(result: types.CallToolResult) -> str:
    return result.content[0].text  # type: ignore[union-attr,no-any-return]


def said(answer: Any) -> str:
    return f"{answer.action} {answer.content} {answer.reason}"


@tool(annotations=SAFE)
async def deploy(call: Any, ctx: Any) -> ToolResult:
    """Ask for a branch, then whether to go on, reporting progress around the questions."""
    ctx.report_progress("asking")
    branch = await ctx.ask("Which branch?", FORM)
    ctx.report_progress("asked once")
    sure = await ctx.ask("Sure?", SURE)
    ctx.report_progress("asked twice")
    return ToolResult(content=[text(f"{said(branch)} / {said(sure)}")])


@tool(annotations=SAFE)
async def release(call: Any, ctx: Any) -> ToolResult:
    """Deploy, as a nested call."""
    outcome = await ctx.execute_tool("deploy")
    return ToolResult(content=[text(f"released: {outcome.result.text}")])


class Elicitor:
    """A client's elicitation callback: the answers it gives in turn, and what it was asked."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, Any]] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append((params.message, params.requested_schema))
        return self.answers.pop(0)


def accept(**content: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


def answered(session: Session) -> list[QuestionAnswered]:
    return [r.event for r in session.records if isinstance(r.event, QuestionAnswered)]


def asked(session: Session) -> list[QuestionAsked]:
    return [r.event for r in session.records if isinstance(r.event, QuestionAsked)]


async def test_a_default_client_is_asked_in_rounds_and_the_call_goes_on_to_its_result(
) -> None:
    async with Session.open(MemoryStore(), tools=[deploy, release]) as session:
        elicitor = Elicitor(accept(branch="main"), accept(sure=True))
        async with Client(mcp_server(session), elicitation_callback=elicitor) as client:
            assert client.protocol_version == "2026-07-28"
            result = await client.call_tool("release", {})
        assert not result.is_error
        assert result.content[0].text == (  # type: ignore[union-attr]
            "released: accept {'branch': 'main'} None / accept {'sure': True} None")
        assert elicitor.asked == [("Which branch?", FORM), ("Sure?", SURE)]
        assert [(e.call_id, e.question_id) for e in asked(session)] == [
            ("h0/0", "h0/0#1"), ("h0/0", "h0/0#2")]
        assert [(a.question_id, a.action, a.content, a.later) for a in answered(session)] == [
            ("h0/0#1", "accept", {"branch": "main"}, False),
            ("h0/0#2", "accept", {"sure": True}, False)]
        assert session.calls["h0"].status == "completed"
        check_log(session.records)


@tool(annotations=SAFE)
async def forwarding(call: Any, ctx: Any) -> ToolResult:
    """Deploy as a nested call, forwarding its progress."""
    outcome = await ctx.execute_tool("deploy", on_progress=ctx.forward_progress)
    return ToolResult(content=[text(outcome.result.text)])


async def test_each_rounds_progress_reaches_the_client_that_sent_that_round() -> None:
    heard: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message)

    async with Session.open(MemoryStore(), tools=[deploy, forwarding]) as session:
        elicitor = Elicitor(accept(branch="v2"), accept(sure=False))
        async with Client(mcp_server(session), elicitation_callback=elicitor) as client:
            await client.call_tool("forwarding", {}, progress_callback=on_progress)
    assert heard == ["asking", "asked once", "asked twice"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_decline_or_cancel_is_recorded_and_read_by_the_tool(action: str) -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        elicitor = Elicitor(types.ElicitResult(action=action),  # type: ignore[arg-type]
                            accept(sure=True))
        async with Client(mcp_server(session), elicitation_callback=elicitor) as client:
            result = await client.call_tool("deploy", {})
        assert text_of(result).startswith(f"{action} None None / accept")
        assert [a.action for a in answered(session)] == [action, "accept"]


async def test_content_that_does_not_fit_the_form_cancels_the_question_with_the_error(
) -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        elicitor = Elicitor(accept(branch=3), accept(sure=True))
        async with Client(mcp_server(session), elicitation_callback=elicitor) as client:
            result = await client.call_tool("deploy", {})
        first = answered(session)[0]
        assert (first.action, first.content) == ("cancel", None)
        assert first.error is not None and "does not fit" in first.reason  # type: ignore[operator]
        assert text_of(result).startswith("cancel None the asker failed")
        check_log(session.records)


async def test_a_default_client_without_the_capability_is_not_asked() -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        async with Client(mcp_server(session)) as client:
            result = await client.call_tool("deploy", {})
        assert result.content[0].text == (  # type: ignore[union-attr]
            f"decline None {NO_ELICITATION} / decline None {NO_ELICITATION}")


@pytest.mark.parametrize("options", [{}, {"json_response": True},
                                     {"stateless": True, "json_response": True}],
                         ids=["sessions", "json", "stateless"])
@pytest.mark.parametrize("mode", MODES)
def test_over_http_from_asyncio_each_era_is_asked_its_own_way(
        mode: str, options: dict[str, Any]) -> None:
    async def main() -> tuple[str, list[QuestionAnswered]]:
        async with AioSession.open(MemoryStore(), tools=[deploy]) as session:
            async with uvicorn_serving(http_app(session, **options)) as url:
                elicitor = Elicitor(accept(branch="main"), accept(sure=True))
                async with Client(url, elicitation_callback=elicitor, mode=mode) as client:
                    result = await client.call_tool("deploy", {})
            return result.content[0].text, [  # type: ignore[union-attr]
                r.event for r in session.records if isinstance(r.event, QuestionAnswered)]

    said_, recorded = asyncio.run(main())
    if mode == "legacy" and options:  # the handshake's protocol, with no stream to ask on
        # (and a stateless server does not keep what the handshake declared)
        why = NO_ELICITATION if options.get("stateless") else NO_BACK_CHANNEL
        assert said_ == f"decline None {why} / decline None {why}"
    else:  # MCP 2026-07-28 in rounds, or the handshake's back-channel
        assert said_ == "accept {'branch': 'main'} None / accept {'sure': True} None"
        assert [a.action for a in recorded] == ["accept", "accept"]


# -- retries that are refused ---------------------------------------------------------------


async def first_round(client: Client, name: str = "deploy",
                      arguments: dict[str, Any] | None = None) -> types.InputRequiredResult:
    result = await client.session.call_tool(name, arguments or {}, allow_input_required=True)
    assert isinstance(result, types.InputRequiredResult)
    return result


async def retry(client: Client, state: str | None, responses: Any = None,
                name: str = "deploy", arguments: dict[str, Any] | None = None) -> Any:
    return await client.session.call_tool(name, arguments or {}, allow_input_required=True,
                                          request_state=state, input_responses=responses)


async def test_a_retry_with_a_forged_altered_or_misdirected_state_is_refused() -> None:
    @tool(annotations=SAFE)
    async def other(call: Any, ctx: Any) -> ToolResult:
        """Another tool."""
        return ToolResult(content=[text("other")])

    async with Session.open(MemoryStore(), tools=[deploy, other]) as session:
        async with Client(mcp_server(session), elicitation_callback=Elicitor()) as client:
            waiting = await first_round(client)
            [key] = waiting.input_requests or {}
            assert key == "h0#1"
            state = waiting.request_state
            assert state is not None and state.startswith("v1.")  # sealed: nothing to read
            assert "question" not in state and "token" not in state
            answer = {key: accept(branch="main")}
            before = len(session.records)
            forged = '{"token": "x", "call": "h0", "question": "h0#1"}'
            altered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            for bad in (forged, altered):
                with pytest.raises(MCPError, match="Invalid or expired requestState"):
                    await retry(client, bad, answer)
            for name, arguments in (("other", {}), ("deploy", {"more": 1})):  # for another call
                with pytest.raises(MCPError, match="Invalid or expired requestState"):
                    await retry(client, state, answer, name=name, arguments=arguments)
            assert len(session.records) == before  # nothing recorded
            # the question still waits: the true retry answers it
            second = await retry(client, state, answer)
            assert isinstance(second, types.InputRequiredResult)
            assert list(second.input_requests or {}) == ["h0#2"]
        assert [a.content for a in answered(session)] == [{"branch": "main"}]


async def test_a_retry_without_the_answer_is_refused_and_the_question_still_waits() -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        async with Client(mcp_server(session), elicitation_callback=Elicitor()) as client:
            waiting = await first_round(client)
            before = len(session.records)
            for responses in (None, {"other": accept(branch="x")}):
                with pytest.raises(MCPError, match=r"carries no answer to question h0#1"):
                    await retry(client, waiting.request_state, responses)
            assert len(session.records) == before
            second = await retry(client, waiting.request_state, {"h0#1": accept(branch="x")})
            assert isinstance(second, types.InputRequiredResult)


async def test_a_state_already_answered_is_refused_and_records_nothing() -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        async with Client(mcp_server(session), elicitation_callback=Elicitor()) as client:
            waiting = await first_round(client)
            answer = {"h0#1": accept(branch="main")}
            second = await retry(client, waiting.request_state, answer)
            before = len(session.records)
            with pytest.raises(MCPError, match=r"question h0#1 of call h0, which waits for no"):
                await retry(client, waiting.request_state, answer)
            assert len(session.records) == before
            done = await retry(client, second.request_state, {"h0#2": accept(sure=True)})
            assert isinstance(done, types.CallToolResult)
        assert [a.question_id for a in answered(session)] == ["h0#1", "h0#2"]


# -- a client that does not come back -------------------------------------------------------


async def test_a_client_that_never_retries_has_its_question_cancelled_after_the_timeout(
        autojump_clock: Any) -> None:
    ended = trio.Event()

    @tool(annotations=SAFE)
    async def patient(call: Any, ctx: Any) -> ToolResult:
        """Deploy, and say when it has ended."""
        try:
            return await deploy.execute(call, ctx)  # type: ignore[no-any-return]
        finally:
            ended.set()

    async with Session.open(MemoryStore(), tools=[patient]) as session:
        async with Client(mcp_server(session, input_timeout=30),
                          elicitation_callback=Elicitor()) as client:
            waiting = await first_round(client, "patient")
            # nobody calls again: on the clock, the wait runs out and the call goes on
            await ended.wait()
            with pytest.raises(MCPError, match="Invalid or expired|waits for no answer"):
                await retry(client, waiting.request_state, {"h0#1": accept(branch="x")},
                            name="patient")
        reason = NO_RETRY.format(timeout=30)
        assert [(a.action, a.reason) for a in answered(session)] == [
            ("cancel", reason), ("cancel", reason)]  # the second, at once: nobody takes it
        assert session.calls["h0"].result.text == (  # type: ignore[union-attr]
            f"cancel None {reason} / cancel None {reason}")
        check_log(session.records)


async def test_a_call_waiting_for_a_retry_is_cancelled_when_the_client_goes() -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        async with Client(mcp_server(session), elicitation_callback=Elicitor()) as client:
            await first_round(client)
            assert session.calls["h0"].status == "running"
        assert session.calls["h0"].status == "cancelled"
        assert answered(session) == []
        check_log(session.records)


async def test_input_timeout_is_a_positive_number_of_seconds() -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        for bad in (0, -1, float("inf"), float("nan"), "10", True):
            with pytest.raises(ValueError, match="input_timeout is a number of seconds"):
                mcp_server(session, input_timeout=bad)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="input_timeout is a number of seconds"):
                http_app(session, input_timeout=bad)  # type: ignore[arg-type]


async def test_a_client_that_gives_up_on_a_round_cancels_the_call(autojump_clock: Any) -> None:
    ended = trio.Event()

    @tool(annotations=SAFE)
    async def stuck(call: Any, ctx: Any) -> ToolResult:
        """Ask, then never end."""
        try:
            await ctx.ask("Which branch?", FORM)
            await trio.sleep_forever()
            raise AssertionError("unreachable")
        finally:
            ended.set()

    answered_once = trio.Event()

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        answered_once.set()
        return accept(branch="main")

    async with Session.open(MemoryStore(), tools=[stuck]) as session:
        async with Client(mcp_server(session), elicitation_callback=elicit) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.call_tool, "stuck", {})
                await answered_once.wait()  # the retry with the answer is in flight
                nursery.cancel_scope.cancel()  # the client gives up on it
            with trio.fail_after(3600):  # on the clock: a call left running fails the test
                await ended.wait()
            assert session.calls["h0"].status == "cancelled"
        assert [a.action for a in answered(session)] == ["accept"]
        check_log(session.records)


async def test_a_session_mounting_a_served_session_answers_its_questions() -> None:
    from engine.mcp import mount

    async def asker(question: Question) -> Answer:
        if "branch" in question.schema["properties"]:
            return Answer(action="accept", content={"branch": "main"})
        return Answer(action="decline")

    async with Session.open(MemoryStore(), tools=[deploy]) as served:
        async with Session.open(MemoryStore(), asker=asker, approver=approve_all) as mounting:
            async with mount(mounting, mcp_server(served), trust_hints=True):
                outcome = await mounting.call_tool("deploy", {})
            assert outcome.result.text == (
                "accept {'branch': 'main'} None / decline None None")
            for session in (served, mounting):  # each log has the questions of its call
                assert [(a.question_id, a.action) for a in answered(session)] == [
                    ("h0#1", "accept"), ("h0#2", "decline")]


async def test_toolledger_serve_over_stdio_asks_a_default_client(tmp_path: Path) -> None:
    log = tmp_path / "served.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine.cli", "serve", "mcp_served_asking:served_session"],
        cwd=str(ROOT / "tests"), env={"PYTHONPATH": str(ROOT), "SERVED_LOG": str(log)})
    elicitor = Elicitor(accept(branch="v3"), accept(sure=True))
    async with Client(params, elicitation_callback=elicitor) as client:
        result = await client.call_tool("deploy", {})
    assert result.content[0].text == "v3 accept"  # type: ignore[union-attr]
    assert [message for message, _ in elicitor.asked] == ["Which branch?", "Deploy v3?"]
    store = JsonlStore(str(log))
    try:
        [session_id] = await store.sessions()
        records = await store.read(session_id)
    finally:
        store.close()
    assert [r.event.action for r in records if isinstance(r.event, QuestionAnswered)] == [
        "accept", "accept"]
