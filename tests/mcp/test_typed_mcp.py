"""A typed tool over MCP: its inferred schemas are MCP's input and output schemas (the
official client lists them and checks each result's structured content against the output
schema), its results come back structured, and arguments its types cannot hold are an error
result like any invalid arguments."""

from __future__ import annotations

from typing import Any

from mcp import Client

from engine import Session
from engine.mcp import mcp_server, tool_from_mcp, tool_to_mcp
from engine.models import FauxModel
from events import MemoryStore
from tests.typed_tools import TYPED, area, label


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def test_a_typed_spec_survives_mcp() -> None:
    for spec in TYPED:
        declared = tool_to_mcp(spec)
        assert declared.input_schema == spec.input_schema
        assert declared.output_schema == spec.output_schema
        back = tool_from_mcp(declared, spec.execute)
        assert (back.input_schema, back.output_schema) == (spec.input_schema, spec.output_schema)


async def test_the_official_client_lists_and_calls_typed_tools() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=TYPED) as session:
        async with Client(mcp_server(session)) as client:
            listed = {tool.name: dump(tool) for tool in (await client.list_tools()).tools}
            assert listed["area"]["inputSchema"] == area.input_schema
            assert listed["area"]["outputSchema"] == area.output_schema
            assert listed["label"]["outputSchema"] == label.output_schema
            # the client validates structured content against the output schema it listed
            measured = await client.call_tool("area", {"size": {"width": 2, "height": 3}})
            assert not measured.is_error and measured.structured_content == {"result": 6.0}
            assert dump(measured)["content"] == [{"type": "text", "text": "6.0"}]
            labelled = await client.call_tool("label", {"size": {"width": 2},
                                                        "words": ["a", "b"]})
            assert labelled.structured_content == {"width": 4.0, "height": 1.0}
            too_big = await client.call_tool("area", {"size": {"width": 10**400}})
            assert too_big.is_error
            assert "is too large for a float @ $.size.width" in too_big.content[0].text
        calls = session.calls
    assert [calls[f"h{n}"].status for n in range(3)] == ["completed", "completed", "failed"]
