"""A long session opens at once: the console folds it in the background, and its page shows
what is read so far — its first calls complete, the rest "not read yet" — says that it is
still reading, withholds its controls until the whole log is read, and updates live until it
is. Small sessions stand in for long ones (the threshold and the part are made small), and a
store whose later parts wait for the test stands in for a slow read."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from engine import Session, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.web import app, folding
from engine.web.guard import csrf_token
from events import MemoryStore
from events.types import Record, ToolCallRequested, ToolExecutionStarted
from tests.web.test_web_live import events
from tests.web.webconsole import SID, Console, Tools, deleting, later

READING = "Still reading this session&#x27;s log"
CALLS = 5


class Gated(MemoryStore):
    """A store whose background reads past the first part wait for ``gate``; it notes every
    read (``after``, ``limit``)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = trio.Event()
        self.holding = False
        self.reads: list[tuple[int, int | None]] = []

    async def read(self, session_id: str, after: int = 0, limit: int | None = None
                   ) -> list[Record]:
        self.reads.append((after, limit))
        if self.holding and after > 0 and limit is not None:
            await self.gate.wait()
        return await super().read(session_id, after, limit)


async def long_session(store: MemoryStore, calls: int = CALLS) -> int:
    """A session of ``calls`` finished calls, then one waiting for approval; the seq of the
    second call's request (where the first part ends)."""
    tools = Tools()
    model = FauxModel([*(faux_tool_call("delete_file", {"path": f"f{n}.md"})
                         for n in range(calls)), faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, approver=approve_all,
                            session_id=SID, create=True) as session:
        await session.prompt("go")
    async with Session.open(store, model=FauxModel([deleting("last.md"), faux_text("done")]),
                            tools=tools.specs, approver=later, session_id=SID) as session:
        assert (await session.prompt("one more")).stop == "paused"
    requested = [r.seq for r in await store.read(SID) if isinstance(r.event, ToolCallRequested)]
    return requested[1]


@pytest.fixture
def part(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make every session count as long, read in parts of the returned setter's size."""
    monkeypatch.setattr(folding, "BEHIND", 0)
    return lambda size: monkeypatch.setattr(folding, "PART", size)


@pytest.fixture
async def gated(part: Any) -> tuple[Gated, int]:
    """A long session in a :class:`Gated` store, holding from here, read in parts that end
    where the second call is asked; and that seq."""
    store = Gated()
    first = await long_session(store)
    part(first)
    store.holding, store.reads = True, []  # from here: the console's reads
    return store, first


async def test_a_long_session_opens_partial_without_controls_then_whole(
        gated: tuple[Gated, int], autojump_clock: trio.testing.MockClock) -> None:
    store, first = gated
    total = await store.last_seq(SID)
    async with Console(store) as console:
        page = await console.page("/session", id=SID)
        assert READING in page
        assert f"read {first:,} of {total:,} records" in page
        assert "deleted f0.md" in page  # the first call, complete
        # the second call: asked, its end not read; not shown as running
        assert page.count('class="status unread">not read yet') == 1
        assert page.count('class="status ') == 2
        assert 'name="csrf"' not in page  # no control acts on a part of the log
        assert f"as far as read: {first:,} of {total:,} records" in await console.page("/")
        refused = await console.post(csrf=csrf_token(console.token), session=SID,
                                     kind="approval", call=f"{CALLS + 1}.0", do="once")
        assert refused.status_code == 503
        assert "still reading" in refused.text
        assert await store.last_seq(SID) == total  # nothing recorded
        store.gate.set()
        whole = await console.page("/session", id=SID)
    assert READING not in whole
    assert "not read yet" not in whole
    assert f"deleted f{CALLS - 1}.md" in whole
    assert 'name="csrf"' in whole and "Approve" in whole  # the controls, now
    assert [after for after, _ in store.reads].count(0) == 1  # one fold, read once


class Paced(MemoryStore):
    """A store each read of a part of which takes ``pace`` seconds (of the test's clock)."""

    pace = 0.01

    async def read(self, session_id: str, after: int = 0, limit: int | None = None
                   ) -> list[Record]:
        if limit is not None:
            await trio.sleep(self.pace)
        return await super().read(session_id, after, limit)


async def test_a_page_stops_waiting_once_its_calls_are_read_and_the_fold_cannot_end_in_time(
        part: Any, autojump_clock: trio.testing.MockClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Paced()
    first = await long_session(store, 20)
    total = await store.last_seq(SID)
    monkeypatch.setattr(app, "ROOTS_PER_PAGE", 1)  # the page shows one call: wait for two
    part(1)
    # the second call is asked well within the page's wait; the whole log is read long after
    assert first * Paced.pace < folding.WAIT / 2 and total * Paced.pace > folding.WAIT
    async with Console(store) as console:
        start = trio.current_time()
        page = await console.page("/session", id=SID)
        waited = trio.current_time() - start
    assert READING in page
    assert "deleted f0.md" in page  # the page's call, complete
    assert waited < folding.WAIT / 2  # shown once its call was read, not after the whole wait


async def test_a_page_waits_for_a_fold_that_ends_in_time(
        part: Any, autojump_clock: trio.testing.MockClock) -> None:
    store = Paced()
    await long_session(store)
    total = await store.last_seq(SID)
    part(total // 3 + 1)  # three parts: 0.03 s, within the page's wait
    async with Console(store) as console:
        page = await console.page("/session", id=SID)
    assert READING not in page
    assert f"deleted f{CALLS - 1}.md" in page


async def test_two_requests_share_one_fold(
        gated: tuple[Gated, int], autojump_clock: trio.testing.MockClock) -> None:
    store, first = gated
    async with Console(store) as console:
        pages: list[str] = []

        async def open_page() -> None:
            pages.append(await console.page("/session", id=SID))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(open_page)
            nursery.start_soon(open_page)
        assert len(pages) == 2 and all(READING in page for page in pages)
        assert [after for after, _ in store.reads].count(0) == 1
        assert [after for after, _ in store.reads].count(first) == 1  # one fold waits, not two
        store.gate.set()
        assert READING not in await console.page("/session", id=SID)
    assert [after for after, _ in store.reads].count(0) == 1


async def test_the_live_page_follows_the_fold_to_its_end(
        gated: tuple[Gated, int], autojump_clock: trio.testing.MockClock) -> None:
    store, first = gated
    async with Console(store) as console:
        assert READING in await console.page("/session", id=SID)
        send, receive = trio.open_memory_channel[str](100)
        with trio.fail_after(60):  # a page that never completes fails, not hangs
            async with trio.open_nursery() as nursery:
                nursery.start_soon(events, console.app, console.token,
                                   f"view=session&id={SID}&after={first}".encode(), send)
                assert (await receive.receive()).startswith("retry:")
                store.gate.set()
                update = await receive.receive()
                nursery.cancel_scope.cancel()
    assert update.startswith("event: update\n")
    assert READING not in update
    assert f"deleted f{CALLS - 1}.md" in update and "Approve" in update


async def test_a_log_that_breaks_half_way_gets_the_error_page(
        part: Any, autojump_clock: trio.testing.MockClock) -> None:
    good = MemoryStore()
    await long_session(good)
    records = await good.read(SID)
    started = [k for k, r in enumerate(records) if isinstance(r.event, ToolExecutionStarted)]
    broken = records[started[3]]  # the fourth call starts a call never asked for
    records[started[3]] = attrs.evolve(broken, event=attrs.evolve(broken.event, call_id="x"))
    store = MemoryStore()
    await store.append(SID, records, 0)
    part(10)
    async with Console(store) as console:
        for _ in range(2):  # and again: the next request reads again, and breaks again
            response = await console.client.get(f"/session?id={SID}")
            assert response.status_code == 422
            assert "cannot be read as a session" in response.text
            assert f"record seq {broken.seq} of session" in response.text
        send, receive = trio.open_memory_channel[str](100)
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(events, console.app, console.token,
                                   f"view=session&id={SID}&after=0".encode(), send)
                assert (await receive.receive()).startswith("retry:")
                update = await receive.receive()
                nursery.cancel_scope.cancel()
    assert "cannot be read as a session" in update
