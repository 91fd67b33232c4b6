"""The ``stores`` group: toolledger's database stores beside the ``eventsourcing`` library's.

The same events (a call's four records, :func:`benchmarks.stores.call_records`, encoded by
toolledger's codec on both sides) in batches of four, each batch acknowledged before the next,
with the same durability: SQLite ``synchronous=FULL`` (``SqliteStore(durable=True)``, the
library's default) and PostgreSQL's default ``synchronous_commit`` (``PostgresStore(durable=
True)``). Events per second, wall time (the disk is waited for), for one writer (one session,
in this process) and for 8 processes each writing a session of its own into one database at
once (from when all 8 are ready to when the last is done). toolledger and the peer alternate
within each repetition (:func:`~benchmarks.harness.interleave`).

PostgreSQL is a throwaway server (``tests/pgserver.py``, its default settings) started for the
group; without its binaries or psycopg the PostgreSQL rows are left out.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import trio

from events import Record, SqliteStore
from events.stores.base import EventStore

from ..harness import Figure, Row, Settings, interleave, paired
from ..stores import call_records

__all__ = ["PROCESSES", "run"]

BATCH = 4
PROCESSES = 8
#: which side a figure times
Side = str  # "toolledger" or "eventsourcing"


def _batches(session_id: str, count: int) -> list[list[Record]]:
    records = call_records(session_id, count)
    return [records[i : i + BATCH] for i in range(0, len(records), BATCH)]


def _toolledger_writes(store: EventStore, batches: Sequence[Sequence[Record]]
                       ) -> tuple[float, float]:
    """Append the batches one after another in one ``trio.run``; the clock around them."""
    async def main() -> tuple[float, float]:
        await store.last_seq(batches[0][0].session_id)  # a database store connects first
        start = time.perf_counter()
        for batch in batches:
            await store.append(batch[0].session_id, batch, batch[0].seq - 1)
        return start, time.perf_counter()

    return trio.run(main)


def _write(side: Side, target: str, session: str, count: int) -> tuple[float, float]:
    """One writer's batches into ``target`` (an SQLite path or a PostgreSQL URL)."""
    batches = _batches(session, count)
    postgres = target.startswith("postgresql:")
    if side == "eventsourcing":
        from . import with_eventsourcing

        recorder = (with_eventsourcing.postgres_recorder(target, "eventsourcing_bench")
                    if postgres else with_eventsourcing.sqlite_recorder(target))
        return with_eventsourcing.write_batches(recorder, batches)
    if postgres:
        from events.stores.postgres import PostgresStore

        store: EventStore = PostgresStore(target, durable=True)
    else:
        store = SqliteStore(target, durable=True)
    try:
        return _toolledger_writes(store, batches)
    finally:
        store.close()


def _process(side: Side, target: str, session: str, count: int, ready: Any,
             out: Any) -> None:
    """In a child process: open, wait for the others, write, report the clock's readings
    (``perf_counter`` is the machine's monotonic clock, the same in every process)."""
    batches = _batches(session, count)
    if side == "eventsourcing":
        from . import with_eventsourcing

        recorder = (with_eventsourcing.postgres_recorder(target, "eventsourcing_bench",
                                                         create=False)
                    if target.startswith("postgresql:")
                    else with_eventsourcing.sqlite_recorder(target, create=False))
        ready.wait()
        out.put(with_eventsourcing.write_batches(recorder, batches))
        return
    if target.startswith("postgresql:"):
        from events.stores.postgres import PostgresStore

        store: EventStore = PostgresStore(target, durable=True)
    else:
        store = SqliteStore(target, durable=True)
    try:
        trio.run(store.last_seq, session)
        ready.wait()
        out.put(_toolledger_writes(store, batches))
    finally:
        store.close()


def one_writer(side: Side, where: Callable[[str], str], count: int) -> float:
    """Events per second of one writer."""
    with tempfile.TemporaryDirectory(prefix="peers-stores-") as directory:
        start, end = _write(side, where(directory), f"one-{os.urandom(4).hex()}", count)
    return count / (end - start)


def processes(side: Side, where: Callable[[str], str], count: int) -> float:
    """Events per second of :data:`PROCESSES` processes writing ``count`` events each."""
    context = multiprocessing.get_context("spawn")
    ready, out = context.Barrier(PROCESSES), context.Queue()
    with tempfile.TemporaryDirectory(prefix="peers-stores-") as directory:
        target = where(directory)
        _write(side, target, f"setup-{os.urandom(4).hex()}", BATCH)  # the tables made first
        runs = os.urandom(4).hex()
        children = [context.Process(target=_process,
                                    args=(side, target, f"p{runs}-{n}", count, ready, out))
                    for n in range(PROCESSES)]
        for child in children:
            child.start()
        readings = [_reading(out, children) for _ in children]
        for child in children:
            child.join()
    return PROCESSES * count / (max(end for _, end in readings)
                                - min(start for start, _ in readings))


def _reading(out: Any, children: list[Any]) -> tuple[float, float]:
    """A child's readings; a child that died instead stops the figure at once."""
    import queue

    while True:
        try:
            reading: tuple[float, float] = out.get(timeout=1)
            return reading
        except queue.Empty:
            if any(child.exitcode not in (None, 0) for child in children):
                raise RuntimeError("a writing process failed (its traceback is above)") from None


@contextmanager
def _postgres() -> Iterator[str | None]:
    from ..databases import postgres_url

    with postgres_url(None) as (url, _):
        if url is not None:
            import psycopg

            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE SCHEMA IF NOT EXISTS eventsourcing_bench")
        yield url


def run(settings: Settings, stacks: Sequence[str]) -> list[Row]:
    """toolledger's SQLite and PostgreSQL stores beside the library's recorders: one writer
    and :data:`PROCESSES` processes, durable."""
    if "toolledger" not in stacks or "eventsourcing" not in stacks:
        return []
    rows: list[Row] = []
    with _postgres() as url:
        targets: dict[str, Callable[[str], str]] = {
            "SQLite": lambda directory: os.path.join(directory, "log.db")}
        if url is not None:
            targets["PostgreSQL"] = lambda directory, url=url: url
        for database, where in targets.items():
            ours_name = {"SQLite": "SqliteStore", "PostgreSQL": "PostgresStore"}[database]
            theirs_name = {"SQLite": "SQLiteApplicationRecorder",
                           "PostgreSQL": "PostgresApplicationRecorder"}[database]
            for label, measure, count in (
                    ("one writer", one_writer, settings.size(800, 80)),
                    (f"{PROCESSES} processes", processes, settings.size(400, 40))):
                ours, theirs = interleave(settings.reps(5, 2), [
                    partial(measure, "toolledger", where, count),
                    partial(measure, "eventsourcing", where, count)])
                figure = Figure(name=f"toolledger {ours_name}(durable=True), {label}",
                                unit="events/s", samples=tuple(ours), better="higher")
                baseline = Figure(name=f"eventsourcing {theirs_name}, {label}",
                                  unit="events/s", samples=tuple(theirs), better="higher")
                ratio = paired(figure, baseline, lambda a, b: a / b)
                targeted = database == "SQLite"  # the targets are SQLite's
                rows.append(Row(group="stores", figure=figure, baseline=baseline,
                                comparison=f"{ratio:.2f}× eventsourcing",
                                target="≥ 1.00× eventsourcing" if targeted else "",
                                met=ratio >= 1.0 if targeted else None,
                                note=f"{database}, batches of {BATCH}, durable, wall time"))
    return rows
