"""Stubs: a tool's schema read back as the typed function a program calls."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from engine.core.codemode import declared, program_functions
from engine.core.typed.schemas import TypeSchemas
from engine.core.typed.stubs import annotation, function_stub, python_name
from events.types import ToolSnapshot

# a Python type, and how a stub writes the schema @tool made of it
ROUND_TRIPS: list[tuple[Any, str]] = [
    (int, "int"), (float, "float"), (str, "str"), (bool, "bool"), (None, "None"),
    (Any, "Any"), (list[int], "list[int]"), (list[list[str]], "list[list[str]]"),
    (dict[str, int], "dict[str, int]"), (Literal["a", 1], "Literal['a', 1]"),
    (int | None, "int | None"), (list[int] | str, "list[int] | str"),
]


@pytest.mark.parametrize(("tp", "written"), ROUND_TRIPS)
def test_a_typed_tools_schema_reads_back_as_its_type(tp: Any, written: str) -> None:
    assert annotation(TypeSchemas("tool 't'", None).schema(tp, "parameter 'x'")) == written


@pytest.mark.parametrize(("name", "identifier"), [
    ("read", "read"), ("fs.read-file", "fs_read_file"), ("2fa", "_2fa"), ("class", "class_")])
def test_a_tool_name_becomes_an_identifier(name: str, identifier: str) -> None:
    assert python_name(name) == identifier and identifier.isidentifier()


def snapshot(name: str, exposure: Any = "codemode", **schema: Any) -> ToolSnapshot:
    return ToolSnapshot(name=name, description=f"{name} it.", exposure=exposure,
                        input_schema={"type": "object", **schema})


def test_required_parameters_come_first_and_optional_ones_default_to_ellipsis() -> None:
    stub = function_stub(snapshot("find", properties={"limit": {"type": "integer"},
                                                      "query": {"type": "string"}},
                                  required=["query"]))
    assert stub.parameters == ("query", "limit")
    assert stub.text.startswith("def find(query: str, limit: int = ...) -> str:\n"
                                '    """find it."""')
    compile(stub.text, "stub", "exec")


def test_properties_that_are_not_identifiers_are_keyword_arguments() -> None:
    stub = function_stub(snapshot("t", properties={"a-b": {}}))
    assert stub.parameters == () and "def t(**arguments: Any) -> str:" in stub.text


def test_only_active_codemode_tools_are_functions_of_a_program() -> None:
    tools = [snapshot("a"), snapshot("b", "direct"), snapshot("c", "hidden"),
             snapshot("d", "model-only"), snapshot("e", "deferred")]
    assert list(program_functions(tools)) == ["a", "a_async"]


def test_the_code_tool_is_declared_only_while_a_codemode_tool_is_active() -> None:
    code = ToolSnapshot(name="run_code", description="", input_schema={"type": "object"},
                        exposure="model-only")
    plain = snapshot("plain", "direct")
    assert declared([code, plain]) == (plain,)
    [told, also] = declared([code, snapshot("a"), plain])
    assert told.name == "run_code" and "def a() -> str:" in told.description and also is plain


def test_a_typed_tool_that_returns_data_is_called_for_the_data_itself() -> None:
    from engine import tool

    @tool(exposure="codemode")
    def count(text: str) -> int:
        """How many words."""
        return len(text.split())

    @tool(exposure="codemode")
    def pair(text: str) -> dict[str, int]:
        """Words and letters."""
        return {"words": 1}

    counted, paired = function_stub(count.snapshot()), function_stub(pair.snapshot())
    assert counted.wrapped and "def count(text: str) -> int:" in counted.text
    assert not paired.wrapped and "def pair(text: str) -> dict[str, int]:" in paired.text
