"""The PostgreSQL store's tables and statements, as text; creating and upgrading them.

The logical schema is the SQLite store's (:mod:`events.stores.sqlite`): one row per record,
``(session_id, seq, line)``, unique by session and seq, the line being the sealed bytes a
JSONL log would hold; and one row per session with its last seq and head (the hash of its last
line), numbered in order of first appearance. Session ids are stored as their UTF-8 bytes
(``surrogatepass``), so any Python string names a session.

``toolledger_artifacts`` keeps the whole of results too large for the log, by session, call
and SHA-256 (:mod:`events.artifacts`). Two more tables: ``toolledger_leases`` (the claims: who owns a session, until when: see
:mod:`events.stores.pgclaims`; the table keeps its older name, which existing databases have)
and ``toolledger_schema`` (one row: the schema's version). A trigger on the sessions table
sends a notification on the channel ``toolledger`` whenever a session's last seq moves, with
``<sha256 of the session id, hex>:<last seq>`` as its payload (a bounded size, whatever the
id: payloads are limited to 8000 bytes); followers (:mod:`events.stores.pgfollow`) read the
rows themselves. The channel is the database's, not
the schema's: a follower of session ``s`` in one schema also hears of an ``s`` in another, and
finds nothing new to read.

Tables are unqualified: they live in the connection's ``search_path`` (``?options=-csearch_path
%3Dmy_schema`` in the URL puts them in a schema of their own). Creating or upgrading them is an
explicit step (:func:`init_schema`, ``toolledger db init URL``); a store never does it on its
own. :data:`MIGRATIONS` takes the schema from version ``i`` to ``i + 1``, so the version is the
number of migrations applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import DatabaseSchemaError
from ..integrity import SEALED_TAIL

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "APPEND",
    "APPEND_GROUP",
    "APPEND_NEW",
    "CHANNEL",
    "HEAD",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "check_schema",
    "init_schema",
]

CHANNEL = "toolledger"

# A migration that ran is never edited: existing databases hold what it made. So the table of
# claims keeps the name it was created with, toolledger_leases (a wire name, docs/stores.md).
MIGRATIONS: list[str] = [
    # 0 -> 1
    """
    CREATE TABLE toolledger_schema (
        only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row),
        version INTEGER NOT NULL
    );
    CREATE TABLE toolledger_sessions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id BYTEA NOT NULL UNIQUE,
        last_seq BIGINT NOT NULL,
        head TEXT NOT NULL
    );
    CREATE TABLE toolledger_records (
        session_id BYTEA NOT NULL,
        seq BIGINT NOT NULL,
        line BYTEA NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE toolledger_leases (
        session_id BYTEA PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    CREATE FUNCTION toolledger_appended() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('toolledger',
                          encode(sha256(NEW.session_id), 'hex') || ':' || NEW.last_seq);
        RETURN NULL;
    END
    $$;
    CREATE TRIGGER toolledger_appended AFTER INSERT OR UPDATE OF last_seq
        ON toolledger_sessions FOR EACH ROW EXECUTE FUNCTION toolledger_appended();
    INSERT INTO toolledger_schema (version) VALUES (0);
    """,
    # 1 -> 2: the whole of results too large for the log (events.artifacts)
    """
    CREATE TABLE toolledger_artifacts (
        session_id BYTEA NOT NULL,
        call_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (session_id, call_id, sha256)
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

# One statement, one round trip: the session's row moves from the expected seq and head to the
# batch's last, and the batch's rows go in only if it did. Another writer that got there first
# leaves no row to move (a racing one waits for the first to commit, then finds the row
# changed), so nothing is inserted: the caller sees fewer rows than its batch, a conflict.
_INSERT_ROWS = """
INSERT INTO toolledger_records (session_id, seq, line)
SELECT head.session_id, r.seq, r.line
FROM head, unnest(%(seqs)s::bigint[], %(lines)s::bytea[]) AS r(seq, line)
"""

APPEND = """
WITH head AS (
    UPDATE toolledger_sessions SET last_seq = %(last)s, head = %(head)s
    WHERE session_id = %(sid)s AND last_seq = %(expected)s AND head = %(prev)s
    RETURNING session_id
)""" + _INSERT_ROWS

# the first batch of a session: its row is new, unless another writer made it first
APPEND_NEW = """
WITH head AS (
    INSERT INTO toolledger_sessions (session_id, last_seq, head)
    VALUES (%(sid)s, %(last)s, %(head)s)
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id
)""" + _INSERT_ROWS

# Many sessions' batches in one statement (group commit): each session's row moves, or its new
# row goes in, on the same conditions as above, and each batch's rows go in only where its
# session's did. The sessions stored come back; every other batch is a conflict (or a head the
# writer remembered wrong), decided alone afterwards.
APPEND_GROUP = """
WITH input AS (
    SELECT * FROM unnest(%(sids)s::bytea[], %(expected)s::bigint[], %(prevs)s::text[],
                         %(lasts)s::bigint[], %(heads)s::text[])
        AS i(session_id, expected, prev, last, head)
), moved AS (
    UPDATE toolledger_sessions AS s SET last_seq = i.last, head = i.head
    FROM input AS i
    WHERE i.expected > 0 AND s.session_id = i.session_id AND s.last_seq = i.expected
        AND s.head = i.prev
    RETURNING s.session_id
), created AS (
    INSERT INTO toolledger_sessions (session_id, last_seq, head)
    SELECT session_id, last, head FROM input WHERE expected = 0
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id
), stored AS (
    SELECT session_id FROM moved UNION ALL SELECT session_id FROM created
), inserted AS (
    INSERT INTO toolledger_records (session_id, seq, line)
    SELECT r.session_id, r.seq, r.line
    FROM unnest(%(rsids)s::bytea[], %(seqs)s::bigint[], %(lines)s::bytea[])
        AS r(session_id, seq, line)
    WHERE r.session_id IN (SELECT session_id FROM stored)
)
SELECT session_id FROM stored
"""


# A session's row in the table of sessions, and its last record's seq and the end of that
# record's line, where its hash is (to check that the two agree before chaining onto the row):
# one row, of nulls where there is nothing.
HEAD = f"""
SELECT s.last_seq, s.head, r.seq, r.tail
FROM (SELECT %(sid)s::bytea AS session_id) AS k
LEFT JOIN toolledger_sessions AS s ON s.session_id = k.session_id
LEFT JOIN LATERAL (
    SELECT seq, substring(line FROM greatest(octet_length(line) - {SEALED_TAIL - 1}, 1)) AS tail
    FROM toolledger_records WHERE session_id = k.session_id ORDER BY seq DESC LIMIT 1
) AS r ON true
"""


def _version(conn: psycopg.Connection[tuple[Any, ...]]) -> int:
    """The schema's version in the connection's search path; 0 if it has no tables."""
    row = conn.execute("SELECT to_regclass('toolledger_schema') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    found = conn.execute("SELECT version FROM toolledger_schema").fetchone()
    return int(found[0]) if found is not None else 0


def check_schema(conn: psycopg.Connection[tuple[Any, ...]], where: str) -> None:
    """:class:`~events.errors.DatabaseSchemaError` unless the tables are at
    :data:`SCHEMA_VERSION`; its message says what to do."""
    version = _version(conn)
    if version == SCHEMA_VERSION:
        return
    init = ("create them with `toolledger db init URL` (or `await store.init_schema()`), then "
            "open the store again")
    if version == 0:
        raise DatabaseSchemaError(
            where, f"the database has no toolledger tables this role may see: {init}; if "
                   f"they exist, the role lacks USAGE on their schema (who may read what: "
                   f"docs/stores.md)")
    if version < SCHEMA_VERSION:
        raise DatabaseSchemaError(
            where, f"the toolledger tables are at schema version {version}, older than "
                   f"{SCHEMA_VERSION}, the one this toolledger uses: upgrade them with "
                   f"`toolledger db init URL` (or `await store.init_schema()`)")
    raise DatabaseSchemaError(
        where, f"the toolledger tables are at schema version {version}, newer than "
               f"{SCHEMA_VERSION}, the newest this toolledger knows: upgrade toolledger to "
               f"use this database")


def init_schema(conn: psycopg.Connection[tuple[Any, ...]], where: str) -> None:
    """Create the tables, or upgrade them to :data:`SCHEMA_VERSION`, in one transaction;
    idempotent. Concurrent callers take turns (a transaction-scoped advisory lock), so two
    workers starting at once do not both create the tables."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('toolledger_schema'))")
        version = _version(conn)
        if version > SCHEMA_VERSION:
            check_schema(conn, where)  # raises: newer than this toolledger knows
        for migration in MIGRATIONS[version:]:
            conn.execute(migration)  # our own text, no parameters
        conn.execute("UPDATE toolledger_schema SET version = %s", (SCHEMA_VERSION,))
