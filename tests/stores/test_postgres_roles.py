"""Who may read what in a PostgreSQL log: the grants docs/stores.md gives a worker's role and a
reader's role are enough for each to do its work, and no more; a role granted nothing cannot
read the logs, and its store says why."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio

from events.errors import DatabaseSchemaError
from events.types import UserMessage

from tests.stores.conformance.backends import postgres_url, rec, recs

psycopg = pytest.importorskip("psycopg")

from events.stores.postgres import PostgresStore  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "stores.md"
ROLES = ("toolledger_writer", "toolledger_reader", "toolledger_nobody")


def documented_grants() -> str:
    """The SQL block of docs/stores.md's section on who may read what in PostgreSQL."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("### Who may read what in PostgreSQL", 1)[1]
    found = re.search(r"```sql\n(.*?)```", section, re.S)
    assert found is not None, "the section has no SQL block"
    return found.group(1)


def refused(url: str, *statements: str) -> None:
    """Each statement, run as the URL's role, is refused for want of a privilege."""
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


@pytest.fixture
def urls(postgres_server: Any, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A log with the documented roles granted on it, holding session "s" (seqs 1 and 2);
    each role's URL, and the owner's."""
    owner = postgres_url(tmp_path)
    schema = owner.rsplit("%3D", 1)[1]
    grants = documented_grants().replace("agents", schema)
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(grants.encode())  # several statements: the simple query protocol
        conn.execute("CREATE ROLE toolledger_nobody LOGIN")
    try:
        with PostgresStore(owner) as store:  # a session written by the tables' owner
            trio.run(store.append, "s", recs("s", 1, 2), 0)
        yield {"owner": owner,
               **{role: owner.replace("postgres@", f"{role}@", 1) for role in ROLES}}
    finally:
        with psycopg.connect(postgres_server.url, autocommit=True) as conn:
            for role in ROLES:
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


async def reads(store: PostgresStore, session: str, last: int) -> None:
    """The store reads, verifies and follows ``session``, which ends at seq ``last``."""
    assert await store.read(session) == recs(session, 1, last)
    assert (await store.verify()).ok
    async with aclosing(store.follow(session, after=last - 1)) as followed:
        assert await anext(followed) == rec(session, last)


async def test_a_worker_role_does_its_work_and_cannot_rewrite_a_record(
    urls: dict[str, str]
) -> None:
    with PostgresStore(urls["toolledger_writer"]) as store:
        with store.claim("w"):
            await store.append("w", recs("w", 1, 2), expected_seq=0)
            store.renew_claims()
            await store.append("w", recs("w", 3, 3), expected_seq=2)
        await reads(store, "w", 3)
    refused(urls["toolledger_writer"], "UPDATE toolledger_records SET line = line",
            "DELETE FROM toolledger_records")


async def test_a_reader_role_reads_and_verifies_and_cannot_write_or_claim(
    urls: dict[str, str]
) -> None:
    with PostgresStore(urls["toolledger_reader"]) as store:
        assert await store.sessions() == ["s"]
        await reads(store, "s", 2)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await store.append("s", [rec("s", 3, UserMessage(text="more"))], expected_seq=2)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            store.claim("s")
    refused(urls["toolledger_reader"], "UPDATE toolledger_sessions SET last_seq = 0",
            "SELECT * FROM toolledger_leases")


async def test_a_role_granted_nothing_reads_nothing_and_is_told_why(
    urls: dict[str, str]
) -> None:
    with PostgresStore(urls["toolledger_nobody"]) as store:
        with pytest.raises(DatabaseSchemaError,
                           match="no toolledger tables this role may see.*USAGE on their"):
            await store.read("s")
