"""What the web console's tests share: a log with a session paused at an approval or a
question, a console over it, and a client that holds the console's cookie."""

from __future__ import annotations

import re
import secrets
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlencode

import httpx

from engine import LATER, Annotations, Session, ToolResult, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.present.renderers import Renderers
from engine.web import WebDesk, console_app, lifespan
from events.stores import EventStore

SID = "s1"
PATH_SCHEMA = {"type": "object", "properties": {"path": {"type": "string", "maxLength": 50}},
               "required": ["path"], "additionalProperties": False}
BRANCH = {"type": "object", "properties": {"branch": {"type": "string", "minLength": 1},
                                           "force": {"type": "boolean"}},
          "required": ["branch"]}


class Tools:
    """``delete_file`` needs approval; ``deploy`` asks which branch. ``ran`` is what ran."""

    def __init__(self) -> None:
        self.ran: list[Any] = []

        @tool(input_schema=PATH_SCHEMA, annotations=Annotations(destructive=True))
        async def delete_file(call: Any, ctx: Any) -> ToolResult:
            """Delete a file."""
            self.ran.append(("delete_file", call.arguments))
            return ToolResult(content=[text(f"deleted {call.arguments['path']}")])

        @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=True))
        async def deploy(call: Any, ctx: Any) -> ToolResult:
            """Deploy a branch."""
            answer = await ctx.ask("Which branch?", BRANCH)
            self.ran.append(("deploy", answer.action, answer.content))
            if not answer.accepted:
                return ToolResult(content=[text(f"not deployed: {answer.action}")])
            return ToolResult(content=[text(f"deployed {answer.content['branch']}")])

        self.specs = [delete_file, deploy]


async def later(request: Any) -> Any:
    return LATER


async def paused(store: EventStore, call: Any, session_id: str = SID) -> Tools:
    """A session that asked for ``call`` and paused there (an approval, or a question)."""
    tools = Tools()
    model = FauxModel([call, faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, approver=later, asker=later,
                            session_id=session_id, create=True) as session:
        assert (await session.prompt("go")).stop == "paused"
    return tools


def deleting(path: str = "notes.md") -> Any:
    return faux_tool_call("delete_file", {"path": path})


async def resumed(store: EventStore, tools: Tools, session_id: str = SID) -> Session:
    """Resume the session where its tools are: it must finish."""
    async with Session.open(store, model=FauxModel([faux_text("done")]), tools=tools.specs,
                            approver=later, asker=later, session_id=session_id) as session:
        result = await session.resume()
        assert result.stop == "end_turn", result
        return session


class Console:
    """A console app over ``store`` and a client already through its token; inside
    ``async with``, its lifespan runs (as a server runs it), with the nursery of its
    background folds and checks."""

    def __init__(self, store: EventStore, *, read_only: bool = False,
                 desk: WebDesk | None = None, renderers: Renderers | None = None) -> None:
        self.token = secrets.token_urlsafe()
        self.app = console_app(store, token=self.token, read_only=read_only, desk=desk,
                               renderers=renderers)
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                        base_url="http://127.0.0.1")
        self._running = AsyncExitStack()

    async def __aenter__(self) -> Console:
        await self._running.enter_async_context(lifespan(self.app))
        entered = await self.client.get("/", params={"token": self.token})
        assert entered.status_code == 303
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.aclose()
        await self._running.aclose()

    async def page(self, path: str = "/", **params: Any) -> str:
        query = urlencode(params, errors="surrogatepass")  # ids may hold lone surrogates
        response = await self.client.get(f"{path}?{query}" if query else path)
        assert response.status_code == 200, response.text
        return response.text

    async def post(self, **fields: str) -> httpx.Response:
        return await self.client.post(
            "/answer", content=urlencode(fields, errors="surrogatepass"),
            headers={"content-type": "application/x-www-form-urlencoded"})

    async def answer(self, session_id: str = SID, **fields: str) -> httpx.Response:
        """Post a form as the session's page serves it: with its CSRF token."""
        page = await self.page("/session", id=session_id)
        found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert found is not None, "the page has no form"
        return await self.post(csrf=found.group(1), session=session_id, **fields)
