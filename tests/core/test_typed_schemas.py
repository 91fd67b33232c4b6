"""A typed tool's schemas come from its signature (engine/core/typed/schemas.py): each type
of docs/tools.md's table gives the schema the table says, descriptions come from the docstring,
``Annotated`` and ``Param``, defaults are recorded when they are JSON, classes nest (and a
class that contains itself goes under ``$defs``), and every schema made is one the engine's
checker accepts."""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, Required, TypedDict

import attrs
import pytest

from engine import Param, ToolSpec, tool
from engine.core.registry import Registry
from engine.core.schemas.checking import compile_schema


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


UserId = NewType("UserId", int)


@attrs.frozen
class Point:
    """A point on the plane.

    Attributes:
        x: across
        y: down
    """

    x: float
    y: float = 0.0


@attrs.define
class Secret:
    _token: str
    hidden: int = attrs.field(init=False, default=0)
    tags: list[str] = attrs.Factory(list)


@dataclasses.dataclass
class Box:
    width: Annotated[int, Param(ge=1)]
    label: str = "box"
    parts: list[str] = dataclasses.field(default_factory=list)


class Query(TypedDict, total=False):
    text: Required[str]
    limit: int


class Strict(TypedDict):
    text: str
    page: NotRequired[int]


@attrs.frozen
class Tree:
    value: int
    children: list[Tree] = attrs.Factory(list)


@attrs.frozen
class Ping:
    pong: Pong | None = None


@attrs.frozen
class Pong:
    ping: Ping


def schema_of(annotation: Any) -> dict[str, Any]:
    """The schema ``@tool`` gives a parameter ``x`` annotated ``annotation``, with the
    ``$defs`` the tool's schema holds (if any)."""

    async def probe(x):  # type: ignore[no-untyped-def]
        """Probe."""

    probe.__annotations__ = {"x": annotation}
    spec = tool(probe)
    compile_schema(spec.input_schema)  # the checker accepts every one
    schema = dict(spec.input_schema["properties"]["x"])
    if "$defs" in spec.input_schema:
        schema["$defs"] = spec.input_schema["$defs"]
    return schema


@pytest.mark.parametrize("annotation, expected", [
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (str, {"type": "string"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (Any, {}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (typing.List[str], {"type": "array", "items": {"type": "string"}}),  # noqa: UP006
    (list, {"type": "array"}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "minItems": 2, "maxItems": 2}),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict[str, Any], {"type": "object"}),
    (dict, {"type": "object"}),
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
    (Literal[1, "a", None], {"type": ["null", "integer", "string"], "enum": [1, "a", None]}),
    (Literal[Color.RED], {"type": "string", "enum": ["red"]}),
    (Color, {"type": "string", "enum": ["red", "green"]}),
    (Level, {"type": "integer", "enum": [1, 2]}),
    (Optional[int], {"type": ["null", "integer"]}),  # noqa: UP045
    (int | str | None, {"type": ["null", "integer", "string"]}),
    (int | Any, {}),
    (list[int] | None, {"anyOf": [{"type": "array", "items": {"type": "integer"}},
                                  {"type": "null"}]}),
    (UserId, {"type": "integer"}),
    (Annotated[str, "a path"], {"type": "string", "description": "a path"}),
    (Annotated[int, Param("how many", ge=1, le=9)],
     {"type": "integer", "description": "how many", "minimum": 1, "maximum": 9}),
    (Annotated[float, Param(gt=0, lt=1, multiple_of=0.5)],
     {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.5}),
    (Annotated[str, Param(min_length=1, max_length=3, pattern="^a")],
     {"type": "string", "minLength": 1, "maxLength": 3, "pattern": "^a"}),
    (Annotated[list[int], Param(min_length=1)],
     {"type": "array", "items": {"type": "integer"}, "minItems": 1}),
    (Annotated[dict[str, int], Param(max_length=2)],
     {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 2}),
    (Annotated[str | list[str], Param(min_length=1)],
     {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
      "minLength": 1, "minItems": 1}),
    (list[Annotated[int, Param(ge=0)]], {"type": "array", "items": {"type": "integer",
                                                                    "minimum": 0}}),
])
def test_each_type_has_the_schema_of_the_table(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_of(annotation) == expected


def test_a_class_is_an_object_of_its_fields_with_no_others() -> None:
    assert schema_of(Point) == {
        "type": "object", "title": "Point", "description": "A point on the plane.",
        "properties": {"x": {"type": "number", "description": "across"},
                       "y": {"type": "number", "description": "down", "default": 0.0}},
        "required": ["x"], "additionalProperties": False}


def test_an_attrs_class_is_read_by_its_constructor() -> None:
    # a private field by its alias, an init=False field left out, a factory not recorded
    assert schema_of(Secret) == {
        "type": "object", "title": "Secret",
        "properties": {"token": {"type": "string"},
                       "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["token"], "additionalProperties": False}


def test_a_dataclass_and_its_annotated_fields() -> None:
    assert schema_of(Box) == {
        "type": "object", "title": "Box",
        "properties": {"width": {"type": "integer", "minimum": 1},
                       "label": {"type": "string", "default": "box"},
                       "parts": {"type": "array", "items": {"type": "string"}}},
        "required": ["width"], "additionalProperties": False}


def test_a_typed_dict_requires_its_required_keys_under_postponed_annotations() -> None:
    # this module postpones annotations: Required/NotRequired are read from the hints
    assert schema_of(Query)["required"] == ["text"]
    assert schema_of(Strict)["required"] == ["text"]
    assert set(schema_of(Query)["properties"]) == {"text", "limit"}


def test_a_class_that_contains_itself_is_defined_once_and_referred_to() -> None:
    schema = schema_of(Tree)
    assert schema["$ref"] == "#/$defs/Tree"
    tree = schema["$defs"]["Tree"]
    assert tree["properties"]["children"] == {"type": "array",
                                              "items": {"$ref": "#/$defs/Tree"}}
    mutual = schema_of(Ping)
    assert mutual["$ref"] == "#/$defs/Ping"
    pong = mutual["$defs"]["Ping"]["properties"]["pong"]["anyOf"][0]
    assert pong["properties"]["ping"] == {"$ref": "#/$defs/Ping"}


def test_two_classes_of_one_name_get_two_definitions() -> None:
    class Other:  # another class named Tree, that contains itself
        leaf = None

    Other.__name__ = Other.__qualname__ = "Tree"
    Other.__annotations__ = {"leaf": Optional[Other]}  # noqa: UP045 (a type, not a string)
    other = dataclasses.dataclass(Other)

    @tool
    async def both(a: Tree, b: other) -> None:  # type: ignore[valid-type]
        """Both trees."""

    assert set(both.input_schema["$defs"]) == {"Tree", "Tree2"}
    compile_schema(both.input_schema)


def test_descriptions_come_from_the_docstring_and_annotations_win() -> None:
    @tool
    async def google(a: int, b: Annotated[int, "from the annotation"] = 2) -> int:
        """Add two numbers.

        A second paragraph of description.

        Args:
            a: the first,
                on two lines
            b: from the docstring

        Returns:
            the sum
        """
        return a + b

    assert google.description == "Add two numbers.\n\nA second paragraph of description."
    properties = google.input_schema["properties"]
    assert properties["a"]["description"] == "the first, on two lines"
    assert properties["b"]["description"] == "from the annotation"

    @tool
    async def numpy(a: int, b: int) -> int:
        """Add two numbers.

        Parameters
        ----------
        a : int
            the first
        b
            the second

        Returns
        -------
        int
        """
        return a + b

    assert numpy.description == "Add two numbers."
    assert [numpy.input_schema["properties"][n]["description"] for n in "ab"] == [
        "the first", "the second"]


def test_a_default_is_recorded_when_it_is_json() -> None:
    marker = object()

    @tool
    async def defaults(color: Color = Color.GREEN, pair: tuple[int, int] = (1, 2),
                       where: Any = marker, many: list[int] | None = None) -> None:
        """Defaults."""

    properties = defaults.input_schema["properties"]
    assert properties["color"]["default"] == "green"
    assert properties["pair"]["default"] == [1, 2]
    assert "default" not in properties["where"]
    assert properties["many"]["default"] is None
    assert "required" not in defaults.input_schema


def test_the_root_is_an_object_without_other_properties_and_checked_when_registered() -> None:
    @tool
    async def add(a: int, b: int = 0) -> int:
        """Add."""
        return a + b

    assert add.input_schema == {"type": "object",
                                "properties": {"a": {"type": "integer"},
                                               "b": {"type": "integer", "default": 0}},
                                "required": ["a"], "additionalProperties": False}
    inputs, outputs = Registry().check(add)
    assert inputs.violation({"a": 1}) is None and inputs.violation({"a": 1, "c": 2})
    assert outputs is not None and outputs.violation({"result": 3}) is None


@pytest.mark.parametrize("annotation, output, wrapped", [
    (int, {"type": "integer"}, True),
    (list[Point], {"type": "array", "items": schema_of(Point)}, True),
    (Point | None, {"anyOf": [schema_of(Point), {"type": "null"}]}, True),
    (Point, schema_of(Point), False),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}, False),
    (Query, schema_of(Query), False),
])
def test_the_output_schema_comes_from_the_return_annotation(
    annotation: Any, output: dict[str, Any], wrapped: bool
) -> None:
    async def probe():  # type: ignore[no-untyped-def]
        """Probe."""

    probe.__annotations__ = {"return": annotation}
    spec: ToolSpec = tool(probe)
    assert spec.output_schema is not None
    compile_schema(spec.output_schema, role="output")
    if wrapped:
        assert spec.output_schema == {"type": "object", "properties": {"result": output},
                                      "required": ["result"], "additionalProperties": False}
    else:
        assert spec.output_schema == output


@pytest.mark.parametrize("annotation", [str, None, Any, "ToolResult", "nothing"])
def test_text_none_untyped_and_result_returns_declare_no_output_schema(annotation: Any) -> None:
    async def probe():  # type: ignore[no-untyped-def]
        """Probe."""

    if annotation == "ToolResult":
        from engine import ToolResult

        probe.__annotations__ = {"return": ToolResult}
    elif annotation != "nothing":
        probe.__annotations__ = {"return": annotation}
    assert tool(probe).output_schema is None


def test_a_class_that_returns_itself_declares_an_object_root() -> None:
    @tool
    async def grow() -> Tree:
        """A tree."""
        return Tree(value=1)

    assert grow.output_schema is not None
    assert grow.output_schema["type"] == "object"
    assert grow.output_schema["allOf"] == [{"$ref": "#/$defs/Tree"}]
    compile_schema(grow.output_schema, role="output")
