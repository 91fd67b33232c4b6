"""Following a session of a PostgreSQL store with LISTEN/NOTIFY, without a thread.

Every append moves the session's row, and a trigger on it (:mod:`events.stores.pgschema`)
notifies the channel ``toolledger`` with ``<sha256 of the session id>:<last seq>``, once the
append commits. A follower keeps a connection of its own that listens on the channel; the
notification says only *that* the session moved: the follower reads the rows itself with the
store's ``read(after=...)``, so it hands out exactly what a reader would (verified, with a
key), whoever wrote them.

Waiting costs no thread: the listening connection's socket is watched by trio
(:func:`trio.lowlevel.wait_readable`) and libpq's own calls (psycopg's ``pq`` API:
``consume_input``, ``notifies``) take in what arrived, without blocking.

Notifications are not durable: one sent while the follower was not connected is gone. So
after every (re)connection, once it listens, the follower catches up with
``read(after=...)`` before it waits. A lost connection (the server restarted, the network
dropped) is reconnected, first at once, then waiting longer each time, up to five seconds,
until it works or the caller stops. Closing the store ends its followers: each raises the
``ValueError`` any use of a closed store raises.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import psycopg
import trio
import trio.lowlevel

from ..types import Record
from . import following
from .pgschema import CHANNEL

__all__ = ["Followed", "follow_session"]


class Followed(Protocol):
    """What following needs of a PostgreSQL store (:class:`~events.stores.postgres.PostgresStore`)."""

    #: where to connect, for the listening connection
    conninfo: str
    #: the sockets followers wait on, which closing the store wakes
    listening: set[int]

    async def read(self, session_id: str, after: int = 0, limit: int | None = None
                   ) -> Sequence[Record]:
        """The session's records after seq ``after`` (at most ``limit``), verified as any
        reader gets them."""
        ...

    def ensure_open(self) -> None:
        """Raise the store's ``ValueError`` if it is closed."""
        ...


def _listen(conninfo: str) -> psycopg.Connection[tuple[Any, ...]]:
    conn = psycopg.connect(conninfo, autocommit=True)
    try:
        conn.execute(f"LISTEN {CHANNEL}")
    except BaseException:
        conn.close()
        raise
    return conn


async def follow_session(store: Followed, session_id: str,
                         after: int = 0) -> AsyncIterator[Record]:
    """:meth:`PostgresStore.follow <events.stores.postgres.PostgresStore.follow>`."""
    wanted = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest() + ":"
    pause = 0.0
    while True:
        try:
            conn = await trio.to_thread.run_sync(_listen, store.conninfo)
        except psycopg.OperationalError:
            pause = min(max(pause * 2, 0.05), 5.0)
            await trio.sleep(pause)  # the server is away: try again, less and less often
            continue
        pause = 0.0
        try:
            moved = True  # catch up first: what was appended while nobody listened
            pgconn = conn.pgconn
            while True:
                while moved:  # a part at a time: a long backlog is not decoded whole first
                    records = await store.read(session_id, after, following.CHUNK)
                    for record in records:
                        yield record
                        after = record.seq
                    moved = len(records) == following.CHUNK
                store.ensure_open()
                store.listening.add(pgconn.socket)
                try:
                    await trio.lowlevel.wait_readable(pgconn.socket)
                except trio.ClosedResourceError:
                    store.ensure_open()  # the store was closed: its ValueError says so
                    raise
                finally:
                    store.listening.discard(pgconn.socket)
                pgconn.consume_input()  # psycopg.OperationalError if the connection is lost
                moved = False
                while (note := pgconn.notifies()) is not None:
                    payload = note.extra.decode()
                    if payload.startswith(wanted) and int(payload[len(wanted):]) > after:
                        moved = True
        except psycopg.OperationalError:
            continue  # reconnect, and catch up
        finally:
            conn.close()
