"""Malformed schemas are refused at registration: ``Session.open`` (or ``session.register``)
with a tool whose schema is any JSON at all either accepts it or raises ``SchemaError``, never
anything else, and writes nothing when it refuses.

Hypothesis draws the schemas from random JSON shaped like schemas: schema keywords (of every
dialect, including the ones the validator would ignore) with values that are sometimes right,
sometimes any JSON; nested schemas under ``properties``, ``items``, ``allOf``, ``$defs``, …;
local and non-local ``$ref``; ``$schema`` from the known dialects and unknown ones. Schemas the
engine accepts must then be usable: random arguments are either valid (the tool runs) or the
call fails as ``invalid_arguments``; random output is either valid or ``invalid_output``.
The network is closed throughout: a schema must never make the engine fetch anything.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from engine import SchemaError, Session, ToolResult, ToolSpec, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore, MemoryStore
from events.types import ToolCallFailed
from tests.faults.checks import SAFE, assert_consistent

KEYWORDS = [
    "type", "properties", "required", "items", "additionalProperties", "patternProperties",
    "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "pattern", "format", "minItems", "maxItems",
    "uniqueItems", "contains", "minProperties", "maxProperties", "propertyNames",
    "dependencies", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$defs",
    "definitions", "$id", "$schema", "$comment", "title", "description", "default",
    "examples", "additionalItems", "contentEncoding", "contentMediaType", "readOnly",
    # keywords a draft-07 validator would silently ignore
    "prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired",
    "dependentSchemas", "minContains", "maxContains", "$dynamicRef", "$anchor",
    "$recursiveRef", "$vocabulary",
]
DIALECTS = [
    "http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-04/schema#", "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema", "https://example.com/my-dialect",
    "draft-07", "",
]
TYPES = ["object", "array", "string", "integer", "number", "boolean", "null", "any", "float"]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=False,
                                                                 allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6,
)


def keyword_values(schema: st.SearchStrategy[Any]) -> dict[str, st.SearchStrategy[Any]]:
    """Plausible values per keyword (any JSON is mixed in by the caller)."""
    names = st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)
    return {
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), max_size=3),
        "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), schema, max_size=3),
        "patternProperties": st.dictionaries(st.sampled_from(["^a", "[", "b$", ".*"]), schema,
                                             max_size=2),
        "$defs": st.dictionaries(st.sampled_from(["x", "y"]), schema, max_size=2),
        "definitions": st.dictionaries(st.sampled_from(["x", "y"]), schema, max_size=2),
        "dependencies": st.dictionaries(st.sampled_from(["a", "b"]), schema | names, max_size=2),
        "required": names,
        "items": schema | st.lists(schema, max_size=2),
        "allOf": st.lists(schema, max_size=2),
        "anyOf": st.lists(schema, max_size=2),
        "oneOf": st.lists(schema, max_size=2),
        "enum": st.lists(JSON, max_size=3),
        "pattern": st.sampled_from(["^[a-z]+$", "(", "\\d", "a{2,1}", ""]),
        "format": st.sampled_from(["email", "date-time", "uri", "no-such-format", "regex"]),
        "$ref": st.sampled_from(["#", "#/$defs/x", "#/definitions/y", "#/nowhere",
                                 "http://example.com/s.json", "other.json#/x", "#x"]),
        "$schema": st.sampled_from(DIALECTS),
        "minimum": st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False),
        "minLength": st.integers(-2, 5) | st.floats(-1, 5),
        "multipleOf": st.sampled_from([0, -1, 0.5, 3, 1e-9]),
        "uniqueItems": st.booleans(),
    }


def schemas() -> st.SearchStrategy[Any]:
    """Schema-shaped JSON: mostly objects of keywords, at any depth; sometimes anything."""
    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        values = keyword_values(inner)

        @st.composite
        def node(draw: st.DrawFn) -> dict[str, Any]:
            keys = draw(st.lists(st.sampled_from(KEYWORDS) | st.text(max_size=5),
                                 max_size=4, unique=True))
            return {key: draw(values[key] | JSON if key in values else inner | JSON)
                    for key in keys}

        return node()

    return st.recursive(st.booleans() | st.just({}) | JSON, extend, max_leaves=8)


def roots() -> st.SearchStrategy[Any]:
    """Whole input schemas: an object schema around a random one, a random one at the root,
    or anything."""
    return st.one_of(
        st.builds(lambda props, extra: {"type": "object", "properties": props, **extra},
                  st.dictionaries(st.sampled_from(["a", "b"]), schemas(), max_size=2),
                  st.dictionaries(st.sampled_from(KEYWORDS), schemas(), max_size=2)),
        schemas(),
        JSON,
    )


@pytest.fixture(scope="module", autouse=True)
def no_network() -> Iterator[None]:
    def urlopen(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a schema made the engine open {args!r}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(urllib.request, "urlopen", urlopen)
        yield


def spec(input_schema: Any, output_schema: Any = None, ran: list[Any] | None = None,
         returns: Any = None) -> ToolSpec:
    @tool(input_schema=input_schema, output_schema=output_schema, annotations=SAFE)
    async def subject(call: Any, ctx: Any) -> ToolResult:
        if ran is not None:
            ran.append(call.arguments)
        return ToolResult(content=[text("ran")], structured_content=returns)

    return subject


async def open_with(store: MemoryStore, tool_spec: ToolSpec, arguments: Any = None,
                    call: bool = False) -> tuple[SchemaError | None, Any]:
    """Open a session with the tool (and, with ``call``, have the model call it with
    ``arguments`` if it was accepted)."""
    model = FauxModel([faux_tool_call("subject", arguments), faux_text("done")])
    try:
        async with Session.open(store, model=model, tools=[tool_spec],
                                session_id="s", create=True) as session:
            if call:
                assert (await session.prompt("go")).text == "done"
            live = session.state
    except SchemaError as exc:
        return exc, None
    return None, live


@given(input_schema=roots(), output_schema=st.none() | roots(), arguments=JSON, output=JSON)
def test_any_json_as_a_schema_is_accepted_or_refused_with_a_schema_error(
    input_schema: Any, output_schema: Any, arguments: Any, output: Any
) -> None:
    store = MemoryStore()
    ran: list[Any] = []
    before = json.dumps([input_schema, output_schema])
    tool_spec = spec(input_schema, output_schema, ran, returns=output)
    refused, live = trio.run(open_with, store, tool_spec, arguments, True)
    assert json.dumps([input_schema, output_schema]) == before, "the schema was changed"
    if refused is not None:
        assert str(refused), "a SchemaError must say what is wrong"
        assert "subject" in str(refused), "the error names the tool"
        assert trio.run(store.sessions) == [], "a refused tool wrote to the log"
        return
    # accepted: the validators work on anything the model sends and the tool returns
    state = trio.run(assert_consistent, store, "s", live)
    view = state.calls["1.0"]
    if view.status == "failed":
        assert isinstance(view.outcome, ToolCallFailed)
        assert view.outcome.kind in ("invalid_arguments", "invalid_output"), view.outcome
        assert (view.outcome.kind == "invalid_arguments") == (ran == [])
    else:
        sent = {} if arguments is None else arguments  # faux_tool_call's default
        assert view.status == "completed" and ran == [sent]


@given(input_schema=roots())
def test_registering_a_malformed_schema_later_writes_nothing(input_schema: Any) -> None:
    async def main() -> None:
        store = MemoryStore()
        async with Session.open(store, model=FauxModel([]), session_id="s", create=True) as session:
            written = len(await store.read("s"))
            try:
                await session.register(spec(input_schema))
            except SchemaError:
                assert len(await store.read("s")) == written, "a refused tool wrote to the log"
                assert "subject" not in session.state.tools
            else:
                assert "subject" in session.state.tools

    trio.run(main)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"minimum": float("nan")}}},
    {"type": "object", "properties": {"a": {"enum": [float("inf")]}}},
    {"type": "object", "properties": {"a": {"const": b"bytes"}}},
    {"type": "object", "properties": {"a": {"enum": {1, 2}}}},
    {"type": "object", "properties": {"a": {"default": object()}}},
    ["type", "object"],
    "object",
    42,
])
def test_values_that_are_not_json_are_refused_with_a_schema_error(schema: Any) -> None:
    store = MemoryStore()
    refused, _ = trio.run(open_with, store, spec(schema))
    assert isinstance(refused, SchemaError), refused
    assert trio.run(store.sessions) == []


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {1: {"type": "string"}}},
    {"type": "object", "properties": {None: {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": ("string", "null")}}},
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ("path",)},
], ids=["int key", "None key", "tuple type", "tuple required"])
def test_a_schema_that_is_json_only_once_encoded_is_refused_or_recorded_as_json(
    schema: Any, tmp_path: Path
) -> None:
    """json.dumps turns tuples into arrays and keys into strings: such a schema compiles, but
    the log must then hold what the file will read back, or a fold of the file differs from
    the live session and every reopen registers the tool again."""
    path = tmp_path / "log.jsonl"

    async def main() -> None:
        with JsonlStore(path) as store:
            try:
                async with Session.open(store, model=FauxModel([]), tools=[spec(schema)],
                                        session_id="s", create=True) as session:
                    live = session.state
            except SchemaError:
                assert await store.sessions() == []
                return
            written = len(await store.read("s"))
            await assert_consistent(store, "s", live)  # fold of the file == the live state
            async with Session.open(store, model=FauxModel([]), tools=[spec(schema)],
                                    session_id="s", create=True):
                pass
            assert len(await store.read("s")) == written, "reopening registered the tool again"

    trio.run(main)
