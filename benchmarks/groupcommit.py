"""SQLite group commit: one transaction for every batch waiting, against one per batch, at
``durable=True`` (``synchronous=FULL``: a sync of the WAL per ``COMMIT``).

Each side runs trio tasks, each appending one session's records in batches of four (a call's
events) and waiting for each batch to be acknowledged before the next, as a session does:
8 sessions at once, and 1 alone (where grouping has nothing to group, so it must cost
nothing). The figure is :class:`~events.stores.SqliteStore` as it is: a durable append goes
through its group commit (:mod:`events.stores.groupcommit`). The baseline is the same store's
write of a batch (the same checks, sealing and rows), but each batch in its own transaction,
one after another in a worker thread: how the store wrote them before group commit.

Its rows close the ``stores`` group (``PYTHONPATH=. python -m benchmarks --only stores``); the
decision they informed is in docs/performance.md (SQLite group commit).
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence

import trio

from events import Record, SqliteStore
from events.stores.base import check_batch, encode_bodies
from events.stores.groupcommit import Batch
from events.stores.sqlite_connect import connect

from .harness import Figure, Row, Settings, interleave, paired
from .stores import call_records

__all__ = ["TransactionPerBatch", "run"]

BATCH = 4


class TransactionPerBatch:
    """The baseline: the store's batch write, one transaction per batch, one at a time."""

    def __init__(self, path: str) -> None:
        self._store = SqliteStore(path, durable=True)
        self._conn = connect(path, 5.0, durable=True)
        self._lock = trio.Lock()

    async def append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        check_batch(session_id, records, expected_seq)
        batch = Batch(session_id, records, encode_bodies(records), expected_seq)
        async with self._lock:
            await trio.to_thread.run_sync(self._write, batch)

    def _write(self, batch: Batch) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._store._write_batch(self._conn, batch)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._conn.close()
        self._store.close()


def concurrent_rate(sessions: int, per_session: int, *, grouped: bool) -> float:
    """Events per second, ``sessions`` sessions appending batches of :data:`BATCH` at once
    into one durable database: through the store's group commit, or one transaction per
    batch."""
    logs = [call_records(f"s{n}", per_session - per_session % BATCH) for n in range(sessions)]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "log.db")
        writer = SqliteStore(path, durable=True) if grouped else TransactionPerBatch(path)

        async def session(records: list[Record]) -> None:
            for i in range(0, len(records), BATCH):
                await writer.append(records[i].session_id, records[i : i + BATCH], i)

        async def main() -> float:
            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for records in logs:
                    nursery.start_soon(session, records)
            return time.perf_counter() - start

        try:
            elapsed = trio.run(main)
        finally:
            writer.close()
    return sum(map(len, logs)) / elapsed


def run(settings: Settings) -> list[Row]:
    """Group commit against a transaction per batch, for 8 durable sessions and for 1."""
    rows = []
    for sessions, per_session in ((8, settings.size(200, 8)), (1, settings.size(800, 16))):
        measures: list[Callable[[], float]] = [
            lambda: concurrent_rate(sessions, per_session, grouped=True),
            lambda: concurrent_rate(sessions, per_session, grouped=False),
        ]
        ours, theirs = interleave(settings.reps(5, 2), measures)
        label = f"{sessions} session{'s' if sessions > 1 else ''}"
        figure = Figure(name=f"SqliteStore(durable=True), {label} (group commit)",
                        unit="events/s", samples=tuple(ours), better="higher")
        baseline = Figure(name=f"a transaction per batch, {label}", unit="events/s",
                          samples=tuple(theirs), better="higher")
        ratio = paired(figure, baseline, lambda a, b: a / b)
        rows.append(Row(group="stores", figure=figure, baseline=baseline,
                        comparison=f"{ratio:.2f}×", note=f"batches of {BATCH}, wall time"))
    return rows
