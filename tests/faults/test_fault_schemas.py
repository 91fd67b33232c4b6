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
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    ResultPatch,
    SchemaError,
    Session,
    ToolResult,
    ToolResultDraft,
    ToolSpec,
    text,
    tool,
)
from engine.core.handlers import UNSET
from engine.core.schemas.checking import compile_schema
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore, MemoryStore
from events.results import TextContent
from events.types import ResultHandlerFailed, ToolCallCompleted, ToolCallFailed
from tests.faults.checks import SAFE, assert_consistent
from tests.faults.hostile import hostile_patterns, nest, watchdog

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
        assert isinstance(view.terminal, ToolCallFailed)
        assert view.terminal.kind in ("invalid_arguments", "invalid_output"), view.terminal
        assert (view.terminal.kind == "invalid_arguments") == (ran == [])
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


# -- a tool_result handler cannot ship an invalid success --------------------------------------

SIZE_SCHEMA = {"type": "object", "properties": {"size": {"type": "integer"}},
               "required": ["size"]}


async def patched_run(returns: ToolResult, patch: ResultPatch | None) -> list[Any]:
    @tool(output_schema=SIZE_SCHEMA, annotations=SAFE)
    async def subject(call: Any, ctx: Any) -> ToolResult:
        return returns

    def handler(draft: ToolResultDraft) -> ResultPatch | None:
        return patch

    store = MemoryStore()
    model = FauxModel([faux_tool_call("subject"), faux_text("done")])
    async with Session.open(store, model=model, tools=[subject], session_id="s", create=True) as session:
        session.on_tool_result(handler)
        assert (await session.prompt("go")).text == "done"
    await assert_consistent(store, "s", session.state)
    return [r.event for r in await store.read("s")]


def test_a_patch_that_breaks_the_output_schema_is_refused() -> None:
    events = trio.run(patched_run, ToolResult(structured_content={"size": 3}),
                      ResultPatch(structured_content={"size": "three"}))
    [failed] = [e for e in events if isinstance(e, ResultHandlerFailed)]
    assert "output schema" in failed.error.message and "size" in failed.error.message
    ending = next(e for e in reversed(events) if isinstance(e, ToolCallCompleted))
    assert not ending.result.is_error
    assert ending.result.structured_content == {"size": 3}  # the tool's valid result stands
    assert ending.result.text == '{"size": 3}'


def test_a_patched_structured_content_gets_a_fresh_json_text_block() -> None:
    events = trio.run(patched_run, ToolResult(structured_content={"size": 3}),
                      ResultPatch(structured_content={"size": 4}))
    ending = next(e for e in reversed(events) if isinstance(e, ToolCallCompleted))
    assert ending.result.structured_content == {"size": 4}
    assert ending.result.text == '{"size": 4}', "the JSON text block is stale"
    kept = next(e for e in reversed(events) if isinstance(e, ToolCallCompleted))
    assert kept.returned is not None and kept.returned.structured_content == {"size": 3}


def test_a_patch_that_turns_a_failure_into_an_invalid_success_is_refused() -> None:
    events = trio.run(patched_run, ToolResult(structured_content={"size": "x"}),
                      ResultPatch(is_error=False, content=["all fine"]))
    [failed] = [e for e in events if isinstance(e, ResultHandlerFailed)]
    assert "output schema" in failed.error.message
    ending = next(e for e in reversed(events) if isinstance(e, ToolCallFailed))
    assert ending.kind == "invalid_output" and ending.result.is_error


@settings(max_examples=40)
@given(
    returns=st.builds(ToolResult, structured_content=st.none() | JSON
                      | st.fixed_dictionaries({"size": st.integers() | JSON}),
                      is_error=st.booleans()),
    patch=st.builds(ResultPatch,
                    structured_content=st.just(UNSET) | JSON
                    | st.fixed_dictionaries({"size": st.integers() | JSON}),
                    is_error=st.just(UNSET) | st.booleans(),
                    content=st.just(UNSET) | st.lists(st.text(max_size=5), max_size=2)),
)
def test_no_result_handler_ships_a_success_its_output_schema_refuses(
    returns: ToolResult, patch: ResultPatch
) -> None:
    validator = compile_schema(SIZE_SCHEMA, role="output")
    events = trio.run(patched_run, returns, patch)
    ending = next(e for e in reversed(events) if isinstance(e, (ToolCallCompleted,
                                                                 ToolCallFailed)))
    result = ending.result
    if not result.is_error:
        assert result.structured_content is not None
        assert validator.violation(result.structured_content) is None, result
    if result.structured_content is not None and len(result.content) == 1:
        block = result.content[0]
        assert isinstance(block, TextContent)
        if block.text.startswith("{"):  # a JSON text block says what the structured content says
            assert json.loads(block.text) == result.structured_content


# -- schemas no validator could finish: reference cycles, and nesting past Python's limits -----

def chain(kinds: list[str], leaf: Any) -> Any:
    """``leaf`` wrapped in one keyword per entry of ``kinds``, the first outermost."""
    schema = leaf
    for kind in reversed(kinds):
        if kind == "properties":
            schema = {"type": "object", "properties": {"a": schema}}
        elif kind == "patternProperties":
            schema = {"patternProperties": {"^a": schema}}
        elif kind in ("allOf", "anyOf", "oneOf"):
            schema = {kind: [schema, {"type": "integer"}] if kind != "allOf" else [schema]}
        elif kind == "then":
            schema = {"if": {"type": "object"}, "then": schema}
        elif kind == "dependencies":
            schema = {"$schema": DIALECTS[0], "dependencies": {"a": schema}}
        else:
            schema = {kind: schema}
    return schema


NESTING = ["properties", "items", "additionalProperties", "patternProperties", "allOf", "anyOf",
           "oneOf", "not", "contains", "propertyNames", "if", "then"]


def validation_ends(validator: Any, value: Any) -> None:
    problem = validator.violation(value)
    assert problem is None or not problem.startswith("data cannot be validated"), problem


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
     "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"allOf": [{"$ref": "#/$defs/x"}]}}},
    {"type": "object", "allOf": [{"$ref": "#"}]},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
     "$defs": {"x": {"anyOf": [{"type": "string"}, {"not": {"$ref": "#/$defs/x"}}]}}},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
     "$defs": {"x": {"if": {"$ref": "#/$defs/x"}}}},
], ids=["itself", "two steps", "the root", "through anyOf and not", "through if"])
def test_a_reference_cycle_that_never_reaches_a_schema_is_refused(schema: Any) -> None:
    refused, _ = trio.run(open_with, MemoryStore(), spec(schema))
    assert isinstance(refused, SchemaError) and refused.keyword == "$ref", refused
    assert "never ends" in str(refused) and "->" in str(refused)


def test_recursion_that_steps_into_the_value_is_accepted() -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array",
                                                      "items": {"$ref": "#"}}},
            "anyOf": [{"required": ["kids"]}, {"$ref": "#/$defs/leaf"}],
            "$defs": {"leaf": {"properties": {"v": {"type": "integer"}}}}}
    validator = compile_schema(tree)
    assert validator.violation({"kids": [{"kids": []}, {"v": 1}]}) is None
    assert validator.violation({"kids": [{"v": "x"}]}) is not None


@pytest.mark.parametrize(("kind", "depth"), [("properties", 60), ("items", 25),
                                             ("contains", 12), ("anyOf", 25), ("not", 30)])
def test_a_schema_nested_too_deep_for_the_validator_is_refused_saying_why(
    kind: str, depth: int
) -> None:
    schema = {"type": "object", "properties": {"a": chain([kind] * depth, {"type": "string"})}}
    refused, _ = trio.run(open_with, MemoryStore(), spec(schema))
    assert isinstance(refused, SchemaError), refused
    message = str(refused)
    assert "subject" in message and "deep" in message and '"$defs"' in message, message
    assert "indentation" not in message and "statically nested" not in message, message


def test_the_same_depth_through_defs_and_refs_is_accepted() -> None:
    defs = {f"d{i}": {"items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(30)}
    defs["d30"] = {"type": "string"}
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs}
    validator = compile_schema(schema)
    assert validator.violation({"a": nest(30, leaf="x")}) is None
    assert validator.violation({"a": nest(30, leaf=1)}) is not None


@settings(max_examples=60)
@given(kinds=st.lists(st.sampled_from(NESTING), max_size=60), value=JSON)
def test_a_nested_schema_is_accepted_and_validates_or_is_refused_saying_why(
    kinds: list[str], value: Any
) -> None:
    schema = {"type": "object", "properties": {"a": chain(kinds, {"type": "string"})}}
    try:
        validator = compile_schema(schema)
    except SchemaError as exc:
        assert "deep" in str(exc) and "indentation" not in str(exc), exc
        return
    validation_ends(validator, {"a": value})


@st.composite
def reference_graphs(draw: st.DrawFn) -> dict[str, Any]:
    """``$defs`` whose entries refer to each other, in place (``$ref``, ``allOf``, ``not``, …)
    or through the value (``items``, ``properties``), with random exits to real schemas."""
    size = draw(st.integers(1, 4))
    defs: dict[str, Any] = {}
    for i in range(size):
        target = {"$ref": f"#/$defs/d{draw(st.integers(0, size - 1))}"}
        how = draw(st.sampled_from(["$ref", "allOf", "anyOf", "not", "if", "items",
                                    "properties", "exit"]))
        if how == "$ref":
            defs[f"d{i}"] = target
        elif how == "exit":
            defs[f"d{i}"] = {"type": "integer"}
        elif how in ("allOf", "anyOf"):
            defs[f"d{i}"] = {how: [{"type": "string"}, target]}
        elif how == "properties":
            defs[f"d{i}"] = {"properties": {"a": target}}
        else:
            defs[f"d{i}"] = {how: target}
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs}


@settings(max_examples=60)
@given(schema=reference_graphs(), value=JSON)
def test_any_reference_graph_is_refused_or_validates_to_an_end(schema: Any, value: Any) -> None:
    try:
        validator = compile_schema(schema)
    except SchemaError as exc:
        assert exc.keyword == "$ref" and "never ends" in str(exc), exc
        return
    validation_ends(validator, {"a": value})


# -- regular expressions cannot freeze the loop -------------------------------------------------

WATCHDOG = 120  # seconds; a linear-time match of a megabyte takes milliseconds


async def pattern_run(pattern: str, where: str, text_: str) -> list[Any]:
    """One call to a tool whose schema matches ``pattern``: against the model's argument
    (``where="pattern"``), an argument's name (``"patternProperties"``) or the tool's output."""
    string = {"type": "string", "pattern": pattern}
    inputs: dict[str, Any] = {"type": "object"}
    arguments: dict[str, Any] = {}
    if where == "pattern":
        inputs, arguments = {"type": "object", "properties": {"s": string}}, {"s": text_}
    elif where == "patternProperties":
        inputs = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}}
        arguments = {text_: "not an integer"}
    output = {"type": "object", "properties": {"s": string}} if where == "output" else None

    @tool(input_schema=inputs, output_schema=output, annotations=SAFE)
    async def subject(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("ran")], structured_content={"s": text_})

    store = MemoryStore()
    model = FauxModel([faux_tool_call("subject", arguments), faux_text("done")])
    async with Session.open(store, model=model, tools=[subject], session_id="s", create=True) as session:
        with trio.move_on_after(60):  # the host's own guard, which a frozen loop never reaches
            assert (await session.prompt("go")).text == "done"
    await assert_consistent(store, "s", session.state)
    return [r.event for r in await store.read("s")]


def ending_of(events: list[Any]) -> Any:
    return next(e for e in reversed(events) if isinstance(e, (ToolCallCompleted, ToolCallFailed)))


@settings(max_examples=15)
@given(attack=hostile_patterns(), where=st.sampled_from(["pattern", "patternProperties",
                                                         "output"]))
def test_no_pattern_and_string_can_freeze_the_loop(attack: tuple[str, str], where: str) -> None:
    pattern, string = attack
    with watchdog(WATCHDOG):
        ending = ending_of(trio.run(pattern_run, pattern, where, string))
    # every attack string fails to match: the argument is invalid, the output is invalid, and
    # a name that no pattern matches is just another property
    expected = {"pattern": "invalid_arguments", "output": "invalid_output"}.get(where)
    assert getattr(ending, "kind", None) == expected, ending


def test_the_first_reported_pattern_fails_its_call_at_once() -> None:
    with watchdog(WATCHDOG):
        ending = ending_of(trio.run(pattern_run, "^(a+)+$", "pattern", "a" * 28 + "!"))
    assert isinstance(ending, ToolCallFailed) and ending.kind == "invalid_arguments"
    assert "must match pattern" in ending.message


@pytest.mark.parametrize(("keyword", "pattern"), [
    ("pattern", r"^(a)\1$"), ("pattern", r"^(?=a)"), ("patternProperties", r"(?<!x)y"),
    ("pattern", r"a{1001}"),
])
def test_a_pattern_no_linear_engine_can_match_is_refused_naming_the_keyword(
    keyword: str, pattern: str
) -> None:
    schema: dict[str, Any] = (
        {"type": "object", "properties": {"s": {"pattern": pattern}}} if keyword == "pattern"
        else {"type": "object", "patternProperties": {pattern: {}}})
    refused, _ = trio.run(open_with, MemoryStore(), spec(schema))
    assert isinstance(refused, SchemaError) and refused.keyword == keyword, refused
    assert "linear time" in str(refused) and repr(pattern) in str(refused)


def test_patterns_read_as_json_schema_says_ecma_262_reads_them() -> None:
    validator = compile_schema({"type": "object", "properties": {
        "digits": {"type": "string", "pattern": r"^\d+$"},
        "line": {"type": "string", "pattern": "^a$"}},
        "patternProperties": {"^x-": {"type": "integer"}}})
    assert validator.violation({"digits": "123", "line": "a", "x-n": 1}) is None
    assert validator.violation({"digits": "\u0661\u0662"}) is not None  # \d is ASCII
    assert validator.violation({"line": "a\n"}) is not None  # $ is the very end
    assert validator.violation({"x-n": "one"}) is not None
    assert validator.violation({"line": "\ud800"}) is not None  # a lone surrogate is read too
