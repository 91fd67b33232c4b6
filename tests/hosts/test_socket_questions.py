"""A person answers a served session's questions (``ctx.ask``) from another process, over the
approvals socket: listed beside the approvals, answered through ``session.answer_question``
in the session's own process, with its refusals; what is refused records nothing.

The client's functions block; here they run in a worker thread, as another program would call
them."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from engine import (
    LATER,
    Annotations,
    InvalidAnswer,
    QuestionNotPending,
    Session,
    ToolResult,
    text,
    tool,
)
from engine.hosts.approvalsocket import (
    answer_question,
    pending_approvals,
    pending_questions,
    Waiting,
    serve_approvals,
    waiting,
)
from events import MemoryStore
from events.types import QuestionAnswered
from tests.strategies import PROPERTY

FORM = {"type": "object",
        "properties": {"branch": {"type": "string", "minLength": 1},
                       "replicas": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["branch"]}


@tool(annotations=Annotations(read_only=True, open_world=False))
async def deploy(call: Any, ctx: Any) -> ToolResult:
    """Deploy the branch the person names."""
    answer = await ctx.ask(call.arguments.get("message", "Which branch?"), FORM)
    if answer.accepted:
        return ToolResult(content=[text(f"deployed {json.dumps(answer.content)}")])
    return ToolResult(content=[text(f"not deployed: {answer.action} ({answer.reason})")])


@tool(annotations=Annotations(destructive=True))
async def drop(call: Any, ctx: Any) -> ToolResult:
    """Drop everything."""
    return ToolResult(content=[text("dropped")])


def later(anything: Any) -> Any:
    return LATER


def in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a blocking client function as another program would, without blocking trio."""
    return trio.to_thread.run_sync(partial(fn, *args, **kwargs), abandon_on_cancel=True)


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "approvals.sock")


def opened() -> Any:
    return Session.open(MemoryStore(), tools=[deploy, drop], approver=later, asker=later)


async def test_a_person_lists_a_question_and_the_call_goes_on_with_the_answer(path: str) -> None:
    outcomes: list[Any] = []
    async with opened() as session:
        async with serve_approvals(session, path):
            async with trio.open_nursery() as nursery:
                assert await in_thread(waiting, path) == Waiting(approvals=(), questions=())

                async def call() -> None:
                    outcomes.append(await session.call_tool("deploy", {}))

                nursery.start_soon(call)
                found = await in_thread(waiting, path, wait=True)
                assert found.approvals == ()
                [question] = found.questions
                assert found.questions == session.pending_questions()
                assert await in_thread(pending_questions, path) == found.questions
                assert (question.question_id, question.call_id, question.name, question.message,
                        question.origin) == ("h0#1", "h0", "deploy", "Which branch?", "host")
                assert question.schema == FORM
                await in_thread(answer_question, path, "h0#1", "accept",
                                {"branch": "main", "replicas": 2})
            assert await in_thread(waiting, path) == Waiting(approvals=(), questions=())
    [outcome] = outcomes
    assert outcome.result.text == 'deployed {"branch": "main", "replicas": 2}'
    [answered] = [r.event for r in session.records if isinstance(r.event, QuestionAnswered)]
    assert (answered.action, answered.content, answered.later) == (
        "accept", {"branch": "main", "replicas": 2}, True)  # the host's answer, recorded here


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_decline_or_a_cancel_with_its_reason(path: str, action: str) -> None:
    async with opened() as session:
        async with serve_approvals(session, path), trio.open_nursery() as nursery:
            outcomes: list[Any] = []

            async def call() -> None:
                outcomes.append(await session.call_tool("deploy", {}))

            nursery.start_soon(call)
            [question] = await in_thread(pending_questions, path, wait=True)
            await in_thread(answer_question, path, question.question_id, action,
                            reason="not today")
    assert outcomes[0].result.text == f"not deployed: {action} (not today)"
    [answered] = session.calls["h0"].questions
    assert answered.answer is not None and answered.answer.action == action


async def test_wrong_answers_are_refused_with_the_reason_and_record_nothing(path: str) -> None:
    async with opened() as session:
        async with serve_approvals(session, path), trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "deploy", {})
            await session.wait_pending_questions()
            recorded = len(session.records)
            for args, error, says in [
                (("h0#1", "accept", {"replicas": 2}), InvalidAnswer, "branch"),
                (("h0#1", "accept", {"branch": "main", "replicas": 9}), InvalidAnswer,
                 "replicas"),
                (("h0#1", "accept", {"branch": "main", "colour": "red"}), InvalidAnswer,
                 "colour"),
                (("h0#1", "accept"), TypeError, "content"),
                (("h0#1", "shrug"), ValueError, '"accept", "decline" or "cancel"'),
                (("h0#7", "decline"), QuestionNotPending, "no call of this session asked"),
            ]:
                with pytest.raises(error, match=says):
                    await in_thread(answer_question, path, *args)
                assert len(session.records) == recorded
            with pytest.raises(ValueError, match='"reason" is a string'):
                await in_thread(answer_question, path, "h0#1", "decline", reason=3)
            assert [q.question_id for q in session.pending_questions()] == ["h0#1"]
            await in_thread(answer_question, path, "h0#1", "accept", {"branch": "main"})
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(QuestionNotPending, match="h0#1 is not waiting.*answered"):
                await in_thread(answer_question, path, "h0#1", "decline")
    assert session.calls["h0"].status == "completed"


async def test_waiting_for_approvals_alone_is_not_ended_by_a_question(path: str) -> None:
    """An approvals-only client (the protocol before questions) waits past a question, for
    an approval; asking for both lists returns at either."""
    async with opened() as session:
        async with serve_approvals(session, path), trio.open_nursery() as nursery:
            async with await trio.open_unix_socket(path) as asking:
                await asking.send_all(b'{"op": "pending", "wait": true}\n')
                nursery.start_soon(session.call_tool, "deploy", {})
                await session.wait_pending_questions()
                both = await in_thread(waiting, path, wait=True)
                assert [q.question_id for q in both.questions] == ["h0#1"]
                nursery.start_soon(session.call_tool, "drop", {})
                reply = json.loads(await _line_from(asking))
            assert reply == {"pending": [attrs.asdict(request) for request in
                                         session.pending_approvals()]}
            assert [r["call_id"] for r in reply["pending"]] == ["h1"]
            await session.resolve_approval("h1", granted=False)
            await session.answer_question("h0#1", "cancel")


async def _line_from(stream: trio.SocketStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some()
        assert chunk, "the server hung up"
        data += chunk
    return data


async def test_bad_pending_requests_are_told_what_to_write(path: str) -> None:
    async with opened() as session:
        async with serve_approvals(session, path):
            for request, says in [
                (b'{"op": "pending", "of": ["answers"]}\n', '\\"of\\" is a list of what to list, '
                                                         'from [\\"approvals\\"'),
                (b'{"op": "pending", "of": []}\n', 'not []'),
                (b'{"op": "answer", "question_id": 3, "action": "accept"}\n',
                 'needs \\"question_id\\"'),
            ]:
                reply = await in_thread(_raw, path, request)
                assert b'"error"' in reply and says.encode() in reply
            assert await in_thread(pending_questions, path) == ()
            assert await in_thread(pending_approvals, path) == ()


def _raw(path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(request)
        return sock.recv(65536)


@PROPERTY
@given(message=st.text(min_size=1, max_size=40), branch=st.text(min_size=1, max_size=40),
       reason=st.text(max_size=40))
def test_a_question_and_its_answer_cross_the_socket_whole(
    message: str, branch: str, reason: str,
) -> None:
    """Whatever a question's message says (control characters, any script) is listed as the
    session lists it, and an answer's content and a refusal's reason are recorded as sent."""
    async def main(path: str) -> None:
        async with opened() as session:
            async with serve_approvals(session, path), trio.open_nursery() as nursery:
                nursery.start_soon(session.call_tool, "deploy", {"message": message})
                nursery.start_soon(session.call_tool, "deploy", {"message": message})
                while len(session.pending_questions()) < 2:
                    await session.wait_pending_questions()
                    await trio.testing.wait_all_tasks_blocked()
                listed = await in_thread(pending_questions, path)
                assert listed == session.pending_questions()
                assert [q.message for q in listed] == [message, message]
                await in_thread(answer_question, path, "h0#1", "accept", {"branch": branch})
                await in_thread(answer_question, path, "h1#1", "decline", reason=reason)
        first, second = (session.calls[c].questions[0].answer for c in ("h0", "h1"))
        assert first is not None and first.content == {"branch": branch}
        assert second is not None and (second.action, second.reason) == ("decline", reason)

    with tempfile.TemporaryDirectory() as directory:
        trio.run(main, os.path.join(directory, "a.sock"))
