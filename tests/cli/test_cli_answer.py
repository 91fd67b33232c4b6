"""``toolledger approvals`` lists a served session's questions beside its approvals, and
``toolledger answer`` answers one from another process: with ``--json``, ``--decline``,
``--cancel``, or at a terminal with the terminal asker's form. What a question says is shown,
never obeyed; each mistake is one line with exit 1, and nothing is recorded.

The session is served in this test's trio loop (``serve_approvals``) and the commands run in a
worker thread, as at another terminal; and ``toolledger serve --approvals`` in a subprocess
leaves the questions its MCP client cannot be asked for the socket."""

from __future__ import annotations

import builtins
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from mcp import Client, StdioServerParameters

from engine import LATER, Annotations, Session, ToolResult, text, tool
from engine.cli import main
from engine.hosts.approvalsocket import pending_questions, serve_approvals
from events import MemoryStore
from tests.asking_served import deploy

TESTS = Path(__file__).resolve().parents[1]


@tool(annotations=Annotations(destructive=True))
async def drop(call: Any, ctx: Any) -> ToolResult:
    """Drop everything."""
    return ToolResult(content=[text("dropped")])


def later(anything: Any) -> Any:
    return LATER


def opened() -> Any:
    return Session.open(MemoryStore(), tools=[deploy, drop], approver=later, asker=later)


async def toolledger(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command in a worker thread: its status, stdout and stderr."""
    status = await trio.to_thread.run_sync(partial(main, list(argv)))
    out, err = capsys.readouterr()
    return status, out, err


async def test_questions_are_listed_beside_approvals_and_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    socket = str(tmp_path / "a.sock")
    outcomes: dict[str, Any] = {}
    async with opened() as session:
        async with serve_approvals(session, socket), trio.open_nursery() as nursery:
            async def call(name: str, arguments: dict[str, Any]) -> None:
                outcomes[name] = await session.call_tool(name, arguments)

            nursery.start_soon(call, "deploy", {"message": "Which \x1b[2Jbranch?\nok"})
            status, out, err = await toolledger(capsys, "approvals", socket, "--wait")
            assert (status, err) == (0, "")
            assert out.splitlines() == [
                "h0#1  deploy asks (call h0)",
                "    message  Which \\x1b[2Jbranch?\\nok",  # shown, not obeyed, one line
                "    field    branch (string, required, min length 1)",
                "    field    replicas (integer, min 1, max 5)",
            ]
            nursery.start_soon(call, "drop", {})
            await session.wait_pending_approvals()
            status, out, _ = await toolledger(capsys, "approvals", socket, "--json")
            listed = json.loads(out)
            assert [(item["kind"], item["call_id"]) for item in listed] == [
                ("approval", "h1"), ("question", "h0")]
            assert listed[1]["question_id"] == "h0#1"
            assert listed[1]["message"] == "Which \x1b[2Jbranch?\nok" and "\x1b" not in out
            assert listed[1]["schema"]["required"] == ["branch"]

            assert await toolledger(capsys, "answer", socket, "h0#1", "--json",
                                    '{"branch": "main", "replicas": 2}') == (
                0, "h0#1 answered\n", "")
            assert await toolledger(capsys, "deny", socket, "h1") == (0, "h1 denied\n", "")
    assert outcomes["deploy"].result.text == 'deployed {"branch": "main", "replicas": 2}'
    [asked] = session.calls["h0"].questions
    assert asked.answer is not None and asked.answer.later


@pytest.mark.parametrize(("option", "said"), [("--decline", "declined"),
                                              ("--cancel", "cancelled")])
async def test_a_decline_or_a_cancel_with_a_reason(
    option: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    socket = str(tmp_path / "a.sock")
    async with opened() as session:
        async with serve_approvals(session, socket), trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "deploy", {})
            await session.wait_pending_questions()
            assert await toolledger(capsys, "answer", socket, "h0#1", option, "--reason",
                                    "not now") == (0, f"h0#1 {said}\n", "")
    assert session.calls["h0"].result is not None
    assert session.calls["h0"].result.text == f"not deployed: {option[2:]} (not now)"


@pytest.mark.parametrize(("question", "argv", "says"), [
    ("h0#1", ["--json", '{"replicas": 2}'], "question h0#1: "),
    ("h0#1", ["--json", '{"branch": "main", "replicas": 0}'], "replicas"),
    ("h0#1", ["--json", "not json"], "--json is not JSON"),
    ("h0#1", ["--json", "[1]"], "--json is a JSON list, not an object"),
    ("h0#1", ["--json", '{"branch": "a"}', "--reason", "why"], "--reason says why"),
    ("h0#1", [], "no answer given and no terminal to ask at"),
    ("h0#9", ["--decline"], "no call of this session asked a question 'h0#9'"),
    ("h0#1", ["--decline", "--cancel"], "not allowed with argument"),
])
async def test_mistakes_are_one_line_and_record_nothing(
    question: str, argv: list[str], says: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    socket = str(tmp_path / "a.sock")
    async with opened() as session:
        async with serve_approvals(session, socket), trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "deploy", {})
            await session.wait_pending_questions()
            recorded = len(session.records)
            status, out, err = await toolledger(capsys, "answer", socket, question, *argv)
            assert (status, out) == (1 if argv != ["--decline", "--cancel"] else 2, "")
            assert "error: " in err and says in err
            assert len(session.records) == recorded
            await session.answer_question("h0#1", "cancel")


def typed(monkeypatch: pytest.MonkeyPatch, lines: list[str]) -> list[str]:
    """A terminal where the person types ``lines``: the prompts they were shown."""
    prompts: list[str] = []
    left = iter(lines)

    def read(prompt: str = "") -> str:
        prompts.append(prompt)
        return next(left)

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(builtins, "input", read)
    return prompts


async def test_at_a_terminal_the_form_asks_one_field_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    socket = str(tmp_path / "a.sock")
    prompts = typed(monkeypatch, ["a", "", "main", "9", "3"])
    async with opened() as session:
        async with serve_approvals(session, socket), trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "deploy", {"message": "Which \x1b]0;x\x07?"})
            await session.wait_pending_questions()
            assert await toolledger(capsys, "answer", socket, "h0#1") == (
                0, "h0#1 answered\n", "")
    assert session.calls["h0"].questions[0].answer.content == {  # type: ignore[union-attr]
        "branch": "main", "replicas": 3}
    assert "deploy (call h0) asks: Which \\x1b]0;x\\x07?" in prompts[0]
    assert "(required)" in prompts[2] and "9 is " in prompts[4]  # asked again, saying why
    assert not any("\x1b" in prompt for prompt in prompts)


async def test_at_a_terminal_the_person_may_decline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    socket = str(tmp_path / "a.sock")
    typed(monkeypatch, ["a", "!decline"])
    async with opened() as session:
        async with serve_approvals(session, socket), trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "deploy", {})
            await session.wait_pending_questions()
            assert await toolledger(capsys, "answer", socket, "h0#1") == (
                0, "h0#1 declined\n", "")
    assert session.calls["h0"].result is not None
    assert session.calls["h0"].result.text == (
        "not deployed: decline (declined at the terminal)")


async def test_serve_with_approvals_leaves_a_question_its_client_cannot_answer_for_the_socket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """The official client declares no elicitation unless given a callback: without
    ``--approvals`` its call's question would be declined; with it, a person answers it at
    the socket while the client's call waits."""
    socket = str(tmp_path / "a.sock")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine.cli", "serve", "asking_served:session", "--approvals", socket],
        cwd=str(TESTS), env={"PYTHONPATH": str(TESTS.parent),
                             "SERVED_LOG": str(tmp_path / "served.jsonl")})
    results: list[Any] = []
    with trio.fail_after(60):  # a guard against a hang, not a measurement
        async with Client(params) as client, trio.open_nursery() as nursery:
            async def call() -> None:
                results.append(await client.call_tool("deploy", {}))

            nursery.start_soon(call)
            [question] = await trio.to_thread.run_sync(
                partial(pending_questions, socket, wait=True), abandon_on_cancel=True)
            assert (question.question_id, question.name) == ("h0#1", "deploy")
            assert await toolledger(capsys, "answer", socket, "h0#1", "--json",
                                    '{"branch": "next"}') == (0, "h0#1 answered\n", "")
    [result] = results
    assert not result.is_error and result.content[0].text == 'deployed {"branch": "next"}'
