"""A store for many processes and machines: one PostgreSQL database.

The tables are the SQLite store's, one row per record sealed into the session's hash chain
(:mod:`events.stores.pgschema`), so one verifier checks both and a session copied between
them keeps its chain; reading rows back, keyed verification included, is the very code the
SQLite store runs (:mod:`events.stores.rows`).

**Off the event loop.** psycopg's async connection runs on asyncio only, so the store uses its
synchronous API in worker threads (:func:`trio.to_thread.run_sync`), one connection per
thread from a small pool (``connections``). A statement that has started is not abandoned
when its task is cancelled: an append is committed or rolled back whole and returns (or
raises) as it would have, and the cancellation is delivered at the task's next checkpoint.
The one exception is an append's statement when the store knows the session's head: it is
sent and awaited from the event loop, with no thread hop (:mod:`events.stores.pgloop`).

**One round trip per append.** The store remembers each session's last seq and head as it
left them. An append seals the batch onto that head and sends one statement
(:data:`~events.stores.pgschema.APPEND`) that moves the session's row from the expected seq
and head to the new ones and inserts the batch's rows only if it did; fewer rows than the
batch means another writer got there first: :class:`~events.errors.ConflictError`. When the
store does not know the session's head (the first append of a session it has not written,
or a row that did not move), it reads it first, with the end of the session's last record's
line, and chains onto it only if the two agree (the table of sessions takes part in the chain:
:func:`~events.stores.rows.check_head`), with a key once that record verifies. Batches
that queue while every connection is busy go together, in one statement and one commit
(group commit, :mod:`events.stores.pgappend`).

**Ownership** is a claim held in the database (:mod:`events.stores.pgclaims`); **following** a
session uses LISTEN/NOTIFY (:mod:`events.stores.pgfollow`).

Needs the ``postgres`` extra: ``pip install 'toolledger[postgres]'``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TypeVar

import trio
import trio.lowlevel

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "PostgresStore needs psycopg 3: install toolledger's postgres extra, "
        "pip install 'toolledger[postgres]'"
    ) from exc

from ..errors import SessionInUse
from ..integrity import Anchor, VerifyReport
from ..renamed import warn_renamed
from ..types import Record
from . import pgloop, pgschema
from ..fast.prepared import Encodings
from .base import Claim, Claims, ClosingStore, check_artifact, check_batch, encode_bodies
from .pgappend import Appender, Connection, Pending, checked_head, last_seq, rows
from .pgclaims import DatabaseClaims
from .pgfollow import follow_session
from .verifyapart import ChecksApart, Kind
from .rows import check_rows, decode_row, seq_bound, session_of, sid_of, verify_tables

__all__ = ["PostgresStore"]

T = TypeVar("T")


# A durable store's commits wait for their WAL to be flushed: the server's own setting, unless
# it is off (then "on"); a stronger one (remote_write, remote_apply) is kept.
_DURABLE = ("SELECT set_config('synchronous_commit', 'on', false) "
            "WHERE current_setting('synchronous_commit') = 'off'")

#: the most batches one statement writes (group commit: :mod:`events.stores.pgappend`)
GROUP_LIMIT = 64


def _artifact(conn: Connection, session_id: str, call_id: str, sha256: str) -> bytes | None:
    row = conn.execute("SELECT data FROM toolledger_artifacts WHERE session_id = %s AND "
                       "call_id = %s AND sha256 = %s",
                       (sid_of(session_id), call_id, sha256)).fetchone()
    return None if row is None else bytes(row[0])


def describe(conninfo: str) -> str:
    """``conninfo`` as a ``postgresql://`` URL without its password, for messages."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "postgresql://?"
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


class PostgresStore(ChecksApart, ClosingStore):
    """An :class:`~events.stores.EventStore` in the PostgreSQL database ``conninfo`` names (a
    ``postgresql://`` URL, or a libpq ``key=value`` string). Its tables must exist: create
    them with ``toolledger db init URL`` or :meth:`init_schema`; otherwise the first use
    raises :class:`~events.errors.DatabaseSchemaError` saying so.

    ``durable=False`` (the default) commits with ``synchronous_commit=off``: a batch
    acknowledged survives a crash of the writer (its process or its machine: the batch is
    committed on the server), but not a crash of the server, of its machine or of one of its
    processes alone (the server then restarts them all and replays its WAL): the commit is
    acknowledged before its WAL leaves the server's memory, so the batches of the crash's
    last moment (up to three ``wal_writer_delay``\\ s, 0.6 s by default) may be gone; the
    database stays consistent, every batch whole or absent. ``durable=True`` acknowledges a
    batch once its commit is written to the WAL and flushed, so it survives a crash of the
    server's processes, and of its machine where the server syncs (``fsync=on``, its
    default): it keeps the server's own ``synchronous_commit`` (normally ``on``; stronger
    settings wait for standbys too), raised to ``on`` where the server's is ``off``.

    ``key`` seals and verifies exactly as the keyed JSONL and SQLite stores do: a row that
    does not verify raises :class:`~events.errors.UnverifiedRecordError` naming the database,
    the session and the seq.

    ``connections`` bounds the connections appends and reads use at once (one more holds the
    claims, and one per :meth:`follow`). ``claim_seconds`` (30 by default) is how long a claim
    lasts without renewal (see :meth:`claim`); ``lease_seconds`` is its deprecated spelling.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        key: bytes | None = None,
        durable: bool = False,
        connections: int = 8,
        claim_seconds: float | None = None,
        lease_seconds: float | None = None,
    ) -> None:
        if lease_seconds is not None:
            if claim_seconds is not None:
                raise TypeError("PostgresStore() takes claim_seconds= or its old name "
                                "lease_seconds=, not both")
            warn_renamed("PostgresStore(lease_seconds=...)", "PostgresStore(claim_seconds=...)")
            claim_seconds = lease_seconds
        if key is not None and (not isinstance(key, bytes) or not key):
            raise ValueError("the HMAC key must be non-empty bytes")
        if connections < 1:
            raise ValueError("connections must be at least 1")
        self.conninfo = conninfo
        self.where = describe(conninfo)
        self.durable = durable
        self._key = key
        self.encodings = Encodings()
        self._slots = trio.Semaphore(connections)
        self._idle: list[Connection] = []
        self._checked = False  # the schema's version, once per store
        self._appender = Appender(self.where, key)
        self._queue: list[Pending] = []  # batches no thread has taken yet
        self._claims = Claims("PostgresStore")
        self._database_claims = DatabaseClaims(
            self._connect, 30.0 if claim_seconds is None else claim_seconds)
        #: the sockets followers wait on, which :meth:`close` wakes (see :mod:`.pgfollow`)
        self.listening: set[int] = set()
        self._closed = False

    # -- connections ----------------------------------------------------------------------

    def _connect(self) -> Connection:
        """A new autocommit connection, its schema checked (once per store)."""
        conn = psycopg.connect(self.conninfo, autocommit=True)
        try:
            conn.execute(_DURABLE if self.durable else "SET synchronous_commit = off")
            if not self._checked:
                pgschema.check_schema(conn, self.where)
                self._checked = True
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        self.ensure_open()
        async with self._slots:
            conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = await trio.to_thread.run_sync(self._connect)
            try:
                yield conn
            finally:
                if conn.broken or conn.closed or self._closed:
                    conn.close()
                else:
                    self._idle.append(conn)

    async def _run(self, work: Callable[[Connection], T]) -> T:
        """``work(conn)`` in a worker thread, on a pooled connection; once started it runs to
        its end even if the task is cancelled."""
        async with self._connection() as conn:
            return await trio.to_thread.run_sync(work, conn)

    async def init_schema(self) -> None:
        """Create the store's tables, or upgrade them to the current version; idempotent
        (``toolledger db init URL`` calls it)."""
        self.ensure_open()

        def init() -> None:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                pgschema.init_schema(conn, self.where)

        await trio.to_thread.run_sync(init)

    # -- appending ------------------------------------------------------------------------

    async def append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """Append a batch, all or nothing; see :meth:`EventStore.append`.

        The batch joins the queue; the first append to get a connection writes every batch
        queued by then, one per session, in one statement (see :mod:`events.stores.pgappend`).
        Cancelled before its batch was handed to a thread, it leaves the queue, nothing
        written; afterwards, it waits (shielded) for the batch's outcome and returns or raises
        it, the cancellation arriving at the task's next checkpoint."""
        self.ensure_open()
        check_batch(session_id, records, expected_seq)
        bodies = encode_bodies(records, self.encodings)
        if session_id in self._database_claims.lost:
            raise SessionInUse(session_id, "this store's claim on it expired and another "
                                           "owner took it")
        pending = Pending(session_id, records, bodies, expected_seq)
        self._queue.append(pending)
        try:
            async with self._connection() as conn:
                group = self._take_group()
                if group:
                    try:
                        alone = len(group) == 1  # its statement, if known, from the loop
                        if not (alone and await pgloop.append(self._appender, conn, group[0])):
                            await trio.to_thread.run_sync(self._appender.write, conn, group)
                    finally:
                        for taken in group:
                            taken.done.set()
            await pending.done.wait()
        except BaseException as exc:
            if not pending.taken:
                self._queue.remove(pending)
                raise
            with trio.CancelScope(shield=True):
                await pending.done.wait()
            if not isinstance(exc, trio.Cancelled):
                raise
        if pending.error is not None:
            raise pending.error

    def _take_group(self) -> list[Pending]:
        """The queued batches to write now, in order: one per session, up to
        :data:`GROUP_LIMIT`; the rest stay queued."""
        group: list[Pending] = []
        sessions: set[str] = set()
        for pending in self._queue:
            if pending.session_id not in sessions:
                sessions.add(pending.session_id)
                group.append(pending)
                pending.taken = True
                if len(group) == GROUP_LIMIT:
                    break
        if group:
            self._queue = [pending for pending in self._queue if not pending.taken]
        return group

    # -- reading --------------------------------------------------------------------------

    async def read(self, session_id: str, after: int = 0, limit: int | None = None
                   ) -> list[Record]:
        """The session's records with ``seq > after``, in seq order; ``[]`` if unknown. At
        most ``limit`` if given (a follower reads a long session a part at a time)."""
        after = max(after, 0)
        last = seq_bound(after, limit)

        def read(conn: Connection) -> list[Record]:
            if self._key is None:
                return [decode_row(self.where, session_id, seq, line)[0]
                        for seq, line in rows(conn, session_id, after + 1, last)]
            # with a key, the row before the first handed out gives the hash it links to
            found = rows(conn, session_id, after, last)
            return check_rows(self.where, self._key, session_id, after, found)[0]

        return await self._run(read)

    async def last_seq(self, session_id: str) -> int:
        """The seq of the session's last record; 0 for an unknown session."""
        return await self._run(lambda conn: last_seq(conn, session_id))

    async def sessions(self) -> list[str]:
        """Every session id, in order of first appearance."""
        rows = await self._run(lambda conn: conn.execute(
            "SELECT session_id FROM toolledger_sessions ORDER BY id").fetchall())
        return [session_of(row[0]) for row in rows]

    async def head(self, session_id: str) -> str | None:
        """The hash of the session's last record; ``None`` for an unknown session.
        :class:`~events.errors.SessionRowError` if the session's row in the table of
        sessions does not agree with its records."""
        has_row, _, head = await self._run(
            lambda conn: checked_head(conn, self.where, session_id, self._key))
        return head if has_row else None

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Record]:
        """Every record of the session with ``seq > after``, then each one appended after
        (by any writer, in any process), until the caller stops iterating or is cancelled.
        See :mod:`events.stores.pgfollow`."""
        self.ensure_open()
        return follow_session(self, session_id, after)

    def _opened_as(self) -> tuple[Kind, str]:
        return "postgresql", self.conninfo

    async def verify(
        self, *, session: str | None = None, anchors: Iterable[Anchor] = ()
    ) -> VerifyReport:
        """Check the hash chain of every session (or of ``session``), with the store's key if
        it has one, as ``toolledger verify`` does for a JSONL file, and each session's row in
        the table of sessions against its records: a broken link names the session and seq
        (its ``line`` is ``None``: rows have no line number); a row that disagrees names the
        session (see :func:`~events.stores.rows.verify_tables`). Reads one session at a
        time, in order of first appearance."""

        def check(conn: Connection) -> VerifyReport:
            only, args = ("WHERE session_id = %s ", (sid_of(session),)) \
                if session is not None else ("", ())  # one session's check: its row only
            table = {session_of(sid): (int(last), str(head)) for sid, last, head in
                     conn.execute("SELECT session_id, last_seq, head FROM toolledger_sessions "
                                  f"{only}ORDER BY id", args)}
            # a check of one session reads that session's records only (no scan for others)
            orphans = [session_of(sid) for (sid,) in conn.execute(
                "SELECT DISTINCT session_id FROM toolledger_records "
                "WHERE session_id NOT IN (SELECT session_id FROM toolledger_sessions)")
            ] if session is None else []
            return verify_tables(self._key, table, orphans,
                                 lambda session_id: rows(conn, session_id, 1),
                                 session=session, anchors=anchors,
                                 artifacts=lambda *name: _artifact(conn, *name))

        return await self._run(check)

    async def put_artifact(self, session_id: str, call_id: str, sha256: str,
                           data: bytes) -> None:
        """Keep the whole of a long result in ``toolledger_artifacts``, committed before it
        returns; see :class:`~events.stores.base.ArtifactStore`."""
        check_artifact(sha256, data)
        row = (sid_of(session_id), call_id, sha256, data)
        await self._run(lambda conn: conn.execute(
            "INSERT INTO toolledger_artifacts (session_id, call_id, sha256, data) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING", row))

    async def get_artifact(self, session_id: str, call_id: str, sha256: str) -> bytes | None:
        """The bytes of an artifact; ``None`` if the table holds none of that name."""
        return await self._run(lambda conn: _artifact(conn, session_id, call_id, sha256))

    @property
    def keyed(self) -> bool:
        """Whether the store was given a key: it seals with it, and every record it hands out
        was verified with it."""
        return self._key is not None

    # -- owning a session -----------------------------------------------------------------

    def claim(self, session_id: str) -> Claim:
        """Own ``session_id`` until the claim is released: a claim held in the database,
        renewed while it is held and taken over by another owner only once it has expired
        (:mod:`events.stores.pgclaims`); :class:`~events.errors.SessionInUse` at once if
        another claim holds it, through this store or any other, in any process.

        One round trip, made on the calling thread (the protocol's ``claim`` is synchronous),
        after connecting the first time. Releasing it also forgets the session's head, so a
        store that opens many sessions in turn does not keep one per session it ever wrote.
        """
        self.ensure_open()
        here = self._claims.claim(session_id)  # SessionInUse if this store holds it already
        try:
            self._database_claims.take(session_id)
        except BaseException:
            here.release()
            raise

        def release() -> None:
            self._appender.heads.pop(session_id, None)  # what a closed session's next owner re-reads
            try:
                self._database_claims.give_back(session_id)
            finally:
                here.release()

        return Claim(release)

    def renew_claims(self) -> list[str]:
        """Renew this store's claims now (a thread does it every third of ``claim_seconds``);
        the sessions whose claim had been taken over, which this store now refuses to append
        to."""
        return self._database_claims.renew()

    def renew_leases(self) -> list[str]:
        """The deprecated name of :meth:`renew_claims`, which it calls after warning."""
        warn_renamed("PostgresStore.renew_leases", "PostgresStore.renew_claims")
        return self.renew_claims()

    def close(self) -> None:
        """End this store's claims and close its connections. Idempotent; the store refuses
        to be used afterwards."""
        if self._closed:
            return
        self._closed = True
        for socket in list(self.listening):  # followers waiting: they end, as closed
            trio.lowlevel.notify_closing(socket)
        self._database_claims.close()
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def ensure_open(self) -> None:
        """``ValueError`` if the store is closed."""
        if self._closed:
            raise ValueError(f"the PostgresStore for {self.where} is closed")
