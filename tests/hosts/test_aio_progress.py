"""Progress under an asyncio host (engine.hosts.aio): the session's handler, a host call's
listener and ``follow()`` see every update, nested calls' included, in the log's order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio

from engine import Annotations, ToolResult, approve_all, text, tool
from engine.hosts.aio import Session
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import ToolProgress

SAFE = Annotations(read_only=True, open_world=False)


@tool(annotations=SAFE)
async def run_checks(call: Any, ctx: Any) -> ToolResult:
    """Three checks."""
    for n in range(3):
        ctx.report_progress(f"check {n}")
        await trio.lowlevel.checkpoint()
    return ToolResult(content=[text("checks ok")])


@tool(annotations=SAFE)
async def review_diff(call: Any, ctx: Any) -> ToolResult:
    """Run the checks, forwarding their progress."""
    await ctx.execute_tool("run_checks", {}, on_progress=ctx.forward_progress)
    return ToolResult(content=[text("reviewed")])


def seen(update: ToolProgress) -> tuple[str, str | None, str | None]:
    return (update.call_id, update.message, update.source)


def expected(call: str) -> list[tuple[str, str | None, str | None]]:
    """What a session records for a ``review_diff`` call: each check's update, then the
    parent's forwarded copy of it."""
    return [update for n in range(3) for update in (
        (f"{call}/0", f"check {n}", None), (call, f"check {n}", f"{call}/0"))]


def test_an_asyncio_host_hears_every_update_live_in_the_logs_order() -> None:
    async def main() -> None:
        heard: asyncio.Queue[ToolProgress] = asyncio.Queue()
        followed: list[Any] = []
        model = FauxModel([faux_tool_call("review_diff", {}), faux_text("done")])
        async with Session.open(MemoryStore(), model=model, tools=[review_diff, run_checks],
                                approver=approve_all) as session:
            # called in trio, on the loop's own thread: it may touch asyncio objects
            session.on_progress(heard.put_nowait)

            async def follow() -> None:
                async for record in session.follow():
                    if isinstance(record.event, ToolProgress):
                        followed.append(seen(record.event))

            follower = asyncio.create_task(follow())
            await session.prompt("review")
            host_call: list[Any] = []
            outcome = await session.call_tool("review_diff", {},
                                              on_progress=host_call.append)
            assert not outcome.is_error
        await follower
        updates = [seen(heard.get_nowait()) for _ in range(heard.qsize())]
        assert updates == expected("1.0") + expected("h0")
        assert followed == updates
        # the host call's listener hears its own updates: the forwarded ones
        assert [seen(u) for u in host_call] == [u for u in expected("h0") if u[0] == "h0"]

    asyncio.run(main())


def test_an_asyncio_host_calls_listener_that_raises_is_raised_after_the_call() -> None:
    async def main() -> None:
        def broken(update: ToolProgress) -> None:
            raise LookupError("the host's bug")

        async with Session.open(MemoryStore(), tools=[run_checks],
                                approver=approve_all) as session:
            with pytest.raises(LookupError, match="the host's bug"):
                await session.call_tool("run_checks", {}, on_progress=broken)
            assert session.calls["h0"].status == "completed"
            assert session.calls["h0"].progress_count == 3

    asyncio.run(main())
