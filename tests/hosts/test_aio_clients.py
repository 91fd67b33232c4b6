"""The official SDK clients under engine.hosts.aio, opened and closed by the asyncio host as the
SDKs' docs show (``async with AsyncOpenAI(...) as client:`` around the session).

The provider is the loopback replay server (tests/models/server.py), in a thread of its own,
keeping its connections alive as a provider does: the client's pool then holds an open
connection when the host leaves the client's block, which is what closing must cope with.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import openai
import pytest

from engine import approve_all
from engine.hosts.aio import Session
from engine.models import Model
from engine.models.anthropic import AnthropicModel
from engine.models.openai import OpenAIChatModel, OpenAIResponsesModel
from events import MemoryStore
from events.modelturns import ModelFailed, ModelRequested
from tests.models.apis import APIS, Api
from tests.models.server import ReplayServer, Reply, payload, serving_in_thread
from tests.models.tools import TOOLS

pytestmark = pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)


@asynccontextmanager
async def client_model(api: Api, server: ReplayServer, *, stream: bool = False,
                       timeout: float = 30.0) -> AsyncIterator[Model]:
    """The adapter over an SDK client the asyncio host opens, and closes after the block."""
    if api.name == "anthropic":
        async with anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-ant-test",
                                            max_retries=0, timeout=timeout) as aclient:
            yield AnthropicModel(aclient, "claude-sonnet-4-5", max_tokens=1024, stream=stream)
        return
    async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test",
                                  max_retries=0, timeout=timeout) as client:
        cls = OpenAIChatModel if api.name == "chat" else OpenAIResponsesModel
        yield cls(client, "gpt-4.1-mini", stream=stream)


def served(replies: Sequence[Reply], main: Any) -> tuple[ReplayServer, Any]:
    """``asyncio.run(main(server))`` against a keep-alive server answering ``replies``."""
    with serving_in_thread(replies, keep_alive=True) as server:
        outcome = asyncio.run(main(server))
    return server, outcome


def test_the_host_closes_its_client_after_a_prompt(api: Api) -> None:
    async def main(server: ReplayServer) -> Any:
        async with client_model(api, server) as model:
            async with Session.open(MemoryStore(), model=model, tools=TOOLS,
                                    approver=approve_all) as session:
                result = await session.prompt("look up a")
                records = session.records
        return result, records

    server, (result, records) = served(
        [payload(api.name, "tool_call"), payload(api.name, "final_text")], main)
    assert (result.stop, result.text) == ("end_turn", "done")
    # both requests went over one pooled connection, still open when the client closed
    assert len(server.requests) == 2 and server.connections == 1
    asked = [r.event for r in records if isinstance(r.event, ModelRequested)]
    assert [(a.provider, a.model) for a in asked] == [
        ("anthropic" if api.name == "anthropic" else "openai",
         "claude-sonnet-4-5" if api.name == "anthropic" else "gpt-4.1-mini")] * 2


def test_a_streamed_prompt_reaches_the_hosts_subscriber_and_the_client_closes(api: Api) -> None:
    async def main(server: ReplayServer) -> Any:
        async with client_model(api, server, stream=True) as model:
            async with Session.open(MemoryStore(), model=model, tools=TOOLS,
                                    approver=approve_all) as session:
                async with session.deltas() as stream:
                    async def read() -> list[str]:
                        return [delta.text async for delta in stream if delta.kind == "text"]

                    reader = asyncio.create_task(read())
                    result = await session.prompt("look up a")
        return result, "".join(await reader)

    server, (result, streamed) = served(
        [payload(api.name, "stream_call"), payload(api.name, "stream_final")], main)
    assert result.stop == "end_turn" and result.text
    assert streamed.endswith(result.text)
    assert server.connections == 1


def test_a_prompt_cancelled_during_the_request_ends_the_turn_and_the_client_closes(
    api: Api,
) -> None:
    async def main(server: ReplayServer) -> Any:
        async with client_model(api, server) as model:
            async with Session.open(MemoryStore(), model=model, tools=TOOLS,
                                    approver=approve_all) as session:
                assert (await session.prompt("look up a")).text == "done"
                prompt = asyncio.create_task(session.prompt("and again"))
                # the request is on its way: the server holds it unanswered
                assert await asyncio.to_thread(server.hanging.wait, 30)
                prompt.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await prompt
                records = session.records
        return records

    _, records = served([payload(api.name, "tool_call"), payload(api.name, "final_text"),
                         Reply(hang=True)], main)
    [failed] = [r.event for r in records if isinstance(r.event, ModelFailed)]
    assert failed.kind == "cancelled" and failed.turn == 3
