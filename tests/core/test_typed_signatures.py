"""``@tool`` tells a typed function from the ``(call, ctx)`` form, refuses what it cannot make a
tool of where the function is decorated (saying what to write instead), structures arguments
into the parameters' types (and says why one cannot be), and turns return values into
results (engine/core/typed/)."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

import attrs
import pytest

from engine import Param, ToolCall, ToolContext, ToolResult, ToolSignatureError, text, tool
from engine.core.tools import is_call_form
from engine.runtime.context import CallContext

T = TypeVar("T")


# -- the two forms ------------------------------------------------------------------------------

async def untyped(call, ctx):  # type: ignore[no-untyped-def]
    """The schema form."""


async def with_any(call: Any, ctx: Any) -> ToolResult:
    """The schema form."""
    return ToolResult()


async def with_types(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """The schema form."""
    return ToolResult()


async def other_names(request: ToolCall, context: Any) -> ToolResult:
    """The schema form: the first parameter is a ToolCall."""
    return ToolResult()


async def context_typed(call, ctx: ToolContext) -> ToolResult:  # type: ignore[no-untyped-def]
    """The schema form: call untyped, ctx the context."""
    return ToolResult()


async def typed_pair(call: int, ctx: str) -> str:
    """Typed: named call and ctx, but with types."""
    return ctx * call


async def three(call, ctx, extra):  # type: ignore[no-untyped-def]
    """Neither: three parameters, untyped."""


@pytest.mark.parametrize("function, form", [
    (untyped, True), (with_any, True), (with_types, True), (other_names, True),
    (context_typed, True),
    (typed_pair, False), (three, False),
])
def test_the_call_form_is_told_from_a_typed_function(function: Any, form: bool) -> None:
    assert is_call_form(function) is form


def test_the_call_form_keeps_its_schema_and_description() -> None:
    spec = tool(input_schema={"type": "object", "properties": {"n": {"type": "integer"}}})(
        with_types)
    assert spec.signature is None and spec.execute is with_types and spec.function is with_types
    assert spec.input_schema["properties"] == {"n": {"type": "integer"}}
    assert spec.description == "The schema form."
    typed = tool(typed_pair)
    assert typed.signature is not None and typed.function is typed_pair
    assert set(typed.input_schema["properties"]) == {"call", "ctx"}


def test_a_sync_function_in_the_call_form_is_still_refused() -> None:
    def sync(call, ctx):  # type: ignore[no-untyped-def]
        """Sync."""

    with pytest.raises(TypeError, match="must be an async function"):
        tool(sync)


# -- refusals ----------------------------------------------------------------------------------

def refused(function: Callable[..., Any], **options: Any) -> str:
    with pytest.raises(ToolSignatureError) as info:
        tool(**options)(function)
    assert isinstance(info.value, TypeError)
    return str(info.value)


async def no_type(path, count: int) -> str:  # type: ignore[no-untyped-def]
    return ""


async def a_set(tags: set[str]) -> None: ...
async def a_frozenset(tags: frozenset[int]) -> None: ...
async def an_object(value: object) -> None: ...
async def a_callable(fn: Callable[[int], int]) -> None: ...
async def bare_callable(fn: collections.abc.Callable) -> None: ...  # type: ignore[type-arg]
async def some_bytes(data: bytes) -> None: ...
async def star_args(*names: str) -> None: ...
async def star_kwargs(**options: int) -> None: ...
async def int_keys(counts: dict[int, str]) -> None: ...
async def a_type_variable(value: T) -> T: return value
async def ge_on_text(name: Annotated[str, Param(ge=1)]) -> None: ...
async def pattern_on_number(n: Annotated[int, Param(pattern="^1")]) -> None: ...
async def call_inside(value: int, call: ToolCall) -> None: ...
async def context_inside(contexts: list[ToolContext]) -> None: ...
async def two_contexts(a: ToolContext, b: CallContext) -> None: ...
async def a_set_in_a_list(groups: list[set[int]]) -> None: ...
async def many_results(n: int) -> ToolResult | int: return n
async def a_path(path: Path) -> None: ...
def sync_with_context(n: int, ctx: ToolContext) -> int: return n


async def an_unknown_name(value: NotDefinedAnywhere) -> None: ...  # type: ignore[name-defined]  # noqa: F821


async def yielding(n: int):  # type: ignore[no-untyped-def]
    yield n


class Method:
    def run(self, n: int) -> int:
        return n


@attrs.frozen
class Holder:
    items: set[int]


@dataclasses.dataclass
class Box(Generic[T]):
    item: T


async def a_generic_box(box: Box[int]) -> None: ...
async def an_open_box(box: Box) -> None: ...  # type: ignore[type-arg]


@pytest.mark.parametrize("function, says", [
    (no_type, "parameter 'path': it has no type: annotate it (path: str, say)"),
    (no_type, "or, to write the schema by hand, use the (call, ctx) form"),
    (a_set, "set[str]: JSON has no sets: take a list[T]"),
    (a_frozenset, "JSON has no sets"),
    (an_object, "take Any for any JSON value, or a precise type"),
    (a_callable, "a function cannot be sent as JSON"),
    (bare_callable, "a function cannot be sent as JSON"),
    (some_bytes, "JSON has no bytes: take a str"),
    (star_args, "*names: a tool's arguments are named: declare each one as a parameter"),
    (star_kwargs, "**options: a tool's arguments are named"),
    (int_keys, "the keys of a JSON object are strings; take dict[str, ...]"),
    (a_type_variable, "the type variable ~T says nothing about the value"),
    (ge_on_text, "Param(ge=...) applies to integer or number values"),
    (pattern_on_number, "Param(pattern=...) applies to string values"),
    (call_inside, "a ToolCall is given only in the (call, ctx) form"),
    (context_inside, "given by the engine only to a parameter of its own"),
    (two_contexts, "the context is already given to 'a': take it once"),
    (a_set_in_a_list, "parameter 'groups', an item: set[int]: JSON has no sets"),
    (many_results, "a ToolResult cannot be one of several return types"),
    (a_path, "Path is not a type a tool can exchange as JSON; use int, float, str"),
    (a_path, "(a str for a path, a date or a URL, converted in the tool)"),
    (sync_with_context, "a sync tool runs in a worker thread, where the context cannot be used: "
                        "make the function async def"),
    (an_unknown_name, "the annotation names 'NotDefinedAnywhere', which is not defined"),
    (yielding, "a generator cannot be a tool: return the values"),
    (Method.run, "@tool takes a function, and a method's self is not an argument"),
    (a_generic_box, "Box[int] is a generic class: a tool takes a class whose fields have plain"),
    (an_open_box, "field 'item' of Box: the type variable ~T says nothing about the value"),
])
def test_what_cannot_be_a_tool_is_refused_saying_what_to_write(
    function: Callable[..., Any], says: str
) -> None:
    message = refused(function)
    assert message.startswith(f"tool {function.__name__!r}")
    assert says in message


@pytest.mark.usefixtures("without_jsonschema")
def test_a_fixed_tuple_without_the_2020_12_validator_says_how_to_get_it() -> None:
    async def pair(point: tuple[int, int]) -> None: ...

    message = refused(pair)
    assert "tuple[int, int]: a tuple of fixed length is checked by the 2020-12 validator" in message
    assert "pip install 'toolledger[schemas2020]'" in message and "tuple[T, ...]" in message

    async def many(points: tuple[int, ...]) -> None: ...

    assert tool(many).input_schema["properties"]["points"]["items"] == {"type": "integer"}


def test_a_field_a_class_cannot_send_is_named_with_its_class() -> None:
    async def take(holder: Holder) -> None: ...

    assert "parameter 'holder', field 'items' of Holder: set[int]: JSON has no sets" in refused(
        take)


def test_an_input_schema_beside_typed_parameters_is_refused() -> None:
    async def add(a: int) -> int:
        return a

    assert "input_schema= is for the (call, ctx) form" in refused(
        add, input_schema={"type": "object"})


def test_a_bad_param_is_refused_when_it_is_made() -> None:
    with pytest.raises(TypeError, match=re.escape("Param(ge=...) takes a finite number")):
        Param(ge=float("nan"))
    with pytest.raises(TypeError, match=re.escape("Param(min_length=...) takes a whole number")):
        Param(min_length=-1)


# -- arguments into types ----------------------------------------------------------------------

class Mode(enum.Enum):
    FAST = "fast"
    SAFE = "safe"


@attrs.frozen
class Size:
    width: int = attrs.field(validator=attrs.validators.le(100))
    height: int = 1


@tool
async def configure(size: Size, mode: Mode, level: Literal[1, 2], ratio: float,
                    scale: int | float = 1, tags: tuple[str, ...] = ()) -> None:
    """Configure."""


@pytest.mark.parametrize("arguments, structured", [
    ({"size": {"width": 3}, "mode": "fast", "level": 1, "ratio": 2},
     {"size": Size(width=3), "mode": Mode.FAST, "level": 1, "ratio": 2.0}),
    ({"size": {"width": 3, "height": 2.0}, "mode": "safe", "level": 2.0, "ratio": 0.5,
      "scale": 2.5, "tags": ["a"]},
     {"size": Size(width=3, height=2), "mode": Mode.SAFE, "level": 2, "ratio": 0.5,
      "scale": 2.5, "tags": ("a",)}),
])
def test_arguments_are_structured_into_the_parameters_types(
    arguments: dict[str, Any], structured: dict[str, Any]
) -> None:
    signature = configure.signature
    assert signature is not None
    taken = signature.structured(arguments)
    assert taken == structured
    assert all(type(taken[k]) is type(v) for k, v in structured.items())


@pytest.mark.parametrize("arguments, problem", [
    ({"size": {"width": 1}, "mode": "fast", "level": 1, "ratio": 10**400},
     "is too large for a float @ $.ratio"),
    ({"size": {"width": 101}, "mode": "fast", "level": 1, "ratio": 1},
     "Size(...) refused these values: ValueError: 'width' must be <= 100: 101 @ $.size"),
    ({"size": {"width": 1}, "mode": "fast", "level": True, "ratio": 1},
     "True is none of 1, 2 @ $.level"),
    ({"size": {"width": 1}, "mode": "slow", "level": 1, "ratio": 1},
     "'slow' is not a value of Mode @ $.mode"),
    ({"size": {"width": 1.5}, "mode": "fast", "level": 1, "ratio": 1},
     "expected an integer, got 1.5 @ $.size.width"),
    ({"size": {"width": 1, "depth": 2}, "mode": "fast", "level": 1, "ratio": 1},
     "Size has no field 'depth' @ $.size"),
    ([1, 2], "the arguments are an object of named values, not list"),
])
def test_a_value_the_types_cannot_hold_is_a_problem_naming_its_path(
    arguments: Any, problem: str
) -> None:
    signature = configure.signature
    assert signature is not None
    found = signature.problem(arguments)
    assert found is not None and problem in found


def test_positional_only_parameters_and_the_context_are_passed_in_place() -> None:
    seen: list[Any] = []

    async def place(a: int, ctx: ToolContext, b: int = 2, /, *, c: int = 3) -> None:
        seen.append((a, ctx, b, c))

    spec = tool(place)
    assert spec.signature is not None
    assert set(spec.input_schema["properties"]) == {"a", "b", "c"}
    context: Any = object()
    args, kwargs = spec.signature.bind({"a": 1, "c": 5}, context)
    assert args == [1, context, 2] and kwargs == {"c": 5}


# -- return values into results ----------------------------------------------------------------

@attrs.frozen
class Total:
    total: int


def result_of(annotation: Any, value: Any) -> ToolResult:
    async def probe():  # type: ignore[no-untyped-def]
        """Probe."""

    if annotation is not None:
        probe.__annotations__ = {"return": annotation}
    spec = tool(probe)
    assert spec.signature is not None
    return spec.signature.result(value)


@pytest.mark.parametrize("annotation, value, content, structured", [
    (str, "hello", ["hello"], None),
    (str | None, None, [], None),
    (type(None), None, [], None),
    (int, 3, ["3"], {"result": 3}),
    (bool, True, ["true"], {"result": True}),
    (list[Total], [Total(1)], ['[{"total": 1}]'], {"result": [{"total": 1}]}),
    (Total, Total(2), ['{"total": 2}'], {"total": 2}),
    (dict[str, Mode], {"a": Mode.FAST}, ['{"a": "fast"}'], {"a": "fast"}),
    (tuple[int, str], (1, "é"), ['[1, "é"]'], {"result": (1, "é")}),
    (Total | None, None, ["null"], {"result": None}),
    (None, "text", ["text"], None),  # untyped: by the value
    (None, {"a": 1}, ['{"a": 1}'], {"a": 1}),
    (None, Total(3), ['{"total": 3}'], {"total": 3}),
    (None, [1], ["[1]"], {"result": [1]}),
    (Any, None, [], None),
])
def test_a_return_value_becomes_the_result_of_the_table(
    annotation: Any, value: Any, content: list[str], structured: Any
) -> None:
    result = result_of(annotation, value)
    assert [block.text for block in result.content] == content  # type: ignore[union-attr]
    assert result.structured_content == structured and not result.is_error


def test_a_tool_result_passes_through_whatever_the_annotation() -> None:
    given = ToolResult(content=[text("failed")], is_error=True)
    for annotation in (ToolResult, int, None, str):
        assert result_of(annotation, given) is given


def test_a_value_that_is_not_json_is_left_for_the_output_check() -> None:
    result = result_of(None, {"a": {1, 2}})
    assert result.content == () and result.structured_content == {"a": {1, 2}}


class Shade(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(("value", "expected"), [
    ("", ""),                       # the constrained str fits
    ("red", Shade.RED),             # too long for it: the enum member, not the str
    (7, 7),                         # within ge=5
    (3, 3.0),                       # below ge=5: the float member
])
def test_a_union_member_whose_constraints_the_value_breaks_does_not_take_it(
        value: Any, expected: Any) -> None:
    from engine.core.typed.conversion import structure_hook

    text = structure_hook(Annotated[str, Param(max_length=0)] | Shade)
    number = structure_hook(Annotated[int, Param(ge=5)] | float)
    taken = (text if isinstance(value, str) else number)(value)
    assert taken == expected and type(taken) is type(expected)
