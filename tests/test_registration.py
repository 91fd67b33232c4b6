"""A tool's schemas are checked once per content (engine/registry.py). These tests hold the
memo to the work it replaces: a spec changed in place is checked as it is now, and values
Python finds equal but JSON does not (``1``, ``1.0``, ``True``) are told apart."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.models import FauxModel
from engine.registry import Registry
from engine.schemas import SchemaError
from events import MemoryStore


def make_tool(schema: dict[str, Any]) -> Any:
    @tool(input_schema=schema, annotations=Annotations(read_only=True))
    async def probe(call: Any, ctx: Any) -> ToolResult:
        """Answers."""
        return ToolResult(content=[text("ok")])

    return probe


async def open_and_close(store: MemoryStore, spec: Any, session_id: str) -> None:
    async with Session.open(store, model=FauxModel([]), tools=[spec], approver=approve_all,
                            session_id=session_id, create=True):
        pass


def test_a_schema_changed_in_place_is_checked_again() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"maximum": 1}}}
    spec = make_tool(schema)
    store = MemoryStore()
    trio.run(open_and_close, store, spec, "a")
    schema["type"] = "array"  # refused: a tool's input is an object
    with pytest.raises(SchemaError, match="type"):
        trio.run(open_and_close, store, spec, "b")


def test_values_python_finds_equal_are_checked_apart() -> None:
    # 1 == True in Python, but a bound must be a number: the spec is refused once it says True
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"maximum": 1}}}
    spec = make_tool(schema)
    trio.run(open_and_close, MemoryStore(), spec, "a")
    schema["properties"]["n"]["maximum"] = True
    assert schema == {"type": "object", "properties": {"n": {"maximum": 1}}}
    with pytest.raises(SchemaError, match="maximum"):
        trio.run(open_and_close, MemoryStore(), spec, "b")


def test_a_spec_that_does_not_print_is_checked_every_time() -> None:
    # a tuple is JSON's array to the engine; a dict subclass has no exact print
    class Schema(dict[str, Any]):
        pass

    schema = Schema(type="object", properties={"n": {"enum": (1, 2)}})
    spec = make_tool(schema)
    Registry().check(spec)
    schema["type"] = "array"
    with pytest.raises(SchemaError):
        Registry().check(spec)
