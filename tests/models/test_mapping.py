"""What each adapter maps that the shared scenarios do not: arguments that are not JSON,
provider blocks kept and sent back unchanged, refusals, and the tool formats both ways."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import pytest

from engine import Annotations, ToolResult, text
from engine.models import ModelError
from engine.models.formats import (
    anthropic_tool,
    chat_tool,
    parse_arguments,
    responses_tool,
    result_text,
    tool_from_anthropic,
    tool_from_chat,
    tool_from_responses,
)
from events.modelturns import ModelFailed
from events.results import ImageContent
from events.types import AssistantMessage, ToolCallFailed, ToolSnapshot
from tests.models.apis import Api
from tests.models.server import payload
from tests.models.test_adapters import of, run

OPENAI = [Api("chat"), Api("responses")]


@pytest.mark.parametrize("api", OPENAI, ids=lambda api: api.name)
async def test_arguments_that_are_not_json_fail_that_call_cleanly(api: Api) -> None:
    server, records, result = await run(api, [payload(api.name, "not_json"),
                                              payload(api.name, "final_text")])
    [message, _] = of(records, AssistantMessage)
    assert message.tool_calls[0].arguments == "{key: a}"  # recorded as the model wrote it
    [failed] = of(records, ToolCallFailed)
    assert failed.kind == "invalid_arguments"
    [(_, output, is_error)] = api.results(server.bodies[1])
    assert is_error and result.text == "done"
    # and the model is shown its own arguments back, as it wrote them
    sent = json.dumps(server.bodies[1])
    assert json.dumps("{key: a}") in sent


@pytest.mark.parametrize(("api", "name", "kind"), [
    (Api("responses"), "reasoning_call", "reasoning"),
    (Api("anthropic"), "thinking_call", "thinking"),
], ids=["responses", "anthropic"])
async def test_blocks_the_adapter_does_not_read_go_back_unchanged(api: Api, name: str,
                                                                  kind: str) -> None:
    server, records, result = await run(api, [payload(api.name, name),
                                              payload(api.name, "final_text")])
    assert result.text == "done"
    [message, _] = of(records, AssistantMessage)
    assert message.provider_content is not None
    recorded = json.loads((payload(api.name, name).body))
    given = recorded["output"] if api.name == "responses" else recorded["content"]
    block = next(b for b in given if b["type"] == kind)
    second = server.bodies[1]
    sent = second["input"] if api.name == "responses" else [
        b for m in second["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert block in sent


async def test_a_message_without_such_blocks_keeps_no_provider_content() -> None:
    _, records, _ = await run(Api("anthropic"), [payload("anthropic", "tool_call"),
                                                 payload("anthropic", "final_text")])
    assert [m.provider_content for m in of(records, AssistantMessage)] == [None, None]


@pytest.mark.parametrize("api", [Api("chat"), Api("anthropic")], ids=lambda api: api.name)
async def test_a_refusal_is_a_model_error(api: Api) -> None:
    _, records, raised = await run(api, [payload(api.name, "refusal")])
    assert isinstance(raised, ModelError) and raised.kind == "refused"
    assert [f.kind for f in of(records, ModelFailed)] == ["refused"]


# -- tool formats -----------------------------------------------------------------------------

SNAPSHOT = ToolSnapshot(
    name="stat_file", description="Size of a file in bytes.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                  "required": ["path"]},
    output_schema={"type": "object", "properties": {"size": {"type": "integer"}}},
    annotations=Annotations(read_only=True), exposure="deferred", timeout=5.0)


@pytest.mark.parametrize(("export", "back", "shape"), [
    (chat_tool, tool_from_chat,
     {"type": "function", "function": {"name": "stat_file", "description": SNAPSHOT.description,
                                       "parameters": SNAPSHOT.input_schema}}),
    (responses_tool, tool_from_responses,
     {"type": "function", "name": "stat_file", "description": SNAPSHOT.description,
      "parameters": SNAPSHOT.input_schema, "strict": False}),
    (anthropic_tool, tool_from_anthropic,
     {"name": "stat_file", "description": SNAPSHOT.description,
      "input_schema": SNAPSHOT.input_schema}),
], ids=["chat", "responses", "anthropic"])
def test_a_tool_exports_to_each_format_and_comes_back(export: Any, back: Any,
                                                      shape: dict[str, Any]) -> None:
    exported = export(SNAPSHOT)
    assert exported == shape
    # what the format cannot carry is not in it: it stays on our side
    assert "output_schema" not in json.dumps(exported) and "read_only" not in json.dumps(exported)
    bare = back(exported)
    assert (bare.name, bare.description, bare.input_schema) == (
        SNAPSHOT.name, SNAPSHOT.description, SNAPSHOT.input_schema)
    assert bare.output_schema is None and bare.annotations == Annotations()  # the cautious defaults
    assert back(exported, like=SNAPSHOT) == SNAPSHOT
    with pytest.raises(ValueError, match="like= names"):
        back(exported, like=ToolSnapshot(name="other", description="", input_schema={}))


def test_arguments_are_parsed_or_passed_through() -> None:
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("") == {}
    assert parse_arguments("{a: 1}") == "{a: 1}"
    assert parse_arguments('{"a": NaN}') == '{"a": NaN}'  # not JSON either


def test_results_render_as_text_for_formats_without_blocks() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    assert result_text(ToolResult(content=[text("a"), image])) == "a\n[image: image/png]"
    assert result_text(ToolResult(content=[text("no")], is_error=True)) == "Error: no"
    assert result_text(ToolResult(structured_content={"n": 1})) == '{"n": 1}'



async def test_a_failed_response_is_a_model_error_of_its_kind() -> None:
    _, records, raised = await run(Api("responses"), [payload("responses", "failed")])
    assert isinstance(raised, ModelError) and raised.kind == "server_error"
    assert raised.response_id == "resp_fl1"
    [failed] = of(records, ModelFailed)
    assert (failed.kind, failed.response_id) == ("server_error", "resp_fl1")


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_an_adapter_without_its_sdk_names_the_extra(sdk: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, sdk, None)  # what an uninstalled package looks like
    monkeypatch.delitem(sys.modules, f"engine.models.{sdk}")
    with pytest.raises(ImportError, match=rf"toolledger\[{sdk}\]"):
        importlib.import_module(f"engine.models.{sdk}")
    import engine.models  # the core does not need it
    assert engine.models.FauxModel
