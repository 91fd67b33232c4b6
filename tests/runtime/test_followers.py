"""Following a session live: a follower gets every record in order and ends with the session.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from engine import (
    Session,
    ToolResult,
    text,
    tool,
)
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import (
    Record,
)
from tests.runtime.batching import DEADLOCK, SAFE


# -- followers ---------------------------------------------------------------------------------


async def test_a_follower_gets_every_record_in_order_and_ends_with_the_session(
    autojump_clock: Any,
) -> None:
    @tool(annotations=SAFE)
    async def work(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("half")
        return ToolResult(content=[text("done")])

    got: list[Record] = []
    follower_ended = trio.Event()

    async def follow(session: Session) -> None:
        async for record in session.follow():
            got.append(record)
        follower_ended.set()

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("work"), faux_tool_call("work")], faux_text("ok")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(store, model=model, tools=[work]) as session:
                nursery.start_soon(follow, session)
                await session.prompt("go")
                await trio.testing.wait_all_tasks_blocked()
                assert not follower_ended.is_set()  # still following an open session
            # leaving the session's block ends the follower; the nursery then exits
    assert follower_ended.is_set()
    stored = await store.read(session.session_id)
    assert got == stored
    assert [r.seq for r in got] == list(range(1, len(got) + 1))


async def test_a_slow_follower_misses_nothing_and_slows_nobody(autojump_clock: Any) -> None:
    @tool(annotations=SAFE)
    async def work(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("done")])

    got: list[Record] = []
    read_first = trio.Event()
    release = trio.Event()

    async def slow_follower(session: Session) -> None:
        async for record in session.follow():
            got.append(record)
            read_first.set()
            await release.wait()  # blocks until the session has finished its prompt
            await trio.lowlevel.checkpoint()

    store = MemoryStore()
    model = FauxModel([faux_tool_call("work"), [faux_tool_call("work")] * 2, faux_text("ok")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(store, model=model, tools=[work]) as session:
                nursery.start_soon(slow_follower, session)
                await read_first.wait()
                result = await session.prompt("go")
                # the prompt ran to its end while the follower sat on its first record
                assert result.stop == "end_turn"
                assert len(got) == 1
                total = len(session.records)
                assert total > 10
                release.set()
    stored = await store.read(session.session_id)
    assert len(stored) == total
    assert got == stored


async def test_a_follower_can_start_after_records(autojump_clock: Any) -> None:
    got: list[Record] = []

    async def follow(session: Session, after: int) -> None:
        async for record in session.follow(after):
            got.append(record)

    model = FauxModel([faux_text("one"), faux_text("two")])
    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as nursery:
            async with Session.open(MemoryStore(), model=model) as session:
                await session.prompt("first")
                after = len(session.records)
                nursery.start_soon(follow, session, after)
                await session.prompt("second")
    assert [r.seq for r in got] == list(range(after + 1, len(session.records) + 1))
    assert got == list(session.records[after:])
