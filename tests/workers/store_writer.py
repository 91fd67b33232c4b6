"""A process that writes to a shared store, for the many-writers tests (tests/stores/test_many_writers.py).

    python -m tests.workers.store_writer many  LOG WORKER SESSIONS BATCHES
    python -m tests.workers.store_writer race  LOG WORKER SESSIONS ROUNDS
    python -m tests.workers.store_writer kill  LOG BATCH

LOG is a ``postgresql://`` URL or the path of a SQLite database. Every record's text names
who wrote it (``WORKER SESSION seq``), so the test can tell whose batches are in the log.

``many``: sessions ``wWORKER-sN`` of BATCHES batches of four records each, eight sessions at a
time. Prints ``DONE``.

``race``: waits for a line on stdin (so that racing workers start together), then for each of
the sessions ``race-N`` and each round r, appends four records at ``expected_seq = 4 r``: of
the workers racing, exactly one wins each round. Prints ``WON SESSION ROUND`` for each win,
then ``CONFLICTS n``.

``kill``: appends batches of BATCH records of about 10 kB each to session ``k`` (after what it
holds) until killed,
printing ``ACK seq`` after each batch the store acknowledged.
"""

from __future__ import annotations

import sys

import trio

from events.errors import ConflictError
from events.stores import EventStore, SqliteStore
from events.types import Record, UserMessage


def open_log(log: str) -> EventStore:
    if log.startswith("postgresql://"):
        from events.stores.postgres import PostgresStore

        return PostgresStore(log)
    return SqliteStore(log, busy_timeout=60.0)


def batch(worker: str, session: str, first: int, count: int, pad: int = 0) -> list[Record]:
    return [Record(session_id=session, seq=seq, time=1_767_225_600.0,
                   event=UserMessage(text=f"{worker} {session} {seq}" + "x" * pad))
            for seq in range(first, first + count)]


async def many(store: EventStore, worker: str, sessions: int, batches: int) -> None:
    limit = trio.Semaphore(8)

    async def write(session: str) -> None:
        async with limit:
            for n in range(batches):
                await store.append(session, batch(worker, session, 4 * n + 1, 4), 4 * n)

    async with trio.open_nursery() as nursery:
        for n in range(sessions):
            nursery.start_soon(write, f"w{worker}-s{n}")
    print("DONE", flush=True)


async def race(store: EventStore, worker: str, sessions: int, rounds: int) -> None:
    await trio.to_thread.run_sync(sys.stdin.readline)
    conflicts = 0
    for n in range(sessions):
        session = f"race-{n}"
        for r in range(rounds):
            try:
                await store.append(session, batch(worker, session, 4 * r + 1, 4), 4 * r)
            except ConflictError:
                conflicts += 1
            else:
                print(f"WON {session} {r}", flush=True)
    print(f"CONFLICTS {conflicts}", flush=True)


async def kill(store: EventStore, size: int) -> None:
    seq = await store.last_seq("k")  # on from where a killed writer stopped
    while True:
        await store.append("k", batch("k", "k", seq + 1, size, pad=10_000), seq)
        seq += size
        print(f"ACK {seq}", flush=True)


def main(argv: list[str]) -> None:
    mode, log, *rest = argv
    store = open_log(log)
    try:
        if mode == "many":
            trio.run(many, store, rest[0], int(rest[1]), int(rest[2]))
        elif mode == "race":
            trio.run(race, store, rest[0], int(rest[1]), int(rest[2]))
        else:
            trio.run(kill, store, int(rest[0]))
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
