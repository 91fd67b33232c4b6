"""An OpenAI Agents SDK agent calls a session's tools through ``toolledger serve``, with its own
MCP client (``MCPServerStdio``; ``MCPServerStreamableHttp`` over streamable HTTP) and its own
test model (``agents.testing.ScriptedModel``, an implementation of its ``Model`` interface that
never reaches the network): every call is audited in the served session's log, the policy's
refusals are the function call outputs the agent's model reads, and a call that waits for a
person's approval holds the run until the person answers from another process, unless the
SDK's client gives up first (its timeout: 5 seconds by default).

Each test runs the real framework on asyncio against a real subprocess: over stdio the
``async with`` block starts and stops it; over HTTP the test starts it (``--http 0``) and
stops it with Ctrl-C, as a person would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from agents.testing import ScriptedModel, assistant_message, function_call

from engine.hosts.approvalsocket import pending_approvals, resolve_approval
from tests.frameworks_served import Served


@pytest.fixture(autouse=True)
def no_tracing() -> Any:
    """The SDK would export its traces to OpenAI's servers: no network in tests."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


TRANSPORTS = ["stdio", "http"]


@asynccontextmanager
async def server(served: Served, transport: str, **options: Any) -> AsyncIterator[MCPServer]:
    """The SDK's MCP client on ``toolledger serve``, connected for the block: over stdio it
    starts the server itself; over streamable HTTP it connects to the URL the server
    printed."""
    if transport == "stdio":
        async with MCPServerStdio({"command": served.command, "args": served.args,
                                   "env": served.env, "cwd": served.cwd}, **options) as notes:
            yield notes
        return
    async with served.over_http() as url:
        async with MCPServerStreamableHttp({"url": url}, **options) as notes:
            yield notes


def outputs(model: ScriptedModel, turn: int) -> dict[str, Any]:
    """What the model read of each function call when it was asked the ``turn``-th time:
    the output by the call's id."""
    return {item["call_id"]: item["output"] for item in model.calls[turn].input
            if item.get("type") == "function_call_output"}


def said(text: str) -> list[dict[str, str]]:
    """A function call's output as the SDK hands it to the model."""
    return [{"type": "input_text", "text": text}]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_call_is_audited_and_a_refusal_is_the_output_the_model_reads(
    tmp_path: Path, transport: str,
) -> None:
    served = Served(str(tmp_path / "served.jsonl"))
    model = ScriptedModel([
        [function_call("read_note", {"title": "todo"}, call_id="read_todo"),
         function_call("read_note", {"title": "diary"}, call_id="read_diary"),
         function_call("delete_note", {"title": "todo"}, call_id="delete"),
         function_call("drop_notes", {}, call_id="drop")],
        [assistant_message("done")],
    ])

    async def main() -> str:
        async with server(served, transport) as notes:
            agent = Agent(name="tidy", model=model, mcp_servers=[notes])
            return str((await Runner.run(agent, "tidy my notes")).final_output)

    assert asyncio.run(main()) == "done"
    model.assert_complete()
    assert {tool.name for tool in model.calls[0].tools} == {
        "read_note", "delete_note", "drop_notes"}
    assert outputs(model, 1) == {
        "read_todo": said("write the docs"),
        "read_diary": said("read_note was blocked: the diary is private"),
        "delete": said("delete_note was not approved"),
        "drop": said("drop_notes was denied: denied by the rule 'drop_*'"),
    }
    calls = served.calls()
    assert set(calls) == {"h0", "h1", "h2", "h3"}  # in the order they reached the server
    assert sorted((view.name, json.dumps(view.arguments), view.origin, view.status)
                  for view in calls.values()) == [
        ("delete_note", '{"title": "todo"}', "host", "denied"),
        ("drop_notes", "{}", "host", "denied"),
        ("read_note", '{"title": "diary"}', "host", "blocked"),
        ("read_note", '{"title": "todo"}', "host", "completed")]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_person_answers_while_the_run_waits(tmp_path: Path, transport: str) -> None:
    served = Served(str(tmp_path / "served.jsonl"), approvals=str(tmp_path / "a.sock"))
    socket = served.approvals or ""
    model = ScriptedModel([
        [function_call("delete_note", {"title": "todo"}, call_id="call_1")],
        [function_call("delete_note", {"title": "groceries"}, call_id="call_2")],
        [assistant_message("done")],
    ])

    async def person() -> list[Any]:
        """Answers as a program of the person's own would, from outside the served
        process: it waits for a request, then grants the first and refuses the second."""
        asked = []
        for granted, reason in ((True, None), (False, "keep the groceries")):
            [request] = await asyncio.to_thread(pending_approvals, socket, wait=True)
            assert len(model.calls) == len(asked) + 1  # the run waits on the call
            asked.append(request)
            await asyncio.to_thread(resolve_approval, socket, request.call_id, granted,
                                    reason=reason)
        return asked

    async def main() -> tuple[str, list[Any]]:
        # None: the client waits for the person as long as it takes (the SDK's default gives
        # up after 5 seconds)
        async with server(served, transport, client_session_timeout_seconds=None) as notes:
            agent = Agent(name="tidy", model=model, mcp_servers=[notes])
            run = asyncio.create_task(Runner.run(agent, "delete two notes"))
            asked = await person()
            return str((await run).final_output), asked

    output, asked = asyncio.run(asyncio.wait_for(main(), 120))
    assert output == "done"
    assert [(request.call_id, request.arguments) for request in asked] == [
        ("h0", {"title": "todo"}), ("h1", {"title": "groceries"})]
    assert outputs(model, 1) == {"call_1": said("deleted todo")}
    assert outputs(model, 2)["call_2"] == said("delete_note was not approved: keep the groceries")
    assert [view.status for view in served.calls().values()] == ["completed", "denied"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_client_that_stops_waiting_ends_the_call_as_cancelled(
    tmp_path: Path, transport: str,
) -> None:
    served = Served(str(tmp_path / "served.jsonl"), approvals=str(tmp_path / "a.sock"))
    model = ScriptedModel([
        [function_call("delete_note", {"title": "todo"}, call_id="call_1")],
        [assistant_message("I could not delete it")],
    ])

    async def main() -> None:
        # nobody answers: the SDK's client gives up after its timeout, and says so to the
        # server (MCP's notifications/cancelled)
        async with server(served, transport, client_session_timeout_seconds=2) as notes:
            await Runner.run(Agent(name="tidy", model=model, mcp_servers=[notes]), "delete it")

    asyncio.run(main())
    assert outputs(model, 1) == {
        "call_1": "An error occurred while running the tool. Please try again."}
    assert served.calls()["h0"].status == "cancelled"  # never run; a later answer is refused
