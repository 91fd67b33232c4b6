"""Writing batches to a PostgreSQL store: one statement for one batch, or for many.

Runs in the store's worker threads (:mod:`events.stores.postgres`), on the connection the
thread was given. The statements are :data:`~events.stores.pgschema.APPEND` and friends: each
moves a session's row from the seq and head its writer expects to the batch's last, and
inserts the batch's rows only where the row moved; a row that did not move is a conflict.

**Group commit.** Appends that queued while every connection was busy go to the database
together, in one statement (:data:`~events.stores.pgschema.APPEND_GROUP`) and so one
transaction and one commit: each batch still moves only its own session's row, and a batch
whose session moved elsewhere is refused alone, the others stored. At most one batch per
session goes in a group (a session's next batch chains onto this one's head, so it waits for
the next). If the group's statement fails as a whole (a deadlock with another writer's group
on the same sessions, say), each batch is retried on its own, so a batch's outcome is the one
it would have had alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
import trio

from ..errors import ConflictError
from ..integrity import GENESIS
from ..types import Record
from . import pgschema
from .base import check_conflict, seal_lines
from .rows import NO_LIMIT, check_head, sid_of

__all__ = ["Appender", "Connection", "Pending", "checked_head", "last_seq", "rows"]

Connection = psycopg.Connection[tuple[Any, ...]]


def rows(conn: Connection, session_id: str, first: int,
         last: int = NO_LIMIT) -> list[tuple[int, bytes]]:
    """The session's ``(seq, line)`` rows from seq ``first`` on (to seq ``last``), in order."""
    cursor = conn.cursor(binary=True)
    cursor.execute("SELECT seq, line FROM toolledger_records WHERE session_id = %s "
                   "AND seq >= %s AND seq <= %s ORDER BY seq",
                   (sid_of(session_id), first, last))
    return cursor.fetchall()


def last_seq(conn: Connection, session_id: str) -> int:
    """The session's last seq; 0 for an unknown session."""
    row = conn.execute("SELECT last_seq FROM toolledger_sessions WHERE session_id = %s",
                       (sid_of(session_id),)).fetchone()
    return int(row[0]) if row is not None else 0


class Pending:
    """A batch waiting to be written, and then its outcome: ``error`` is ``None`` once it is
    stored, the reason once it is refused, and until then says that its outcome is unknown
    (what the writer sees if the write was cut short); ``done`` is set, in the event loop,
    when the write is over."""

    __slots__ = ("session_id", "records", "bodies", "expected_seq", "done", "error", "taken")

    def __init__(self, session_id: str, records: Sequence[Record], bodies: list[bytes],
                 expected_seq: int) -> None:
        self.session_id = session_id
        self.records = records
        self.bodies = bodies
        self.expected_seq = expected_seq
        self.done = trio.Event()
        self.error: BaseException | None = RuntimeError(
            f"the append to session {session_id!r} after seq {expected_seq} was cut short: it "
            f"may or may not be stored; re-read the session")
        self.taken = False  # handed to a worker thread: it will be written, whatever happens


class Appender:
    """The writing half of a store: the heads it remembers, and the statements it sends."""

    def __init__(self, where: str, key: bytes | None) -> None:
        self.where = where
        self.key = key
        #: session -> (last seq, head) as this store left it: the one round trip's premise
        self.heads: dict[str, tuple[int, str]] = {}

    def write(self, conn: Connection, group: list[Pending]) -> None:
        """Write ``group`` (one batch per session), setting each one's ``error``; never
        raises."""
        if len(group) > 1:
            try:
                self._write_group(conn, group)
                return
            except psycopg.Error:
                pass  # the group as a whole failed: each batch on its own, as if alone
        for pending in group:
            try:
                self.append(conn, pending)
            except Exception as exc:
                pending.error = exc
            else:
                pending.error = None

    def append(self, conn: Connection, pending: Pending) -> None:
        """One batch, one statement (two round trips if this store does not know the head)."""
        session_id, records, expected = pending.session_id, pending.records, pending.expected_seq
        if not records:
            check_conflict(session_id, expected, checked_head(conn, self.where, session_id)[1])
            return
        prev = self._prev(conn, pending)
        for _ in range(2):  # a second time only if the head we knew was not the session's
            query, params, head = self.statement(pending, prev)
            try:
                cursor = conn.execute(query, params)
            except psycopg.errors.UniqueViolation:
                # a new session's records met records already there: its row is missing
                self.head_of(conn, session_id, expected)  # SessionRowError says so
                raise
            if self.stored(pending, cursor.rowcount, head):
                return
            prev = self.head_of(conn, session_id, expected)  # ConflictError if it moved
        raise ConflictError(session_id, expected, last_seq(conn, session_id))

    def known(self, pending: Pending) -> str | None:
        """The head to chain the batch onto without reading it (a new session's genesis, or
        the head this store left), or ``None``."""
        if pending.expected_seq == 0:
            return GENESIS
        known = self.heads.get(pending.session_id)
        return known[1] if known is not None and known[0] == pending.expected_seq else None

    def statement(self, pending: Pending, prev: str) -> tuple[str, dict[str, object], str]:
        """The batch sealed onto ``prev``: its statement, the statement's parameters, and
        the session's new head."""
        records = pending.records
        lines, head = seal_lines(pending.bodies, prev, self.key)
        return (pgschema.APPEND_NEW if pending.expected_seq == 0 else pgschema.APPEND,
                {"sid": sid_of(pending.session_id), "last": records[-1].seq, "head": head,
                 "expected": pending.expected_seq, "prev": prev,
                 "seqs": [r.seq for r in records], "lines": [line[:-1] for line in lines]},
                head)

    def stored(self, pending: Pending, rowcount: int, head: str) -> bool:
        """After the statement: whether it stored the batch (the head is remembered then;
        else forgotten, and the head must be read)."""
        if rowcount == len(pending.records):
            self.heads[pending.session_id] = (pending.records[-1].seq, head)
            return True
        self.heads.pop(pending.session_id, None)
        return False

    def _write_group(self, conn: Connection, group: list[Pending]) -> None:
        sealed: list[tuple[Pending, str, list[bytes], str]] = []
        for pending in group:
            try:
                prev = self._prev(conn, pending)
            except Exception as exc:  # a conflict already, or a last record not verified
                pending.error = exc
                continue
            lines, head = seal_lines(pending.bodies, prev, self.key)
            sealed.append((pending, prev, lines, head))
        if not sealed:
            return
        moved = conn.execute(pgschema.APPEND_GROUP, {
            "sids": [sid_of(p.session_id) for p, _, _, _ in sealed],
            "expected": [p.expected_seq for p, _, _, _ in sealed],
            "prevs": [prev for _, prev, _, _ in sealed],
            "lasts": [p.records[-1].seq for p, _, _, _ in sealed],
            "heads": [head for _, _, _, head in sealed],
            "rsids": [sid_of(p.session_id) for p, _, lines, _ in sealed for _ in lines],
            "seqs": [r.seq for p, _, _, _ in sealed for r in p.records],
            "lines": [line[:-1] for _, _, lines, _ in sealed for line in lines],
        }).fetchall()
        stored = {bytes(row[0]) for row in moved}
        for pending, _, _, head in sealed:
            if sid_of(pending.session_id) in stored:
                self.heads[pending.session_id] = (pending.records[-1].seq, head)
                pending.error = None
                continue
            self.heads.pop(pending.session_id, None)
            try:  # not moved: a conflict, or a head this store remembered wrong (retry it)
                self.append(conn, pending)
            except Exception as exc:
                pending.error = exc
            else:
                pending.error = None

    def _prev(self, conn: Connection, pending: Pending) -> str:
        """The head to chain the batch onto: the genesis value for a new session, the one this
        store remembers, else the session's (read, and with a key verified first)."""
        known = self.known(pending)
        if known is not None:
            return known
        return self.head_of(conn, pending.session_id, pending.expected_seq)

    def head_of(self, conn: Connection, session_id: str, expected_seq: int) -> str:
        """The head to chain onto, the session ending at ``expected_seq`` (else a conflict),
        once its row in the table of sessions agrees with its last record (see
        :func:`checked_head`); with a key, only once that record links to the one before
        it."""
        _, last, head = checked_head(conn, self.where, session_id, self.key)
        check_conflict(session_id, expected_seq, last)
        return head


def checked_head(
    conn: Connection, where: str, session_id: str, key: bytes | None = None
) -> tuple[bool, int, str]:
    """Whether the session has a row in the table of sessions, and the last seq and head it
    keeps, once they agree with the session's last record (one round trip:
    :data:`~events.stores.pgschema.HEAD`), and with a ``key`` once that record verifies (one
    more); :class:`~events.errors.SessionRowError` naming the row otherwise (see
    :func:`~events.stores.rows.check_head`)."""
    found = conn.execute(pgschema.HEAD, {"sid": sid_of(session_id)}).fetchone()
    assert found is not None  # one row, whatever the tables hold
    row = found[:2] if found[0] is not None else None
    last = found[2:] if found[2] is not None else None
    return (row is not None, *check_head(where, session_id, row, last, key,
                                         lambda first: rows(conn, session_id, first)))
