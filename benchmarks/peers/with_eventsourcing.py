"""The ``eventsourcing`` library's side of the stores group: its recorders, given our events.

An ``eventsourcing`` application stores its events through an *application recorder*: one row
per event, keyed by ``(originator_id, originator_version)`` (the key is its conflict check),
with a notification id that orders every event of the database. Here each session is one
originator (a UUID of its own), each record one stored event: its version the record's seq,
its topic the event's type, its state the record's line as toolledger's codec encodes it (the
codec's work is done in the timed loop, as a toolledger store does it in ``append``). A batch
of four (a call's records) is one ``insert_events``: one transaction.

The library is synchronous: its writes run on the calling thread, which waits for them.
Durability is the library's own: on SQLite it sets WAL and leaves ``synchronous`` at SQLite's
default, ``FULL`` (a sync of the WAL per commit), so the toolledger store beside it is
``durable=True``; on PostgreSQL it keeps the server's ``synchronous_commit`` (``on``), so the
toolledger store beside it is ``durable=True`` too.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from eventsourcing.persistence import ApplicationRecorder, StoredEvent

from events import Record
from events.fast.prepared import Encodings
from events.stores.base import encode_bodies

__all__ = ["postgres_recorder", "sqlite_recorder", "write_batches"]


def sqlite_recorder(path: str, *, create: bool = True) -> ApplicationRecorder:
    """The library's SQLite application recorder on the database at ``path`` (WAL, the
    default ``synchronous=FULL``), its table made if ``create``."""
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    recorder = SQLiteApplicationRecorder(SQLiteDatastore(db_name=path, lock_timeout=30))
    if create:
        recorder.create_table()
    return recorder


def postgres_recorder(url: str, schema: str, *, create: bool = True) -> ApplicationRecorder:
    """The library's PostgreSQL application recorder on the server ``url`` names, its table
    made in ``schema`` if ``create`` (the server's default ``synchronous_commit``)."""
    from psycopg.conninfo import conninfo_to_dict

    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

    info: dict[str, Any] = conninfo_to_dict(url)
    datastore = PostgresDatastore(dbname=info.get("dbname", "postgres"),
                                  host=info.get("host", "127.0.0.1"), port=info["port"],
                                  user=info.get("user", "postgres"),
                                  password=info.get("password", ""), schema=schema)
    recorder = PostgresApplicationRecorder(datastore)
    if create:  # not by processes at once: concurrent CREATE TABLE IF NOT EXISTS can fail
        recorder.create_table()
    return recorder


def write_batches(recorder: ApplicationRecorder, batches: Sequence[Sequence[Record]],
                  clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """Insert each batch of one session's records as one ``insert_events``, one after
    another; the clock's readings before the first and after the last."""
    originator = uuid.uuid4()
    encodings = Encodings()
    start = clock()
    for batch in batches:
        bodies = encode_bodies(batch, encodings)
        recorder.insert_events([
            StoredEvent(originator_id=originator, originator_version=record.seq,
                        topic=type(record.event).__name__, state=body)
            for record, body in zip(batch, bodies)])
    return start, clock()
