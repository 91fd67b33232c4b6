"""The backends the conformance suite runs against, and what it needs of each.

Every test in ``tests/stores/conformance/`` runs against each backend in :data:`BACKENDS` (memory,
JSONL, SQLite, PostgreSQL): the suite is the specification of a store. A new store is one more entry in
:func:`make_store` and, if its log outlives the store object (shared by several store objects
and processes, or keyed), in :data:`SHARED`, :func:`reopen` and :func:`forge_row` (and
:func:`forge_session_row` for a store with a table of sessions). The JSONL
file's own promises (torn lines, corruption) are in ``tests/stores/test_jsonl_store.py``, the SQLite
database's in ``tests/stores/test_sqlite_store.py``, PostgreSQL's in ``tests/stores/test_postgres_store.py``.

A PostgreSQL "log in ``directory``" is a schema of its own on the run's server (the
``postgres_server`` fixture, which ``tests/conftest.py`` asks for whenever a test
runs on the postgres backend), named after the directory, so that another store object, or
another process, given the same directory finds the same log."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from events.codec import encode_line_bytes
from events.integrity import GENESIS, seal_bytes, unseal
from events.stores import EventStore, JsonlStore, MemoryStore, SqliteStore
from events.types import Event, Record, UserMessage


T0 = 1_767_225_600.0


def rec(session: str, seq: int, event: Event | None = None) -> Record:
    return Record(
        session_id=session,
        seq=seq,
        time=T0 + seq,
        event=event if event is not None else UserMessage(text=f"{session} #{seq}"),
    )


def recs(session: str, first: int, last: int) -> list[Record]:
    return [rec(session, seq) for seq in range(first, last + 1)]


BACKENDS = ["memory", "jsonl", "sqlite", "postgres"]


#: the backends whose log outlives the store object, shared by several of them and processes
SHARED = ["jsonl", "sqlite", "postgres"]
LOGS = {"jsonl": "log.jsonl", "sqlite": "log.db"}
_SCHEMAS_MADE: set[str] = set()


def postgres_url(directory: Path) -> str:
    """The URL of the PostgreSQL log for ``directory``: a schema of its own on the run's
    server, made with the store's tables the first time it is asked for."""
    from events.stores import pgschema
    import psycopg

    from tests.pgserver import URL_VARIABLE as POSTGRES_URL_VARIABLE

    server = os.environ.get(POSTGRES_URL_VARIABLE)
    if not server:
        pytest.fail("the postgres backend needs the postgres_server fixture")
    schema = "log_" + hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    url = f"{server}?options=-csearch_path%3D{schema}"
    if schema not in _SCHEMAS_MADE:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(f"SET search_path TO {schema}")
            pgschema.init_schema(conn, url)
        _SCHEMAS_MADE.add(schema)
    return url


def spy_postgres_writes(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The sessions of each group a PostgreSQL store's worker thread writes, in order (the
    appends sent from the event loop are not among them)."""
    from events.stores import pgappend

    seen: list[list[str]] = []
    write = pgappend.Appender.write

    def spy(self: pgappend.Appender, conn: object, group: list[pgappend.Pending]) -> None:
        seen.append([pending.session_id for pending in group])
        write(self, conn, group)  # type: ignore[arg-type]

    monkeypatch.setattr(pgappend.Appender, "write", spy)
    return seen


def make_store(kind: str, directory: Path) -> EventStore:
    if kind == "memory":
        return MemoryStore()
    return reopen(kind, directory)


def reopen(kind: str, directory: Path, key: bytes | None = None) -> EventStore:
    """Another store object on the log in ``directory`` (for the :data:`SHARED` kinds)."""
    if kind == "postgres":
        from events.stores.postgres import PostgresStore

        return PostgresStore(postgres_url(directory), key=key)
    path = directory / LOGS[kind]
    if kind == "sqlite":
        return SqliteStore(path, key=key)
    return JsonlStore(path, key=key)


def forge_row(kind: str, directory: Path, record: Record, key: bytes | None) -> None:
    """Put ``record`` in place of the stored one of its seq, chained after the one before it
    and sealed with ``key`` (plain SHA-256 without one): what someone with write access to
    the file or the database can do."""
    if kind == "postgres":
        import psycopg

        with psycopg.connect(postgres_url(directory), autocommit=True) as conn:
            sid = record.session_id.encode("utf-8", "surrogatepass")
            rows = {seq: bytes(line) for seq, line in conn.execute(
                "SELECT seq, line FROM toolledger_records WHERE session_id = %s", (sid,))}
            prev = (unseal(rows[record.seq - 1]) or pytest.fail("not sealed"))[1] \
                if record.seq > 1 else GENESIS
            line, _ = seal_bytes(encode_line_bytes(record)[1], prev, key)
            conn.execute("UPDATE toolledger_records SET line = %s WHERE session_id = %s "
                         "AND seq = %s", (line, sid, record.seq))
        return
    path = directory / LOGS[kind]
    if kind == "sqlite":
        with closing(sqlite3.connect(path, isolation_level=None)) as db:
            sid = record.session_id.encode("utf-8", "surrogatepass")
            rows = dict(db.execute("SELECT seq, line FROM records WHERE session_id = ?", (sid,)))
            prev = (unseal(rows[record.seq - 1]) or pytest.fail("not sealed"))[1] \
                if record.seq > 1 else GENESIS
            line, _ = seal_bytes(encode_line_bytes(record)[1], prev, key)
            db.execute("UPDATE records SET line = ? WHERE session_id = ? AND seq = ?",
                       (line, sid, record.seq))
        return
    lines = path.read_bytes().splitlines()
    mine = [i for i, raw in enumerate(lines) if json.loads(raw)["session_id"] == record.session_id]
    index = mine[record.seq - 1]
    prev = (unseal(lines[mine[record.seq - 2]]) or pytest.fail("not sealed"))[1] \
        if record.seq > 1 else GENESIS
    lines[index], _ = seal_bytes(encode_line_bytes(record)[1], prev, key)
    path.write_bytes(b"\n".join(lines) + b"\n")


def forge_session_row(kind: str, directory: Path, session_id: str, **values: object) -> None:
    """Set ``values`` (``last_seq``, ``head``) in the session's row of the database's table of
    sessions, or without values delete the row, as someone with write access to the database
    can ("sqlite" and "postgres")."""
    names = sorted(values)
    change = (f"UPDATE {{table}} SET {', '.join(f'{name} = %s' for name in names)}"
              if names else "DELETE FROM {table}")
    statement = change + " WHERE session_id = %s"
    params = [*(values[name] for name in names), session_id.encode("utf-8", "surrogatepass")]
    if kind == "postgres":
        import psycopg

        with psycopg.connect(postgres_url(directory), autocommit=True) as conn:
            conn.execute(statement.format(table="toolledger_sessions"), params)
        return
    assert kind == "sqlite", f"a {kind} log has no table of sessions"
    with closing(sqlite3.connect(directory / LOGS[kind], isolation_level=None)) as db:
        db.execute(statement.format(table="sessions").replace("%s", "?"), params)


def run_on(kind: str, body: Callable[[EventStore], Awaitable[None]]) -> None:
    """``body`` on a fresh store of ``kind`` (for Hypothesis, which cannot use fixtures)."""

    async def main(directory: Path) -> None:
        with closing(make_store(kind, directory)) as store:
            await body(store)

    with tempfile.TemporaryDirectory() as directory:
        trio.run(main, Path(directory))


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A fresh store of each backend in turn (the test modules import this fixture)."""
    made = make_store(request.param, tmp_path)
    yield made
    made.close()

