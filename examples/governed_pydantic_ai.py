"""A pydantic-ai agent whose tools are a toolledger session's, served over MCP: every call is
governed by the session's policy and recorded in its log, whatever the agent does
(docs/frameworks.md). Needs the ``mcp`` extra and ``pydantic-ai-slim[mcp]``.

    python -m examples.governed_pydantic_ai            # from the repository's root

The agent's own MCP client (``MCPToolset``) starts ``toolledger serve
examples.governed_notes:session --approvals SOCKET`` over stdio. The agent reads a note (it
runs), drops every note (a deny rule refuses it: the agent's model reads why) and deletes a
note: that call waits, and the agent's run with it, until a person answers. Here the person
is :func:`person`, which answers from outside the served process as
``toolledger approve SOCKET CALL_ID`` would at another terminal.

The model is pydantic-ai's ``FunctionModel`` playing a script, so the example needs no key and
no network; a real one goes in its place (``Agent("openai:gpt-5", toolsets=[notes])``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from engine.hosts.approvalsocket import pending_approvals, resolve_approval

ROOT = Path(__file__).resolve().parents[1]


def notes(log: str, socket: str) -> MCPToolset[None]:
    """The served session's tools, as a pydantic-ai toolset. ``tool_error_behavior="failed"``:
    a refused call is a failed tool result the model reads, not a prompt to try again."""
    server = StdioTransport(
        sys.executable,  # or "toolledger", where it is installed on PATH
        ["-m", "engine.cli", "serve", "examples.governed_notes:session", "--approvals", socket],
        env={"NOTES_LOG": log, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT), keep_alive=False)
    # init_timeout: the served process imports the engine before it answers, which takes more
    # than the client's 5 s default on a busy machine
    return MCPToolset(server, tool_error_behavior="failed", init_timeout=60)


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: read a note and drop every note, then delete the note, then say what came
    back of each call."""
    turn = sum(isinstance(message, ModelResponse) for message in messages)
    if turn == 0:
        return ModelResponse(parts=[ToolCallPart("read_note", {"title": "todo"}),
                                    ToolCallPart("drop_notes", {})])
    if turn == 1:
        return ModelResponse(parts=[ToolCallPart("delete_note", {"title": "todo"})])
    said = [f"{part.tool_name}: {part.content}" for message in messages
            if isinstance(message, ModelRequest) for part in message.parts
            if isinstance(part, ToolReturnPart)]
    return ModelResponse(parts=[TextPart("; ".join(said))])


async def person(socket: str) -> None:
    """A person at another terminal: waits for the request, and grants it."""
    [request] = await asyncio.to_thread(pending_approvals, socket, wait=True)
    print(f"waiting for a person: {request.call_id} {request.name} {request.arguments}")
    print(f"  (toolledger approve {socket} {request.call_id}, at another terminal)")
    await asyncio.to_thread(resolve_approval, socket, request.call_id, True)


async def main(workdir: str = ".") -> str:
    """Run the agent with the served tools; its log is ``workdir/notes.jsonl``. Returns what
    the agent answered."""
    log = os.path.abspath(os.path.join(workdir, "notes.jsonl"))
    socket = os.path.abspath(os.path.join(workdir, "notes.sock"))
    agent = Agent(FunctionModel(script), toolsets=[notes(log, socket)])
    async with agent:  # the server is up, and so its socket
        answered = asyncio.create_task(person(socket))
        result = await agent.run("tidy my notes")
        await answered
    return str(result.output)


if __name__ == "__main__":
    print(asyncio.run(main()))
    print("every call is in notes.jsonl: toolledger show notes.jsonl")
