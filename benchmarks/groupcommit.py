"""SQLite group commit: one transaction for every batch waiting, against one per batch, at
``durable=True`` (``synchronous=FULL``: a sync of the WAL per ``COMMIT``).

Each side runs trio tasks, each appending one session's records in batches of four (a call's
events) and waiting for each batch to be acknowledged before the next, as a session does:
8 sessions at once, and 1 alone (where grouping has nothing to group, so it must cost
nothing). The figure is :class:`~events.stores.SqliteStore` as it is: a durable append goes
through its group commit (:mod:`events.stores.groupcommit`). The baseline is the same store's
write of a batch (the same checks, sealing and rows), but each batch in its own transaction,
one after another in a worker thread: how the store wrote them before group commit.

Beside them, one durable writer through the store against the same ``FULL`` commit made inline
on the event loop (:class:`InlineFull`): the thread hop's cost, and what an inline durable
commit would block the loop for.

The group commit rows close the ``stores`` group (``PYTHONPATH=. python -m benchmarks --only
stores``); ``PYTHONPATH=. python -m benchmarks.groupcommit [--quick]`` prints them with the
inline row first. The decisions they informed are in docs/performance.md (SQLite group
commit; The database paths, second round).
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

__all__ = ["InlineFull", "TransactionPerBatch", "main", "run"]

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


class InlineFull(SqliteStore):
    """The other baseline: the durable store committing inline, on the event loop's thread,
    as the store does when not durable (its connections are ``synchronous=FULL``; only the
    choice of the inline path is the non-durable store's)."""

    def __init__(self, path: str) -> None:
        super().__init__(path, durable=True)
        self.durable = False  # append_nowait then commits inline instead of refusing


def concurrent_rate(sessions: int, per_session: int, *, grouped: bool,
                    inline: bool = False) -> float:
    """Events per second, ``sessions`` sessions appending batches of :data:`BATCH` at once
    into one durable database: through the store's group commit, or one transaction per
    batch (in a worker thread, or ``inline`` on the event loop)."""
    logs = [call_records(f"s{n}", per_session - per_session % BATCH) for n in range(sessions)]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "log.db")
        writer: SqliteStore | TransactionPerBatch = (
            SqliteStore(path, durable=True) if grouped
            else InlineFull(path) if inline else TransactionPerBatch(path))

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


def inline_row(settings: Settings) -> Row:
    """One durable writer through the store (its commit in a worker thread) against the same
    ``FULL`` commit made inline on the event loop: what the thread hop costs a durable
    append, beside what the loop would be blocked for."""
    per_session = settings.size(800, 16)
    ours, theirs = interleave(settings.reps(5, 2), [
        lambda: concurrent_rate(1, per_session, grouped=True),
        lambda: concurrent_rate(1, per_session, grouped=False, inline=True)])
    figure = Figure(name="SqliteStore(durable=True), 1 session (its commit in a worker thread)",
                    unit="events/s", samples=tuple(ours), better="higher")
    baseline = Figure(name="the same FULL commit inline, on the event loop", unit="events/s",
                      samples=tuple(theirs), better="higher")
    ratio = paired(figure, baseline, lambda a, b: a / b)
    blocked = BATCH * 1e6 / baseline.median
    return Row(group="stores", figure=figure, baseline=baseline, comparison=f"{ratio:.2f}×",
               note=f"batches of {BATCH}, wall time; inline, each append would block the loop "
                    f"~{blocked:,.0f} µs")


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


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.groupcommit [--quick] [--json | --markdown]``: these rows
    alone."""
    import argparse
    import json
    import sys

    from .__main__ import add_run_options, show
    from .report import to_json

    parser = argparse.ArgumentParser(prog="python -m benchmarks.groupcommit")
    add_run_options(parser)
    args = parser.parse_args(argv)
    settings = Settings(quick=args.quick, repeat=args.repeat, clock_name="wall")
    rows = [inline_row(settings), *run(settings)]
    if args.json:
        json.dump(to_json(rows, settings={"quick": args.quick, "clock": "wall"}), sys.stdout,
                  indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        show(rows, "SQLite durable commits, wall time", as_markdown=args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
