"""How followers are woken, store by store: by this store object's appends on every path an
append takes (inline, or waiting: a durable store's sync, SQLite's group commit), without
waiting for a poll; and by closing the store, which ends them with the store's error."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from events.stores import EventStore, JsonlStore, MemoryStore, SqliteStore
from events.types import Record

from tests.stores.conformance.backends import recs

NEVER = 3600.0  # a poll interval no test waits for: only a wake-up gets the records there


def stores(tmp_path: Path) -> dict[str, EventStore]:
    return {
        "jsonl durable": JsonlStore(tmp_path / "log.jsonl", durable=True, poll_interval=NEVER),
        "sqlite durable": SqliteStore(tmp_path / "log.db", durable=True, poll_interval=NEVER),
        "sqlite": SqliteStore(tmp_path / "inline.db", poll_interval=NEVER),
        "jsonl": JsonlStore(tmp_path / "inline.jsonl", poll_interval=NEVER),
    }


@pytest.mark.parametrize("name", ["jsonl durable", "sqlite durable", "sqlite", "jsonl"])
async def test_an_append_wakes_the_followers_at_once(name: str, tmp_path: Path) -> None:
    made = stores(tmp_path)
    store = made[name]
    got: list[Record] = []

    async def follow() -> None:
        async for record in store.follow("s"):
            got.append(record)
            if len(got) == 4:
                return

    try:
        with trio.fail_after(60):  # a guard against a hang: without the wake-up it would wait
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow)
                await trio.testing.wait_all_tasks_blocked()
                await store.append("s", recs("s", 1, 2), expected_seq=0)
                await trio.testing.wait_all_tasks_blocked()
                await store.append("s", recs("s", 3, 4), expected_seq=2)
    finally:
        for each in made.values():
            each.close()
    assert got == recs("s", 1, 4)


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
async def test_closing_the_store_ends_its_followers_with_its_error(
    kind: str, tmp_path: Path
) -> None:
    store: EventStore = {"memory": lambda: MemoryStore(),
                         "jsonl": lambda: JsonlStore(tmp_path / "log.jsonl", poll_interval=NEVER),
                         "sqlite": lambda: SqliteStore(tmp_path / "log.db", poll_interval=NEVER),
                         }[kind]()
    failed: list[Exception] = []

    async def follow() -> None:
        try:
            async for _ in store.follow("s"):
                pass
        except ValueError as exc:
            failed.append(exc)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            await trio.testing.wait_all_tasks_blocked()
            store.close()
    assert len(failed) == 1 and "closed" in str(failed[0])
