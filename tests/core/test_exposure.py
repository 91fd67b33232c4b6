"""Exposure: what is declared to the model, and who may call a tool (DESIGN's table).

Every cell of the table is checked on a real session (FauxModel + MemoryStore), in three
phases: right after registration, after ``set_active_tools`` named the tool, and after
``set_active_tools`` left it out.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine import Annotations, CallOutcome, Session, ToolResult, approve_all, fold, text, tool
from engine.core.tools import ToolSpec
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import ActiveToolsSet, ToolCallFailed

SAFE = Annotations(read_only=True, open_world=False)

EXPOSURES = ("direct", "model-only", "codemode", "deferred", "hidden")
PHASES = ("registered", "activated", "deactivated")
COLUMNS = ("active", "declared", "model_may_call", "nested_may_call")

# DESIGN's table, written out per phase. "registered": nothing but registration happened;
# "activated": set_active_tools named the tool (and the caller); "deactivated":
# set_active_tools named only the caller.
_ACTIVE = {
    ("direct", "registered"): True,
    ("direct", "activated"): True,
    ("direct", "deactivated"): False,
    ("model-only", "registered"): True,
    ("model-only", "activated"): True,
    ("model-only", "deactivated"): False,
    ("codemode", "registered"): False,
    ("codemode", "activated"): True,
    ("codemode", "deactivated"): False,
    ("deferred", "registered"): False,
    ("deferred", "activated"): True,
    ("deferred", "deactivated"): False,
    ("hidden", "registered"): False,
    ("hidden", "activated"): True,  # hidden tools wait for set_active_tools (the seed)
    ("hidden", "deactivated"): False,
}
_NESTED = {
    "direct": None,  # while active
    "model-only": False,  # never
    "codemode": True,  # always
    "deferred": True,
    "hidden": True,
}


def expected(exposure: str, phase: str, column: str) -> bool:
    active = _ACTIVE[(exposure, phase)]
    if column in ("active", "declared", "model_may_call"):
        return active
    nested = _NESTED[exposure]
    return active if nested is None else nested


class Harness:
    """A ``target`` tool with the exposure under test and a direct ``caller`` that calls it
    as a nested call. ``runs`` lists the names of the bodies that ran."""

    def __init__(self, exposure: str) -> None:
        self.runs: list[str] = []
        self.outcomes: list[CallOutcome] = []
        runs, outcomes = self.runs, self.outcomes

        @tool(name="target", annotations=SAFE, exposure=exposure)  # type: ignore[arg-type]
        async def target(call: Any, ctx: Any) -> ToolResult:
            """The tool under test."""
            runs.append("target")
            return ToolResult(content=[text("target ran")])

        @tool(name="caller", annotations=SAFE)
        async def caller(call: Any, ctx: Any) -> ToolResult:
            """Calls the target as a nested call."""
            runs.append("caller")
            outcomes.append(await ctx.execute_tool("target", {}))
            return ToolResult(content=[text("caller ran")])

        self.tools: list[ToolSpec] = [caller, target]


async def set_phase(session: Session, phase: str) -> None:
    if phase == "activated":
        await session.set_active_tools(["caller", "target"])
    elif phase == "deactivated":
        await session.set_active_tools(["caller"])


def assert_unavailable(session: Session, call_id: str) -> None:
    view = session.calls[call_id]
    assert view.status == "failed"
    assert isinstance(view.terminal, ToolCallFailed)
    assert view.terminal.kind == "unavailable"
    assert view.result is not None and view.result.is_error
    assert view.result.text == "Tool target is not available"
    assert not view.started


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("exposure", EXPOSURES)
async def test_exposure_table(exposure: str, phase: str, column: str) -> None:
    harness = Harness(exposure)
    want = expected(exposure, phase, column)
    if column == "declared":
        script: list[Any] = [faux_text("nothing to do")]
    elif column == "model_may_call":
        script = [faux_tool_call("target"), faux_text("done")]
    elif column == "nested_may_call":
        script = [faux_tool_call("caller"), faux_text("done")]
    else:
        script = []
    model = FauxModel(script)
    store = MemoryStore()
    async with Session.open(store, model=model, tools=harness.tools, approver=approve_all) as session:
        await set_phase(session, phase)
        # the caller stays active in every phase, so only the target's exposure matters
        assert "caller" in session.state.active_tools

        if column == "active":
            assert ("target" in session.state.active_tools) is want
        elif column == "declared":
            await session.prompt("hello")
            declared = [spec.name for spec in model.requests[0].tools]
            assert ("target" in declared) is want
            assert "caller" in declared
            assert [spec.name for spec in session.declared_tools()] == declared
        elif column == "model_may_call":
            await session.prompt("call the target")
            if want:
                assert session.calls["1.0"].status == "completed"
                assert harness.runs == ["target"]
            else:
                assert_unavailable(session, "1.0")
                assert harness.runs == []
            # the model is told, in the transcript, either way
            entry = session.transcript[2]
            assert entry.call_id == "1.0"  # type: ignore[union-attr]
            assert entry.result.is_error is (not want)  # type: ignore[union-attr]
        else:
            await session.prompt("call the caller")
            assert session.calls["1.0"].status == "completed"
            [outcome] = harness.outcomes
            assert outcome.call_id == "1.0/0"
            if want:
                assert not outcome.is_error
                assert session.calls["1.0/0"].status == "completed"
                assert harness.runs == ["caller", "target"]
            else:
                assert outcome.is_error
                assert outcome.result.text == "Tool target is not available"
                assert_unavailable(session, "1.0/0")
                assert harness.runs == ["caller"]
        model.assert_complete()
        assert session.state.open_calls == ()
    assert fold(await store.read(session.session_id)).snapshot() == session.state.snapshot()


async def test_a_hidden_tool_waits_for_set_active_tools() -> None:
    harness = Harness("hidden")
    model = FauxModel([faux_text("a"), faux_text("b")])
    async with Session.open(MemoryStore(), model=model, tools=harness.tools) as session:
        await session.prompt("first")
        await session.set_active_tools(["target", "caller"])
        await session.prompt("second")
    assert [[spec.name for spec in request.tools] for request in model.requests] == [
        ["caller"], ["caller", "target"]]


# -- set_active_tools ----------------------------------------------------------------------


def _simple(name: str, exposure: str = "direct") -> ToolSpec:
    async def execute(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text(name)])

    return ToolSpec(name=name, description=name, input_schema={"type": "object"},
                    execute=execute, annotations=SAFE, exposure=exposure)  # type: ignore[arg-type]


async def test_set_active_tools_replaces_the_active_set() -> None:
    tools = [_simple("a"), _simple("b"), _simple("c", "deferred")]
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        for spec in tools:
            await session.register(spec)
        assert session.state.active_tools == {"a", "b"}
        await session.set_active_tools(["c"])
        assert session.state.active_tools == {"c"}
        await session.set_active_tools(["a", "c"])
        assert session.state.active_tools == {"a", "c"}
        assert [s.name for s in session.declared_tools()] == ["a", "c"]
        await session.set_active_tools([])
        assert session.state.active_tools == frozenset()
        assert session.declared_tools() == ()


async def test_set_active_tools_is_an_event_in_the_log() -> None:
    store = MemoryStore()
    tools = [_simple("a"), _simple("b")]
    async with Session.open(store, model=FauxModel([]), tools=tools) as session:
        before = len(session.records)
        await session.set_active_tools(["b", "b"])
        records = session.records
        assert len(records) == before + 1
        assert records[-1].event == ActiveToolsSet(names=("b",))
        # it is written before set_active_tools returns, not only when the session closes
        stored = await store.read(session.session_id)
        assert stored[-1].event == ActiveToolsSet(names=("b",))
        assert fold(stored).active_tools == {"b"}


async def test_set_active_tools_activates_hidden_names_too() -> None:
    tools = [_simple("a"), _simple("h", "hidden"), _simple("d", "deferred")]
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=tools) as session:
        await session.set_active_tools(["h", "d", "a"])
        assert session.records[-1].event == ActiveToolsSet(names=("h", "d", "a"))
        assert session.state.active_tools == {"a", "d", "h"}
        await session.set_active_tools(["h"])
        assert session.state.active_tools == {"h"}


async def test_set_active_tools_rejects_unknown_names_and_records_nothing() -> None:
    store = MemoryStore()
    tools = [_simple("a"), _simple("d", "deferred")]
    async with Session.open(store, model=FauxModel([]), tools=tools) as session:
        before = session.records
        active = session.state.active_tools
        with pytest.raises(ValueError, match="'nope'") as info:
            await session.set_active_tools(["d", "nope"])
        message = str(info.value)
        assert "set_active_tools" in message and "registered" in message
        assert session.records == before
        assert session.state.active_tools == active
        assert await store.read(session.session_id) == list(before)


async def test_an_unknown_tool_is_not_available_to_the_model_or_a_nested_call() -> None:
    outcomes: list[CallOutcome] = []

    @tool(annotations=SAFE)
    async def caller(call: Any, ctx: Any) -> ToolResult:
        outcomes.append(await ctx.execute_tool("ghost", {}))
        return ToolResult(content=[text("caller ran")])

    model = FauxModel([[faux_tool_call("ghost"), faux_tool_call("caller")], faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[caller]) as session:
        await session.prompt("go")
        for call_id in ("1.0", "1.1/0"):
            view = session.calls[call_id]
            assert isinstance(view.terminal, ToolCallFailed)
            assert view.terminal.kind == "unavailable"
            assert view.result is not None and view.result.text == "Tool ghost is not available"
        assert outcomes[0].is_error
        assert session.calls["1.1"].status == "completed"
