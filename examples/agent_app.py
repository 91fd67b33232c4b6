"""An agent in an asyncio web app (Starlette), its every tool call recorded and governed
(docs/hosts.md, "An agent in an asyncio app"). Needs the ``asgi``, ``mcp`` and ``openai``
extras, and a server to run it (uvicorn, hypercorn):

    OPENAI_API_KEY=... uvicorn --factory examples.agent_app:app_from_environment

One session lives as long as the app: its lifespan opens it on a JSONL log, with

- a model through the official OpenAI SDK (``OPENAI_BASE_URL`` points it at any server that
  speaks Chat Completions), whose client the app opens and closes on its own loop;
- the app's own tool, ``word_count``, a plain typed function;
- the tools of an MCP server started over stdio (``examples/units_server.py``), mounted with
  the prefix ``units_``; the host vouches for ``convert`` being read-only, so the policy lets
  it run (the server's own word would not count).

The app answers

- ``POST /ask`` ``{"text": ...}``: the agent's answer, ``{"text", "stop", "calls"}``, with the
  calls the model made for it (id, tool, status); 409 while another question is answered;
- ``/mcp``: the same tools served over MCP's streamable HTTP to other agents, whose calls are
  the session's host calls, recorded in the same log under the same policy.

Anything the policy asks about is refused (the default approver): this app has no person to
ask. When the server stops, the session closes, the mount's server process ends and the
OpenAI client closes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from mcp import StdioServerParameters
from openai import AsyncOpenAI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from engine import AlreadyRunning, Annotations, tool
from engine.hosts.aio import Session
from engine.mcp import MCPEndpoint, mount
from engine.models.openai import OpenAIChatModel
from events import JsonlStore
from events.stores import EventStore

#: the MCP server this app mounts: examples/units_server.py, in a process of its own
UNITS_SERVER = StdioServerParameters(command=sys.executable,
                                     args=["-m", "examples.units_server"], cwd=os.getcwd())


@tool(annotations=Annotations(read_only=True, open_world=False))
async def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text to count.
    """
    return len(text.split())


def create_app(store: EventStore, *, model: str = "gpt-4.1-mini",
               client_options: Mapping[str, Any] | None = None,
               units_server: Any = UNITS_SERVER) -> Starlette:
    """The app: one session in ``store`` prompting ``model`` through an ``AsyncOpenAI``
    client made with ``client_options`` (``base_url``, ``api_key``, ...), with
    ``word_count`` and the tools of ``units_server`` (what ``mcp.Client`` connects to)."""
    endpoint = MCPEndpoint(name="agent-app")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncOpenAI(**dict(client_options or {})) as client, \
                Session.open(store, model=OpenAIChatModel(client, model),
                             tools=[word_count]) as session, \
                mount(session, units_server, prefix="units_",
                      hints={"convert": Annotations(read_only=True, open_world=False)}), \
                endpoint.serving(session):
            app.state.session = session
            yield

    async def ask(request: Request) -> JSONResponse:
        session: Session = request.app.state.session
        body = await request.json()
        before = len(session.calls)
        result = await session.prompt(str(body["text"]))
        made = list(session.calls.values())[before:]
        return JSONResponse({
            "text": result.text,
            "stop": result.stop,
            "calls": [{"id": call.call_id, "tool": call.name, "status": call.status}
                      for call in made if call.origin == "model"],
        })

    async def busy(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=409)

    return Starlette(routes=[Route("/ask", ask, methods=["POST"]), Route("/mcp", endpoint)],
                     lifespan=lifespan, exception_handlers={AlreadyRunning: busy})


def app_from_environment() -> Starlette:
    """The app on the log ``agent.jsonl``, asking ``OPENAI_MODEL`` (``gpt-4.1-mini``) through
    the client's own settings from the environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``)."""
    return create_app(JsonlStore("agent.jsonl"),
                      model=os.environ.get("OPENAI_MODEL", "gpt-4.1-mini"))
