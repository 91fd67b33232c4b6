"""A store for one machine and several processes: one SQLite database in WAL mode.

One row per record, keyed by ``(session_id, seq)``: the row holds the record's line, the
very bytes :class:`~events.stores.JsonlStore` would write (without the newline), sealed into
the session's hash chain the same way (:func:`~events.stores.base.seal_lines`), so one
verifier checks both and a session copied from one to the other keeps its chain. A table of
sessions keeps each session's last seq and head (the hash of its last line) and their order
of first appearance.

Appends run ``BEGIN IMMEDIATE`` (the write lock is taken at once: a read transaction never has
to upgrade to one), read the session's head, check the conflict, insert the batch's rows and
``COMMIT``: a batch is all there or not at all, whatever happens to the process. Session ids
are stored as their UTF-8 bytes (``surrogatepass``), so any Python string names a session.

The ``async`` methods do their work inline when they can, as the JSONL store does: an append
first tries the write lock without waiting; if another process holds it, or the store is
``durable`` (``COMMIT`` waits for the disk), the append runs in a worker thread on a
connection of its own that waits up to ``busy_timeout`` seconds, and once started it finishes
even if its task is cancelled. Reads run inline (in WAL mode a reader never waits for a
writer). Not thread-safe: use one store from one event loop.

WAL needs every process to see the same shared memory file: a local filesystem, not NFS or
SMB.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence

import trio

from ..integrity import GENESIS
from ..types import Record
from .base import Claim, InlineStore, check_batch, check_conflict, encode_bodies, seal_lines
from .locks import claim_file
from .rows import check_rows, decode_row

__all__ = ["SqliteStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    session_id BLOB NOT NULL UNIQUE,
    last_seq INTEGER NOT NULL,
    head TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    session_id BLOB NOT NULL,
    seq INTEGER NOT NULL,
    line BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""


def _sid(session_id: str) -> bytes:
    return session_id.encode("utf-8", "surrogatepass")


def _connect(
    path: str, timeout: float, *, durable: bool, waits: bool = True
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are begun explicitly), set up with WAL;
    one that does not ``waits`` gets ``SQLITE_BUSY`` at once from a lock held elsewhere."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        if not waits:
            conn.execute("PRAGMA busy_timeout=0")
    except BaseException:
        conn.close()
        raise
    return conn


class SqliteStore(InlineStore):
    """An :class:`~events.stores.EventStore` in the SQLite database at ``path`` (created if
    missing, with its tables).

    ``durable=False`` (the default) commits with ``synchronous=NORMAL``: a committed batch
    survives a crash of the process, and the database stays consistent through power loss,
    which may lose the last batches committed before it. ``durable=True`` commits with
    ``synchronous=FULL``: a batch acknowledged survives power loss too.

    ``busy_timeout`` (seconds) is how long a waiting append (in a worker thread) and a read
    wait for another process's lock before failing with :class:`sqlite3.OperationalError`.

    ``key`` (non-empty bytes) seals every line with an HMAC of it and verifies, with it, every
    record the store hands out and the session's last record before chaining onto it, exactly
    as the keyed JSONL store does: a row that does not verify raises
    :class:`~events.errors.UnverifiedRecordError` naming the database, the session and the seq
    (the seq stands where a file's line number would).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durable: bool = False,
        key: bytes | None = None,
        busy_timeout: float = 5.0,
    ) -> None:
        if key is not None and (not isinstance(key, bytes) or not key):
            raise ValueError("the HMAC key must be non-empty bytes")
        self.path: str = os.fspath(path)
        self.durable = durable
        self.busy_timeout = busy_timeout
        self._key = key
        # reads, inline; waits up to busy_timeout (WAL readers rarely wait at all)
        self._read_conn: sqlite3.Connection | None = _connect(self.path, busy_timeout,
                                                              durable=durable)
        conn = self._read_conn
        try:
            conn.executescript(_SCHEMA)
            # inline appends: never wait for a lock on the event loop
            self._write_conn: sqlite3.Connection | None = _connect(
                self.path, busy_timeout, durable=durable, waits=False)
        except BaseException:
            conn.close()
            raise
        self._wait_conn: sqlite3.Connection | None = None  # appends that wait, in a thread
        self._waiting = trio.Lock()

    # -- appending ------------------------------------------------------------------------

    def append_nowait(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """Append a batch, all or nothing, without waiting; see :meth:`EventStore.append`.

        Raises :class:`trio.WouldBlock`, having stored nothing, when it would have to wait:
        the store is ``durable``, or another process holds the write lock."""
        conn = self._ensure_open(self._write_conn)
        if self.durable:
            raise trio.WouldBlock
        check_batch(session_id, records, expected_seq)
        bodies = encode_bodies(records)
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise trio.WouldBlock from None
            raise
        self._write_locked(conn, session_id, records, bodies, expected_seq)

    async def append_waiting(
        self, session_id: str, records: Sequence[Record], expected_seq: int
    ) -> None:
        """The append when :meth:`append_nowait` cannot be done now: in a worker thread, on a
        connection that waits up to ``busy_timeout`` for the write lock. Once started it is
        not abandoned on cancellation: the batch is committed or rolled back whole."""
        self._ensure_open(self._write_conn)
        check_batch(session_id, records, expected_seq)
        bodies = encode_bodies(records)
        async with self._waiting:
            if self._wait_conn is None:
                self._wait_conn = await trio.to_thread.run_sync(
                    lambda: _connect(self.path, self.busy_timeout, durable=self.durable))
            conn = self._ensure_open(self._wait_conn)

            def write() -> None:
                conn.execute("BEGIN IMMEDIATE")
                self._write_locked(conn, session_id, records, bodies, expected_seq)

            await trio.to_thread.run_sync(write)

    def _write_locked(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        records: Sequence[Record],
        bodies: list[bytes],
        expected_seq: int,
    ) -> None:
        """In a transaction begun with ``BEGIN IMMEDIATE``: check, seal, insert, commit (or
        roll back on any error)."""
        sid = _sid(session_id)
        try:
            row = conn.execute("SELECT last_seq, head FROM sessions WHERE session_id = ?",
                               (sid,)).fetchone()
            last, head = (row[0], row[1]) if row is not None else (0, GENESIS)
            check_conflict(session_id, expected_seq, last)
            if bodies:
                if self._key is not None and last:
                    head = self._verified_head(conn, session_id, last)
                lines, new_head = seal_lines(bodies, head, self._key)
                conn.executemany(
                    "INSERT INTO records (session_id, seq, line) VALUES (?, ?, ?)",
                    [(sid, record.seq, line[:-1]) for record, line in zip(records, lines)])
                new_last = records[-1].seq
                if row is None:
                    conn.execute("INSERT INTO sessions (session_id, last_seq, head) "
                                 "VALUES (?, ?, ?)", (sid, new_last, new_head))
                else:
                    conn.execute("UPDATE sessions SET last_seq = ?, head = ? "
                                 "WHERE session_id = ?", (new_last, new_head, sid))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _verified_head(self, conn: sqlite3.Connection, session_id: str, last: int) -> str:
        """The session's head as its last row says, once that row links to the one before it
        with the key: a keyed store never chains onto a record it cannot verify."""
        rows = conn.execute("SELECT seq, line FROM records WHERE session_id = ? AND seq >= ? "
                            "ORDER BY seq", (_sid(session_id), last - 1)).fetchall()
        return self._check_rows(session_id, last - 1, rows)[1]

    # -- reading --------------------------------------------------------------------------

    async def read(self, session_id: str, after: int = 0) -> list[Record]:
        """The session's records with ``seq > after``, in seq order; ``[]`` if unknown."""
        conn = self._ensure_open(self._read_conn)
        after = max(after, 0)
        sid = _sid(session_id)
        if self._key is None:
            rows = conn.execute("SELECT seq, line FROM records WHERE session_id = ? AND seq > ? "
                                "ORDER BY seq", (sid, after)).fetchall()
            return [self._decode(session_id, seq, line)[0] for seq, line in rows]
        # with a key, the row before the first handed out gives the hash the first links to
        rows = conn.execute("SELECT seq, line FROM records WHERE session_id = ? AND seq >= ? "
                            "ORDER BY seq", (sid, after)).fetchall()
        return self._check_rows(session_id, after, rows)[0]

    async def last_seq(self, session_id: str) -> int:
        """The seq of the session's last record; 0 for an unknown session."""
        conn = self._ensure_open(self._read_conn)
        row = conn.execute("SELECT last_seq FROM sessions WHERE session_id = ?",
                           (_sid(session_id),)).fetchone()
        return int(row[0]) if row is not None else 0

    async def sessions(self) -> list[str]:
        """Every session id, in order of first appearance."""
        conn = self._ensure_open(self._read_conn)
        rows = conn.execute("SELECT session_id FROM sessions ORDER BY id").fetchall()
        return [bytes(row[0]).decode("utf-8", "surrogatepass") for row in rows]

    def head(self, session_id: str) -> str | None:
        """The hash of the session's last record (see :meth:`JsonlStore.head
        <events.stores.JsonlStore.head>`); ``None`` for an unknown session."""
        conn = self._ensure_open(self._read_conn)
        row = conn.execute("SELECT head FROM sessions WHERE session_id = ?",
                           (_sid(session_id),)).fetchone()
        return str(row[0]) if row is not None else None

    @property
    def keyed(self) -> bool:
        """Whether the store was given a key: it seals with it, and every record it hands out
        was verified with it."""
        return self._key is not None

    def claim(self, session_id: str) -> Claim:
        """Own ``session_id`` until the claim is released: the JSONL store's file claim, a
        lock file of the session's own in ``<path>.owners/``, respected by every claim in
        every process on this machine (see :mod:`events.stores.locks`);
        :class:`~events.errors.SessionInUse` at once if it is held."""
        self._ensure_open(self._read_conn)
        return claim_file(self.path, session_id)

    def close(self) -> None:
        """Close the database. Idempotent; the store refuses to be used afterwards."""
        conns = (self._read_conn, self._write_conn, self._wait_conn)
        self._read_conn = self._write_conn = self._wait_conn = None
        for conn in conns:
            if conn is not None:
                conn.close()

    # -- internals ------------------------------------------------------------------------

    def _ensure_open(self, conn: sqlite3.Connection | None) -> sqlite3.Connection:
        if conn is None:
            raise ValueError(f"the SqliteStore for {self.path} is closed")
        return conn

    def _decode(self, session_id: str, seq: int, line: bytes) -> tuple[Record, str | None]:
        return decode_row(self.path, session_id, seq, line)

    def _check_rows(
        self, session_id: str, after: int, rows: list[tuple[int, bytes]]
    ) -> tuple[list[Record], str]:
        assert self._key is not None
        return check_rows(self.path, self._key, session_id, after, rows)
