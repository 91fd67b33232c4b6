"""What a session keeps alive, and how it lets it go.

A long session keeps its records (its history, its transcript, its call tree), and CPython's
cyclic collector walks every object the process keeps on each full pass: the fewer objects a
turn leaves behind, the less a long session pays per turn (docs/performance.md). And a session
that has closed is freed by reference counting, without waiting for the collector.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore
from events.types import Record

SAFE = Annotations(read_only=True, open_world=False)


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def ping(call: Any, ctx: Any) -> ToolResult:
    """Answers pong, after a nested call to itself when asked."""
    if call.arguments.get("again"):
        await ctx.execute_tool("ping", {})
    return ToolResult(content=[text("pong")])


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def test_a_long_session_keeps_no_envelope_per_record(tmp_path: Path) -> None:
    """What a session keeps alive is what CPython's collector walks on each full pass: the
    envelopes of the records it made are not kept, whatever the session's length."""

    async def alive_after(calls: int) -> int:
        model = FauxModel([*(faux_tool_call("ping", {}) for _ in range(calls)), faux_text("ok")])
        async with Session.open(JsonlStore(tmp_path / f"{calls}.jsonl"), model=model,
                                tools=[ping], approver=approve_all) as session:
            await session.prompt("go")
            assert len(session.records) > 6 * calls
            gc.collect()
            return sum(type(obj) is Record for obj in gc.get_objects())

    short, long = await alive_after(2), await alive_after(40)
    assert long - short < 40 - 2  # not one a call, let alone one a record


async def test_a_model_s_requests_keep_no_object_of_their_own_for_deltas(
        tmp_path: Path) -> None:
    model = FauxModel([faux_tool_call("ping", {}), faux_tool_call("ping", {}), faux_text("ok")])
    async with Session.open(JsonlStore(tmp_path / "log.jsonl"), model=model, tools=[ping],
                            approver=approve_all) as session:
        await session.prompt("go")
    first = model.requests[0].on_delta
    assert all(request.on_delta is first for request in model.requests)


async def test_a_closed_session_and_its_deltas_are_freed_without_the_cyclic_collector(
        tmp_path: Path, no_collector: None) -> None:
    model = FauxModel([faux_tool_call("ping", {"again": True}), faux_text("ok")])
    async with Session.open(JsonlStore(tmp_path / "log.jsonl"), model=model, tools=[ping],
                            approver=approve_all) as session:
        await session.prompt("go")
        held = weakref.ref(session)
        deltas = weakref.ref(model.requests[0].on_delta)
    del session, model
    assert held() is None
    assert deltas() is None
