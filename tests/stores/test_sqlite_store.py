"""The SQLite database's own promises, beyond the conformance suite: a session runs on it end
to end across processes' lifetimes, appends never wait for another writer on the event loop,
and several processes append to one database without losing or repeating a record."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio

from engine import LATER, Annotations, ApprovalRequest, Session, ToolResult, fold, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import SessionInUse, SqliteStore, verify_lines
from events.types import Record, UserMessage

KEY = b"the host's HMAC key, kept away from the log"
SID = "s"


def rec(seq: int, session: str = SID) -> Record:
    return Record(session_id=session, seq=seq, time=1.0 + seq, event=UserMessage(text=f"#{seq}"))


async def later(request: ApprovalRequest) -> Any:
    return LATER


@pytest.mark.trio
@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "keyed"])
async def test_a_session_pauses_and_resumes_on_a_reopened_database(
    tmp_path: Path, key: bytes | None
) -> None:
    runs: list[str] = []

    @tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
          annotations=Annotations(destructive=True))
    async def rm_rf(call: Any, ctx: Any) -> ToolResult:
        runs.append(call.call_id)
        return ToolResult(content=[text("gone")])

    db = tmp_path / "runs.db"
    model = FauxModel([faux_tool_call("rm_rf", {"path": "/tmp/x"}), faux_text("done")])
    with SqliteStore(db, key=key) as store:
        async with Session.open(store, model=model, tools=[rm_rf], approver=later,
                                session_id=SID, create=True) as session:
            paused = await session.prompt("clean up")
            assert paused.stop == "paused" and [p.call_id for p in paused.pending] == ["1.0"]
            with pytest.raises(SessionInUse):  # the open session owns it
                SqliteStore(db).claim(SID)
        assert runs == []
        paused_at = await store.last_seq(SID)

    with SqliteStore(db, key=key) as store:  # a new store object, as a new process would have
        async with Session.open(store, model=model, tools=[rm_rf], approver=later,
                                session_id=SID) as session:
            await session.resolve_approval("1.0", True)
            done = await session.resume()
            assert done.stop == "end_turn" and done.text == "done"
        assert runs == ["1.0"]
        records = await store.read(SID)
        assert len(records) > paused_at
        assert fold(records).snapshot() == session.state.snapshot()
        # the rows hold the lines a JSONL file would: one verifier checks the chain
        with sqlite3.connect(db) as plain:
            lines = [(number, bytes(row[0]) + b"\n") for number, row in enumerate(
                plain.execute("SELECT line FROM records ORDER BY seq"), start=1)]
        report = verify_lines(lines, key=key)
        assert report.ok and report.records == len(records)
        assert store.head(SID) is not None
    model.assert_complete()


@pytest.mark.trio
async def test_an_append_waits_for_another_writer_off_the_event_loop(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with SqliteStore(db) as store:
        await store.append(SID, [rec(1)], 0)
        other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        ticked = trio.Event()

        async def append() -> None:
            await store.append(SID, [rec(2)], 1)

        async def tick_then_let_go() -> None:
            await trio.sleep(0)
            ticked.set()  # the loop ran while the append waited
            await trio.to_thread.run_sync(other.execute, "COMMIT")

        with pytest.raises(trio.WouldBlock):
            store.append_nowait(SID, [rec(2)], 1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(append)
            nursery.start_soon(tick_then_let_go)
        other.close()
        assert ticked.is_set()
        assert await store.read(SID) == [rec(1), rec(2)]


@pytest.mark.trio
async def test_a_durable_store_commits_in_a_thread(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with SqliteStore(db, durable=True) as store:
        with pytest.raises(trio.WouldBlock):
            store.append_nowait(SID, [rec(1)], 0)
        await store.append(SID, [rec(1), rec(2)], 0)
    with SqliteStore(db) as store:
        assert await store.read(SID) == [rec(1), rec(2)]
    with sqlite3.connect(db) as plain:
        assert plain.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_processes_appending_concurrently_stay_consistent(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    SqliteStore(db).close()
    writer = textwrap.dedent(
        """
        import sys
        import trio
        from events import SqliteStore
        from events.errors import ConflictError
        from events.types import Record, UserMessage

        async def main(path, name):
            store = SqliteStore(path)
            written = 0
            while written < 30:  # one shared session, racing: retry on conflict
                last = await store.last_seq("shared")
                record = Record(session_id="shared", seq=last + 1, time=1.0,
                                event=UserMessage(text=f"{name} {written}"))
                try:
                    await store.append("shared", [record], last)
                except ConflictError:
                    continue
                written += 1
            for seq in range(1, 26):  # and a session of its own, in batches of one
                record = Record(session_id=name, seq=seq, time=1.0, event=UserMessage(text="x"))
                await store.append(name, [record], seq - 1)
            store.close()

        trio.run(main, sys.argv[1], sys.argv[2])
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(db), f"w{n}"], env=env)
             for n in range(4)]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0, 0]

    async def check() -> None:
        with SqliteStore(db) as store:
            shared = await store.read("shared")
            assert [r.seq for r in shared] == list(range(1, 121))
            texts = [r.event.text for r in shared if isinstance(r.event, UserMessage)]
            assert sorted(texts) == sorted(f"w{n} {i}" for n in range(4) for i in range(30))
            assert sorted(await store.sessions()) == sorted(["shared", "w0", "w1", "w2", "w3"])
            for n in range(4):
                assert [r.seq for r in await store.read(f"w{n}")] == list(range(1, 26))

    trio.run(check)


def _open_and_close(path: str, barrier: Any, results: Any) -> None:
    barrier.wait()  # every process opens the new file at the same moment
    try:
        SqliteStore(path).close()
        results.put(None)
    except Exception as exc:  # reported to the test, which names it
        results.put(repr(exc))


def test_processes_opening_a_new_database_at_once_all_open_it(tmp_path: Path) -> None:
    # switching a new file to WAL takes a lock SQLite's busy handler does not wait for
    context = multiprocessing.get_context("fork")
    for attempt in range(100):
        path = str(tmp_path / f"new-{attempt}.db")
        barrier, results = context.Barrier(6), context.Queue()
        processes = [context.Process(target=_open_and_close, args=(path, barrier, results))
                     for _ in range(6)]
        for process in processes:
            process.start()
        errors = [error for error in (results.get(timeout=60) for _ in processes) if error]
        for process in processes:
            process.join()
        assert errors == [], f"attempt {attempt}: {errors[0]}"
