"""A PostgreSQL append whose session's head the store knows is sent from the event loop
(events.stores.pgloop): no worker thread, and every promise of the thread's append kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from events.errors import ConflictError
from tests.stores.conformance.backends import postgres_url, recs, spy_postgres_writes

psycopg = pytest.importorskip("psycopg")

from events.stores import pgloop  # noqa: E402
from events.stores.postgres import PostgresStore  # noqa: E402


@pytest.fixture
def url(postgres_server: Any, tmp_path: Path) -> str:
    return postgres_url(tmp_path)


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The sessions of each group the worker thread's append writes."""
    return spy_postgres_writes(monkeypatch)


async def test_appends_after_the_first_go_from_the_loop(url: str,
                                                        threads: list[list[str]]) -> None:
    assert pgloop.ON_LOOP
    with PostgresStore(url, key=b"k") as store:
        await store.append("s", recs("s", 1, 3), 0)  # a new session: genesis is known too
        await store.append("s", recs("s", 4, 4), 3)
        await store.append("s", recs("s", 5, 8), 4)
        assert threads == []
        assert await store.read("s") == recs("s", 1, 8)
        assert (await store.verify()).ok
    with PostgresStore(url, key=b"k") as other:  # a head it does not know: read in a thread
        await other.append("s", recs("s", 9, 9), 8)
        assert threads == [["s"]]
        assert (await other.verify()).ok


async def test_a_head_moved_elsewhere_is_a_conflict_decided_in_the_thread(
        url: str, threads: list[list[str]]) -> None:
    with PostgresStore(url) as mine, PostgresStore(url) as theirs:
        await mine.append("s", recs("s", 1, 2), 0)
        await theirs.append("s", recs("s", 3, 3), 2)  # mine still remembers seq 2's head
        threads.clear()
        with pytest.raises(ConflictError):
            await mine.append("s", recs("s", 3, 4), 2)
        assert threads == [["s"]]  # the loop's statement stored nothing; the thread decided
        assert await mine.read("s") == recs("s", 1, 3)
        await mine.append("s", recs("s", 4, 4), 3)  # and it goes on from the session's head
        assert await theirs.read("s") == recs("s", 1, 4)
        assert (await mine.verify()).ok


async def test_a_statement_sent_from_the_loop_finishes_if_cancelled(url: str) -> None:
    with PostgresStore(url) as store:
        await store.append("s", recs("s", 1, 1), 0)
        returned = False
        with psycopg.connect(url) as blocker:
            blocker.execute("SELECT * FROM toolledger_sessions FOR UPDATE")  # holds the row
            async with trio.open_nursery() as nursery:
                async def append(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
                    nonlocal returned
                    with trio.CancelScope() as scope:
                        task_status.started(scope)
                        await store.append("s", recs("s", 2, 3), 1)
                        returned = True

                scope = await nursery.start(append)
                await trio.testing.wait_all_tasks_blocked()  # the statement waits for the row
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                blocker.commit()
        assert returned  # committed whole, returned as if not cancelled
        assert await store.read("s") == recs("s", 1, 3)


async def test_a_wait_for_either_direction_returns_the_one_that_came() -> None:
    import socket

    from psycopg.waiting import Ready, Wait

    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        assert await pgloop._ready(ours.fileno(), Wait.RW) == Ready.W  # writable at once
        try:
            while True:  # fill the buffers: neither readable nor writable now
                ours.send(b"x" * 65536)
        except BlockingIOError:
            pass
        async with trio.open_nursery() as nursery:
            ready: list[int] = []

            async def wait() -> None:
                ready.append(await pgloop._ready(ours.fileno(), Wait.RW))

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert ready == []  # still waiting: the socket is ready for nothing
            theirs.send(b"answer")
        assert ready == [Ready.R]


def test_a_psycopg_release_it_was_not_tested_with_uses_the_thread() -> None:
    """The execute generator is psycopg's private API: a release outside ``TESTED`` may give
    it another meaning, so the store keeps every statement in its worker thread there."""
    assert pgloop.supported()  # the installed release is one of them (CI tests this path)
    assert not pgloop.supported("3.9.0")
    assert not pgloop.supported("4.0.1")
    assert pgloop.supported(pgloop.TESTED[-1] + ".0")
