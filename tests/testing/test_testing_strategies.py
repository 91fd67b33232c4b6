"""engine.testing's strategies draw what they say: all 27 hint combinations, schemas the engine
accepts, arguments that fit (or break) them by the engine's own validator, specs that register
and run, and model calls to the drawn tools."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from engine import Annotations, Session, approve_all
from engine.core.schemas.checking import compile_schema
from engine.core.tools import ToolSpec
from engine.models import FauxModel, FauxToolCall, faux_text
from engine.testing import (
    ANNOTATION_HINTS,
    BodyRuns,
    counted,
    counting_clock,
    input_schemas,
    invalid_arguments,
    output_schemas,
    tool_annotations,
    tool_calls,
    tool_names,
    tool_sets,
    tool_specs,
    valid_arguments,
)
from engine.testing.arguments import weighted
from events import MemoryStore
from events.types import ToolRegistered

# each example compiles a schema or runs a session: a fraction of the profile's examples
SOME = settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

HINTS = (None, True, False)
# find() without shrinking: the first example that fits is enough to show it can be drawn
FIND = settings(max_examples=2_000, database=None, phases=[Phase.generate])


def test_the_hint_combinations_are_the_27_the_policy_reads() -> None:
    combos = {(a.read_only, a.destructive, a.open_world) for a in ANNOTATION_HINTS}
    assert combos == set(itertools.product(HINTS, HINTS, HINTS))
    assert len(ANNOTATION_HINTS) == 27


@pytest.mark.parametrize("combo", list(itertools.product(HINTS, HINTS, HINTS)))
def test_the_annotations_strategy_draws_every_hint_combination(
    combo: tuple[bool | None, bool | None, bool | None],
) -> None:
    found = find(tool_annotations(),
                 lambda a: (a.read_only, a.destructive, a.open_world) == combo,
                 settings=FIND)
    assert isinstance(found, Annotations)


def test_the_annotations_strategy_draws_titles_and_idempotent_hints() -> None:
    quiet = FIND
    assert find(tool_annotations(), lambda a: a.title is not None, settings=quiet).title is not None
    for value in (True, False):
        assert find(tool_annotations(), lambda a: a.idempotent is value,
                    settings=quiet).idempotent is value
    plain = tool_annotations(titles=False, idempotent=False)
    assert find(plain, lambda a: True, settings=quiet).title is None


@SOME
@given(tool_annotations(titles=False, idempotent=False))
def test_without_titles_and_idempotent_only_the_policy_hints_vary(notes: Annotations) -> None:
    assert notes.title is None and notes.idempotent is None


@SOME
@given(tool_names())
def test_tool_names_are_valid_spec_names(name: str) -> None:
    async def body(call: Any, ctx: Any) -> Any:
        raise AssertionError("not run")

    assert ToolSpec(name=name, description="", input_schema={"type": "object"},
                    execute=body).name == name


@SOME
@given(input_schemas(max_depth=3), st.data())
def test_drawn_schemas_compile_and_arguments_fit_or_break_them(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    validator = compile_schema(schema, where="drawn input schema")
    good = data.draw(valid_arguments(schema), label="valid")
    assert validator.violation(good) is None, (schema, good)
    bad = data.draw(invalid_arguments(schema), label="invalid")
    assert validator.violation(bad) is not None, (schema, bad)


@SOME
@given(output_schemas(), st.data())
def test_drawn_output_schemas_compile_as_output_schemas(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    validator = compile_schema(schema, role="output")
    assert validator.violation(data.draw(valid_arguments(schema))) is None


@pytest.mark.parametrize("schema, good, bad", [
    ({"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 3,
                                             "maximum": 5}},
      "required": ["n"], "additionalProperties": False},
     lambda v: v["n"] in (4, 5) and list(v) == ["n"],
     lambda v: not (isinstance(v, dict) and list(v) == ["n"] and v["n"] in (4, 5)
                    and type(v["n"]) is int)),
    ({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                "minItems": 1, "maxItems": 2}}},
     lambda v: "tags" not in v or 1 <= len(v["tags"]) <= 2,
     lambda v: True),
])
def test_arguments_for_a_known_schema(schema: dict[str, Any], good: Any, bad: Any) -> None:
    validator = compile_schema(schema)

    @settings(max_examples=50, database=None)
    @given(valid_arguments(schema), invalid_arguments(schema))
    def check(valid: Any, invalid: Any) -> None:
        assert good(valid) and validator.violation(valid) is None
        assert bad(invalid) and validator.violation(invalid) is not None

    check()


TREE = {"type": "object", "properties": {"value": {"type": "integer"},
                                         "children": {"type": "array",
                                                      "items": {"$ref": "#/$defs/Tree"}}},
        "required": ["value"], "additionalProperties": False}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"x": {"anyOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
         "additionalProperties": False},
        {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        {"type": "null"}]}}, "required": ["x"]},
    {"type": "object", "properties": {"tree": {"$ref": "#/$defs/Tree"}}, "required": ["tree"],
     "$defs": {"Tree": TREE}},
    {"type": "object", "properties": {"pair": {"type": "array", "prefixItems": [
        {"type": "integer"}, {"type": "string", "minLength": 1}], "minItems": 2,
        "maxItems": 2}}, "required": ["pair"]},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-c]+$",
                                               "maxLength": 4},
                                      "n": {"type": "integer", "multipleOf": 3, "minimum": 0},
                                      "bag": {"type": "object", "minProperties": 1,
                                              "maxProperties": 2,
                                              "additionalProperties": {"type": "integer"}}},
     "required": ["code", "n", "bag"]},
])
def test_arguments_for_the_keywords_of_inferred_schemas(schema: dict[str, Any]) -> None:
    validator = compile_schema(schema)

    @settings(max_examples=100, database=None, deadline=None)
    @given(valid_arguments(schema), invalid_arguments(schema))
    def check(valid: Any, invalid: Any) -> None:
        assert validator.violation(valid) is None, valid
        assert validator.violation(invalid) is not None, invalid

    check()


def test_a_schema_that_contains_itself_gives_finite_values_of_every_depth() -> None:
    schema = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/Tree"}},
              "required": ["tree"], "$defs": {"Tree": TREE}}

    def depth(tree: Any) -> int:
        return 1 + max((depth(child) for child in tree["children"]), default=0) if (
            "children" in tree) else 1

    found = find(valid_arguments(schema), lambda v: depth(v["tree"]) >= 3, settings=FIND)
    assert depth(found["tree"]) >= 3


def test_a_schema_with_a_keyword_it_cannot_generate_for_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'patternProperties'"):
        valid_arguments({"type": "object", "patternProperties": {"^x": {"type": "string"}}})
    with pytest.raises(ValueError, match="every value satisfies"):
        invalid_arguments({})


def test_weighted_draws_in_proportion_and_not_per_inner_branch() -> None:
    inner = st.one_of(*(st.just(f"inner{i}") for i in range(8)))
    strategy = weighted((3, st.just("outer")), (1, inner))
    # st.one_of would flatten the inner branches and draw "outer" 1 time in 9, not 3 in 4

    @settings(max_examples=3, database=None)
    @given(st.lists(strategy, min_size=400, max_size=400))
    def proportion(xs: list[str]) -> None:
        assert xs.count("outer") > 200

    proportion()


@SOME
@given(tool_specs(exposures=st.just("direct")), st.data())
def test_a_drawn_spec_registers_and_its_body_satisfies_its_output_schema(
    spec: ToolSpec, data: st.DataObject
) -> None:
    arguments = data.draw(valid_arguments(spec.input_schema), label="arguments")
    runs = BodyRuns()

    async def main() -> None:
        model = FauxModel([FauxToolCall(name=spec.name, arguments=arguments), faux_text("ok")])
        async with Session.open(MemoryStore(), model=model, tools=[counted(spec, runs)],
                                approver=approve_all, clock=counting_clock()) as session:
            await session.prompt("go")
            registered = [r.event.spec for r in session.records
                          if isinstance(r.event, ToolRegistered)]
            assert registered == [spec.snapshot()]
            call = session.calls["1.0"]
            assert call.status == "completed", call.terminal
            assert runs["1.0"] == 1

    trio.run(main)


@SOME
@given(tool_sets(max_size=4), st.data())
def test_tool_calls_name_the_tools_or_the_unknown_one(specs: list[ToolSpec],
                                                     data: st.DataObject) -> None:
    assert len({s.name for s in specs}) == len(specs)
    call = data.draw(tool_calls(specs, unknown="nope"))
    assert call.name in {s.name for s in specs} | {"nope"}
    only_valid = data.draw(tool_calls(specs, unknown=None, invalid=False))
    spec = next(s for s in specs if s.name == only_valid.name)
    assert compile_schema(spec.input_schema).violation(only_valid.arguments) is None
