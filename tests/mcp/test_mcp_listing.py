"""A mount reads a server's tool list within bounds: time, pages, tools, bytes.

A server that never answers ``tools/list``, or pages forever, or lists more than anyone could
use, stops the mount with a :class:`~engine.mcp.ListingError` that names the limit, and nothing
is registered; a mount the host cancels ends as a plain ``trio.Cancelled``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
import trio

from engine import Session
from engine.mcp import ListingError, ListingLimits, mount
from engine.models import FauxModel
from events import MemoryStore

from mcp import StdioServerParameters
from mcp_servers import calculator, pager, silent


async def refused(server: Any, error: type[BaseException], **options: Any) -> BaseException:
    """What mounting ``server`` in a new session raised (an ``error``); the session has no
    tool registered after it."""
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        with pytest.raises(error) as raised:
            async with mount(session, server, **options):
                pass
        assert not session.state.tools
    return raised.value


async def test_a_server_that_never_lists_its_tools_stops_the_mount_in_time(
    autojump_clock: Any,
) -> None:
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        with trio.fail_after(3600):  # virtual time: without a bound, the mount waits forever
            with pytest.raises(ListingError, match=r"'silent' did not list its tools within 30"):
                async with mount(session, silent()):
                    pass
            assert trio.current_time() < 60
        assert not session.state.tools


async def test_a_server_that_pages_forever_stops_at_the_page_limit() -> None:
    with trio.fail_after(60):
        assert "more than 100 pages" in str(await refused(pager(), ListingError))


@pytest.mark.parametrize(("server", "limits", "problem"), [
    (lambda: pager(per_page=600), ListingLimits(), r"more than 1000 tools"),
    (lambda: pager(description="x" * 10_000), ListingLimits(bytes=50_000),
     r"more than 50000 bytes"),
    (lambda: pager(), ListingLimits(pages=3), r"more than 3 pages"),
])
async def test_too_many_tools_or_bytes_stop_the_mount_naming_the_limit(
    server: Any, limits: ListingLimits, problem: str,
) -> None:
    message = str(await refused(server(), ListingError, listing=limits))
    assert re.search(problem, message)
    assert "ListingLimits" in message  # what to change, if the host wants more


def test_a_listing_limit_is_a_positive_number() -> None:
    with pytest.raises(ValueError, match="pages"):
        ListingLimits(pages=0)
    with pytest.raises(ValueError, match="timeout"):
        ListingLimits(timeout=-1)


@pytest.mark.parametrize("after", [0.0, 0.05, 0.2, 0.5])
async def test_a_cancelled_mount_ends_as_a_plain_cancellation(after: float) -> None:
    """Wherever the cancellation lands in a long listing: no group of the SDK's errors."""
    endless = ListingLimits(pages=10**9, tools=10**9, bytes=10**12, timeout=3600)
    seen: list[BaseException] = []
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        with trio.move_on_after(after) as scope:
            try:
                async with mount(session, pager(), listing=endless):
                    pass
            except BaseException as exc:
                seen.append(exc)
                raise
    assert scope.cancelled_caught
    assert [type(exc) for exc in seen] == [trio.Cancelled]


async def test_a_server_that_cannot_be_started_is_a_connection_error() -> None:
    gone = StdioServerParameters(command=sys.executable, args=["-c", "pass"])
    message = str(await refused(gone, ConnectionError, name="gone"))
    assert message.startswith("could not connect to the MCP server 'gone': ")


async def test_a_listing_within_the_limits_mounts_as_before() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        async with mount(session, calculator(), listing=ListingLimits(pages=1, tools=6)) as m:
            assert len(m.tools) == 6
