"""The PostgreSQL store's own promises, beyond the conformance suite (tests/stores/conformance/):
explicit schema creation, an append that has started finishes even if cancelled, claims that
are renewed and taken over only once expired, and following a session across processes and
lost connections."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, closing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from events.errors import SessionInUse, DatabaseSchemaError, UnverifiedRecordError
from events.types import Record, UserMessage

from tests.stores.conformance.backends import postgres_url, rec, recs

psycopg = pytest.importorskip("psycopg")

from events.stores import pgschema  # noqa: E402
from events.stores.postgres import PostgresStore  # noqa: E402


@pytest.fixture
def url(postgres_server: Any, tmp_path: Path) -> str:
    """A log of its own (a schema, with the store's tables) on the run's server."""
    return postgres_url(tmp_path)


@pytest.fixture
def store(url: str) -> Iterator[PostgresStore]:
    with PostgresStore(url) as made:
        yield made


def sql(url: str, query: str, *params: object) -> list[tuple[Any, ...]]:
    """One statement on a connection of its own; the rows it returns, if any."""
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params or None)
        return cursor.fetchall() if cursor.description else []


# -- the schema is created explicitly, and versioned ----------------------------------------


async def test_a_database_without_the_tables_says_how_to_make_them(
    postgres_server: Any, tmp_path: Path
) -> None:
    sql(postgres_server.url, "CREATE SCHEMA bare")
    url = f"{postgres_server.url}?options=-csearch_path%3Dbare"
    with PostgresStore(url) as store:
        with pytest.raises(DatabaseSchemaError, match="toolledger db init URL") as info:
            await store.read("s")
        assert "no toolledger tables" in str(info.value)
        assert "127.0.0.1" in str(info.value)
        await store.init_schema()
        await store.init_schema()  # idempotent
        await store.append("s", recs("s", 1, 2), expected_seq=0)
    with PostgresStore(url) as store:
        assert await store.read("s") == recs("s", 1, 2)
    assert sql(url, "SELECT version FROM toolledger_schema") == [(pgschema.SCHEMA_VERSION,)]


async def test_a_newer_schema_is_refused(url: str) -> None:
    sql(url, "UPDATE toolledger_schema SET version = version + 1")
    with PostgresStore(url) as store:
        with pytest.raises(DatabaseSchemaError, match="newer .* upgrade toolledger"):
            await store.sessions()
        with pytest.raises(DatabaseSchemaError, match="newer"):
            await store.init_schema()


def test_without_psycopg_the_error_names_the_extra() -> None:
    script = ("import sys; sys.modules['psycopg'] = None\n"
              "import events, events.stores\n"  # the core imports without it
              "import events.stores.postgres\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert done.returncode == 1
    assert "pip install 'toolledger[postgres]'" in done.stderr


# -- appends --------------------------------------------------------------------------------


async def test_a_started_append_finishes_when_its_task_is_cancelled(
    store: PostgresStore, url: str
) -> None:
    await store.append("s", recs("s", 1, 1), expected_seq=0)
    with psycopg.connect(url) as blocker:  # holds the session's row until it commits
        blocker.execute("SELECT * FROM toolledger_sessions FOR UPDATE")
        finished: list[str] = []

        async def append() -> None:
            try:
                await store.append("s", recs("s", 2, 4), expected_seq=1)
            except trio.Cancelled:
                finished.append("cancelled")
                raise
            finished.append("returned")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append)
            while not sql(url, "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                               "AND query LIKE '%%toolledger_records%%'"):
                await trio.sleep(0.01)  # until the append's statement waits for the row
            nursery.cancel_scope.cancel()
            blocker.commit()  # lets it go on
    # the statement ran to its end and the append says so; the cancellation comes at the
    # task's next checkpoint
    assert finished == ["returned"]
    assert await store.read("s") == recs("s", 1, 4)


async def test_an_append_after_another_writers_append_reads_the_head_again(url: str) -> None:
    with PostgresStore(url) as first, PostgresStore(url) as second:
        await first.append("s", recs("s", 1, 2), expected_seq=0)
        await second.append("s", recs("s", 3, 4), expected_seq=2)
        await first.append("s", recs("s", 5, 5), expected_seq=4)  # its remembered head is old
        assert await second.read("s") == recs("s", 1, 5)
        assert await first.head("s") == await second.head("s")


# -- claims ---------------------------------------------------------------------------------


def expire(url: str, session_id: str) -> None:
    """What time does to a claim nobody renews."""
    sql(url, "UPDATE toolledger_leases SET expires_at = now() - interval '1 second' "
             "WHERE session_id = %s", session_id.encode())


async def test_a_claim_is_taken_over_only_once_it_expired(url: str) -> None:
    with PostgresStore(url) as first, PostgresStore(url) as second:
        held = first.claim("s")
        with pytest.raises(SessionInUse, match="claimed by .* pid"):
            second.claim("s")
        assert first.renew_claims() == []  # renewing keeps it
        with pytest.raises(SessionInUse):
            second.claim("s")
        expire(url, "s")
        taken = second.claim("s")
        # the first owner learns it at its next renewal, and then writes nothing more there
        assert first.renew_claims() == ["s"]
        with pytest.raises(SessionInUse, match="claim on it expired"):
            await first.append("s", [rec("s", 1)], expected_seq=0)
        await second.append("s", [rec("s", 1)], expected_seq=0)
        held.release()  # ends nothing of the new owner's
        with pytest.raises(SessionInUse):
            first.claim("s")
        taken.release()
        with first.claim("s"):
            await first.append("s", [rec("s", 2)], expected_seq=1)


async def test_renewal_moves_the_expiry_forward(url: str) -> None:
    with PostgresStore(url, claim_seconds=600) as store, store.claim("s"):
        expire(url, "s")
        assert store.renew_claims() == []
        [(left,)] = sql(url, "SELECT expires_at - now() > interval '5 minutes' "
                             "FROM toolledger_leases")
        assert left


async def test_the_old_keyword_lease_seconds_sets_claim_seconds_and_warns(url: str) -> None:
    with pytest.warns(DeprecationWarning, match=r"lease_seconds=.*claim_seconds=") as caught:
        store = PostgresStore(url, lease_seconds=600)
    assert caught[0].filename == __file__  # the warning points at the code to change
    with store, store.claim("s"):
        [(left,)] = sql(url, "SELECT expires_at - now() > interval '5 minutes' "
                             "FROM toolledger_leases")
        assert left
    with pytest.raises(TypeError, match="not both"):
        PostgresStore(url, claim_seconds=60, lease_seconds=60)


async def test_the_old_method_renew_leases_renews_the_claims_and_warns(url: str) -> None:
    with PostgresStore(url) as first, PostgresStore(url) as second:
        first.claim("s")
        with pytest.warns(DeprecationWarning, match=r"renew_leases .*renew_claims") as caught:
            assert first.renew_leases() == []
        assert caught[0].filename == __file__
        expire(url, "s")
        second.claim("s")
        with pytest.warns(DeprecationWarning):
            assert first.renew_leases() == ["s"]  # what renew_claims says: the claim was taken


async def test_closing_the_store_ends_its_claims(url: str) -> None:
    with PostgresStore(url) as first:
        first.claim("s")
        first.claim("t")
    assert sql(url, "SELECT count(*) FROM toolledger_leases") == [(0,)]
    with PostgresStore(url) as second, second.claim("s"):
        pass


# -- following ------------------------------------------------------------------------------


async def take(records: AsyncIterator[Record], count: int) -> list[Record]:
    return [await anext(records) for _ in range(count)]


async def test_follow_sees_what_another_store_appends(url: str) -> None:
    with PostgresStore(url) as reader, PostgresStore(url) as writer:
        await writer.append("s", recs("s", 1, 2), expected_seq=0)
        async with aclosing(reader.follow("s", after=1)) as records:
            assert await take(records, 1) == [rec("s", 2)]
            await writer.append("other", recs("other", 1, 1), expected_seq=0)
            await writer.append("s", recs("s", 3, 5), expected_seq=2)
            assert await take(records, 3) == recs("s", 3, 5)


async def test_follow_catches_up_after_its_connection_is_lost(url: str) -> None:
    with PostgresStore(url) as reader, PostgresStore(url) as writer:
        async with aclosing(reader.follow("s")) as records:
            await writer.append("s", recs("s", 1, 1), expected_seq=0)
            assert await take(records, 1) == [rec("s", 1)]
            # the server drops the listener; what is appended meanwhile is not notified to it
            [(pid,)] = sql(url, "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'")
            sql(url, "SELECT pg_terminate_backend(%s)", pid)
            await writer.append("s", recs("s", 2, 3), expected_seq=1)
            assert await take(records, 2) == recs("s", 2, 3)
            await writer.append("s", recs("s", 4, 4), expected_seq=3)
            assert await take(records, 1) == [rec("s", 4)]


async def test_a_keyed_follower_verifies(url: str) -> None:
    key = b"the host's key"
    with PostgresStore(url, key=key) as writer, PostgresStore(url, key=key) as reader:
        await writer.append("s", recs("s", 1, 2), expected_seq=0)
        async with aclosing(reader.follow("s")) as records:
            assert await take(records, 2) == recs("s", 1, 2)
    with closing(PostgresStore(url, key=b"another key")) as wrong:
        async with aclosing(wrong.follow("s")) as records:
            with pytest.raises(UnverifiedRecordError):
                await anext(records)


async def test_closing_the_store_ends_its_followers_with_its_error(url: str) -> None:
    store = PostgresStore(url)
    await store.append("s", recs("s", 1, 1), expected_seq=0)
    failed: list[Exception] = []

    async def follow() -> None:
        try:
            async for _ in store.follow("s"):
                pass
        except ValueError as exc:
            failed.append(exc)

    with trio.fail_after(60):  # a guard against a hang, never a measure
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            # connected, caught up, and waiting on its socket
            while not store.listening:
                await trio.sleep(0.01)
            store.close()
    assert len(failed) == 1 and "closed" in str(failed[0])


# -- group commit ---------------------------------------------------------------------------


async def test_batches_queued_together_are_each_stored_or_refused_alone(
    url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.stores.conformance.backends import forge_row, spy_postgres_writes

    groups = spy_postgres_writes(monkeypatch)
    key = b"the host's key"
    with PostgresStore(url, key=key) as setup:
        for session in ("old", "forged"):
            await setup.append(session, recs(session, 1, 2), expected_seq=0)
    forge_row("postgres", tmp_path, rec("forged", 2, UserMessage(text="forged #X")), key=None)

    outcomes: dict[str, str] = {}
    with PostgresStore(url, key=key, connections=1) as store:  # one connection: they queue

        async def append(session: str, first: int, last: int, expected: int) -> None:
            try:
                await store.append(session, recs(session, first, last), expected)
            except Exception as exc:
                outcomes[f"{session} {first}"] = type(exc).__name__
            else:
                outcomes[f"{session} {first}"] = "stored"

        await store.append("z", recs("z", 1, 1), expected_seq=0)
        with psycopg.connect(url) as blocker:
            # the one connection stays busy with z's next batch while the others queue, in order
            blocker.execute("SELECT * FROM toolledger_sessions FOR UPDATE")
            groups.clear()
            async with trio.open_nursery() as nursery:
                for args in [("z", 2, 2, 1), ("a", 1, 2, 0), ("b", 1, 1, 0),
                             ("a", 3, 4, 2),  # a's next batch: the next group
                             ("old", 1, 1, 0),  # stale
                             ("forged", 3, 3, 2),  # onto a record that does not verify
                             ("old", 3, 3, 2)]:
                    nursery.start_soon(append, *args)
                    await trio.testing.wait_all_tasks_blocked()
                blocker.commit()
        assert outcomes == {"z 2": "stored", "a 1": "stored", "b 1": "stored", "a 3": "stored",
                            "old 1": "ConflictError", "forged 3": "UnverifiedRecordError",
                            "old 3": "stored"}
        # z's batch went alone, its head known: its statement was sent from the event loop
        # (events.stores.pgloop), not by the worker thread's write
        assert groups == [["a", "b", "old", "forged"], ["a", "old"]]
        assert await store.read("a") == recs("a", 1, 4)
        assert await store.read("b") == recs("b", 1, 1)
        assert await store.read("old") == recs("old", 1, 3)


async def test_a_queued_append_cancelled_before_it_is_taken_writes_nothing(url: str) -> None:
    with PostgresStore(url, connections=1) as store:
        await store.append("z", recs("z", 1, 1), expected_seq=0)
        with psycopg.connect(url) as blocker:
            blocker.execute("SELECT * FROM toolledger_sessions FOR UPDATE")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(store.append, "z", recs("z", 2, 2), 1)  # busy: the connection
                await trio.testing.wait_all_tasks_blocked()

                async def append_q(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
                    with trio.CancelScope() as scope:
                        task_status.started(scope)
                        await store.append("q", recs("q", 1, 1), 0)

                scope = await nursery.start(append_q)
                await trio.testing.wait_all_tasks_blocked()  # q queued, waiting for the connection
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                blocker.commit()
        await store.append("r", recs("r", 1, 1), 0)  # the next group: q is not in it
        assert await store.read("z") == recs("z", 1, 2)
        assert await store.read("q") == []
        assert await store.sessions() == ["z", "r"]


# -- a whole session --------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, b"the host's key"], ids=["plain", "keyed"])
async def test_a_session_pauses_and_resumes_on_another_store_object(
    url: str, key: bytes | None
) -> None:
    from engine import LATER, Annotations, Session, ToolResult, fold, text, tool
    from engine.models import FauxModel, faux_text, faux_tool_call
    from events import verify_lines

    runs: list[str] = []

    @tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
          annotations=Annotations(destructive=True))
    async def rm_rf(call: Any, ctx: Any) -> ToolResult:
        runs.append(call.call_id)
        return ToolResult(content=[text("gone")])

    async def later(request: Any) -> Any:
        return LATER

    model = FauxModel([faux_tool_call("rm_rf", {"path": "/tmp/x"}), faux_text("done")])
    with PostgresStore(url, key=key) as store:
        async with Session.open(store, model=model, tools=[rm_rf], approver=later,
                                session_id="s", create=True) as session:
            paused = await session.prompt("clean up")
            assert paused.stop == "paused"
            with PostgresStore(url) as other, pytest.raises(SessionInUse):
                other.claim("s")  # the open session holds the claim
        assert runs == []
    with PostgresStore(url, key=key) as store:  # as another worker would
        async with Session.open(store, model=model, tools=[rm_rf], approver=later,
                                session_id="s") as session:
            await session.resolve_approval("1.0", True)
            done = await session.resume()
            assert done.stop == "end_turn" and done.text == "done"
        assert runs == ["1.0"]
        records = await store.read("s")
        assert fold(records).snapshot() == session.state.snapshot()
    # the rows hold the lines a JSONL file would: one verifier checks the chain
    lines = [(seq, bytes(line) + b"\n") for seq, line in sql(
        url, "SELECT seq, line FROM toolledger_records ORDER BY seq")]
    report = verify_lines(lines, key=key)
    assert report.ok and report.records == len(records)
    model.assert_complete()


async def test_a_write_cut_short_is_never_taken_for_stored(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from events.stores import pgappend

    def broken(self: pgappend.Appender, conn: Any, group: list[pgappend.Pending]) -> None:
        raise MemoryError  # whatever stops a write before it settles its batches

    with PostgresStore(url, connections=1) as store:
        monkeypatch.setattr(pgappend.Appender, "write", broken)
        outcomes: list[str] = []

        async def append(session: str) -> None:
            try:
                await store.append(session, recs(session, 1, 1), 0)
            except BaseException as exc:
                outcomes.append(f"{session}: {exc!r}")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, "a")
            nursery.start_soon(append, "b")
        assert sorted(o.split(":")[0] for o in outcomes) == ["a", "b"]
        assert any("MemoryError" in o for o in outcomes)  # the writer's own
        assert any("cut short: it may or may not be stored" in o for o in outcomes)


async def test_verify_checks_every_chain_and_names_a_broken_link(url: str, tmp_path: Path) -> None:
    from tests.stores.conformance.backends import forge_row

    key = b"the host's key"
    with PostgresStore(url, key=key) as store:
        await store.append("a", recs("a", 1, 3), expected_seq=0)
        await store.append("b", recs("b", 1, 2), expected_seq=0)
        report = await store.verify()
        assert report.ok and report.records == 5 and report.keyed
        forge_row("postgres", tmp_path, rec("b", 2, UserMessage(text="b #X")), key=None)
        report = await store.verify()
        assert report.broken is not None and report.broken.line is None
        assert (report.broken.session_id, report.broken.seq) == ("b", 2)
        assert (await store.verify(session="a")).ok
