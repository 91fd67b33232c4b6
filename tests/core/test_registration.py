"""A tool's registration is worked out once per content: the check of its schemas
(engine/core/registry.py), and the encoding of the records a session opens with
(a store's ``Encodings``, events/fast/prepared.py). These tests hold both to the work they
replace: a spec changed in place is checked and recorded as it is now, values Python finds
equal but JSON does not (``1``, ``1.0``, ``True``) are told apart, and a remembered record's
line is the reference's, byte for byte."""

from __future__ import annotations

import json
import marshal
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Annotations, ModelView, Session, ToolResult, approve_all, text, tool
from engine.core.registry import Registry
from engine.core.schemas.checking import SchemaError
from engine.models import FauxModel
from engine.testing import tool_specs
from events import JsonlStore, MemoryStore
from events.codec import decode_line, encode_stored
from events.fast.prepared import REPEATED, Encodings
from events.fast.readers import FAST
from events.stores import EventStore
from events.types import (
    Record,
    SessionSettings,
    SessionStarted,
    ToolRegistered,
    ToolSnapshot,
    ToolSource,
    UserMessage,
)
from tests.strategies import instances_of


def make_tool(schema: dict[str, Any]) -> Any:
    @tool(input_schema=schema, annotations=Annotations(read_only=True))
    async def probe(call: Any, ctx: Any) -> ToolResult:
        """Answers."""
        return ToolResult(content=[text("ok")])

    return probe


async def open_and_close(store: EventStore, spec: Any, session_id: str) -> None:
    tools = spec if isinstance(spec, list) else [spec]
    async with Session.open(store, model=FauxModel([]), tools=tools, approver=approve_all,
                            session_id=session_id, create=True):
        pass


def recorded_schemas(path: Path) -> dict[str, str]:
    """Each session's recorded input schema, as the file's line holds it."""
    found = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "tool_registered":
            found[record["session_id"]] = json.dumps(record["data"]["spec"]["input_schema"])
    return found


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


def test_a_schema_changed_in_place_is_recorded_as_it_is_now(tmp_path: Path) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"minimum": 1}}}
    spec = make_tool(schema)
    with JsonlStore(tmp_path / "log.jsonl") as store:
        trio.run(open_and_close, store, spec, "a")
        schema["properties"]["n"]["minimum"] = 1.0  # equal in Python, another line in the log
        trio.run(open_and_close, store, spec, "b")
        schema["properties"]["n"]["exclusiveMaximum"] = 9
        trio.run(open_and_close, store, spec, "c")
        trio.run(open_and_close, store, spec, "d")
    assert recorded_schemas(tmp_path / "log.jsonl") == {
        "a": '{"type": "object", "properties": {"n": {"minimum": 1}}}',
        "b": '{"type": "object", "properties": {"n": {"minimum": 1.0}}}',
        "c": '{"type": "object", "properties": {"n": {"minimum": 1.0, "exclusiveMaximum": 9}}}',
        "d": '{"type": "object", "properties": {"n": {"minimum": 1.0, "exclusiveMaximum": 9}}}',
    }


def test_two_tools_of_one_name_are_refused_at_open() -> None:
    first = make_tool({"type": "object"})
    second = make_tool({"type": "object", "properties": {}})
    with pytest.raises(ValueError, match="two tools are named 'probe'"):
        trio.run(open_and_close, MemoryStore(), [first, second], "a")


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


def tupled(value: Any) -> Any:
    """``value`` with every list made a tuple (JSON's array to the engine; a list in the log)."""
    if isinstance(value, dict):
        return {key: tupled(child) for key, child in value.items()}
    if isinstance(value, list):
        return tuple(tupled(child) for child in value)
    return value


def schemas_print(snapshot: Any) -> bytes:
    return marshal.dumps((snapshot.input_schema, snapshot.output_schema), 2)


@settings(max_examples=60, deadline=None)
@given(spec=tool_specs(), tuples=st.booleans())
def test_a_registered_tools_snapshot_is_the_specs_own(spec: Any, tuples: bool) -> None:
    if tuples:  # the registry's print is not what the log holds: the spec copies its schemas
        spec = attrs.evolve(spec, input_schema=tupled(spec.input_schema))
    registry = Registry().with_spec(spec)
    first, second = registry.recorded(spec.name), registry.recorded(spec.name)
    reference = spec.snapshot()
    for snapshot in (first, second):
        assert snapshot == reference
        assert schemas_print(snapshot) == schemas_print(reference)  # type for type
    # each a private copy: changing one changes neither the other nor the spec
    assert first.input_schema is not second.input_schema
    first.input_schema["changed"] = True
    assert "changed" not in second.input_schema and "changed" not in spec.input_schema
    assert registry.recorded(spec.name) == reference


def test_a_snapshot_holds_the_schemas_as_they_were_checked() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"minimum": 1}}}
    spec = make_tool(schema)
    registry = Registry().with_spec(spec)
    schema["properties"]["n"]["minimum"] = 1.0  # changed in place after the check
    assert schemas_print(registry.recorded("probe")) == schemas_print(
        attrs.evolve(spec, input_schema={"type": "object", "properties": {"n": {"minimum": 1}}})
        .snapshot())
    again = Registry().with_spec(spec)  # checked anew: the schema as it is now
    assert schemas_print(again.recorded("probe")) == schemas_print(spec.snapshot())
    assert type(again.recorded("probe").input_schema["properties"]["n"]["minimum"]) is float


def line(event: Any, seq: int = 1, time: float = 1.5, *, fast: bool = True,
         encodings: Encodings | None = None) -> bytes:
    record = Record(session_id="s", seq=seq, time=time, event=event)
    return encode_stored(record, fast=fast, encodings=encodings)[0]


@settings(max_examples=60, deadline=None)
@given(spec=tool_specs(), seq=st.integers(1, 2**40), time=st.floats(0, 2e9))
def test_a_registration_is_written_as_the_reference_writes_it(spec: Any, seq: int,
                                                              time: float) -> None:
    first, second = ToolRegistered(spec=spec.snapshot()), ToolRegistered(spec=spec.snapshot())
    reference = line(first, seq, time, fast=False)
    encodings = Encodings()
    assert line(first, seq, time, encodings=encodings) == reference  # encoded now
    assert line(second, seq, time, encodings=encodings) == reference  # found
    # as a session records it: the snapshot its registry made
    for _ in range(2):
        registered = ToolRegistered(spec=Registry().with_spec(spec).recorded(spec.name))
        assert line(registered, seq, time, fast=False) == reference
        assert line(registered, seq, time, encodings=encodings) == reference


def test_specs_that_differ_only_outside_their_schemas_are_written_apart() -> None:
    base = make_tool({"type": "object"})
    specs = [base,
             attrs.evolve(base, description="Answers again."),
             attrs.evolve(base, name="probe2"),
             attrs.evolve(base, annotations=Annotations(read_only=None)),
             attrs.evolve(base, annotations=Annotations(read_only=True, title="t")),
             attrs.evolve(base, exposure="hidden"),
             attrs.evolve(base, execution_mode="sequential"),
             attrs.evolve(base, timeout=1),
             attrs.evolve(base, timeout=1.0),  # equal to 1 in Python, "1.0" in the log
             attrs.evolve(base, source=ToolSource(server="s", tool="probe")),
             attrs.evolve(base, source=ToolSource(server="s", version="1", tool="probe"))]
    encodings = Encodings()
    lines = []
    for spec in specs * 2:
        registered = ToolRegistered(spec=Registry().with_spec(spec).recorded(spec.name))
        lines.append(line(registered, encodings=encodings))
        assert lines[-1] == line(registered, fast=False)
    assert len(set(lines)) == len(specs) >= len(encodings)


def test_every_field_a_snapshot_is_made_of_is_written_apart() -> None:
    """The memo's key is the event's own print: a change of each field of a snapshot, its
    annotations or its source, one at a time, is written as the reference writes it, with no
    list of fields kept by hand."""
    base = attrs.evolve(make_tool({"type": "object"}),
                        source=ToolSource(server="s", version="1", tool="probe"))
    other = {
        ToolSnapshot: {"name": "probe2", "description": "Answers again.",
                       "input_schema": None, "output_schema": None, "annotations": None,
                       "exposure": "hidden", "execution_mode": "sequential", "timeout": 2.5,
                       "source": None, "model_view": ModelView(max_lines=5)},
        Annotations: {"title": "t", "read_only": False, "destructive": True,
                      "idempotent": True, "open_world": False},
        ToolSource: {"server": "t", "version": "2", "tool": "probe3",
                     "hints": Annotations(read_only=True), "hints_trusted": True},
    }
    for cls, changes in other.items():
        assert set(changes) == {field.name for field in attrs.fields(cls)}, cls
    variants = [attrs.evolve(base, **{name: value})
                for name, value in other[ToolSnapshot].items()
                if value is not None]
    variants += [attrs.evolve(base, annotations=attrs.evolve(base.annotations, **{name: value}))
                 for name, value in other[Annotations].items()]
    variants += [attrs.evolve(base, source=attrs.evolve(base.source, **{name: value}))
                 for name, value in other[ToolSource].items()]
    said = attrs.evolve(base, source=attrs.evolve(base.source, hints=Annotations()))
    variants += [said] + [attrs.evolve(said, source=attrs.evolve(
        said.source, hints=attrs.evolve(Annotations(), **{name: value})))
        for name, value in other[Annotations].items()]
    variants.append(attrs.evolve(base, source=None))
    encodings = Encodings()
    lines = []
    for spec in [base, *variants]:
        registered = ToolRegistered(spec=Registry().with_spec(spec).recorded(spec.name))
        lines.append(line(registered, encodings=encodings))
        assert lines[-1] == line(registered, fast=False)
    assert len(set(lines)) == len(lines)


def test_every_field_a_session_start_is_made_of_is_written_apart() -> None:
    settings = SessionSettings(max_turns=5, max_depth=4, max_argument_bytes=100,
                               max_result_bytes=200)
    base = SessionStarted(metadata={"a": 1}, settings=settings)
    assert {field.name for field in attrs.fields(SessionStarted)} == {"metadata", "settings"}
    variants = [attrs.evolve(base, metadata={"a": 1.0})]
    variants += [attrs.evolve(base, settings=attrs.evolve(settings, **{
        field.name: ModelView(max_lines=7) if field.name == "model_view" else 7}))
                 for field in attrs.fields(SessionSettings)]
    encodings = Encodings()
    lines = []
    for started in [base, *variants]:
        lines.append(line(started, encodings=encodings))
        assert lines[-1] == line(started, fast=False)
    assert len(set(lines)) == len(lines)


def test_a_spec_whose_annotations_do_not_print_is_encoded_every_time() -> None:
    class Notes(Annotations):
        pass

    spec = attrs.evolve(make_tool({"type": "object"}), annotations=Notes(read_only=True))
    snapshot = Registry().with_spec(spec).recorded(spec.name)
    assert snapshot == spec.snapshot()
    encodings = Encodings()
    registered = ToolRegistered(spec=snapshot)
    assert line(registered, encodings=encodings) == line(registered, fast=False)
    assert len(encodings) == 0


@settings(max_examples=100, deadline=None)
@given(event=st.sampled_from(sorted(FAST, key=lambda cls: cls.__name__)).flatmap(instances_of),
       seq=st.integers(1, 2**40), time=st.floats(0, 2e9))
def test_an_event_is_written_as_the_reference_writes_it(event: Any, seq: int,
                                                        time: float) -> None:
    reference = line(event, seq, time, fast=False)
    again = decode_line(reference).event  # an equal event, with values of its own
    encodings = Encodings()
    assert line(event, seq, time, encodings=encodings) == reference
    assert line(again, seq, time, encodings=encodings) == reference
    assert len(encodings) <= (1 if type(event) in REPEATED else 0)


def test_values_python_finds_equal_are_encoded_apart() -> None:
    events = [SessionStarted(metadata={"k": value}) for value in (1, 1.0, True, 1, True)]
    encodings = Encodings()
    lines = [line(event, encodings=encodings) for event in events]
    assert lines == [line(event, fast=False) for event in events]
    assert len(set(lines)) == 3 == len(encodings)


def test_what_cannot_be_remembered_is_left_to_the_ordinary_path() -> None:
    class Name(str):
        pass

    settings = SessionSettings(max_turns=True, max_depth=8, max_argument_bytes=1,
                               max_result_bytes=1)
    encodings = Encodings()
    for event in (SessionStarted(settings=settings),  # the reader takes an exact int only
                  SessionStarted(metadata={"k": Name("v")}),  # a subclass does not print
                  UserMessage(text="hi")):  # not a repeated event
        assert line(event, encodings=encodings) == line(event, fast=False)
    assert len(encodings) == 0


def test_sessions_started_alike_but_for_types_are_written_apart(tmp_path: Path) -> None:
    # a session's start is prepared by the print of its metadata and settings
    metadata = [{"k": 1}, {"k": 1.0}, {"k": True}, {"k": 1}, {"k": [1, {"n": None}]}, {}]

    async def main(store: EventStore) -> None:
        for index, values in enumerate(metadata):
            async with Session.open(store, model=FauxModel([]), session_id=f"s{index}",
                                    create=True, metadata=values, max_turns=1 + index % 2):
                pass

    path = tmp_path / "log.jsonl"
    with JsonlStore(path) as store:
        trio.run(main, store)
    lines = [raw for raw in path.read_bytes().splitlines() if b'"session_started"' in raw]
    assert len(lines) == len(metadata)
    for index, (raw, values) in enumerate(zip(lines, metadata, strict=True)):
        record = decode_line(raw)
        assert record.event.metadata == values
        assert [type(value) for value in record.event.metadata.values()] == [
            type(value) for value in values.values()]
        assert record.event.settings.max_turns == 1 + index % 2
        body, _ = encode_stored(record, fast=False)
        assert raw.startswith(body[:-1])  # the sealed line: the reference's bytes, then its hash
