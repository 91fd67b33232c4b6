"""Hypothesis strategies for tools: annotations, names, JSON Schemas, specs, and model calls.

Build a tool catalogue your session has never seen, and calls to it::

    @given(tool_sets(), st.data())
    def test_every_spec_registers(specs, data):
        calls = data.draw(st.lists(tool_calls(specs), max_size=3))
        ...

The schemas stay within what :mod:`engine.core.schemas.checking` accepts (the root is an object; no keyword
the validator would ignore), so every drawn spec registers; :func:`valid_arguments` and
:func:`invalid_arguments` (re-exported from :mod:`engine.testing.arguments`) understand every
schema :func:`input_schemas` draws.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from events.results import ToolResult, text
from events.types import Annotations

from ..core.toolcontext import ToolContext
from ..core.tools import EXPOSURES, Execute, ToolCall, ToolSpec
from ..models import TRUNCATED_STOP_REASONS, FauxToolCall, truncated
from .arguments import invalid_arguments, json_values, valid_arguments, weighted

__all__ = [
    "ANNOTATION_HINTS",
    "DRAFT_07",
    "TERMINAL_SEQUENCES",
    "input_schemas",
    "invalid_arguments",
    "nested_plans",
    "json_values",
    "output_schemas",
    "property_schemas",
    "reopened_rules",
    "schedules",
    "terminal_text",
    "stop_reasons",
    "tool_annotations",
    "tool_calls",
    "tool_names",
    "tool_sets",
    "tool_specs",
    "valid_arguments",
    "weighted",
]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

_HINTS = (None, True, False)

#: The 27 combinations of the three hints the approval policy reads (``read_only``,
#: ``destructive``, ``open_world``, each unset, true or false): parametrize over it to test a
#: policy exhaustively.
ANNOTATION_HINTS: tuple[Annotations, ...] = tuple(
    Annotations(read_only=r, destructive=d, open_world=o)
    for r, d, o in itertools.product(_HINTS, _HINTS, _HINTS)
)


def tool_annotations(
    *, titles: bool = True, idempotent: bool = True
) -> st.SearchStrategy[Annotations]:
    """MCP annotations: any of the 27 combinations of ``read_only``, ``destructive`` and
    ``open_world`` (each ``None``, true or false), with a ``title`` (text or ``None``) and an
    ``idempotent`` hint unless ``titles`` / ``idempotent`` is false. Example::

        @given(tool_annotations())
        def test_policy_never_allows_an_undeclared_destructive_tool(notes): ...
    """
    hints = st.sampled_from(_HINTS)
    return st.builds(
        Annotations,
        title=st.one_of(st.none(), st.text(max_size=12)) if titles else st.none(),
        read_only=hints,
        destructive=hints,
        idempotent=hints if idempotent else st.none(),
        open_world=hints,
    )


def tool_names(max_size: int = 24) -> st.SearchStrategy[str]:
    """Valid tool names (MCP: 1 to 128 characters of ``A-Z a-z 0-9 _ . -``)."""
    if not 1 <= max_size <= 128:
        raise ValueError("tool names have 1 to 128 characters")
    alphabet = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    return st.text(alphabet, min_size=1, max_size=max_size)


_NAMES = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_"), min_size=1, max_size=8)

#: Whole sequences a terminal obeys: set the clipboard, the window title, a hidden link, clear
#: the screen, erase the line just printed and go back to its start, hide what follows; the
#: 8-bit (C1) forms of CSI and OSC; a right-to-left override and isolates; zero-width, BOM and
#: tag characters; a lone surrogate as ``os.fsdecode`` makes of a non-UTF-8 byte.
TERMINAL_SEQUENCES = (
    "\x1b]52;c;cHduZWQ=\x07", "\x1b]0;title\x1b\\", "\x1b]8;;https://x.example\x1b\\",
    "\x1b[2J", "\x1b[2K\x1b[1G", "\x1b[8m", "\x9b2J", "\x9d0;t\x9c", "\u202e", "\u2066",
    "\u2069", "\u200b", "\ufeff", "\U000e0041", "\udcff", "\r", "\n", "\t", "\x7f",
)


def terminal_text(*, min_size: int = 0, max_size: int = 24) -> st.SearchStrategy[str]:
    """Text that tries to drive the terminal it is printed on: whole escape sequences, any
    control, format or surrogate character, mixed with ordinary letters (any script).

    Feed it to whatever a command prints (tool output, arguments, ids, messages, file names)
    and check that no character of :data:`engine.core.visible.HIDDEN` reaches the output.
    """
    piece = st.one_of(
        st.sampled_from(TERMINAL_SEQUENCES),
        st.characters(categories=["Cc", "Cf", "Cs", "Zl", "Zp"]),
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
        st.text(st.sampled_from("abc verified BROKEN [red]:/"), min_size=1, max_size=8),
    )
    return st.lists(piece, min_size=min_size, max_size=max_size).map("".join)


def _string_schemas() -> st.SearchStrategy[dict[str, Any]]:
    def build(low: int | None, extra: int | None, enum: list[str] | None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if enum is not None:
            schema["enum"] = enum
            return schema
        if low is not None:
            schema["minLength"] = low
        if extra is not None:
            schema["maxLength"] = (low or 0) + extra
        return schema

    return st.builds(build, st.one_of(st.none(), st.integers(0, 3)),
                     st.one_of(st.none(), st.integers(0, 6)),
                     st.one_of(st.none(), st.none(),
                               st.lists(st.text(max_size=4), min_size=1, max_size=3, unique=True)))


def _number_schemas(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    def build(low: int | None, width: int | None, exclusive: bool) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": kind}
        if low is not None:
            schema["exclusiveMinimum" if exclusive else "minimum"] = low
        if width is not None:
            high = (low if low is not None else 0) + width + (2 if exclusive else 0)
            schema["exclusiveMaximum" if exclusive else "maximum"] = high
        return schema

    return st.builds(build, st.one_of(st.none(), st.integers(-10, 10)),
                     st.one_of(st.none(), st.integers(0, 20)), st.booleans())


_LEAVES: st.SearchStrategy[dict[str, Any]] = st.one_of(
    _string_schemas(),
    _number_schemas("integer"),
    _number_schemas("number"),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.sampled_from([{"type": ["string", "null"]}, {"type": ["integer", "null"]},
                     {"type": ["integer", "string"]}]),
    st.builds(lambda value: {"const": value}, st.one_of(st.integers(-3, 3), st.text(max_size=3))),
)


def property_schemas(max_depth: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of one property: strings (lengths, enums), integers and numbers (bounds,
    exclusive bounds), booleans, null, type lists, ``const``, and, ``max_depth`` levels deep,
    arrays (``items``, ``minItems``/``maxItems``) and objects."""
    if max_depth <= 0:
        return _LEAVES
    inner = property_schemas(max_depth - 1)

    def array(items: dict[str, Any], low: int | None, extra: int | None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": items}
        if low is not None:
            schema["minItems"] = low
        if extra is not None:
            schema["maxItems"] = (low or 0) + extra
        return schema

    arrays = st.builds(array, inner, st.one_of(st.none(), st.integers(0, 2)),
                       st.one_of(st.none(), st.integers(0, 3)))
    return st.one_of(_LEAVES, _LEAVES, arrays, _objects(inner, max_properties=3))


def _objects(properties: st.SearchStrategy[dict[str, Any]], *, max_properties: int,
             root: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(_NAMES, properties, max_size=max_properties))
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if props:
            required = draw(st.lists(st.sampled_from(sorted(props)), unique=True,
                                     max_size=len(props)))
            if required:
                schema["required"] = required
        closed = draw(st.sampled_from([None, None, False, True]))
        if closed is not None:
            schema["additionalProperties"] = not closed
        if root:
            if draw(st.booleans()):
                schema["description"] = draw(st.text(max_size=10))
            if draw(st.integers(0, 3)) == 0:
                schema = {"$schema": DRAFT_07, **schema}
        return schema

    return build()


def input_schemas(
    max_depth: int = 2, max_properties: int = 4
) -> st.SearchStrategy[dict[str, Any]]:
    """Tool input schemas the engine accepts: ``{"type": "object", "properties": ...}`` with
    ``required`` and ``additionalProperties`` sometimes, properties from
    :func:`property_schemas`, in the default dialect (2020-12) or draft-07."""
    return _objects(property_schemas(max_depth - 1), max_properties=max_properties, root=True)


def output_schemas(
    max_depth: int = 2, max_properties: int = 3
) -> st.SearchStrategy[dict[str, Any]]:
    """Output schemas the engine accepts (object schemas, like :func:`input_schemas`)."""
    return input_schemas(max_depth, max_properties)


def _returning(name: str, structured: Any) -> Execute:
    async def execute(call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=[text(f"{name} ran")], structured_content=structured)

    execute.__name__ = execute.__qualname__ = name.replace(".", "_").replace("-", "_")
    return execute


@st.composite
def tool_specs(
    draw: st.DrawFn,
    *,
    names: st.SearchStrategy[str] | None = None,
    annotations: st.SearchStrategy[Annotations] | None = None,
    input_schemas: st.SearchStrategy[dict[str, Any]] | None = None,
    output_schemas: st.SearchStrategy[dict[str, Any] | None] | None = None,
    exposures: st.SearchStrategy[Any] | None = None,
    execution_modes: st.SearchStrategy[Any] | None = None,
    timeouts: st.SearchStrategy[float | None] | None = None,
    execute: Execute | None = None,
) -> ToolSpec:
    """Tool specs with drawn declarations. Each keyword replaces the strategy for that part
    (default: every name, annotation, schema, exposure, mode and an occasional timeout).

    The body (unless ``execute`` is given) returns a text block and, when the spec declares an
    output schema, structured content that satisfies it, drawn with the spec. Count its runs
    with :func:`engine.testing.counted`. Example::

        @given(tool_specs(exposures=st.just("direct")))
        def test_registration_records_the_snapshot(spec): ...
    """
    from . import strategies as this  # the module's functions, which keywords shadow here

    name = draw(names if names is not None else this.tool_names())
    notes = draw(annotations if annotations is not None else this.tool_annotations())
    schema = draw(input_schemas if input_schemas is not None else this.input_schemas())
    output = draw(output_schemas if output_schemas is not None
                  else st.one_of(st.none(), this.output_schemas()))
    structured = draw(valid_arguments(output)) if output is not None else None
    body = execute if execute is not None else _returning(name, structured)
    return ToolSpec(
        name=name,
        description=f"the {name} tool",
        input_schema=schema,
        output_schema=output,
        annotations=notes,
        exposure=draw(exposures if exposures is not None else st.sampled_from(EXPOSURES)),
        execution_mode=draw(execution_modes if execution_modes is not None
                            else st.sampled_from(["parallel", "parallel", "sequential"])),
        timeout=draw(timeouts if timeouts is not None
                     else st.one_of(st.none(), st.none(), st.just(30.0))),
        execute=body,
    )


def tool_sets(
    min_size: int = 1, max_size: int = 4, **spec_options: Any
) -> st.SearchStrategy[list[ToolSpec]]:
    """Lists of :func:`tool_specs` with distinct names (a session's tools must have them);
    ``spec_options`` go to :func:`tool_specs`."""
    return st.lists(tool_specs(**spec_options), min_size=min_size, max_size=max_size,
                    unique_by=lambda spec: spec.name)


def tool_calls(
    tools: Sequence[ToolSpec],
    *,
    unknown: str | None = "no_such_tool",
    invalid: bool = True,
) -> st.SearchStrategy[FauxToolCall]:
    """Model calls (``faux_tool_call`` blocks for a :class:`~engine.models.FauxModel`) to
    ``tools``: mostly with valid arguments for the tool's input schema, sometimes with invalid
    ones (unless ``invalid`` is false), sometimes to the tool named ``unknown`` (``None``:
    never). A list of them is a parallel batch. Example::

        script = [data.draw(st.lists(tool_calls(specs), min_size=1, max_size=3)),
                  faux_text("done")]
    """
    options: list[st.SearchStrategy[FauxToolCall]] = []
    for spec in tools:
        arguments: st.SearchStrategy[Any] = valid_arguments(spec.input_schema)
        if invalid:
            arguments = weighted((3, arguments), (1, invalid_arguments(spec.input_schema)))
        options.append(arguments.map(_calling(spec.name)))
    if unknown is not None:
        options.append(json_values(max_leaves=2).map(_calling(unknown)))
    if not options:
        raise ValueError("tool_calls needs at least one tool (or an unknown name)")
    return weighted(*((1, option) for option in options))


def nesting_calls(
    calls: st.SearchStrategy[FauxToolCall], nest: str, depth: int
) -> st.SearchStrategy[FauxToolCall]:
    """``calls``, and calls of the nesting tool ``nest`` (:func:`~engine.testing.nest_tool`)
    whose plan is a list of such calls, up to ``depth`` levels deep."""
    levels = calls
    for _ in range(depth):
        plans = st.lists(levels.map(lambda c: {"name": c.name, "arguments": c.arguments}),
                         max_size=3)
        levels = weighted((3, calls),
                          (1, plans.map(lambda p: FauxToolCall(name=nest, arguments={"plan": p}))))
    return levels


def _calling(name: str) -> Callable[[Any], FauxToolCall]:
    return lambda arguments: FauxToolCall(name=name, arguments=arguments)


def nested_plans(
    tools: Sequence[str], *, max_calls: int = 5, values: int = 3
) -> st.SearchStrategy[list[tuple[str, dict[str, Any]]]]:
    """The nested calls one body makes, as ``(tool, arguments)`` pairs, for a body that makes
    them concurrently. Arguments come from a few small values, so identical calls (which the
    log must answer in order) and calls of one tool with other arguments (which it must never
    confuse) are both common."""
    if not tools:
        raise ValueError("nested_plans needs at least one tool name")
    call = st.tuples(st.sampled_from(list(tools)),
                     st.fixed_dictionaries({"n": st.integers(0, values - 1)}))
    return st.lists(call, min_size=1, max_size=max_calls)


def schedules(tasks: int, *, max_checkpoints: int = 4) -> st.SearchStrategy[list[int]]:
    """A scheduling order for ``tasks`` concurrent tasks: how many checkpoints each passes
    before it acts. Drawn (not left to trio's own randomness), so Hypothesis varies it, shrinks
    it and replays a failure exactly."""
    return st.lists(st.integers(0, max_checkpoints), min_size=tasks, max_size=tasks)


def reopened_rules(tools: Sequence[str]) -> st.SearchStrategy[tuple[str, ...]]:
    """Deny rules a session may be reopened with: exact names, ``fnmatch`` patterns that match
    some of ``tools`` (a common prefix and ``*``), and patterns that match none."""
    names = list(tools)
    patterns = st.sampled_from(names) | st.sampled_from(names).flatmap(
        lambda name: st.integers(0, len(name)).map(lambda cut: name[:cut] + "*")
    ) | st.just("no_such_tool_*")
    return st.lists(patterns, max_size=3, unique=True).map(tuple)
#: Stop reasons of messages that ended normally, as providers spell them.
FINISHED_STOP_REASONS = ("stop", "end_turn", "tool_use", "tool_calls", "stop_sequence",
                         "completed", "pause_turn", "refusal", "content_filter", "STOP")


def stop_reasons(cut_off: bool | None = None) -> st.SearchStrategy[str]:
    """Stop reasons as a model adapter may pass them on: every provider's name for "cut off at
    the token limit" (in any case, with stray whitespace) when ``cut_off`` is true; normal
    ends and arbitrary words when false; either when ``None``. Pair it with
    :func:`engine.models.truncated`: a cut-off message's calls must fail unrun."""
    cut = st.tuples(st.sampled_from(sorted(TRUNCATED_STOP_REASONS)),
                    st.sampled_from([str.lower, str.upper, str.title]),
                    st.sampled_from(["", " ", "\n"])).map(lambda t: t[1](t[0]) + t[2])
    finished = st.one_of(st.sampled_from(FINISHED_STOP_REASONS),
                         st.text(max_size=12).filter(lambda r: not truncated(r)))
    if cut_off is None:
        return st.one_of(cut, finished)
    return cut if cut_off else finished
