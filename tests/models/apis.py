"""The three provider APIs under test, side by side: how to build each adapter against the
loopback server (or, where a test runs hundreds of exchanges, over an in-process transport that
answers the same scripted replies), and how to read the tool results back out of a request it
sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import attrs
import httpx
import httpx2
import openai

from engine import Session, approve_all
from engine.models import Model, ModelError
from engine.testing import check_session
from events import MemoryStore
from engine.models.anthropic import AnthropicModel
from engine.models.openai import OpenAIChatModel, OpenAIResponsesModel
from tests.models.server import ReplayServer, Reply
from tests.models.tools import TOOLS


@attrs.frozen
class Api:
    """One API: its payload directory's name, and what differs between the three."""

    name: str

    @asynccontextmanager
    async def model(self, server: ReplayServer, *, stream: bool = False, max_retries: int = 2,
                    timeout: float = 30.0) -> AsyncIterator[Model]:
        """The adapter, over an SDK client pointed at ``server``, closed after the block."""
        if self.name == "anthropic":
            async with anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-ant-test",
                                                max_retries=max_retries,
                                                timeout=timeout) as aclient:
                yield AnthropicModel(aclient, "claude-sonnet-4-5", max_tokens=1024,
                                     stream=stream)
            return
        async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test",
                                      max_retries=max_retries, timeout=timeout) as client:
            cls = OpenAIChatModel if self.name == "chat" else OpenAIResponsesModel
            yield cls(client, "gpt-4.1-mini", stream=stream, settings={"temperature": 0})

    @asynccontextmanager
    async def answering(self, replies: Sequence[Reply], *,
                        stream: bool = False) -> AsyncIterator[tuple[Model, list[Any]]]:
        """The adapter, over an SDK client whose transport answers ``replies`` in order, in
        the process (no socket; no retries), and the JSON bodies of the requests it sent."""
        script, sent = list(replies), []
        http = httpx2 if self.name == "anthropic" else httpx

        def answer(request: Any) -> Any:
            sent.append(json.loads(request.content))
            reply = script.pop(0) if script else Reply(status=500, body=b"{}")
            return http.Response(reply.status, content=reply.body,
                                 headers={"content-type": reply.content_type, **dict(reply.headers)})

        async with http.AsyncClient(transport=http.MockTransport(answer)) as transport:
            if self.name == "anthropic":
                client: Any = anthropic.AsyncAnthropic(api_key="sk-ant-test", max_retries=0,
                                                       http_client=transport)
                yield AnthropicModel(client, "claude-sonnet-4-5", max_tokens=1024,
                                     stream=stream), sent
                return
            client = openai.AsyncOpenAI(api_key="sk-test", max_retries=0, http_client=transport)
            cls = OpenAIChatModel if self.name == "chat" else OpenAIResponsesModel
            yield cls(client, "gpt-4.1-mini", stream=stream), sent

    @property
    def path(self) -> str:
        """Where the SDK sends its requests."""
        return {"chat": "/v1/chat/completions", "responses": "/v1/responses",
                "anthropic": "/v1/messages"}[self.name]

    @property
    def first_delta(self) -> int:
        """How many events of ``stream_call.sse`` come up to its first piece of text."""
        return {"chat": 2, "responses": 5, "anthropic": 4}[self.name]

    def results(self, body: dict[str, Any]) -> list[tuple[str, str, bool]]:
        """The tool results a request carries: ``(model call id, text, is_error)``."""
        found: list[tuple[str, str, bool]] = []
        if self.name == "chat":
            for message in body["messages"]:
                if message["role"] == "tool":
                    text = message["content"]
                    found.append((message["tool_call_id"], text, text.startswith("Error:")))
        elif self.name == "responses":
            for item in body["input"]:
                if item.get("type") == "function_call_output":
                    text = item["output"]
                    found.append((item["call_id"], text, text.startswith("Error:")))
        else:
            for message in body["messages"]:
                if message["role"] != "user":
                    continue
                for block in message["content"]:
                    if block["type"] == "tool_result":
                        text = "\n".join(part["text"] for part in block["content"])
                        found.append((block["tool_use_id"], text, block.get("is_error", False)))
        return found

    def system(self, body: dict[str, Any]) -> str | None:
        """The system prompt a request carries."""
        if self.name == "chat":
            first = body["messages"][0]
            return first["content"] if first["role"] == "system" else None
        return body.get("instructions" if self.name == "responses" else "system")

    def tools(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The tool declarations a request carries."""
        return list(body.get("tools", []))


APIS = [Api("chat"), Api("responses"), Api("anthropic")]


async def prompted(model: Model, store: MemoryStore, *, resume: bool = False,
                   **options: Any) -> Any:
    """Session ``"s"`` over ``model`` and the recorded payloads' tools, prompted once: what
    the prompt returned, or the ``ModelError`` it raised (then, with ``resume``, the session
    resumed once, to show it goes on). The log is checked whole at the end. ``options`` go
    to ``Session.open``."""
    async with Session.open(store, model=model, tools=TOOLS, approver=approve_all,
                            session_id="s", create=True, **options) as session:
        try:
            outcome: Any = await session.prompt("look up a")
        except ModelError as exc:
            outcome = exc
            if resume:
                assert (await session.resume()).stop == "end_turn"
        await check_session(session, store, closed=True)
    return outcome
