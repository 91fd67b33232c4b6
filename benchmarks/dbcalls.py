"""One tool call through ``Session.call_tool`` on the database stores, and what it is made of.

Rows of ``python -m benchmarks.databases`` (group ``calls``): microseconds per
``await session.call_tool("add", {"a": 1, "b": 2})`` (a host call: validation, policy, body,
four records in two appends, the call's request, decision and start before the body runs and
its completion after), on

- ``SqliteStore()`` (not durable: ``synchronous=NORMAL``), beside the same store with SQLite's
  own checkpoints inside its inline commits (how it ran before the checkpoints moved to a
  worker thread, :mod:`events.stores.sqlite_checkpoint`), interleaved; wall time, since a
  checkpoint's cost is a wait for the disk;
- ``PostgresStore()`` (not durable: ``synchronous_commit=off``), beside the same store with
  every statement in a worker thread (how it ran before an append's statement was sent from
  the event loop, :mod:`events.stores.pgloop`), interleaved;
- ``MemoryStore()``, the same call with no database at all.

Each beside its floor, the same call's two appends of its records and nothing else (the
store's work for the call: encode, prove, seal, one transaction or statement each).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import trio

from engine import Session, approve_all
from events import MemoryStore, SqliteStore
from events.stores.base import EventStore

from .harness import Figure, Row, Settings, interleave, paired
from .peers.ledger import add
from .peers.tool import ARGS
from .stores import call_records

__all__ = ["InlineCheckpoints", "ThreadsOnly", "call_tool_us", "run", "two_appends_us"]

US = 1e6
#: the issue's targets, microseconds per call
TARGETS = {"SqliteStore()": 80.0, "PostgresStore()": 300.0}


class InlineCheckpoints(SqliteStore):
    """The baseline: the SQLite store with SQLite's own checkpoints in its inline commits."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        assert self._write_conn is not None
        self._write_conn.execute("PRAGMA wal_autocheckpoint=1000")
        self._checkpoints.committed = lambda written: None  # type: ignore[method-assign]


class ThreadsOnly:
    """The PostgreSQL baseline: the store with every statement in a worker thread."""

    def __new__(cls, url: str) -> EventStore:  # type: ignore[misc]
        from events.stores import pgloop
        from events.stores.postgres import PostgresStore

        class Threads(PostgresStore):
            async def append(self, *args: Any, **kwargs: Any) -> None:
                pgloop.ON_LOOP = False
                try:
                    await super().append(*args, **kwargs)
                finally:
                    pgloop.ON_LOOP = True

        return Threads(url)


def call_tool_us(make: Callable[[str], EventStore], calls: int) -> float:
    """Microseconds per ``session.call_tool("add", ARGS)`` on a fresh store, wall time."""
    laps: list[float] = []

    async def main(store: EventStore) -> None:
        async with Session.open(store, tools=[add], approver=approve_all,
                                session_id=f"calls-{os.urandom(4).hex()}", create=True) as s:
            await s.call_tool("add", ARGS)  # warm up: the schema compiled, the head known
            start = time.perf_counter()
            for _ in range(calls):
                outcome = await s.call_tool("add", ARGS)
                if outcome.is_error:
                    raise RuntimeError(f"add failed: {outcome}")
            laps.append(time.perf_counter() - start)

    with tempfile.TemporaryDirectory(prefix="dbcalls-") as directory:
        store = make(os.path.join(directory, "log.db"))
        try:
            trio.run(main, store)
        finally:
            store.close()
    return laps[0] / calls * US


def two_appends_us(make: Callable[[str], EventStore], calls: int) -> float:
    """Microseconds per call of the store's work alone: each call's four records appended as
    a session appends them (three, then one), wall time."""
    session = f"floor-{os.urandom(4).hex()}"
    records = call_records(session, 4 * (calls + 1))

    async def main(store: EventStore) -> float:
        await store.append(session, records[:4], 0)  # warm up
        start = time.perf_counter()
        for first in range(4, len(records), 4):
            await store.append(session, records[first : first + 3], first)
            await store.append(session, records[first + 3 : first + 4], first + 3)
        return time.perf_counter() - start

    with tempfile.TemporaryDirectory(prefix="dbcalls-") as directory:
        store = make(os.path.join(directory, "log.db"))
        try:
            elapsed = trio.run(main, store)
        finally:
            store.close()
    return elapsed / calls * US


def run(settings: Settings, postgres: str | None) -> list[Row]:
    """The ``calls`` rows: SQLite against its inline checkpoints, PostgreSQL against the
    memory store, each with its floor."""
    calls = settings.size(4_000, 100)
    sides: list[tuple[str, Callable[[str], EventStore], str, Callable[[str], EventStore]]] = [
        ("SqliteStore()", SqliteStore, "SqliteStore(), SQLite's checkpoints inline",
         InlineCheckpoints)]
    if postgres is not None:
        from events.stores.postgres import PostgresStore

        sides.append(("PostgresStore()", lambda _: PostgresStore(postgres),
                      "PostgresStore(), every statement in a worker thread",
                      lambda _: ThreadsOnly(postgres)))
    rows = []
    for name, make, other_name, other in sides:
        n = calls if name.startswith("Sqlite") else max(calls // 4, 25)
        ours, theirs, floor = interleave(settings.reps(5, 2), [
            lambda: call_tool_us(make, n), lambda: call_tool_us(other, n),
            lambda: two_appends_us(make, n)])
        figure = Figure(name=f"Session.call_tool on {name}", unit="µs/call",
                        samples=tuple(ours))
        baseline = Figure(name=f"Session.call_tool on {other_name}", unit="µs/call",
                          samples=tuple(theirs))
        floors = Figure(name=f"a call's two appends on {name}, nothing else", unit="µs/call",
                        samples=tuple(floor))
        target = TARGETS[name]
        rows.append(Row(group="calls", figure=figure, baseline=baseline,
                        comparison=f"{paired(figure, baseline, lambda a, b: a / b):.2f}×",
                        target=f"≤ {target:.0f} µs", met=figure.median <= target,
                        floor=f"{floors.median:.0f} µs/call: {floors.name}",
                        note="not durable, wall time"))
        rows.append(Row(group="calls", figure=floors, note="the store's share of a call"))
    memory = interleave(settings.reps(5, 2), [lambda: call_tool_us(lambda _: MemoryStore(),
                                                                   calls)])[0]
    rows.append(Row(group="calls", figure=Figure(name="Session.call_tool on MemoryStore()",
                                                 unit="µs/call", samples=tuple(memory)),
                    note="no database: the engine's and the codec's share"))
    return rows
