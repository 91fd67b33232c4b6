"""A store for one machine and several processes: one SQLite database in WAL mode.

One row per record, keyed by ``(session_id, seq)``: the row holds the record's line, the
very bytes :class:`~events.stores.JsonlStore` would write (without the newline), sealed into
the session's hash chain the same way (:func:`~events.stores.base.seal_lines`), so one
verifier checks both and a session copied from one to the other keeps its chain. A table of
sessions keeps each session's last seq and head (the hash of its last line) and their order
of first appearance; it takes part in the chain (an append chains onto the head it keeps), so
a row that does not agree with its session's last record is refused
(:func:`~events.stores.rows.check_head`) and named by :meth:`SqliteStore.verify`.

Appends run ``BEGIN IMMEDIATE`` (the write lock is taken at once: a read transaction never has
to upgrade to one), read the session's head and check it, check the conflict, insert the
batch's rows and ``COMMIT``: a batch is all there or not at all, whatever happens to the
process. Session ids are stored as their UTF-8 bytes (``surrogatepass``), so any Python string
names a session.

The ``async`` methods do their work inline when they can, as the JSONL store does: an append
first tries the write lock without waiting; if another process holds it, or the store is
``durable`` (``COMMIT`` waits for the disk), the append runs in a worker thread on a
connection of its own that waits up to ``busy_timeout`` seconds, in one transaction with the
other appends waiting then (:mod:`events.stores.groupcommit`), and once its transaction has
begun it finishes even if its task is cancelled. An inline commit never checkpoints the WAL
(which waits for the disk): a worker thread does (:mod:`events.stores.sqlite_checkpoint`).
Reads run inline (in WAL mode a reader never
waits for a writer). Not thread-safe: use one store from one event loop.

The tables' layout is versioned (:mod:`events.stores.sqlite_schema`): an empty database gets
them on opening, anything else waits for :meth:`SqliteStore.init_schema`.

WAL needs every process to see the same shared memory file: a local filesystem, not NFS or
SMB.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from collections.abc import AsyncIterator, Iterable, Sequence

import trio

from ..errors import DatabaseSchemaError
from ..integrity import SEALED_TAIL, Anchor, VerifyReport
from ..types import Record
from ..fast.prepared import Encodings
from .base import (Claim, InlineStore, check_artifact, check_batch, check_conflict, encode_bodies,
                   seal_lines)
from .following import POLL_INTERVAL, Appended, follow_session
from .groupcommit import Batch, GroupCommit
from .locks import claim_file
from .verifyapart import ChecksApart, Kind
from .rows import (check_head, check_rows, decode_row, seq_bound, session_of, sid_of,
                   verify_tables)
from .sqlite_checkpoint import Checkpointer
from .sqlite_connect import connect, create_file
from .sqlite_schema import check_schema, init_schema

__all__ = ["SqliteStore"]


# the session's last record: its seq, and the end of its line that holds its hash
_LAST_RECORD = (f"SELECT seq, substr(line, -{SEALED_TAIL}) FROM records WHERE session_id = ? "
                f"ORDER BY seq DESC LIMIT 1")


class SqliteStore(ChecksApart, InlineStore):
    """An :class:`~events.stores.EventStore` in the SQLite database at ``path``.

    A missing file is created owner-only (mode ``0600`` whatever the umask; SQLite gives its
    ``-wal`` and ``-shm`` files the database's mode; an existing file keeps its mode: see
    :mod:`events.stores.modes`), and an empty database gets the store's tables; a database that
    holds other tables, or the store's tables laid out by an older toolledger, is left as it is
    until :meth:`init_schema` (``toolledger db init``) creates or upgrades them: until then
    every use raises :class:`~events.errors.DatabaseSchemaError` saying so. One laid out by a
    newer toolledger is refused at once (see :mod:`events.stores.sqlite_schema`).

    ``read_only=True`` opens an existing database for reading only: nothing is created or
    changed, and appending is refused.

    ``durable=False`` (the default) commits with ``synchronous=NORMAL``: a committed batch
    survives a crash of the process, and the database stays consistent through power loss,
    which may lose the last batches committed before it. ``durable=True`` commits with
    ``synchronous=FULL``: a batch acknowledged survives power loss too.

    ``busy_timeout`` (seconds) is how long a waiting append (in a worker thread) and a read
    wait for another process's lock before failing with :class:`sqlite3.OperationalError`.

    ``poll_interval`` (seconds) is how often a follower (:meth:`follow`) looks up the
    session's last seq: how soon it sees what other processes append. Appends through this
    store object wake followers at once.

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
        poll_interval: float = POLL_INTERVAL,
        read_only: bool = False,
    ) -> None:
        if key is not None and (not isinstance(key, bytes) or not key):
            raise ValueError("the HMAC key must be non-empty bytes")
        self.path: str = os.fspath(path)
        self.durable = durable
        self.read_only = read_only
        self.busy_timeout = busy_timeout
        self.poll_interval = poll_interval
        self._appended = Appended()
        self.encodings = Encodings()
        self._key = key
        self._write_conn: sqlite3.Connection | None = None
        if not read_only:
            create_file(self.path)
        try:
            # reads, inline; waits up to busy_timeout (WAL readers rarely wait at all)
            conn = connect(self.path, busy_timeout, durable=durable, read_only=read_only)
            try:
                #: why the tables cannot be used yet (:meth:`init_schema` fixes it), or None
                self._unusable = check_schema(conn, self.path, create=not read_only)
                if not read_only:  # inline appends: never wait for a lock on the event loop
                    self._write_conn = connect(self.path, busy_timeout, durable=durable,
                                                waits=False)
                    # nor for the disk: its checkpoints run in a worker thread
                    self._write_conn.execute("PRAGMA wal_autocheckpoint=0")
            except BaseException:
                conn.close()
                raise
        except sqlite3.DatabaseError as exc:  # not a database, a folder that does not exist
            raise DatabaseSchemaError(
                self.path, f"cannot be opened as an SQLite database ({exc})") from exc
        self._read_conn: sqlite3.Connection | None = conn
        self._checkpoints = Checkpointer(
            self.path, busy_timeout, durable=durable,
            page_size=int(conn.execute("PRAGMA page_size").fetchone()[0]))
        # appends that wait, grouped, in a worker thread, on a connection that waits
        self._group = GroupCommit(
            lambda: connect(self.path, busy_timeout, durable=durable), self._write_batch)

    # -- appending ------------------------------------------------------------------------

    def append_nowait(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """Append a batch, all or nothing, without waiting; see :meth:`EventStore.append`.

        Raises :class:`trio.WouldBlock`, having stored nothing, when it would have to wait:
        the store is ``durable``, or another process holds the write lock."""
        conn = self._ensure_writable()
        if self.durable:
            raise trio.WouldBlock
        check_batch(session_id, records, expected_seq)
        bodies = encode_bodies(records, self.encodings)
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise trio.WouldBlock from None
            raise
        try:
            self._write_batch(conn, Batch(session_id, records, bodies, expected_seq))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._checkpoints.committed(sum(map(len, bodies)))
        self._appended.notify()

    async def append_waiting(
        self, session_id: str, records: Sequence[Record], expected_seq: int
    ) -> None:
        """The append when :meth:`append_nowait` cannot be done now: in a worker thread, on a
        connection that waits up to ``busy_timeout`` for the write lock, in one transaction
        with the other appends waiting then (group commit: see
        :mod:`events.stores.groupcommit`). It returns once the batch is committed. Cancelled
        only before anything of it is written: once its transaction has begun, the batch is
        committed or rolled back whole."""
        self._ensure_writable()
        check_batch(session_id, records, expected_seq)
        await self._group.append(Batch(session_id, records, encode_bodies(records, self.encodings), expected_seq))
        self._appended.notify()

    def _write_batch(self, conn: sqlite3.Connection, batch: Batch) -> None:
        """Inside a write transaction: check the conflict, seal the batch onto the session's
        head, insert its rows and move the head. Raises, having written nothing that the
        caller does not roll back, for a conflict or a head that does not verify."""
        session_id, records = batch.session_id, batch.records
        sid = sid_of(session_id)
        has_row, last, head = self._head_row(conn, session_id)
        check_conflict(session_id, batch.expected_seq, last)
        if not records:
            return
        lines, new_head = seal_lines(batch.bodies, head, self._key)
        conn.executemany(
            "INSERT INTO records (session_id, seq, line) VALUES (?, ?, ?)",
            [(sid, record.seq, line[:-1]) for record, line in zip(records, lines)])
        new_last = records[-1].seq
        if not has_row:
            conn.execute("INSERT INTO sessions (session_id, last_seq, head) VALUES (?, ?, ?)",
                         (sid, new_last, new_head))
        else:
            conn.execute("UPDATE sessions SET last_seq = ?, head = ? WHERE session_id = ?",
                         (new_last, new_head, sid))

    def _head_row(self, conn: sqlite3.Connection, session_id: str) -> tuple[bool, int, str]:
        """Whether the session has a row in the table of sessions, and the last seq and head
        it keeps, once they agree with the session's last record, and with a key once that
        record verifies: a store never chains onto a head its records do not end with, and a
        keyed one never onto a record it cannot verify (see
        :func:`~events.stores.rows.check_head`)."""
        sid = sid_of(session_id)
        row = conn.execute("SELECT last_seq, head FROM sessions WHERE session_id = ?",
                           (sid,)).fetchone()
        last = conn.execute(_LAST_RECORD, (sid,)).fetchone()
        return (row is not None, *check_head(
            self.path, session_id, row, last, self._key,
            lambda first: conn.execute("SELECT seq, line FROM records WHERE session_id = ? "
                                       "AND seq >= ? ORDER BY seq", (sid, first)).fetchall()))

    # -- reading --------------------------------------------------------------------------

    async def read(self, session_id: str, after: int = 0, limit: int | None = None
                   ) -> list[Record]:
        """The session's records with ``seq > after``, in seq order; ``[]`` if unknown. At
        most ``limit`` if given: :meth:`follow` reads a long session a part at a time, so its
        first record comes before the whole session is decoded."""
        conn = self._ensure_open(self._read_conn)
        after = max(after, 0)
        sid = sid_of(session_id)
        last = seq_bound(after, limit)
        if self._key is None:
            rows = conn.execute("SELECT seq, line FROM records WHERE session_id = ? AND seq > ? "
                                "AND seq <= ? ORDER BY seq", (sid, after, last)).fetchall()
            return [self._decode(session_id, seq, line)[0] for seq, line in rows]
        # with a key, the row before the first handed out gives the hash the first links to
        rows = conn.execute("SELECT seq, line FROM records WHERE session_id = ? AND seq >= ? "
                            "AND seq <= ? ORDER BY seq", (sid, after, last)).fetchall()
        return self._check_rows(session_id, after, rows)[0]

    async def last_seq(self, session_id: str) -> int:
        """The seq of the session's last record; 0 for an unknown session."""
        conn = self._ensure_open(self._read_conn)
        row = conn.execute("SELECT last_seq FROM sessions WHERE session_id = ?",
                           (sid_of(session_id),)).fetchone()
        return int(row[0]) if row is not None else 0

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Record]:
        """The session's records with ``seq > after``, then each one appended, until the
        caller stops (see :meth:`EventStore.follow`): appends through this store wake it at
        once; what other processes append it finds by looking up the session's last seq
        every ``poll_interval`` seconds. It holds no transaction while it waits."""
        return follow_session(self.read, self.last_seq, self._appended, session_id, after,
                              poll_interval=self.poll_interval)

    async def sessions(self) -> list[str]:
        """Every session id, in order of first appearance."""
        conn = self._ensure_open(self._read_conn)
        rows = conn.execute("SELECT session_id FROM sessions ORDER BY id").fetchall()
        return [session_of(row[0]) for row in rows]

    def head(self, session_id: str) -> str | None:
        """The hash of the session's last record (see :meth:`JsonlStore.head
        <events.stores.JsonlStore.head>`); ``None`` for an unknown session."""
        has_row, _, head = self._head_row(self._ensure_open(self._read_conn), session_id)
        return head if has_row else None

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

    async def put_artifact(self, session_id: str, call_id: str, sha256: str,
                           data: bytes) -> None:
        """Keep the whole of a long result in the table ``artifacts``, committed before it
        returns (in a worker thread, on a connection of its own that waits up to
        ``busy_timeout``); see :class:`~events.stores.base.ArtifactStore`."""
        self._ensure_writable()
        check_artifact(sha256, data)
        row = (sid_of(session_id), call_id, sha256, data)

        def put() -> None:
            conn = connect(self.path, self.busy_timeout, durable=self.durable)
            try:
                with conn:
                    conn.execute("INSERT OR IGNORE INTO artifacts (session_id, call_id, sha256, "
                                 "data) VALUES (?, ?, ?, ?)", row)
            finally:
                conn.close()

        await trio.to_thread.run_sync(put)

    async def get_artifact(self, session_id: str, call_id: str, sha256: str) -> bytes | None:
        """The bytes of an artifact; ``None`` if the table holds none of that name."""
        return self._artifact(self._ensure_open(self._read_conn), session_id, call_id, sha256)

    @staticmethod
    def _artifact(conn: sqlite3.Connection, session_id: str, call_id: str,
                  sha256: str) -> bytes | None:
        row = conn.execute("SELECT data FROM artifacts WHERE session_id = ? AND call_id = ? AND "
                           "sha256 = ?", (sid_of(session_id), call_id, sha256)).fetchone()
        return None if row is None else bytes(row[0])

    async def init_schema(self) -> None:
        """Create the store's tables in the database, or upgrade them to the layout this
        code uses; a no-op when they are current (``toolledger db init`` runs it). Raises
        :class:`~events.errors.DatabaseSchemaError` for a database laid out by a newer
        toolledger, or holding tables of the same names that toolledger did not make. Runs in
        a worker thread: it may wait up to ``busy_timeout`` for another writer."""
        self._ensure_open(self._read_conn, schema=False)
        if self.read_only:
            raise ValueError(f"the SqliteStore for {self.path} is read-only: it cannot make "
                             f"tables")

        def init() -> None:
            conn = connect(self.path, self.busy_timeout, durable=self.durable)
            try:
                init_schema(conn, self.path)
            finally:
                conn.close()

        await trio.to_thread.run_sync(init)
        self._unusable = None

    def _opened_as(self) -> tuple[Kind, str]:
        return "sqlite", self.path

    async def verify(
        self, *, session: str | None = None, anchors: Iterable[Anchor] = ()
    ) -> VerifyReport:
        """Check the hash chain of every session (or of ``session``), with the store's key if
        it has one: :func:`~events.stores.jsonl.verify_jsonl` for the rows of the database,
        and each session's row in the table of sessions against its records. A broken link
        names the session and seq (its ``line`` is ``None``: rows have no line number); a row
        that disagrees names the session (see :func:`~events.stores.rows.verify_tables`).
        Reads one session at a time, in order of first appearance, in a worker thread on a
        connection of its own: a long check never holds the event loop, and a cancelled one
        is left to end there."""
        self._ensure_open(self._read_conn)
        return await trio.to_thread.run_sync(self._verify, session, tuple(anchors),
                                             abandon_on_cancel=True)

    def _verify(self, session: str | None, anchors: Sequence[Anchor]) -> VerifyReport:
        with closing(connect(self.path, self.busy_timeout, durable=False, read_only=True)) as conn:
            only, args = ("WHERE session_id = ? ", (sid_of(session),)) if session is not None \
                else ("", ())  # one session's check reads that session's row only
            rows = {session_of(sid): (int(last), str(head)) for sid, last, head in conn.execute(
                f"SELECT session_id, last_seq, head FROM sessions {only}ORDER BY id", args)}
            # a check of one session reads that session's records only (no scan for others)
            orphans = [session_of(sid) for (sid,) in conn.execute(
                "SELECT DISTINCT session_id FROM records "
                "WHERE session_id NOT IN (SELECT session_id FROM sessions)")
            ] if session is None else []
            return verify_tables(
                self._key, rows, orphans,
                lambda session_id: conn.execute(
                    "SELECT seq, line FROM records WHERE session_id = ? ORDER BY seq",
                    (sid_of(session_id),)),
                session=session, anchors=anchors,
                artifacts=lambda *name: self._artifact(conn, *name))

    def close(self) -> None:
        """Close the database. Idempotent; the store refuses to be used afterwards."""
        conns = (self._read_conn, self._write_conn)
        self._read_conn = self._write_conn = None
        self._checkpoints.wait()  # its connection closes before the store's last one does
        for conn in conns:
            if conn is not None:
                conn.close()
        self._group.close()
        self._appended.notify()  # a waiting follower's next read says the store is closed

    # -- internals ------------------------------------------------------------------------

    def _ensure_open(
        self, conn: sqlite3.Connection | None, *, schema: bool = True
    ) -> sqlite3.Connection:
        if conn is None:
            raise ValueError(f"the SqliteStore for {self.path} is closed")
        if schema and self._unusable is not None:
            raise DatabaseSchemaError(
                self.path, f"{self._unusable}: run `toolledger db init sqlite:///{self.path}` "
                f"(or await store.init_schema()) to make them current")
        return conn

    def _ensure_writable(self) -> sqlite3.Connection:
        if self.read_only:
            raise ValueError(f"the SqliteStore for {self.path} is read-only: it cannot append")
        return self._ensure_open(self._write_conn)

    def _decode(self, session_id: str, seq: int, line: bytes) -> tuple[Record, str | None]:
        return decode_row(self.path, session_id, seq, line)

    def _check_rows(
        self, session_id: str, after: int, rows: list[tuple[int, bytes]]
    ) -> tuple[list[Record], str]:
        assert self._key is not None
        return check_rows(self.path, self._key, session_id, after, rows)
