"""A typed tool's inferred schema is exported to each provider as it is: the OpenAI Chat
Completions and Responses formats and Anthropic's, built by the adapters and sent through the
official SDKs (an in-process transport answers), and read back from them."""

from __future__ import annotations

import pytest

from engine import Session, approve_all
from engine.models.formats import (
    anthropic_tool,
    chat_tool,
    responses_tool,
    tool_from_anthropic,
    tool_from_chat,
    tool_from_responses,
)
from events import MemoryStore
from tests.models.apis import APIS, Api
from tests.models.server import payload
from tests.typed_tools import TYPED, area


def test_the_formats_carry_the_inferred_schema_and_give_it_back() -> None:
    snapshot = area.snapshot()
    assert chat_tool(snapshot)["function"]["parameters"] == area.input_schema
    assert responses_tool(snapshot)["parameters"] == area.input_schema
    assert anthropic_tool(snapshot)["input_schema"] == area.input_schema
    for back in (tool_from_chat(chat_tool(snapshot), like=snapshot),
                 tool_from_responses(responses_tool(snapshot), like=snapshot),
                 tool_from_anthropic(anthropic_tool(snapshot), like=snapshot)):
        assert back == snapshot


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_the_adapters_send_the_inferred_schemas(api: Api) -> None:
    async with api.answering([payload(api.name, "final_text")]) as (model, sent):
        async with Session.open(MemoryStore(), model=model, tools=TYPED,
                                approver=approve_all) as session:
            await session.prompt("measure")
    [body] = sent
    declared = {(t.get("function") or t)["name"]: t for t in api.tools(body)}
    assert set(declared) == {"area", "label"}
    for spec in TYPED:
        tool = declared[spec.name]
        schema = (tool["function"]["parameters"] if api.name == "chat" else
                  tool["input_schema"] if api.name == "anthropic" else tool["parameters"])
        assert schema == spec.input_schema
