"""Replay runs a recorded program again: its calls answered from the log (or by the live
tools when asked), and a program that now calls something else is a divergence naming the
call."""

from __future__ import annotations

import pytest

from engine import Block, Session, ToolCallDraft
from engine.codemode import CODE_TOOL, code_tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from events import MemoryStore

from codemode_tools import CODEMODE, RAN

pytest.importorskip("pydantic_monty")

PROGRAM = """\
import asyncio
try:
    first = shout(word="x")
except PermissionError:
    first = double(n=99)["double"]
pair = await asyncio.gather(double_async(n=1), double_async(n=2))
[first, [p["double"] for p in pair]]
"""


async def recorded() -> list[object]:
    store = MemoryStore()
    model = FauxModel([faux_tool_call(CODE_TOOL, {"code": PROGRAM}), faux_text("done")])
    async with Session.open(store, model=model, tools=[*CODEMODE, code_tool()]) as session:
        await session.activate(["double", "shout"])
        await session.prompt("go")
    return list(await store.read(session.session_id))


async def test_a_recorded_program_replays_against_its_recorded_calls() -> None:
    records = await recorded()
    RAN.clear()
    report = await redrive(records, tools=[*CODEMODE, code_tool()])
    assert report.ok, [d.describe() for d in report.divergences]
    assert sum(RAN.values()) == 0  # the program ran again; no tool did


async def test_a_live_replay_runs_the_program_and_its_tools() -> None:
    records = await recorded()
    RAN.clear()
    report = await redrive(records, tools=[*CODEMODE, code_tool()], tool_mode="live",
                           unverified=True)
    assert report.ok, [d.describe() for d in report.divergences]
    assert RAN == {"shout x": 1, "double 1": 1, "double 2": 1}


async def test_a_program_that_now_calls_something_else_diverges_at_that_call() -> None:
    records = await recorded()

    def no_shouting(draft: ToolCallDraft) -> Block | None:
        return Block("no shouting") if draft.name == "shout" else None

    report = await redrive(records, tools=[*CODEMODE, code_tool()], handlers=[no_shouting])
    assert not report.ok
    said = [d.describe() for d in report.divergences]
    # the program took its except branch: its second call is now double(n=99)
    assert any(line.startswith("call 1.0/1 (double)") and "arguments.n was 1, now 99" in line
               for line in said), said
    assert any(line.startswith("call 1.0/0 (shout)") for line in said), said
