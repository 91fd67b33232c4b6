"""Every memo in the engine has an owner, holds a bounded number of entries, and gives what the
path without it gives.

The memos: a store's encodings of the records that repeat from session to session
(``events.fast.prepared.Encodings``), a tool spec's checks of its own schemas
(``ToolSpec.checked``), a registry's annotation-rule decisions (``Registry.by_annotations``),
and a console's renderers (``engine.present.renderers.Renderers``); ``engine.core.memo.Memo`` is
the bounded memo the spec's is made of. Nothing is shared by the whole process.
"""

from __future__ import annotations

import contextvars
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Annotations, ToolResult, text, tool
from engine.core.memo import Memo
from engine.core.policy import by_annotations, decide
from engine.core.registry import Registry
from engine.core.schemas.checking import compile_schema
from engine.present.renderers import Renderers, current, register_renderer
from engine.testing import tool_specs
from events import JsonlStore, MemoryStore
from events.codec import proven_data
from events.fast.prepared import REPEATED, Encodings
from events.types import SessionSettings, SessionStarted, ToolRegistered
from tests.strategies import instances_of

repeated_events = st.sampled_from(sorted(REPEATED, key=lambda cls: cls.__name__)).flatmap(
    instances_of)


# -- the bounded memo ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(-20, 20), max_size=60), maxsize=st.integers(1, 8))
def test_a_memo_gives_what_it_was_made_from_and_stays_bounded(keys: list[int],
                                                              maxsize: int) -> None:
    memo: Memo[int, tuple[int, int]] = Memo(maxsize)
    made = []

    def make(key: int) -> tuple[int, int]:
        made.append(key)
        return (key, key * key)

    for key in keys:
        assert memo.get(key, make) == (key, key * key)
        assert len(memo) <= maxsize
    assert len(made) <= len(keys)
    if keys:
        assert memo.get(keys[-1], make) == (keys[-1], keys[-1] ** 2)


def test_a_memo_remembers_nothing_for_what_raised() -> None:
    memo: Memo[str, int] = Memo(2)

    def refuse(key: str) -> int:
        raise ValueError(key)

    with pytest.raises(ValueError):
        memo.get("a", refuse)
    assert len(memo) == 0
    with pytest.raises(ValueError, match="at least 1"):
        Memo(0)


# -- a store's encodings ---------------------------------------------------------------------


def test_each_store_owns_its_encodings(tmp_path: Path) -> None:
    first, second = MemoryStore(), MemoryStore()
    assert first.encodings is not second.encodings
    with JsonlStore(tmp_path / "log.jsonl") as store:
        assert isinstance(store.encodings, Encodings)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(repeated_events, min_size=1, max_size=12), maxsize=st.integers(1, 4))
def test_encodings_give_what_the_proof_gives_and_stay_bounded(events: list[Any],
                                                               maxsize: int) -> None:
    encodings = Encodings(maxsize)
    for event in events * 2:  # each met again, remembered or dropped by then
        assert encodings.data(event) == proven_data(event)
        assert len(encodings) <= maxsize


def test_encodings_remember_one_entry_per_content() -> None:
    encodings = Encodings()
    settings_ = SessionSettings(max_turns=3, max_depth=2, max_argument_bytes=10,
                                max_result_bytes=10)
    for _ in range(5):
        encodings.data(SessionStarted(metadata={"a": [1, 2]}, settings=settings_))
    assert len(encodings) == 1
    encodings.data(SessionStarted(metadata={"a": [1, 2.0]}, settings=settings_))
    assert len(encodings) == 2


# -- a spec's checks, a registry's decisions -------------------------------------------------


def make_tool(schema: dict[str, Any], annotations: Annotations = Annotations()) -> Any:
    @tool(input_schema=schema, annotations=annotations)
    async def probe(call: Any, ctx: Any) -> ToolResult:
        """Answers."""
        return ToolResult(content=[text("ok")])

    return probe


def test_a_spec_owns_its_checks_and_keeps_few() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"maximum": 0}}}
    spec = make_tool(schema)
    first = Registry().check(spec)
    assert Registry().check(spec) == first  # the spec's memo, whichever registry asks
    for bound in range(1, 20):  # changed in place: each print checked anew
        schema["properties"]["n"]["maximum"] = bound
        Registry().check(spec)
        assert len(spec.checked) <= spec.checked.maxsize
    copy = attrs.evolve(spec)
    assert copy.checked is not spec.checked and len(copy.checked) == 0


@settings(max_examples=40, deadline=None)
@given(spec=tool_specs(), arguments=st.dictionaries(st.text(max_size=3),
                                                    st.integers() | st.text(max_size=3),
                                                    max_size=3))
def test_a_remembered_check_judges_as_a_fresh_compile(spec: Any,
                                                      arguments: dict[str, Any]) -> None:
    registry = Registry()
    for _ in range(2):  # compiled, then remembered
        inputs, _outputs = registry.check(spec)
        fresh = compile_schema(spec.input_schema, role="input")
        assert (inputs.violation(arguments) is None) == (fresh.violation(arguments) is None)


@settings(max_examples=100, deadline=None)
@given(notes=instances_of(Annotations), other=instances_of(Annotations))
def test_a_registrys_decisions_are_the_annotation_rules(notes: Annotations,
                                                        other: Annotations) -> None:
    spec = make_tool({"type": "object"}, notes)
    registry = Registry().with_spec(spec)
    for _ in range(2):  # worked out, then remembered
        assert registry.by_annotations("probe", spec.annotations) == by_annotations(
            "probe", notes)
    # annotations other than the registered tool's, or another tool: worked out, not kept
    assert registry.by_annotations("probe", other) == by_annotations("probe", other)
    assert registry.by_annotations("other", notes) == by_annotations("other", notes)
    assert len(registry._decisions) <= len(registry.specs)
    assert Registry().with_spec(spec)._decisions == {}  # each registry its own
    assert decide("probe", notes, annotation_rule=registry.by_annotations) == decide(
        "probe", notes)


# -- a console's renderers -------------------------------------------------------------------


def test_each_console_owns_its_renderers() -> None:
    first, second = Renderers(), Renderers()

    def view(call: Any) -> str:
        return "mine"

    first.register("probe", view)
    assert first.get("probe") is view and second.get("probe") is None
    assert len(first) == 1 and len(second) == 0


def test_register_renderer_adds_to_its_contexts_renderers_only() -> None:
    def view(call: Any) -> str:
        return "mine"

    def in_a_context() -> Renderers:
        register_renderer("probe", view)
        return current()

    mine = contextvars.copy_context().run(in_a_context)
    assert mine.get("probe") is view
    theirs = contextvars.copy_context().run(current)
    assert theirs is not mine and theirs.get("probe") is None


def test_a_repeated_event_class_is_what_sessions_open_with() -> None:
    assert REPEATED == {SessionStarted, ToolRegistered}


def test_no_table_is_keyed_by_an_objects_id() -> None:
    """An ``id()`` is reused once its object goes: a table keyed by one needs weak references
    to stay right, and it is shared by everything in the process. The memos are keyed by what
    they remember instead."""
    root = Path(__file__).resolve().parents[2]
    found = [f"{path.relative_to(root)}:{number}"
             for package in ("engine", "events")
             for path in sorted((root / package).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if any(use in line for use in ("[id(", "get(id(", "pop(id(", "setdefault(id("))]
    assert found == []
