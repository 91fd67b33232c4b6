"""Generated programs over faux tools (sequential, parallel, failing, denied), answered at once
or paused for their approvals and resumed: the log folds to what ran, each call ran once, the
program saw what the tools answered, and a replay runs the program again to the same calls."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from engine import LATER, ApprovalRequest, Session, fold
from engine.codemode import CODE_TOOL, code_tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import ProgramSuspended
from tests.strategies import PROPERTY

from codemode_tools import CODEMODE, RAN

pytest.importorskip("pydantic_monty")

#: one call: (tool, argument); what the program gets back, by the tool's rule
calls = st.one_of(
    st.tuples(st.just("double"), st.integers(-5, 5)),
    st.tuples(st.just("shout"), st.sampled_from(["a", "b", "hi"])),
    st.tuples(st.just("boom"), st.none()),
    st.tuples(st.just("wipe"), st.sampled_from(["ok1", "ok2", "no1", "no2"])),
)
#: a statement: one call, or several gathered
statements = st.one_of(calls.map(lambda c: ("call", [c])),
                       st.lists(calls, min_size=1, max_size=4).map(lambda cs: ("gather", cs)))


def expected(call: tuple[str, Any]) -> Any:
    name, arg = call
    if name == "double":
        return 2 * arg
    if name == "shout":
        return arg.upper()
    if name == "boom":
        return "failed"
    return f"wiped {arg}" if arg.startswith("ok") else "denied"


def call_text(call: tuple[str, Any], suffix: str = "") -> str:
    name, arg = call
    argument = {"double": f"n={arg!r}", "shout": f"word={arg!r}", "boom": "",
                "wipe": f"path={arg!r}"}[name]
    read = "['double']" if name == "double" else ""
    return f"{name}{suffix}({argument})", read


def program(steps: list[tuple[str, list[tuple[str, Any]]]]) -> str:
    lines = ["import asyncio", "",
             "async def safe(call, read):",
             "    try:",
             "        value = await call",
             "    except PermissionError:",
             "        return 'denied'",
             "    except RuntimeError:",
             "        return 'failed'",
             "    return value['double'] if read else value",
             "", "out = []"]
    for kind, group in steps:
        if kind == "call":
            text, read = call_text(group[0])
            lines += ["try:", f"    out.append({text}{read})",
                      "except PermissionError:", "    out.append('denied')",
                      "except RuntimeError:", "    out.append('failed')"]
        else:
            parts = []
            for call in group:
                text, read = call_text(call, "_async")
                parts.append(f"safe({text}, {bool(read)})")
            lines.append(f"out.extend(await asyncio.gather({', '.join(parts)}))")
    lines.append("out")
    return "\n".join(lines)


async def approver(request: ApprovalRequest) -> bool:
    return str(request.arguments.get("path", "")).startswith("ok")


@PROPERTY
@given(steps=st.lists(statements, min_size=0, max_size=5))
def test_a_generated_program_runs_each_call_once_and_the_log_folds_to_it(
        steps: list[tuple[str, list[tuple[str, Any]]]]) -> None:
    flat = [call for _, group in steps for call in group]
    code = program(steps)

    async def main() -> None:
        RAN.clear()
        store = MemoryStore()
        model = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
        async with Session.open(store, model=model, tools=[*CODEMODE, code_tool()],
                                approver=approver) as session:
            await session.activate([t.name for t in CODEMODE])
            await session.prompt("go")
        records = await store.read(session.session_id)
        check_log(records, state=session.state, transcript=session.transcript, closed=True)
        state = fold(records)
        assert state.snapshot() == session.state.snapshot()
        top = next(v for v in state.calls.values() if v.name == CODE_TOOL)
        assert top.result is not None and not top.result.is_error, top.result
        # the program saw what each tool answered, in source order
        assert top.result.structured_content["result"] == [expected(c) for c in flat]
        # the log holds one nested call per call, in source order, ended as it ran
        children = [state.calls[c] for c in state.children(top.call_id)]
        assert [(v.name, v.arguments) for v in children] == [
            (name, {} if arg is None else {{"double": "n", "shout": "word",
                                           "wipe": "path"}[name]: arg})
            for name, arg in flat]
        ends = {"denied": "denied", "failed": "failed"}
        assert [v.status for v in children] == [ends.get(expected(c), "completed") for c in flat]
        # each body that was allowed ran exactly once; none that was denied ran
        ran = sum(RAN.values())
        assert ran == sum(1 for c in flat if expected(c) != "denied")
        # re-driven, the program runs again against the recorded calls, and does the same
        report = await redrive(records, tools=[*CODEMODE, code_tool()])
        assert report.ok, [d.describe() for d in report.divergences]
        assert sum(RAN.values()) == ran  # no tool body ran in the replay

    trio.run(main)


@PROPERTY
@given(steps=st.lists(statements, min_size=1, max_size=4), reopen=st.booleans())
def test_a_generated_program_that_pauses_for_its_approvals_goes_on_to_the_same_end(
        steps: list[tuple[str, list[tuple[str, Any]]]], reopen: bool) -> None:
    """Every approval answered later, at a pause, by the host (in the same session, or in one
    opened again on the store): the program stops with its state recorded at each pause and
    goes on from it, to what it does when answered at once."""
    flat = [call for _, group in steps for call in group]
    code = program(steps)

    async def later(request: ApprovalRequest) -> Any:
        return LATER

    async def main() -> None:
        RAN.clear()
        store = MemoryStore()
        model = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
        tools = [*CODEMODE, code_tool()]
        async with Session.open(store, model=model, tools=tools, approver=later) as session:
            sid = session.session_id
            await session.activate([t.name for t in CODEMODE])
            result = await session.prompt("go")
            while result.stop == "paused" and not reopen:
                for request in result.pending:
                    await session.resolve_approval(request.call_id, await approver(request))
                result = await session.resume()
        while result.stop == "paused":
            async with Session.open(store, model=model, tools=tools, approver=later,
                                    session_id=sid) as session:
                for request in session.pending_approvals():
                    await session.resolve_approval(request.call_id, await approver(request))
                result = await session.resume()
        assert result.stop == "end_turn"
        records = await store.read(sid)
        check_log(records, state=session.state, transcript=session.transcript, closed=True)
        state = fold(records)
        top = next(v for v in state.calls.values() if v.name == CODE_TOOL)
        assert top.result is not None and not top.result.is_error, top.result
        assert top.result.structured_content["result"] == [expected(c) for c in flat]
        suspended = [r.event for r in records if isinstance(r.event, ProgramSuspended)]
        assert len(suspended) >= (1 if any(name == "wipe" for name, _ in flat) else 0)
        assert sum(RAN.values()) == sum(1 for c in flat if expected(c) != "denied")
        ran = sum(RAN.values())
        report = await redrive(records, tools=tools)
        assert report.ok, [d.describe() for d in report.divergences]
        assert sum(RAN.values()) == ran

    trio.run(main)
