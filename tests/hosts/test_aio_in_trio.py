"""``engine.hosts.aio.Session.in_trio``: a trio context manager built on the session, held open
for an asyncio block (what ``engine.mcp.mount`` goes through from asyncio).

Checked as Python's ``async with`` would have it, plus what trio asks: the manager is entered
and exited in one trio task (so it may open a nursery), in a copy of the asyncio caller's
context; what the block raises reaches the manager's exit, which may swallow it; cancelling
the asyncio task while the manager enters cancels that, in trio, and waits for it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from engine import Session as TrioSession
from engine.hosts.aio import Session
from events import MemoryStore

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="-")


def test_a_trio_manager_is_held_in_one_trio_task_and_may_swallow_the_blocks_error() -> None:
    seen: list[Any] = []

    @asynccontextmanager
    async def watched(session: TrioSession) -> AsyncIterator[str]:
        task = trio.lowlevel.current_task()
        async with trio.open_nursery() as nursery:  # held open across the asyncio block
            nursery.start_soon(trio.sleep_forever)
            try:
                yield f"{session.session_id} {WHO.get()}"
            except LookupError as exc:
                seen.append(exc)  # swallowed: the block's error ends here
            finally:
                seen.append(trio.lowlevel.current_task() is task)
                nursery.cancel_scope.cancel()

    async def main() -> None:
        async with Session.open(MemoryStore(), session_id="s", create=True) as session:
            WHO.set("req-1")
            async with session.in_trio(watched) as value:
                assert value == "s req-1"
            raised = KeyError("swallowed")
            async with session.in_trio(watched):
                raise raised
            assert seen == [True, raised, True]
            mine = ValueError("mine")
            with pytest.raises(ExceptionGroup) as caught:  # the manager's nursery wraps it
                async with session.in_trio(watched):
                    raise mine
            assert caught.value.exceptions == (mine,)

    asyncio.run(main())


def test_cancelling_the_asyncio_task_while_the_manager_enters_cancels_it_in_trio() -> None:
    ended: list[str] = []
    entering = asyncio.Event()  # set from trio: guest ticks run on the loop's thread

    @asynccontextmanager
    async def slow(session: TrioSession) -> AsyncIterator[None]:
        entering.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            ended.append("cancelled in trio")
            raise
        yield  # never reached

    async def main() -> None:
        async with Session.open(MemoryStore()) as session:
            async def hold() -> None:
                async with session.in_trio(slow):
                    raise AssertionError("entered a manager that never enters")

            task = asyncio.create_task(hold())
            await entering.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert ended == ["cancelled in trio"]  # before the cancellation went on

    asyncio.run(main())


def test_a_closed_session_holds_nothing() -> None:
    @asynccontextmanager
    async def anything(session: TrioSession) -> AsyncIterator[None]:
        yield

    async def main() -> None:
        async with Session.open(MemoryStore()) as session:
            pass
        with pytest.raises(RuntimeError, match="the session is closed"):
            async with session.in_trio(anything):
                pass

    asyncio.run(main())
