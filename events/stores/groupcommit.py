"""Group commit for the SQLite store: the appends that must wait share one transaction.

An append that cannot be done inline (the store is ``durable``, so ``COMMIT`` waits for the
disk; or another process holds the write lock) runs in a worker thread. Alone, each such
append is one transaction, and at ``synchronous=FULL`` one sync of the WAL: with several
sessions appending at once they queue up behind each other's syncs. Grouped, every batch
queued while one transaction is being written goes into the next one, so one sync serves
them all (measured in ``benchmarks/groupcommit.py``: docs/performance.md has the figures).

Without a task of its own (the store runs in its host's event loop and starts nothing there):
the first appender that gets the lock *leads*: it takes every queued batch and writes them in
a worker thread, ``BEGIN IMMEDIATE``, a ``SAVEPOINT`` per batch, one ``COMMIT``; then it
wakes their appenders. A batch that fails alone (a conflict, a record that does not verify)
is rolled back to its savepoint and fails alone; if the transaction fails (``COMMIT`` does,
or the lock cannot be had), every batch of the group fails with that error, nothing of it
stored. Each append returns, or raises its batch's error, only after the ``COMMIT``.

Cancellation keeps the store's promise: an append is cancelled only before anything of it
is written. A batch still queued is withdrawn and its appender gets :class:`trio.Cancelled`;
one that a leader has taken is waited for, shielded, and its append then returns (or raises)
as if it had not been cancelled: the cancellation lands at the appender's next checkpoint.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

import trio

from ..types import Record

__all__ = ["Batch", "GroupCommit"]


class Batch:
    """One append waiting to be written: what the store's ``write`` needs, and its outcome."""

    __slots__ = ("bodies", "done", "error", "expected_seq", "records", "session_id", "taken")

    def __init__(
        self, session_id: str, records: Sequence[Record], bodies: list[bytes], expected_seq: int
    ) -> None:
        self.session_id = session_id
        self.records = records
        self.bodies = bodies
        self.expected_seq = expected_seq
        self.taken = False  # a leader is writing it
        self.done = trio.Event()  # set once its group's transaction has ended
        self.error: BaseException | None = None


#: Writes one batch's rows inside the open transaction; raises to fail it alone.
Write = Callable[[sqlite3.Connection, Batch], None]


class GroupCommit:
    """The queue of one store's waiting appends, and the transactions that write them.

    ``connect`` makes the connection the groups are written on (once, in a worker thread);
    ``write`` writes one batch inside the open transaction.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], write: Write) -> None:
        self._connect = connect
        self._write = write
        self._conn: sqlite3.Connection | None = None
        self._pending: list[Batch] = []
        self._lock = trio.Lock()
        self._closed = False

    async def append(self, batch: Batch) -> None:
        """Write ``batch`` with whatever else is queued; return after its ``COMMIT``, or raise
        its error (see the module docstring for cancellation)."""
        self._pending.append(batch)
        try:
            async with self._lock:
                if not batch.taken:
                    await self._lead()
        except trio.Cancelled:
            if not batch.taken:
                self._pending.remove(batch)
                raise
            with trio.CancelScope(shield=True):
                await batch.done.wait()
        if batch.error is not None:
            raise batch.error

    async def _lead(self) -> None:
        group, self._pending = self._pending, []
        for batch in group:
            batch.taken = True
        try:
            if self._closed:  # closed while the group waited for the lock
                raise ValueError("the store was closed before the batch could be written")
            if self._conn is None:
                self._conn = await trio.to_thread.run_sync(self._connect)
            await trio.to_thread.run_sync(self._commit, self._conn, group)
        except BaseException as exc:  # closed, no connection: nothing of the group was written
            for batch in group:
                batch.error = batch.error or exc
            raise
        finally:
            for batch in group:
                batch.done.set()
            if self._closed:  # the store closed while this group was written
                self._close_connection()

    def _commit(self, conn: sqlite3.Connection, group: list[Batch]) -> None:
        """In a worker thread: the group's transaction, a savepoint per batch."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            for batch in group:
                conn.execute("SAVEPOINT batch")
                try:
                    self._write(conn, batch)
                except Exception as exc:  # this batch alone
                    conn.execute("ROLLBACK TO batch")
                    batch.error = exc
                conn.execute("RELEASE batch")
            conn.execute("COMMIT")
        except BaseException as exc:  # the transaction: every batch of the group
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for batch in group:
                batch.error = batch.error or exc

    def close(self) -> None:
        """Write no group that has not begun. A group being written finishes first, then
        its leader closes the connection."""
        self._closed = True
        if not self._lock.locked():
            self._close_connection()

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
