"""Results through whole sessions: error results, output checks, result handlers, and the
schema safety rules applied when a session registers its tools.

Every failing call becomes that call's error result and the session goes on: each test checks
that the model was asked again after the failure.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import call_events, events_of, run_session

from engine import (
    Annotations,
    ResultPatch,
    SchemaError,
    Session,
    ToolResult,
    ToolResultDraft,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.results import ImageContent, TextContent
from events.types import (
    TERMINAL_EVENTS,
    AssistantMessage,
    ResultHandlerFailed,
    ToolCallCompleted,
    ToolCallFailed,
)

SAFE = Annotations(read_only=True, open_world=False)
SIZE_OUT = {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}


def results(state: Any) -> list[ToolResultEntry]:
    return [entry for entry in state.transcript if isinstance(entry, ToolResultEntry)]


def terminal(records: Any, call_id: str) -> Any:
    ends = [e for e in call_events(records, call_id) if isinstance(e, TERMINAL_EVENTS)]
    assert len(ends) == 1
    return ends[0]


def returning(value: Any, *, name: str = "subject", output_schema: Any = None,
              input_schema: Any = None) -> Any:
    """A tool that returns ``value`` (called with the call if callable) and counts runs."""
    runs: list[str] = []

    async def execute(call: Any, ctx: Any) -> Any:
        runs.append(call.call_id)
        return value(call) if callable(value) else value

    spec = tool(name=name, annotations=SAFE, output_schema=output_schema,
                input_schema=input_schema)(execute)
    return spec, runs


async def one_call(spec: Any, arguments: Any = None, **kwargs: Any) -> Any:
    """The model calls ``spec`` once, then ends its turn; the session must go on after it."""
    state, records, model = await run_session(
        [spec], [faux_tool_call(spec.name, arguments or {}), faux_text("after")], **kwargs)
    model.assert_complete()
    assert len(model.requests) == 2  # the next turn happened
    assert isinstance(state.transcript[-1], AssistantMessage)
    assert state.transcript[-1].text == "after"
    [entry] = results(state)
    assert state.open_calls == ()
    return state, records, entry


# -- error results --------------------------------------------------------------------------


async def test_invalid_arguments_is_an_error_result() -> None:
    spec, runs = returning(ToolResult(content=[text("ok")]), input_schema={
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    state, records, entry = await one_call(spec, {"n": "three"})
    assert runs == []
    assert entry.result.is_error and "Invalid arguments for subject" in entry.result.text
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "invalid_arguments"


async def test_model_arguments_that_are_not_json_are_refused() -> None:
    spec, runs = returning(ToolResult(content=[text("ok")]))
    state, records, entry = await one_call(spec, {"x": float("nan")})
    assert runs == []
    assert entry.result.is_error


async def test_output_that_violates_the_schema_fails_and_stays_in_the_log() -> None:
    bad = ToolResult(content=[text("big")], structured_content={"size": "huge"})
    spec, runs = returning(bad, output_schema=SIZE_OUT)
    state, records, entry = await one_call(spec)
    assert runs == ["1.0"]
    assert entry.result.is_error
    assert "output schema" in entry.result.text and "size" in entry.result.text
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "invalid_output"
    assert end.returned == bad  # the invalid value stays in the log
    assert entry.result.structured_content is None


async def test_missing_structured_content_with_an_output_schema_fails() -> None:
    spec, _ = returning(ToolResult(content=[text("12 bytes")]), output_schema=SIZE_OUT)
    state, records, entry = await one_call(spec)
    assert entry.result.is_error and "structured content" in entry.result.text
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "invalid_output"
    assert end.returned is not None and end.returned.text == "12 bytes"


async def test_valid_output_completes() -> None:
    spec, _ = returning(ToolResult(content=[text("12 bytes")], structured_content={"size": 12}),
                        output_schema=SIZE_OUT)
    state, records, entry = await one_call(spec)
    assert not entry.result.is_error
    assert entry.result.structured_content == {"size": 12}
    assert isinstance(terminal(records, "1.0"), ToolCallCompleted)


async def test_a_raising_tool_is_an_error_result_with_type_and_message() -> None:
    async def execute(call: Any, ctx: Any) -> ToolResult:
        raise FileNotFoundError("no such file: a.txt")

    spec = tool(name="reader", annotations=SAFE)(execute)
    state, records, entry = await one_call(spec)
    assert entry.result.is_error
    assert "FileNotFoundError" in entry.result.text and "no such file: a.txt" in entry.result.text
    assert "Traceback" not in entry.result.text
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "raised"
    assert end.error is not None
    assert end.error.type == "FileNotFoundError"
    assert end.error.message == "no such file: a.txt"
    assert "Traceback" in end.error.traceback and "in execute" in end.error.traceback


@pytest.mark.parametrize("structured", [
    {"tags": {"a", "b"}},
    {"ratio": float("nan")},
    {"inf": float("inf")},
    {1: "int key"},
    {"when": object()},
], ids=["set", "nan", "inf", "int-key", "object"])
@pytest.mark.parametrize("with_content", [True, False], ids=["content", "no-content"])
async def test_a_result_that_is_not_json_is_an_error_result(structured: Any,
                                                           with_content: bool) -> None:
    content = [text("here")] if with_content else []
    spec, runs = returning(ToolResult(content=content, structured_content=structured))
    state, records, entry = await one_call(spec)
    assert runs == ["1.0"]
    assert entry.result.is_error
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "not_serialisable"


@pytest.mark.parametrize("value", ["just a string", {"content": []}, None, 42],
                         ids=["str", "dict", "none", "int"])
async def test_a_tool_returning_something_else_is_an_error_result(value: Any) -> None:
    spec, runs = returning(value)
    state, records, entry = await one_call(spec)
    assert runs == ["1.0"]
    assert entry.result.is_error and "ToolResult" in entry.result.text
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "invalid_output"


@pytest.mark.parametrize("build", [
    lambda call: ToolResult(content=["a plain string, not a block"]),
    lambda call: ToolResult(content=[{"type": "text", "text": "a dict, not a block"}]),
    lambda call: ToolResult(content=[text("x")], is_error="yes"),
], ids=["str-block", "dict-block", "non-bool-is_error"])
async def test_a_malformed_tool_result_fails_in_the_tool_that_builds_it(build: Any) -> None:
    # ToolResult checks its shape when built, so the mistake raises inside the tool body
    spec, runs = returning(build)
    state, records, entry = await one_call(spec)
    assert runs == ["1.0"]
    assert entry.result.is_error and "TypeError" in entry.result.text
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "raised"
    assert end.error is not None and end.error.type == "TypeError"


async def test_is_error_with_data_keeps_content_and_structure_and_completes() -> None:
    failed_run = ToolResult(content=[text("2 tests failed")],
                            structured_content={"exit_code": 1, "failed": ["a", "b"]},
                            is_error=True)
    # an output schema the error data does not satisfy: error results are not checked
    spec, _ = returning(failed_run, output_schema=SIZE_OUT)
    state, records, entry = await one_call(spec)
    assert entry.result == failed_run
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallCompleted)
    assert state.calls["1.0"].status == "completed"


async def test_structured_content_without_content_gets_a_json_text_block() -> None:
    data = {"size": 12, "name": "é"}
    spec, _ = returning(ToolResult(structured_content=data))
    state, records, entry = await one_call(spec)
    assert entry.result.structured_content == data
    [block] = entry.result.content
    assert isinstance(block, TextContent)
    assert json.loads(block.text) == data
    assert not entry.result.is_error


async def test_non_text_content_is_kept() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    spec, _ = returning(ToolResult(content=[image], structured_content={"w": 1}))
    _, _, entry = await one_call(spec)
    assert entry.result.content == (image,)


# -- tool_result handlers -------------------------------------------------------------------


async def test_result_handlers_chain_in_order() -> None:
    spec, _ = returning(ToolResult(content=[text("raw")], structured_content={"n": 1}))
    seen: list[Any] = []

    def first(draft: ToolResultDraft) -> ResultPatch:
        seen.append(("first", draft.result.text, draft.result.structured_content))
        return ResultPatch(structured_content={"n": draft.result.structured_content["n"] + 1})

    async def second(draft: ToolResultDraft) -> ResultPatch:
        seen.append(("second", draft.result.text, draft.result.structured_content))
        return ResultPatch(content=[text("second"), "plain"],
                           structured_content={"n": draft.result.structured_content["n"] * 10})

    state, records, entry = await one_call(spec, on_tool_result=[first, second])
    assert seen == [("first", "raw", {"n": 1}), ("second", "raw", {"n": 2})]
    assert entry.result.text == "second\nplain"
    assert entry.result.structured_content == {"n": 20}
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallCompleted)
    assert end.returned is not None and end.returned.structured_content == {"n": 1}


async def test_a_patch_replacing_content_only_drops_structured_content() -> None:
    spec, _ = returning(ToolResult(content=[text("raw")], structured_content={"secret": 1}))

    def redact(draft: ToolResultDraft) -> ResultPatch:
        return ResultPatch(content=["[redacted]"])

    _, _, entry = await one_call(spec, on_tool_result=[redact])
    assert entry.result.text == "[redacted]"
    assert entry.result.structured_content is None


async def test_a_patch_can_mark_an_error() -> None:
    spec, _ = returning(ToolResult(content=[text("exit 1")]))
    _, records, entry = await one_call(
        spec, on_tool_result=[lambda event: ResultPatch(is_error=True)])
    assert entry.result.is_error and entry.result.text == "exit 1"
    assert isinstance(terminal(records, "1.0"), ToolCallCompleted)


async def test_a_raising_result_handler_is_recorded_and_skipped() -> None:
    spec, _ = returning(ToolResult(content=[text("raw")]))
    after: list[str] = []

    def broken(draft: ToolResultDraft) -> ResultPatch:
        raise ZeroDivisionError("bad math")

    def later(draft: ToolResultDraft) -> ResultPatch:
        after.append(draft.result.text)
        return ResultPatch(content=[draft.result.text + " (checked)"])

    state, records, entry = await one_call(spec, on_tool_result=[broken, later])
    [failure] = events_of(records, ResultHandlerFailed)
    assert failure.call_id == "1.0" and "broken" in failure.handler
    assert failure.error.type == "ZeroDivisionError" and failure.error.message == "bad math"
    assert after == ["raw"]
    assert entry.result.text == "raw (checked)" and not entry.result.is_error


async def test_a_result_handler_returning_garbage_is_recorded_and_skipped() -> None:
    spec, _ = returning(ToolResult(content=[text("raw")]))
    _, records, entry = await one_call(spec, on_tool_result=[lambda event: "nope"])
    assert len(events_of(records, ResultHandlerFailed)) == 1
    assert entry.result.text == "raw"


@pytest.mark.parametrize("bad", [float("nan"), {"tags": {"x"}}], ids=["nan", "set"])
async def test_a_result_handler_patching_in_non_json_is_recorded_and_skipped(bad: Any) -> None:
    spec, _ = returning(ToolResult(content=[text("raw")], structured_content={"a": 1}))
    _, records, entry = await one_call(
        spec, on_tool_result=[lambda event: ResultPatch(structured_content=bad)])
    assert len(events_of(records, ResultHandlerFailed)) == 1
    assert entry.result.structured_content == {"a": 1}


async def test_result_handlers_see_error_results_of_failed_bodies() -> None:
    async def execute(call: Any, ctx: Any) -> ToolResult:
        raise ValueError("nope")

    spec = tool(name="boom", annotations=SAFE)(execute)
    seen: list[tuple[bool, str]] = []

    def watch(draft: ToolResultDraft) -> None:
        seen.append((draft.result.is_error, draft.result.text))

    _, records, entry = await one_call(spec, on_tool_result=[watch])
    assert seen == [(True, entry.result.text)]
    assert "ValueError: nope" in entry.result.text


# -- nothing a handler or a tool holds can change the log -----------------------------------------


async def test_a_result_handler_mutating_its_event_changes_nothing() -> None:
    spec, _ = returning(lambda call: ToolResult(content=[text("raw")],
                                                structured_content={"items": [1]}))

    def vandal(draft: ToolResultDraft) -> None:
        draft.arguments["path"] = "changed"
        draft.result.structured_content["items"].append(666)

    state, records, entry = await one_call(spec, {"path": "a"}, on_tool_result=[vandal])
    assert state.calls["1.0"].arguments == {"path": "a"}
    assert entry.result.structured_content == {"items": [1]}
    assert terminal(records, "1.0").result.structured_content == {"items": [1]}


async def test_a_patch_value_kept_by_its_handler_cannot_change_the_log() -> None:
    spec, _ = returning(lambda call: ToolResult(content=[text("raw")]))
    kept: list[dict[str, Any]] = []

    def tag(draft: ToolResultDraft) -> ResultPatch:
        if kept:
            kept[0]["calls"] += 1  # the handler changes its own value on a later call
        else:
            kept.append({"calls": 1})
        return ResultPatch(structured_content=kept[0])

    state, records, model = await run_session(
        [spec], [faux_tool_call("subject"), faux_tool_call("subject"), faux_text("ok")],
        on_tool_result=[tag])
    first = terminal(records, "1.0")
    assert first.result.structured_content == {"calls": 1}
    assert state.calls["1.0"].result is not None
    assert state.calls["1.0"].result.structured_content == {"calls": 1}


async def test_a_result_value_kept_by_its_tool_cannot_change_the_log() -> None:
    cache: dict[str, Any] = {"hits": 0}

    def body(call: Any) -> ToolResult:
        cache["hits"] += 1
        return ToolResult(content=[text("cached")], structured_content=cache)

    spec, _ = returning(body)
    state, records, _ = await run_session(
        [spec], [faux_tool_call("subject"), faux_tool_call("subject"), faux_text("ok")])
    assert terminal(records, "1.0").result.structured_content == {"hits": 1}
    assert terminal(records, "2.0").result.structured_content == {"hits": 2}


async def test_a_tool_mutating_its_arguments_changes_neither_the_log_nor_the_model() -> None:
    async def execute(call: Any, ctx: Any) -> ToolResult:
        call.arguments["path"] = "mutated"
        call.arguments["extra"] = True
        return ToolResult(content=[text("ok")])

    spec = tool(name="mutator", annotations=SAFE)(execute)
    model_arguments = {"path": "a"}
    before = copy.deepcopy(model_arguments)
    state, records, entry = await one_call(spec, model_arguments)
    assert model_arguments == before
    assert state.calls["1.0"].arguments == before
    assert call_events(records, "1.0")[0].arguments == before


# -- schema safety at registration ----------------------------------------------------------


def _spec_with_schema(schema: Any, name: str = "tuple_tool") -> Any:
    async def execute(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("ok")])

    return tool(name=name, annotations=SAFE, input_schema=schema)(execute)


async def _open(store: MemoryStore, specs: list[Any]) -> None:
    async with Session.open(store, model=FauxModel([]), tools=specs, session_id="s", create=True):
        pass  # pragma: no cover - the open must fail


async def test_prefix_items_is_refused_at_open_and_nothing_is_written(
        without_jsonschema: None) -> None:
    schema = {"type": "object", "properties": {
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}}}
    store = MemoryStore()
    fine = _spec_with_schema({"type": "object"}, name="fine")
    with pytest.raises(SchemaError) as info:
        await _open(store, [fine, _spec_with_schema(schema)])
    message = str(info.value)
    assert "prefixItems" in message and "tuple_tool" in message
    assert await store.sessions() == []
    assert await store.read("s") == []


async def test_unevaluated_properties_in_output_schema_is_refused(
        without_jsonschema: None) -> None:
    async def execute(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("ok")])

    spec = tool(name="out_tool", annotations=SAFE, output_schema={
        "type": "object", "unevaluatedProperties": False})(execute)
    store = MemoryStore()
    with pytest.raises(SchemaError) as info:
        await _open(store, [spec])
    assert "unevaluatedProperties" in str(info.value) and "out_tool" in str(info.value)
    assert await store.sessions() == []


@pytest.mark.parametrize("ref", [
    "https://example.com/schemas/point.json",
    "http://example.com/s.json#/definitions/x",
    "other.json#/x",
])
async def test_a_remote_ref_is_refused_at_open(ref: str) -> None:
    schema = {"type": "object", "properties": {"p": {"$ref": ref}}}
    store = MemoryStore()
    with pytest.raises(SchemaError) as info:
        await _open(store, [_spec_with_schema(schema, name="remote_ref")])
    assert "$ref" in str(info.value) and "remote_ref" in str(info.value)
    assert await store.sessions() == []


async def test_caller_schema_and_model_arguments_are_unchanged_by_a_call() -> None:
    schema = {
        "type": "object",
        "$defs": {"count": {"type": "integer", "minimum": 0, "default": 5}},
        "properties": {
            "n": {"$ref": "#/$defs/count"},
            "mode": {"type": "string", "default": "fast"},
            "opts": {"type": "object", "properties": {"deep": {"type": "boolean",
                                                                "default": True}}},
        },
        "required": ["opts"],
    }
    schema_before = copy.deepcopy(schema)
    received: list[Any] = []

    async def execute(call: Any, ctx: Any) -> ToolResult:
        received.append(copy.deepcopy(call.arguments))
        return ToolResult(content=[text("ok")])

    spec = tool(name="configured", annotations=SAFE, input_schema=schema)(execute)
    model_arguments: dict[str, Any] = {"opts": {}}
    state, records, entry = await one_call(spec, model_arguments)
    assert schema == schema_before
    assert model_arguments == {"opts": {}}
    assert received == [{"opts": {}}]  # no defaults filled in
    assert state.calls["1.0"].arguments == {"opts": {}}
    assert not entry.result.is_error
