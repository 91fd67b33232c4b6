"""An SQLite store's inline commits leave the WAL's checkpoints to a worker thread."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from events import SqliteStore
from events.stores import sqlite_checkpoint
from events.stores.sqlite_checkpoint import WAL_PAGES
from tests.stores.conformance.backends import recs


async def append_until_checkpoints(store: SqliteStore, count: int, last: int = 0) -> int:
    """Append 2-record batches after seq ``last`` until ``count`` checkpoints have begun;
    the last seq."""
    for _ in range(WAL_PAGES * count):
        await store.append("s", recs("s", last + 1, last + 2), last)
        last += 2
        if store._checkpoints.started >= count:
            return last
    raise AssertionError("no checkpoint began")


async def test_inline_appends_are_checkpointed_off_the_loop(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    path = str(tmp_path / "log.db")
    threads: list[int] = []
    checkpoint = sqlite_checkpoint.Checkpointer._checkpoint

    def recorded(self: sqlite_checkpoint.Checkpointer) -> None:
        threads.append(threading.get_ident())
        checkpoint(self)

    monkeypatch.setattr(sqlite_checkpoint.Checkpointer, "_checkpoint", recorded)
    store = SqliteStore(path)
    other = sqlite3.connect(path)  # so that closing the store does not checkpoint itself
    try:
        before = os.path.getsize(path)
        last = await append_until_checkpoints(store, 1)
        store.close()  # waits for the checkpoint
        assert store._checkpoints.error is None
        assert threads and threading.get_ident() not in threads
        assert os.path.getsize(path) > before  # the pages reached the database file
    finally:
        other.close()
    with SqliteStore(path, read_only=True) as again:
        assert [r.seq for r in await again.read("s")] == list(range(1, last + 1))


async def test_a_failed_checkpoint_loses_nothing_and_the_next_one_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "log.db")
    failures = iter([OSError("disk full")])

    def failing(self: sqlite_checkpoint.Checkpointer) -> None:
        raise next(failures)

    monkeypatch.setattr(sqlite_checkpoint.Checkpointer, "_checkpoint", failing)
    store = SqliteStore(path)
    try:
        last = await append_until_checkpoints(store, 1)
        store._checkpoints.wait()
        assert isinstance(store._checkpoints.error, OSError)
        last = await append_until_checkpoints(store, 2, last)
        store._checkpoints.wait()
        assert isinstance(store._checkpoints.error, StopIteration)  # it ran again
        assert [r.seq for r in await store.read("s")] == list(range(1, last + 1))
        assert (await store.verify()).ok
    finally:
        store.close()
