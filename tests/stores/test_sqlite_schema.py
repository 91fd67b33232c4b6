"""The SQLite store's tables: made on an empty database, never slipped into someone else's,
versioned, upgraded only by ``init_schema``, refused when newer than the code; read-only
opening; the chain of its rows verified as a file's lines are."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from events.errors import DatabaseSchemaError
from events.stores import JsonlStore, SqliteStore
from events.stores import sqlite_schema
from events.stores.sqlite_schema import DATABASE_VERSION

from tests.stores.conformance.backends import forge_row, recs, rec
from events.types import UserMessage


def version_of(path: Path) -> int:
    with closing(sqlite3.connect(path)) as db:
        return int(db.execute("SELECT version FROM toolledger_schema").fetchone()[0])


def tables_of(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


@pytest.mark.trio
async def test_a_new_database_gets_the_current_tables(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with SqliteStore(path) as store:
        await store.append("s", recs("s", 1, 2), expected_seq=0)
        await store.init_schema()  # current already: nothing to do
        assert await store.read("s") == recs("s", 1, 2)
    assert version_of(path) == DATABASE_VERSION
    assert tables_of(path) == {"toolledger_schema", "sessions", "records", "artifacts"}


@pytest.mark.trio
async def test_another_database_is_changed_only_by_init_schema(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.commit()
    with SqliteStore(path) as store:
        assert tables_of(path) == {"users"}  # opening it changed nothing
        with pytest.raises(DatabaseSchemaError, match="no toolledger tables.*db init sqlite:///"):
            await store.read("s")
        with pytest.raises(DatabaseSchemaError):
            await store.append("s", recs("s", 1, 1), expected_seq=0)
        await store.init_schema()
        await store.append("s", recs("s", 1, 1), expected_seq=0)
        assert await store.read("s") == recs("s", 1, 1)
    assert tables_of(path) == {"users", "toolledger_schema", "sessions", "records", "artifacts"}


def test_tables_toolledger_did_not_make_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE sessions (who TEXT)")
        db.commit()
    with pytest.raises(DatabaseSchemaError, match="tables named sessions.*not made by"):
        SqliteStore(path)


@pytest.mark.trio
async def test_a_newer_layout_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    SqliteStore(path).close()
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE toolledger_schema SET version = ?", (DATABASE_VERSION + 1,))
        db.commit()
    for read_only in (False, True):
        with pytest.raises(DatabaseSchemaError, match=f"version {DATABASE_VERSION + 1}, newer"):
            SqliteStore(path, read_only=read_only)
    with closing(sqlite3.connect(path, isolation_level=None)) as db, \
            pytest.raises(DatabaseSchemaError, match="newer"):
        sqlite_schema.init_schema(db, str(path))
    assert version_of(path) == DATABASE_VERSION + 1


@pytest.mark.trio
async def test_an_older_layout_is_upgraded_by_init_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.db"
    with SqliteStore(path) as store:
        await store.append("s", recs("s", 1, 2), expected_seq=0)
    # this code's layout is one step ahead of the database's
    monkeypatch.setattr(sqlite_schema, "DATABASE_VERSION", DATABASE_VERSION + 1)
    monkeypatch.setattr(sqlite_schema, "_UPGRADES", {
        DATABASE_VERSION: ("CREATE INDEX records_by_line ON records (line)",)})
    with SqliteStore(path) as store:
        with pytest.raises(DatabaseSchemaError, match="older than.*db init"):
            await store.read("s")
        await store.init_schema()
        assert await store.read("s") == recs("s", 1, 2)
    assert version_of(path) == DATABASE_VERSION + 1
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'records_by_line'") \
            .fetchone() is not None


@pytest.mark.trio
async def test_a_version_1_database_gets_the_table_of_artifacts_by_init_schema(
    tmp_path: Path
) -> None:
    # laid out as the release before artifacts laid it out: version 1, no artifacts table
    path = tmp_path / "runs.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        for statement in sqlite_schema._CREATE:
            db.execute(statement)
    with SqliteStore(path) as store:
        with pytest.raises(DatabaseSchemaError, match="version 1, older than.*db init"):
            await store.sessions()
        await store.init_schema()
        await store.append("s", recs("s", 1, 2), expected_seq=0)
        await store.put_artifact("s", "1.0", hashlib.sha256(b"{}").hexdigest(), b"{}")
        assert await store.get_artifact("s", "1.0", hashlib.sha256(b"{}").hexdigest()) == b"{}"
    assert version_of(path) == DATABASE_VERSION == 2


@pytest.mark.trio
async def test_read_only_creates_and_changes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(FileNotFoundError):
        SqliteStore(missing, read_only=True)
    assert not missing.exists()
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with SqliteStore(empty, read_only=True) as store:
        with pytest.raises(DatabaseSchemaError, match="no toolledger tables"):
            await store.sessions()
    path = tmp_path / "runs.db"
    with SqliteStore(path) as writer:
        await writer.append("s", recs("s", 1, 2), expected_seq=0)
        with SqliteStore(path, read_only=True) as reader:
            assert await reader.read("s") == recs("s", 1, 2)
            with pytest.raises(ValueError, match="read-only"):
                await reader.append("s", [rec("s", 3)], expected_seq=2)
            await writer.append("s", [rec("s", 3)], expected_seq=2)
            assert await reader.last_seq("s") == 3


@pytest.mark.trio
@pytest.mark.parametrize("key", [None, b"k"], ids=["plain", "keyed"])
async def test_rows_verify_as_lines_do(tmp_path: Path, key: bytes | None) -> None:
    with SqliteStore(tmp_path / "log.db", key=key) as db, \
            JsonlStore(tmp_path / "log.jsonl", key=key) as file:
        for store in (db, file):
            await store.append("a", recs("a", 1, 3), expected_seq=0)
            await store.append("b", recs("b", 1, 2), expected_seq=0)
        rows, lines = await db.verify(), await file.verify()
        assert rows.ok and rows.keyed == (key is not None)
        assert rows.sessions == lines.sessions  # the same heads: the same chain
        only = await db.verify(session="b")
        assert [chain.session_id for chain in only.sessions] == ["b"]
    forge_row("sqlite", tmp_path, rec("a", 2, UserMessage(text="a #X")), key=None)
    with SqliteStore(tmp_path / "log.db", key=key) as db:
        broken = (await db.verify()).broken
    assert broken is not None
    assert (broken.line, broken.session_id, broken.seq) == (None, "a", 2 if key else 3)


def test_what_is_no_database_says_so(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_bytes(b"not a database, but long enough to be taken for one's header" * 4)
    for path, problem in [(text, "file is not a database"),
                          (tmp_path / "no folder" / "runs.db", "unable to open")]:
        with pytest.raises(DatabaseSchemaError, match=f"cannot be opened as an SQLite database "
                                                      f"\\({problem}"):
            SqliteStore(path)
    assert text.read_bytes().startswith(b"not a database")


def test_a_database_another_process_creates_while_this_one_looks_is_used_not_refused(
        tmp_path: Path) -> None:
    """Two processes open a new file at once: the other one's tables are committed between
    this one's look at the catalogue and its next read. The look must be one snapshot, so that
    it sees either an empty file (and creates the tables, a no-op now) or the tables."""
    from events.stores.sqlite_schema import check_schema, init_schema

    path = str(tmp_path / "log.db")
    other = sqlite3.connect(path, isolation_level=None)
    this = sqlite3.connect(path, isolation_level=None)

    class Racing:
        """``this`` connection, with the other process committing right after the first read
        of the catalogue."""

        raced = False

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            cursor = this.execute(sql, *args)
            if "sqlite_master" in sql and not Racing.raced:
                Racing.raced = True
                rows = cursor.fetchall()
                init_schema(other, path)
                return _Rows(rows)
            return cursor

    class _Rows:
        def __init__(self, rows: list[tuple[object, ...]]) -> None:
            self._rows = rows

        def fetchall(self) -> list[tuple[object, ...]]:
            return self._rows

        def fetchone(self) -> tuple[object, ...] | None:
            return self._rows[0] if self._rows else None

        def __iter__(self) -> object:
            return iter(self._rows)

    try:
        assert check_schema(Racing(), path, create=True) is None  # type: ignore[arg-type]
    finally:
        other.close()
        this.close()
