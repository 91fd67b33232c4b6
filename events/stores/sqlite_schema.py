"""The SQLite store's tables, and the version of their layout.

A database made by :class:`~events.stores.SqliteStore` has a table ``toolledger_schema``
holding one row: the version of the layout (:data:`DATABASE_VERSION`). That is the version
of the *tables*, not of the records in them (each record carries its own schema version, read
by the codec): a layout change (a column, an index) is one more step in :data:`_UPGRADES`,
applied by :func:`init_schema` — ``toolledger db init URL`` — never behind the user's back.

Creating is explicit too, with one convenience: a **new, empty** database (a file the store
just made) gets its tables when the store opens it, as :class:`~events.stores.JsonlStore`
makes its file, so embedding needs no set-up step. A database that already holds other tables
is never changed by opening it: the store says to run ``toolledger db init``. A database whose
layout is newer than this code's is refused, by opening and by :func:`init_schema` alike: an
older toolledger must not write rows a newer one laid out differently.
"""

from __future__ import annotations

import sqlite3

from ..errors import DatabaseSchemaError

__all__ = ["DATABASE_VERSION", "check_schema", "init_schema"]

#: The layout of the tables this code reads and writes.
DATABASE_VERSION = 2

_VERSION_TABLE = "toolledger_schema"
_TABLES = ("sessions", "records", "artifacts")

#: Version 1, from an empty database.
_CREATE = (
    f"CREATE TABLE {_VERSION_TABLE} (version INTEGER NOT NULL)",
    """CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        session_id BLOB NOT NULL UNIQUE,
        last_seq INTEGER NOT NULL,
        head TEXT NOT NULL
    )""",
    """CREATE TABLE records (
        session_id BLOB NOT NULL,
        seq INTEGER NOT NULL,
        line BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID""",
    f"INSERT INTO {_VERSION_TABLE} (version) VALUES (1)",
)

#: The statements that take a database from version ``n`` to ``n + 1``, by ``n``. Each layout
#: change adds one step here and raises :data:`DATABASE_VERSION`; a step that ran is never
#: edited (databases hold what it made).
_UPGRADES: dict[int, tuple[str, ...]] = {
    # 1 -> 2: the whole of results too large for the log (events.artifacts)
    1: ("""CREATE TABLE artifacts (
        session_id BLOB NOT NULL,
        call_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (session_id, call_id, sha256)
    ) WITHOUT ROWID""",),
}


def _catalogue(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """The database's objects (type, name), read in one statement: one snapshot, so that
    another process's tables appear in it whole or not at all."""
    return [(str(kind), str(name))
            for kind, name in conn.execute("SELECT type, name FROM sqlite_master").fetchall()]


def _version(conn: sqlite3.Connection, path: str,
             catalogue: list[tuple[str, str]] | None = None) -> int | None:
    """The layout version the database records; ``None`` if it has none of the tables."""
    tables = {name for kind, name in (_catalogue(conn) if catalogue is None else catalogue)
              if kind == "table"}
    if _VERSION_TABLE in tables:
        rows = conn.execute(f"SELECT version FROM {_VERSION_TABLE}").fetchall()
        if len(rows) != 1 or not isinstance(rows[0][0], int):
            raise DatabaseSchemaError(
                path, f"its {_VERSION_TABLE} table holds {rows!r}, not one version number: "
                f"it was changed by hand; restore it from a copy")
        return int(rows[0][0])
    clashing = [name for name in _TABLES if name in tables]
    if clashing:
        raise DatabaseSchemaError(
            path, f"it has tables named {', '.join(clashing)} but no {_VERSION_TABLE} table: "
            f"they were not made by toolledger; keep the logs in another database file")
    return None


def _newer(path: str, version: int) -> DatabaseSchemaError:
    return DatabaseSchemaError(
        path, f"its tables are laid out as version {version}, newer than this toolledger's "
        f"{DATABASE_VERSION}: a newer toolledger made or upgraded them; use that version "
        f"(or a newer one) with this database")


def check_schema(conn: sqlite3.Connection, path: str, *, create: bool) -> str | None:
    """What stops the store from using the database, or ``None`` if nothing does.

    An empty database gets version 1 of the tables if ``create``. A database whose layout is
    newer than this code's, or whose tables toolledger did not make, raises
    :class:`~events.errors.DatabaseSchemaError` at once (nothing can fix that here); one
    without the tables (not empty, or not ``create``) or with an older layout returns the
    problem, which :func:`init_schema` fixes.
    """
    catalogue = _catalogue(conn)  # the version and emptiness of one snapshot, never of two
    version = _version(conn, path, catalogue)
    if version is None and create and not catalogue:
        init_schema(conn, path)
        return None
    if version is None:
        return "it holds no toolledger tables"
    if version > DATABASE_VERSION:
        raise _newer(path, version)
    if version < DATABASE_VERSION:
        return (f"its tables are laid out as version {version}, older than this toolledger's "
                f"{DATABASE_VERSION}")
    return None


def init_schema(conn: sqlite3.Connection, path: str) -> None:
    """Create the tables in the database, or upgrade them to :data:`DATABASE_VERSION`; a
    no-op if they are current. One ``BEGIN IMMEDIATE`` transaction, so two processes doing it
    at once do it once, and a failure leaves the database as it was."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _version(conn, path)
        if version is not None and version > DATABASE_VERSION:
            raise _newer(path, version)
        if version is None:
            for statement in _CREATE:
                conn.execute(statement)
            version = 1
        while version < DATABASE_VERSION:
            for statement in _UPGRADES[version]:
                conn.execute(statement)
            version += 1
            conn.execute(f"UPDATE {_VERSION_TABLE} SET version = ?", (version,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
