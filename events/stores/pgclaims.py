"""Claims in the database: who owns a session of a PostgreSQL store.

A claim is a row of ``toolledger_leases``: the session, its owner (one per store object: host,
pid and a random part) and when it expires, by the server's clock (so the clocks of the
workers' machines never matter). The table keeps its older name: existing databases have it, so
it is a wire name, like the log's event types, and does not follow the word "claim"
(docs/stores.md). Taking a claim succeeds if there is no row, or if the row has expired;
otherwise :class:`~events.errors.SessionInUse` names the owner and how long its claim has left.
The owner renews its claims from a thread of its own every third of a claim's length, so a
session stays owned while it is open however long it waits (for an approval, say), and a worker
that dies, or loses the database, loses its claims once they expire: its sessions can be taken
over then, and not before.

A renewal that finds a claim gone (it expired, and another owner took it) marks the session
*lost*: the store then refuses to append to it (:class:`~events.errors.SessionInUse`), since
another owner may be driving it. The conflict check stays the last line of defence for a
writer that pauses longer than its claim without renewing (a stopped process).

:meth:`DatabaseClaims.take` and :meth:`DatabaseClaims.give_back` are one round trip each on
the claims' connection, made from the caller's thread (the event loop's, for
:meth:`~events.stores.EventStore.claim`, which is synchronous): a short stop, once per
session opened and closed.

This module was ``events.stores.pglease``, and :class:`DatabaseClaims` was ``Leases``: both
old names still work, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import SessionInUse
from ..renamed import renamed_attribute

if TYPE_CHECKING:
    import psycopg

__all__ = ["DatabaseClaims"]

#: Names this module had before, for code written against them (each warns).
_RENAMED = {"Leases": "DatabaseClaims"}

# ``toolledger_leases`` is the table's name in existing databases (a wire name): it stays.

_TAKE = """
INSERT INTO toolledger_leases AS claim (session_id, owner, expires_at)
VALUES (%(sid)s, %(owner)s, now() + make_interval(secs => %(seconds)s))
ON CONFLICT (session_id) DO UPDATE
    SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
    WHERE claim.expires_at < now()
RETURNING owner
"""

_RENEW = """
UPDATE toolledger_leases SET expires_at = now() + make_interval(secs => %(seconds)s)
WHERE owner = %(owner)s AND session_id = ANY(%(sids)s)
RETURNING session_id
"""


def _sid(session_id: str) -> bytes:
    return session_id.encode("utf-8", "surrogatepass")


class DatabaseClaims:
    """The claims one store holds in the database, on a connection of their own, renewed by a
    thread."""

    def __init__(self, connect: Callable[[], psycopg.Connection[tuple[Any, ...]]],
                 seconds: float) -> None:
        self.seconds = seconds
        self.owner = f"{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:12]}"
        self._connect = connect
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._lock = threading.Lock()  # one statement at a time on the connection
        self._held: dict[bytes, str] = {}
        self.lost: set[str] = set()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def take(self, session_id: str) -> None:
        """Claim ``session_id`` for this owner; :class:`~events.errors.SessionInUse` if another
        owner's claim has not expired."""
        sid = _sid(session_id)
        with self._lock:
            conn = self._connection()
            taken = conn.execute(_TAKE, {"sid": sid, "owner": self.owner,
                                         "seconds": self.seconds}).fetchone()
            if taken is None:
                holder = conn.execute(
                    "SELECT owner, greatest(expires_at - now(), interval '0') "
                    "FROM toolledger_leases WHERE session_id = %s", (sid,)).fetchone()
                where = (f"claimed by {holder[0]} for {holder[1]} more" if holder is not None
                         else "claimed by another owner")
                raise SessionInUse(session_id, where)
            self._held[sid] = session_id
            self.lost.discard(session_id)
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew_until_stopped,
                                                 name="toolledger claim renewal", daemon=True)
                self._renewer.start()

    def give_back(self, session_id: str) -> None:
        """End this owner's claim on ``session_id`` (nothing if another owner holds it)."""
        sid = _sid(session_id)
        with self._lock:
            self._held.pop(sid, None)
            self.lost.discard(session_id)
            self._connection().execute(
                "DELETE FROM toolledger_leases WHERE session_id = %s AND owner = %s",
                (sid, self.owner))

    def renew(self) -> list[str]:
        """Extend every claim held to :attr:`seconds` from now; return the sessions whose claim
        was gone (now :attr:`lost`). The renewal thread calls it every third of a claim."""
        with self._lock:
            if not self._held:
                return []
            rows = self._connection().execute(
                _RENEW, {"seconds": self.seconds, "owner": self.owner,
                         "sids": list(self._held)}).fetchall()
            kept = {bytes(row[0]) for row in rows}
            gone = [self._held.pop(sid) for sid in list(self._held) if sid not in kept]
            self.lost.update(gone)
            return gone

    def close(self) -> None:
        """Stop renewing and end every claim held. Idempotent."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._lock:
            conn, self._conn = self._conn, None
            held, self._held = list(self._held), {}
            if conn is None:
                return
            try:
                if held and not conn.broken:
                    conn.execute("DELETE FROM toolledger_leases WHERE owner = %s "
                                 "AND session_id = ANY(%s)", (self.owner, held))
            finally:
                conn.close()

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self._connect()
        return self._conn

    def _renew_until_stopped(self) -> None:
        import psycopg

        while not self._stop.wait(self.seconds / 3):
            try:
                self.renew()
            except psycopg.Error:
                pass  # the database is away: try again next time, on a new connection


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
