"""The 2020-12 path: schemas with keywords fastjsonschema would ignore, validated by jsonschema.

Each safety rule of docs/schemas.md is checked on this path too: local references only and
nothing fetched, no defaults filled in, formats as annotations unless asked, patterns in linear
time, bounded. Without jsonschema (simulated by the ``without_jsonschema`` fixture) the same
schemas are refused at registration, saying what to do.
"""

from __future__ import annotations

import copy
import json
import urllib.request
from typing import Any

import pytest

from engine import Annotations, Session, ToolResult, text, tool
from engine.core.schemas.checking import SchemaError, compile_schema
from engine.models import FauxModel
from events import MemoryStore
from events.types import ToolCallFailed

D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"
DRAFT07 = "http://json-schema.org/draft-07/schema#"

#: what pydantic emits for a ``tuple[int, str]`` field
PAIR = {"type": "object", "properties": {"pair": {
    "type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
    "minItems": 2, "maxItems": 2}}, "required": ["pair"]}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def urlopen(*args: Any, **kwargs: Any) -> Any:
        pytest.fail(f"network access attempted: {args!r}")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)


def refused(schema: Any, **kw: Any) -> SchemaError:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema, **kw)
    return info.value


def test_a_tuple_as_pydantic_writes_it_is_validated() -> None:
    validator = compile_schema(PAIR)
    assert validator.implementation == "jsonschema" and validator.dialect == "2020-12"
    assert validator.violation({"pair": [1, "a"]}) is None
    assert validator.violation({"pair": ["a", 1]}) == "data.pair[0]: 'a' is not of type 'integer'"
    assert validator.violation({"pair": [1]}) is not None
    assert compile_schema({"type": "object", "properties": {"n": {"type": "integer"}}}
                          ).implementation == "fastjsonschema"


def test_without_jsonschema_the_same_schema_is_refused_saying_what_to_do(
        without_jsonschema: None) -> None:
    error = refused({**PAIR, "description": "without jsonschema"})
    assert error.keyword == "prefixItems" and error.path == "/properties/pair/prefixItems"
    assert "pip install 'toolledger[schemas2020]'" in str(error)


@pytest.mark.parametrize(("schema", "valid", "invalid"), [
    ({"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}}],
      "unevaluatedProperties": False}, {"a": "x"}, {"a": "x", "b": 1}),
    ({"type": "object", "properties": {"xs": {"type": "array", "prefixItems": [{"const": 0}],
                                              "unevaluatedItems": {"type": "string"}}}},
     {"xs": [0, "a", "b"]}, {"xs": [0, "a", 2]}),
    ({"type": "object", "dependentRequired": {"card": ["cvv"]}}, {"card": 1, "cvv": 2},
     {"card": 1}),
    ({"type": "object", "dependentSchemas": {"card": {"required": ["cvv"]}}},
     {"cvv": 2}, {"card": 1}),
    ({"type": "object", "properties": {"xs": {"type": "array", "contains": {"const": 1},
                                              "minContains": 2, "maxContains": 3}}},
     {"xs": [1, 1, 0]}, {"xs": [1, 0]}),
])
def test_the_keywords_fastjsonschema_ignores_are_enforced(schema: dict[str, Any], valid: Any,
                                                          invalid: Any) -> None:
    validator = compile_schema(schema)
    assert validator.implementation == "jsonschema"
    assert validator.violation(valid) is None
    assert validator.violation(invalid) is not None


def test_a_dynamic_reference_to_an_anchor_of_the_schema_is_followed() -> None:
    tree = {"$schema": D2020, "type": "object", "$dynamicAnchor": "node",
            "properties": {"value": {"type": "integer"},
                           "children": {"type": "array", "items": {"$dynamicRef": "#node"}}}}
    validator = compile_schema(tree)
    assert validator.violation({"value": 1, "children": [{"value": 2, "children": []}]}) is None
    assert validator.violation({"value": 1, "children": [{"value": "x"}]}) is not None


def test_references_stay_local() -> None:
    remote = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"},
                                               "b": {"prefixItems": [True]}}}
    assert refused(remote).keyword == "$ref"
    unknown = {"type": "object", "properties": {"a": {"$dynamicRef": "#nowhere"}}}
    assert "names no anchor" in str(refused(unknown))
    assert refused({"type": "object", "properties": {
        "a": {"$dynamicRef": "https://example.com/s#node"}}}).keyword == "$dynamicRef"


def test_defaults_are_not_filled_in_and_the_schema_is_not_changed() -> None:
    schema = {"type": "object", "properties": {"pair": {"type": "array", "default": [1, "a"],
                                                        "prefixItems": [{"type": "integer"}]}},
              "unevaluatedProperties": {"default": 5}}
    kept = copy.deepcopy(schema)
    validator = compile_schema(schema)
    data: dict[str, Any] = {}
    assert validator.violation(data) is None
    assert data == {} and schema == kept


def test_formats_are_annotations_unless_the_tool_asks() -> None:
    schema = {"type": "object", "properties": {"to": {"type": "string", "format": "email"},
                                               "pair": {"prefixItems": [True]}}}
    assert compile_schema(schema).violation({"to": "not an address"}) is None
    asserted = compile_schema(schema, assert_formats=True)
    assert asserted.violation({"to": "not an address"}) is not None
    assert asserted.violation({"to": "a@example.com"}) is None
    odd = {"type": "object", "properties": {"x": {"format": "no-such-format"},
                                            "pair": {"prefixItems": [True]}}}
    assert refused(odd, assert_formats=True).keyword == "format"


def test_patterns_are_matched_in_linear_time() -> None:
    # Python's re takes longer than the universe on this; RE2 takes microseconds
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
              "patternProperties": {"^(b+)+$": {"type": "integer"}},
              "additionalProperties": False, "dependentRequired": {"s": []}}
    validator = compile_schema(schema)
    assert validator.implementation == "jsonschema"
    assert validator.violation({"s": "a" * 5_000 + "!"}) is not None
    assert validator.violation({"b" * 5_000 + "!": 1}) is not None  # additional: refused
    assert validator.violation({"bbb": "x"}) is not None
    assert validator.violation({"s": "aaa", "bb": 1}) is None


def test_unevaluated_properties_beside_pattern_properties_is_refused() -> None:
    schema = {"type": "object", "patternProperties": {"^x": True}, "unevaluatedProperties": False}
    error = refused(schema)
    assert error.keyword == "unevaluatedProperties" and "linear" in str(error)


@pytest.mark.parametrize(("dialect", "keyword", "value"), [
    (DRAFT07, "prefixItems", [True]),  # not a draft-07 keyword: it would be ignored
    (D2020, "$recursiveRef", "#"),  # a 2019-09 keyword that 2020-12 dropped
    (D2019, "$dynamicRef", "#x"),  # a 2020-12 keyword that 2019-09 does not have
    (D2020, "$vocabulary", {}),
])
def test_keywords_the_dialect_does_not_have_stay_refused(dialect: str, keyword: str,
                                                         value: Any) -> None:
    assert refused({"$schema": dialect, "type": "object", keyword: value}).keyword == keyword


def test_2019_09_recursive_references_are_followed() -> None:
    tree = {"$schema": D2019, "type": "object", "$recursiveAnchor": True,
            "properties": {"kids": {"type": "array", "items": {"$recursiveRef": "#"}},
                           "n": {"type": "integer"}}}
    validator = compile_schema(tree)
    assert validator.violation({"kids": [{"kids": [], "n": 1}]}) is None
    assert validator.violation({"kids": [{"n": "x"}]}) is not None


def test_bounds_hold_on_this_path_too() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(45):
        deep = {"unevaluatedProperties": deep}
    assert "nested deeper" in str(refused({"type": "object", "properties": {"d": deep}}))
    # a dynamic reference that loops on the same value fails its check, it does not crash
    loop = {"type": "object", "$dynamicAnchor": "me", "allOf": [{"$dynamicRef": "#me"}],
            "unevaluatedProperties": False}
    message = compile_schema(loop).violation({})
    assert message is not None and "cannot be validated" in message


async def test_a_tool_with_a_2020_12_output_schema_fails_an_output_that_breaks_it() -> None:
    @tool(annotations=Annotations(read_only=True), output_schema=PAIR)
    async def pairs(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("x")], structured_content={"pair": ["a", 1]})

    async with Session.open(MemoryStore(), model=FauxModel([]), tools=[pairs]) as session:
        outcome = await session.call_tool("pairs")
        terminal = session.calls[outcome.call_id].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "invalid_output"
        assert "data.pair[0]" in terminal.message


def test_the_benchmark_of_both_paths_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.schemas import main

    assert main(["--quick", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [row["figure"]["name"].split(" (")[0] for row in rows] == [
        "fastjsonschema", "jsonschema", "fastjsonschema", "jsonschema"]
    assert all(row["baseline"]["name"] == "bare function call" for row in rows)
