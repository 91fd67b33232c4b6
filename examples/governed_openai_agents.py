"""An OpenAI Agents SDK agent whose tools are a toolledger session's, served over MCP: every
call is governed by the session's policy and recorded in its log, whatever the agent does
(docs/frameworks.md). Needs the ``mcp`` extra and ``openai-agents``.

    python -m examples.governed_openai_agents          # from the repository's root

The SDK's own MCP client (``MCPServerStdio``) starts ``toolledger serve
examples.governed_notes:session --approvals SOCKET`` over stdio, and the agent does what
examples/governed_pydantic_ai.py's does: a read runs, a drop is refused by a deny rule, a
delete waits until a person answers (here :func:`person`, as ``toolledger deny SOCKET
CALL_ID --reason ...`` would at another terminal: it refuses, and the model reads why).

The client's timeout (``client_session_timeout_seconds``) is 5 seconds unless it is told
otherwise: a call still waiting for a person then is given up, and ends cancelled in the log.
``None`` waits as long as the person takes.

The model is the SDK's ``ScriptedModel`` (``agents.testing``), so the example needs no key and
no network (tracing, which would send spans to OpenAI, is turned off); a real model goes in its
place (``Agent(name=..., model="gpt-5", mcp_servers=[notes])``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from engine.hosts.approvalsocket import pending_approvals, resolve_approval

ROOT = Path(__file__).resolve().parents[1]


def notes(log: str, socket: str) -> MCPServerStdio:
    """The served session's tools, as the SDK's MCP server; it waits for a person as long as
    it takes."""
    return MCPServerStdio(
        {"command": sys.executable,  # or "toolledger", where it is installed on PATH
         "args": ["-m", "engine.cli", "serve", "examples.governed_notes:session",
                  "--approvals", socket],
         "env": {"NOTES_LOG": log, "PYTHONPATH": str(ROOT)}, "cwd": str(ROOT)},
        client_session_timeout_seconds=None)


def said(call: ModelCall) -> list[Any]:
    """The last step of the script: what came back of each call, as the model read it."""
    items = [item for item in call.input if isinstance(item, dict)]
    names = {item["call_id"]: item["name"] for item in items
             if item.get("type") == "function_call"}
    return [assistant_message("; ".join(
        f"{names[item['call_id']]}: {_text(item['output'])}" for item in items
        if item.get("type") == "function_call_output"))]


def _text(output: Any) -> str:
    """A function call's output as text: the SDK hands the model a list of content parts."""
    if isinstance(output, str):
        return output
    return " ".join(part.get("text", "") for part in output)


def model() -> ScriptedModel:
    """The model: read a note and drop every note, then delete the note, then say what came
    back."""
    return ScriptedModel([
        [function_call("read_note", {"title": "todo"}, call_id="call_1"),
         function_call("drop_notes", {}, call_id="call_2")],
        [function_call("delete_note", {"title": "todo"}, call_id="call_3")],
        ModelStep.respond(said),
    ])


async def person(socket: str) -> None:
    """A person at another terminal: waits for the request, and refuses it, saying why."""
    [request] = await asyncio.to_thread(pending_approvals, socket, wait=True)
    print(f"waiting for a person: {request.call_id} {request.name} {request.arguments}")
    print(f"  (toolledger deny {socket} {request.call_id} --reason ..., at another terminal)")
    await asyncio.to_thread(resolve_approval, socket, request.call_id, False,
                            reason="the todo list stays")


async def main(workdir: str = ".") -> str:
    """Run the agent with the served tools; its log is ``workdir/notes.jsonl``. Returns what
    the agent answered."""
    set_tracing_disabled(True)
    log = os.path.abspath(os.path.join(workdir, "notes.jsonl"))
    socket = os.path.abspath(os.path.join(workdir, "notes.sock"))
    async with notes(log, socket) as server:  # the server is up, and so its socket
        agent = Agent(name="notes", model=model(), mcp_servers=[server])
        answered = asyncio.create_task(person(socket))
        result = await Runner.run(agent, "tidy my notes")
        await answered
    return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(main()))
    print("every call is in notes.jsonl: toolledger show notes.jsonl")
