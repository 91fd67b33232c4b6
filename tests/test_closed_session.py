"""A session that has closed never writes again.

When ``Session.open``'s block ends, the session lets go of its claim on the store: another
block (or process) may own the session from then on. So whatever the host still holds of the
closed session (the object, a task outside the block) must not write to its log:

- every change the host makes (``register``, ``set_system_prompt``, ``set_active_tools``,
  ``activate``, ``resolve_approval``, the handlers) is refused with a ``RuntimeError`` that
  says to open the session again, before anything is recorded, and the store's claim is free
  for the block that does;
- a host call running in a task outside the block is stopped with it, and what it recorded is
  written before the block has ended: also when its body ended just as the block did, and
  when its write waits for the store;
- a write another task has begun is finished before the block has ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from engine import LATER, Annotations, ApprovalRequest, Session, ToolResult, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import JsonlStore, MemoryStore
from events.stores import EventStore
from events.types import Record

SAFE = Annotations(read_only=True, open_world=False)
SID = "s"


@tool(annotations=SAFE)
async def listed(call: Any, ctx: Any) -> ToolResult:
    """A tool registered when the session opens."""
    return ToolResult(content=[text("listed")])


@tool(annotations=SAFE, exposure="deferred")
async def deferred(call: Any, ctx: Any) -> ToolResult:
    """A tool registered when the session opens, active only once activated."""
    return ToolResult(content=[text("deferred")])


@tool(annotations=SAFE)
async def added(call: Any, ctx: Any) -> ToolResult:
    """A tool registered later."""
    return ToolResult(content=[text("added")])


@tool()  # the policy asks about it
async def risky(call: Any, ctx: Any) -> ToolResult:
    """Needs approval."""
    return ToolResult(content=[text("risky")])


async def later(request: ApprovalRequest) -> Any:
    return LATER


def handler(*_: Any) -> None:
    return None


#: each change the host may make of a session, made as a host would
CHANGES: dict[str, Callable[[Session], Awaitable[object]]] = {
    "register": lambda session: session.register(added),
    "set_system_prompt": lambda session: session.set_system_prompt("be brief"),
    "set_active_tools": lambda session: session.set_active_tools(["listed", "deferred"]),
    "activate": lambda session: session.activate(["deferred"]),
    "resolve_approval": lambda session: session.resolve_approval("1.0", granted=True),
}


async def no_await(value: object) -> object:
    return value


#: the handlers record nothing, but a closed session would never run them
HANDLERS: dict[str, Callable[[Session], Awaitable[object]]] = {
    "on_tool_call": lambda session: no_await(session.on_tool_call(handler)),
    "on_tool_result": lambda session: no_await(session.on_tool_result(handler)),
}


def make_store(kind: str, tmp_path: Path) -> EventStore:
    return MemoryStore() if kind == "memory" else JsonlStore(tmp_path / "log.jsonl")


async def snapshot(store: EventStore, tmp_path: Path) -> tuple[list[Record], bytes]:
    """The session's log, record for record, and (for the JSONL store) byte for byte."""
    path = tmp_path / "log.jsonl"
    return await store.read(SID), path.read_bytes() if path.exists() else b""


async def paused_session(store: EventStore) -> Session:
    """A session, closed, whose last prompt paused with call 1.0 waiting for an approval."""
    async with Session.open(store, model=FauxModel([faux_tool_call("risky")]),
                            tools=[listed, deferred, risky], approver=later,
                            session_id=SID, create=True) as session:
        paused = await session.prompt("go")
        assert [request.call_id for request in paused.pending] == ["1.0"]
    return session


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
@pytest.mark.parametrize("change", [*CHANGES, *HANDLERS])
async def test_a_closed_session_refuses_every_change_and_writes_nothing(
    kind: str, change: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    closed = await paused_session(store)
    before = await snapshot(store, tmp_path)

    make = {**CHANGES, **HANDLERS}[change]
    with pytest.raises(RuntimeError, match=r"the session is closed: open it again with "
                                           r"Session\.open\(\)"):
        await make(closed)

    assert await snapshot(store, tmp_path) == before
    assert closed.records == tuple(before[0])  # nothing recorded either

    # the claim is free: the block that opens the session again owns it, and writes
    async with Session.open(store, model=FauxModel([faux_text("done")]),
                            tools=[listed, deferred, risky], approver=later,
                            session_id=SID) as session:
        await make(session)
        if change in CHANGES:
            assert len(session.records) > len(before[0])
        await session.set_system_prompt("written by the new owner")
    records = await store.read(SID)
    assert records[:len(before[0])] == before[0]
    assert records[-1].event.text == "written by the new owner"  # type: ignore[union-attr]
    check_log(records)
