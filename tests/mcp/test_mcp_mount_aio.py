"""Mounting an MCP server from asyncio: ``async with mount(aio_session, ...)`` with an
``engine.hosts.aio.Session``, the mount running in the session's trio run on the host's loop.

The tests are plain functions that call asyncio.run, as in tests/hosts/test_aio.py. What is
checked is what a trio host gets: the server's tools registered and governed, each call
logged, the mount's bounds (the call timeout, the listing's limits) in force, cancellation
from the asyncio side ending the mount, and the host's own exception coming out as itself.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from engine import approve_all
from engine.hosts.aio import Session
from engine.mcp import ListingError, ListingLimits, mount
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import ToolCallCompleted, ToolCallFailed

from mcp import StdioServerParameters
from mcp_servers import calculator, pager, silent

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers.py"


def stdio_calculator() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVERS)])


def in_session(main: Callable[[Session], Awaitable[Any]], model: FauxModel | None = None) -> Any:
    """``main(session)`` under asyncio.run, in a new asyncio-hosted session."""
    async def run() -> Any:
        async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
            return await main(session)

    return asyncio.run(run())


def test_a_server_over_stdio_is_mounted_from_asyncio_and_its_calls_are_logged() -> None:
    model = FauxModel([[faux_tool_call("calc.add", {"a": 2, "b": 3}),
                        faux_tool_call("calc.hang", {})], faux_text("done")])

    async def main(session: Session) -> Any:
        async with mount(session, stdio_calculator(), prefix="calc.", trust_hints=True,
                         timeout=0.5) as mounted:
            assert (mounted.server, mounted.version) == ("calculator", "1.2.0")
            assert mounted.tools["add"] == "calc.add"
            result = await session.prompt("go")
        assert mounted.closed
        return result, {r.event.call_id: r.event for r in session.records
                        if isinstance(r.event, (ToolCallCompleted, ToolCallFailed))}

    result, ends = in_session(main, model)
    assert result.text == "done"
    assert isinstance(ends["1.0"], ToolCallCompleted)
    assert ends["1.0"].result.structured_content == {"total": 5}
    # the call's own bound holds on the host's loop as under trio
    assert isinstance(ends["1.1"], ToolCallFailed) and ends["1.1"].kind == "timeout"


def test_a_server_that_never_lists_its_tools_stops_the_mount_from_asyncio_in_time() -> None:
    async def main(session: Session) -> Any:
        with pytest.raises(ListingError, match=r"'silent' did not list its tools within 0.2"):
            async with mount(session, silent(), listing=ListingLimits(timeout=0.2)):
                raise AssertionError("mounted a server that never listed its tools")
        assert not session.state.tools
        # the session goes on: another server mounts in it
        async with mount(session, calculator(), only=["add"]) as mounted:
            return dict(mounted.tools)

    assert in_session(main) == {"add": "add"}


@pytest.mark.parametrize("turns", [0, 1, 10, 100])
def test_cancelling_the_task_that_mounts_ends_the_mount_as_its_cancellation(turns: int) -> None:
    """Wherever the cancellation lands (after ``turns`` turns of the loop: before the mount
    crossed into trio, while it connects, while it lists pages): a plain ``CancelledError``,
    and nothing registered."""
    endless = ListingLimits(pages=10**9, tools=10**9, bytes=10**12, timeout=3600)

    async def main(session: Session) -> Any:
        async def mount_forever() -> None:
            async with mount(session, pager(), listing=endless):
                raise AssertionError("mounted a server that pages forever")

        task = asyncio.create_task(mount_forever())
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return dict(session.state.tools)

    assert in_session(main) == {}


def test_the_hosts_exception_comes_out_of_the_mount_as_itself_and_ends_it() -> None:
    raised = KeyError("mine")

    async def main(session: Session) -> Any:
        with pytest.raises(KeyError) as caught:
            async with mount(session, calculator()) as mounted:
                raise raised
        assert caught.value is raised
        return mounted.closed

    assert in_session(main) is True


def test_a_mount_another_task_holds_ends_when_the_session_closes() -> None:
    async def main() -> Any:
        held, leave = asyncio.Event(), asyncio.Event()
        mounted: list[Any] = []

        async def hold(session: Session) -> None:
            async with mount(session, calculator()) as mount_:
                mounted.append(mount_)
                held.set()
                await leave.wait()

        async with Session.open(MemoryStore()) as session:
            holder = asyncio.create_task(hold(session))
            await asyncio.wait([holder, asyncio.create_task(held.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
            if holder.done():
                holder.result()  # the mount failed: why
        # the session's block ended with the mount held: it closed with the session
        assert mounted[0].closed
        leave.set()
        await holder

    asyncio.run(main())


def test_a_session_mount_does_not_know_is_refused_saying_what_it_takes() -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match=r"engine.Session .* engine.hosts.aio.Session"):
            async with mount(object(), calculator()):  # type: ignore[arg-type]
                pass

    asyncio.run(main())
