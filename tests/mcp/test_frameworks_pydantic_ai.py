"""A pydantic-ai agent calls a session's tools through ``toolledger serve``, with its own MCP
client (``MCPToolset``, over stdio and over streamable HTTP) and its own test model
(``FunctionModel``): every call is audited in the served session's log, the policy's refusals
are what the agent's model reads, and a call that waits for a person's approval holds the
agent's run until the person answers from another process (``toolledger approvals`` /
``approve`` / ``deny``).

Each test runs the real framework on asyncio against a real subprocess: over stdio the
toolset starts and stops it (``keep_alive=False``: nothing outlives the test); over HTTP the
test starts it (``--http 0``) and stops it with Ctrl-C, as a person would."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.frameworks_served import ROOT, Served


TRANSPORTS = ["stdio", "http"]


@asynccontextmanager
async def toolset(served: Served, transport: str, **options: Any) -> AsyncIterator[MCPToolset[Any]]:
    """pydantic-ai's MCP client on ``toolledger serve``: over stdio it starts the server
    itself; over streamable HTTP it connects to the URL the server printed."""
    if transport == "stdio":
        # a guard, not a measure: the served process's imports outlast the 5 s default under load
        yield MCPToolset(StdioTransport(served.command, served.args, env=served.env,
                                        cwd=served.cwd, keep_alive=False),
                         init_timeout=120, **options)
        return
    async with served.over_http() as url:
        yield MCPToolset(url, **options)


def scripted(*turns: list[ToolCallPart] | str) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """A model that answers with ``turns`` in order (tool calls, or the final text), and the
    messages it was given each time: what the agent's model read. The tools it was offered
    are in ``model.offered`` (the last time it was asked)."""
    seen: list[list[ModelMessage]] = []
    offered: dict[str, Any] = {}

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        offered.update({tool.name: tool for tool in info.function_tools})
        turn = turns[len(seen) - 1]
        return ModelResponse(parts=[TextPart(turn)] if isinstance(turn, str) else list(turn))

    model = FunctionModel(answer)
    model.offered = offered  # type: ignore[attr-defined]
    return model, seen


def returned(messages: list[ModelMessage]) -> dict[str, tuple[str, Any]]:
    """What the model read of each tool call in the last request: ``(outcome, content)`` by
    the tool's name, or by the call's id if the name is not enough."""
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    parts = [part for part in request.parts if isinstance(part, (ToolReturnPart, RetryPromptPart))]
    names = [part.tool_name for part in parts]
    return {(part.tool_name if names.count(part.tool_name) == 1 else part.tool_call_id):
            (part.outcome, part.content) for part in parts}


CALLS = [ToolCallPart("read_note", {"title": "todo"}, tool_call_id="read_todo"),
         ToolCallPart("read_note", {"title": "diary"}, tool_call_id="read_diary"),
         ToolCallPart("delete_note", {"title": "todo"}),
         ToolCallPart("drop_notes", {})]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_call_is_audited_and_refusals_are_failed_tool_results(
    tmp_path: Path, transport: str,
) -> None:
    served = Served(str(tmp_path / "served.jsonl"))
    model, seen = scripted(CALLS, "done")

    async def main() -> str:
        async with toolset(served, transport, tool_error_behavior="failed") as notes:
            async with Agent(model, toolsets=[notes]) as agent:
                return (await agent.run("tidy my notes")).output

    assert asyncio.run(main()) == "done"
    offered = model.offered  # type: ignore[attr-defined]
    assert set(offered) == {"read_note", "delete_note", "drop_notes"}
    assert offered["read_note"].description == "Read a note."
    assert offered["read_note"].parameters_json_schema["required"] == ["title"]
    assert returned(seen[1]) == {
        "read_todo": ("success", "write the docs"),
        "read_diary": ("failed", "read_note was blocked: the diary is private"),  # a handler
        "delete_note": ("failed", "delete_note was not approved"),  # the approver refused
        "drop_notes": ("failed", "drop_notes was denied: denied by the rule 'drop_*'"),
    }
    calls = served.calls()
    assert sorted((view.name, json.dumps(view.arguments), view.origin, view.status)
                  for view in calls.values()) == [
        ("delete_note", '{"title": "todo"}', "host", "denied"),
        ("drop_notes", "{}", "host", "denied"),
        ("read_note", '{"title": "diary"}', "host", "blocked"),
        ("read_note", '{"title": "todo"}', "host", "completed")]
    assert set(calls) == {"h0", "h1", "h2", "h3"}  # in the order they reached the server
    by_name = {view.name: view for view in calls.values()}
    assert by_name["delete_note"].policy is not None
    assert by_name["delete_note"].policy.decision == "ask"
    assert by_name["drop_notes"].policy is not None
    assert by_name["drop_notes"].policy.rule == "drop_*"


def test_by_default_a_refusal_is_a_retry_prompt_and_a_model_that_insists_ends_the_run(
    tmp_path: Path,
) -> None:
    served = Served(str(tmp_path / "served.jsonl"))
    again = [ToolCallPart("delete_note", {"title": "todo"})]
    model, seen = scripted(again, again, "never asked")

    async def main() -> None:
        async with toolset(served, "stdio") as notes, Agent(model, toolsets=[notes]) as agent:
            await agent.run("delete the todo note")

    with pytest.raises(UnexpectedModelBehavior, match="'delete_note' exceeded max retries"):
        asyncio.run(main())
    assert returned(seen[1]) == {"delete_note": ("retried", "delete_note was not approved")}
    [retry] = seen[1][-1].parts
    assert isinstance(retry, ToolReturnPart) and retry.retry is not None  # asked to try again
    assert retry.model_response_str() == '{"error":"delete_note was not approved"}'
    assert [view.status for view in served.calls().values()] == ["denied", "denied"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_person_answers_from_another_terminal_while_the_agent_waits(
    tmp_path: Path, transport: str,
) -> None:
    served = Served(str(tmp_path / "served.jsonl"), approvals=str(tmp_path / "a.sock"))
    model, seen = scripted([ToolCallPart("delete_note", {"title": "todo"})],
                           [ToolCallPart("delete_note", {"title": "groceries"})], "done")

    async def toolledger(*args: str) -> str:
        """The command a person types at another terminal."""
        done = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "engine.cli", *args, cwd=str(ROOT),
            stdout=asyncio.subprocess.PIPE)
        out, _ = await done.communicate()
        assert done.returncode == 0
        return out.decode()

    async def person() -> list[Any]:
        asked = []
        for answer in (["approve"], ["deny", "--reason", "keep the groceries"]):
            [request] = json.loads(await toolledger("approvals", served.approvals or "",
                                                    "--wait", "--json"))
            assert len(seen) == len(asked) + 1  # the agent's run waits on the call
            asked.append(request)
            await toolledger(answer[0], served.approvals or "", request["call_id"], *answer[1:])
        return asked

    async def main() -> tuple[str, list[Any]]:
        async with toolset(served, transport, tool_error_behavior="failed") as notes:
            async with Agent(model, toolsets=[notes]) as agent:  # the server is up, and its socket
                run = asyncio.create_task(agent.run("delete two notes"))
                asked = await person()
                return (await run).output, asked

    output, asked = asyncio.run(asyncio.wait_for(main(), 120))
    assert output == "done"
    assert [(request["call_id"], request["name"], request["arguments"]) for request in asked] \
        == [("h0", "delete_note", {"title": "todo"}),
            ("h1", "delete_note", {"title": "groceries"})]
    assert returned(seen[1]) == {"delete_note": ("success", "deleted todo")}
    assert returned(seen[2]) == {
        "delete_note": ("failed", "delete_note was not approved: keep the groceries")}
    calls = served.calls()
    assert [(view.status, view.approval is not None and view.approval.later)
            for view in calls.values()] == [("completed", True), ("denied", True)]
