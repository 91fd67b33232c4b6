"""Following a session (``store.follow``): what is stored first, then each append as it comes,
from this store object, from another one on the same log and from another process; never in
a writer's way; ended cleanly by cancellation. Written against the protocol only, so every
backend in ``backends.py`` runs it."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any
from contextlib import closing
from pathlib import Path

import pytest
import trio
import trio.testing

from events.stores import EventStore
from events.types import Record, ToolCallCompleted, UserMessage
from events.results import TextContent, ToolResult

from tests.stores.conformance.backends import SHARED, make_store, rec, recs, reopen, store

#: A guard against a hang, never a measure: a follower that works gets its records at once.
HANG = 60


async def take(records: AsyncIterator[Record], count: int) -> list[Record]:
    """The next ``count`` records of a follower."""
    taken: list[Record] = []
    with trio.fail_after(HANG):
        async for record in records:
            taken.append(record)
            if len(taken) == count:
                break
    return taken


@pytest.mark.trio
async def test_stored_records_come_first_then_each_append(store: EventStore) -> None:
    await store.append("s", recs("s", 1, 3), expected_seq=0)
    await store.append("other", recs("other", 1, 2), expected_seq=0)
    follower = store.follow("s")
    assert await take(follower, 3) == recs("s", 1, 3)
    got: list[Record] = []

    async def follow_on() -> None:
        got.extend(await take(follower, 4))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow_on)
        await trio.testing.wait_all_tasks_blocked()  # the follower waits for an append
        await store.append("other", recs("other", 3, 3), expected_seq=2)
        await store.append("s", recs("s", 4, 5), expected_seq=3)
        await trio.testing.wait_all_tasks_blocked()
        await store.append("s", recs("s", 6, 7), expected_seq=5)
    assert got == recs("s", 4, 7)


@pytest.mark.trio
async def test_following_from_a_position_and_before_the_session_starts(
    store: EventStore,
) -> None:
    await store.append("s", recs("s", 1, 4), expected_seq=0)
    assert await take(store.follow("s", after=2), 2) == recs("s", 3, 4)
    got: list[Record] = []

    async def follow_new() -> None:
        got.extend(await take(store.follow("new"), 2))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow_new)
        await trio.testing.wait_all_tasks_blocked()
        await store.append("new", recs("new", 1, 2), expected_seq=0)
    assert got == recs("new", 1, 2)


@pytest.mark.trio
async def test_a_follower_never_blocks_a_writer_and_misses_nothing(store: EventStore) -> None:
    """A follower whose caller stops pulling holds nothing: every append goes through, and
    when it pulls again it gets every record, in order, once."""
    await store.append("s", recs("s", 1, 1), expected_seq=0)
    follower = store.follow("s")
    assert await take(follower, 1) == recs("s", 1, 1)
    for batch in range(50):
        await store.append("s", recs("s", 2 * batch + 2, 2 * batch + 3), 2 * batch + 1)
    assert await take(follower, 100) == recs("s", 2, 101)


@pytest.mark.trio
async def test_many_followers_see_the_same_records(store: EventStore) -> None:
    seen: list[list[int]] = [[] for _ in range(3)]

    async def follow(into: list[int]) -> None:
        into.extend(record.seq for record in await take(store.follow("s"), 40))

    async with trio.open_nursery() as nursery:
        for into in seen:
            nursery.start_soon(follow, into)
        for batch in range(10):
            await store.append("s", recs("s", 4 * batch + 1, 4 * batch + 4), 4 * batch)
            await trio.lowlevel.checkpoint()
    assert seen == [list(range(1, 41))] * 3


@pytest.mark.trio
async def test_cancelling_a_follower_ends_it_cleanly(store: EventStore) -> None:
    await store.append("s", recs("s", 1, 2), expected_seq=0)
    got: list[Record] = []
    caught_up = trio.Event()

    async def follow_forever() -> None:
        async for record in store.follow("s"):
            got.append(record)
            if len(got) == 2:
                caught_up.set()

    with trio.fail_after(HANG):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow_forever)
            # cancelled while it waits for more (a store that waits on a socket or a thread
            # looks blocked long before it has read anything, so wait for the records)
            await caught_up.wait()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert got == recs("s", 1, 2)
    # the store goes on as before, and a new follower starts afresh
    await store.append("s", recs("s", 3, 3), expected_seq=2)
    assert await take(store.follow("s", after=1), 2) == recs("s", 2, 3)


@pytest.mark.trio
async def test_unicode_and_large_payloads_are_followed_whole(store: EventStore) -> None:
    session = "sessión \U0001f600 \ud800 \x00 end"  # a lone surrogate and a NUL included
    big = "\u00e9\U0001f600" * 300_000 + "\udfff"  # about 1.5 MB of UTF-8
    result = ToolResult(content=(TextContent(text=big),), structured_content={"k\udc80": big})
    records = [
        rec(session, 1, UserMessage(text="\u202egnp.exe \ud83d")),
        rec(session, 2, ToolCallCompleted(call_id="1.0", result=result)),
    ]
    got: list[Record] = []

    async def follow() -> None:
        got.extend(await take(store.follow(session), 2))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        await trio.testing.wait_all_tasks_blocked()
        await store.append(session, records[:1], expected_seq=0)
        await store.append(session, records[1:], expected_seq=1)
    assert got == records


# -- a log shared by several store objects and processes ----------------------------------


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
async def test_a_follower_sees_what_another_store_object_appends(
    kind: str, tmp_path: Path
) -> None:
    with closing(make_store(kind, tmp_path)) as follower, \
            closing(reopen(kind, tmp_path)) as writer:
        await writer.append("s", recs("s", 1, 2), expected_seq=0)
        got: list[Record] = []

        async def follow() -> None:
            got.extend(await take(follower.follow("s"), 6))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            for batch in range(2):
                await writer.append("s", recs("s", 2 * batch + 3, 2 * batch + 4), 2 * batch + 2)
        assert got == recs("s", 1, 6)


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
async def test_a_follower_sees_what_another_process_appends(kind: str, tmp_path: Path) -> None:
    """The writer is another process, appending batches while this one follows: every record
    arrives, once, in order, whole (the key makes the follower verify each one too)."""
    key = b"a key both processes hold"
    script = textwrap.dedent(f"""
        import trio
        from pathlib import Path
        from tests.stores.conformance.backends import recs, reopen
        async def main():
            store = reopen({kind!r}, Path({str(tmp_path)!r}), key={key!r})
            try:
                for batch in range(20):
                    await store.append("s", recs("s", 3 * batch + 1, 3 * batch + 3), 3 * batch)
            finally:
                store.close()
        trio.run(main)
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    with closing(reopen(kind, tmp_path, key=key)) as follower:
        got: list[Record] = []

        async def follow() -> None:
            got.extend(await take(follower.follow("s"), 60))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            with trio.fail_after(HANG):
                writer = await trio.run_process([sys.executable, "-c", script], env=env,
                                                check=False, capture_stderr=True)
            assert writer.returncode == 0, writer.stderr.decode(errors="replace")
        assert got == recs("s", 1, 60)


@pytest.mark.trio
async def test_a_long_backlog_is_read_a_part_at_a_time_and_misses_nothing(
        store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from events.stores import following

    monkeypatch.setattr(following, "CHUNK", 2)  # a part of two records: 7 take four reads
    await store.append("s", recs("s", 1, 7), expected_seq=0)
    reads: list[tuple[int, int | None]] = []
    read = store.read

    async def counted(session_id: str, after: int = 0, limit: int | None = None
                      ) -> list[Record]:
        reads.append((after, limit))
        return await read(session_id, after, limit)  # type: ignore[call-arg]

    monkeypatch.setattr(store, "read", counted)
    follower = store.follow("s", 1)
    assert await take(follower, 1) == [rec("s", 2)]
    assert reads == [(1, 2)]  # the first record came before the rest was read
    assert await take(follower, 5) == recs("s", 3, 7)
    assert {limit for _, limit in reads} == {2}


@pytest.mark.trio
async def test_a_read_with_a_limit_takes_that_many_from_after(store: EventStore) -> None:
    await store.append("s", recs("s", 1, 5), expected_seq=0)
    read: Any = store.read
    assert await read("s", 1, 3) == recs("s", 2, 4)
    assert await read("s", 3, 10) == recs("s", 4, 5)
    assert await read("s", 5, 2) == []
    assert await read("nobody", 0, 2) == []
