"""The command line on store URLs: show, verify and tail read a database as they read a file;
copy moves sessions between stores with their chain proven; db init makes the tables;
tail --follow watches a session another process writes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import trio

from engine.cli import main
from events.codec import decode_record
from events.stores import JsonlStore, SqliteStore
from events.stores.copying import CopyError, copy_session

from tests.stores.conformance.backends import forge_row, rec, recs
from events.types import UserMessage

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "v1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real session's log, written by the demo."""
    workdir = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--approve", "all", "--workdir", str(workdir)]) == 0
    return workdir / "session.jsonl"


def two_sessions(path: Path, key: bytes | None = None) -> None:
    async def write() -> None:
        with JsonlStore(path, key=key) as store:
            await store.append("alpha", recs("alpha", 1, 3), expected_seq=0)
            await store.append("beta", recs("beta", 1, 2), expected_seq=0)

    trio.run(write)


def test_show_reads_a_database_as_it_reads_a_file(
    demo_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    assert run(capsys, "copy", str(demo_log), url)[0] == 0
    for command in (["show", "--json"], ["transcript", "--json"], ["show"]):
        from_file = run(capsys, command[0], str(demo_log), *command[1:])
        from_db = run(capsys, command[0], url, *command[1:])
        assert from_db == from_file and from_db[0] == 0


def test_copy_keeps_the_chain_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "a.jsonl"
    two_sessions(source)
    status, out, _ = run(capsys, "verify", str(source), "--json")
    heads = {s["session_id"]: s["head"] for s in json.loads(out)["sessions"]}
    status, out, err = run(capsys, "copy", str(source), f"sqlite:///{tmp_path}/b.db", "--json")
    assert status == 0, err
    copied = json.loads(out)["sessions"]
    assert {c["session_id"]: c["head"] for c in copied} == heads
    # and back into another file, one session, named by a prefix
    status, out, err = run(capsys, "copy", f"sqlite:///{tmp_path}/b.db",
                           str(tmp_path / "c.jsonl"), "--session", "be", "--json")
    assert status == 0, err
    assert [c["session_id"] for c in json.loads(out)["sessions"]] == ["beta"]
    status, out, _ = run(capsys, "verify", str(tmp_path / "c.jsonl"), "--json")
    assert [(s["session_id"], s["head"]) for s in json.loads(out)["sessions"]] == \
        [("beta", heads["beta"])]


def test_copy_never_overwrites_a_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    two_sessions(source)
    assert run(capsys, "copy", str(source), str(target), "--session", "beta")[0] == 0
    before = target.read_bytes()
    status, _, err = run(capsys, "copy", str(source), str(target))
    assert status == 1 and "already holds 'beta'" in err and "nothing was copied" in err
    assert target.read_bytes() == before  # alpha was not copied either


def test_copy_refuses_a_broken_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "log.jsonl"
    two_sessions(source)
    forge_row("jsonl", tmp_path, rec("alpha", 2, UserMessage(text="alpha#X")), key=None)
    status, _, err = run(capsys, "copy", str(source), f"sqlite:///{tmp_path}/b.db")
    assert status == 1 and "session 'alpha'" in err and "does not verify" in err
    with closing(SqliteStore(tmp_path / "b.db")) as target:
        assert trio.run(target.sessions) == []


def test_copy_with_a_key_seals_and_verifies_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(b"the key")
    source = tmp_path / "a.jsonl"
    two_sessions(source, key=b"the key")
    url = f"sqlite:///{tmp_path}/b.db"
    assert run(capsys, "copy", str(source), url, "--key-file", str(key_file))[0] == 0
    status, out, _ = run(capsys, "verify", url, "--key-file", str(key_file), "--json")
    assert status == 0 and json.loads(out)["keyed"] is True
    # without the key the copy's chain is not proven: refused before anything is written
    status, _, err = run(capsys, "copy", str(source), f"sqlite:///{tmp_path}/c.db")
    assert status == 1 and "does not verify" in err


def test_copy_refuses_records_of_an_older_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "copy", str(CORPUS / "reference.jsonl"), str(tmp_path / "b.jsonl"))
    assert status == 1 and "schema version 1" in err


async def test_copy_session_refuses_a_keyed_store_and_a_plain_one(tmp_path: Path) -> None:
    with JsonlStore(tmp_path / "a.jsonl", key=b"k") as source, \
            SqliteStore(tmp_path / "b.db") as target:
        await source.append("s", recs("s", 1, 2), expected_seq=0)
        with pytest.raises(CopyError, match="same key"):
            await copy_session(source, target, "s")
        assert await target.sessions() == []


def test_verify_names_a_forged_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/log.db"

    async def write() -> None:
        with SqliteStore(tmp_path / "log.db") as store:
            await store.append("s", recs("s", 1, 3), expected_seq=0)

    trio.run(write)
    forge_row("sqlite", tmp_path, rec("s", 2, UserMessage(text="s #X")), key=None)
    status, out, _ = run(capsys, "verify", url, "--json")
    assert status == 1
    broken = json.loads(out)["broken"]
    assert (broken["line"], broken["session_id"], broken["seq"]) == (None, "s", 3)
    status, _, err = run(capsys, "verify", f"sqlite:///{tmp_path}/missing.db")
    assert status == 2 and "No such file" in err


def test_db_init(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.commit()
    url = f"sqlite:///{path}"
    status, _, err = run(capsys, "show", url)
    assert status == 1 and "no toolledger tables" in err and f"db init {url}" in err
    for _ in range(2):  # idempotent
        status, out, _ = run(capsys, "db", "init", url)
        assert status == 0 and "tables ready" in out
    assert run(capsys, "show", url)[0] == 0
    status, _, err = run(capsys, "db", "init", str(tmp_path / "log.jsonl"))
    assert status == 1 and "keeps no tables" in err
    assert not (tmp_path / "log.jsonl").exists()
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE toolledger_schema SET version = 99")
        db.commit()
    status, _, err = run(capsys, "db", "init", url)
    assert status == 1 and "version 99, newer" in err


def test_tail_prints_one_line_a_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "log.jsonl"
    two_sessions(source)
    status, _, err = run(capsys, "tail", str(source))
    assert status == 1 and "holds 2 sessions" in err
    status, out, _ = run(capsys, "tail", str(source), "--session", "al", "--after", "1")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()] == ["2", "3"]
    assert "user_message" in out and "alpha #3" in out
    status, out, _ = run(capsys, "tail", str(source), "--session", "beta", "--json")
    assert [decode_record(json.loads(line)) for line in out.splitlines()] == recs("beta", 1, 2)


async def test_tail_follow_watches_what_another_process_writes(tmp_path: Path) -> None:
    """The writer is this process, the watcher another: each record appended shows up there,
    and Ctrl-C ends the watch quietly."""
    url = f"sqlite:///{tmp_path}/runs.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with SqliteStore(tmp_path / "runs.db") as store:
        await store.append("s", recs("s", 1, 2), expected_seq=0)
        watcher = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "tail", url, "--session", "s", "-f", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            assert watcher.stdout is not None
            readline = watcher.stdout.readline
            seen = []
            # a guard against a hang, never a measure: the waits in threads are abandoned
            # when it fires, and the watcher is killed below
            with trio.fail_after(60):
                for seq in range(1, 6):
                    if seq > 2:
                        await store.append("s", [rec("s", seq)], expected_seq=seq - 1)
                    line = await trio.to_thread.run_sync(readline, abandon_on_cancel=True)
                    seen.append(decode_record(json.loads(line)))
                assert seen == recs("s", 1, 5)
                watcher.send_signal(signal.SIGINT)
                assert await trio.to_thread.run_sync(watcher.wait, abandon_on_cancel=True) == 0
            assert watcher.stderr is not None and watcher.stderr.read() == b""
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.wait()


def test_a_postgresql_url_is_made_copied_into_shown_and_verified(
    demo_log: Path, postgres_server: object, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    from tests.pgserver import URL_VARIABLE as POSTGRES_URL_VARIABLE

    server = os.environ[POSTGRES_URL_VARIABLE]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA cli_urls")
    url = f"{server}?options=-csearch_path%3Dcli_urls"
    # the tables are made explicitly; a store on a database without them says how
    status, _, err = run(capsys, "show", url)
    assert status != 0 and "db init" in err
    assert run(capsys, "db", "init", url)[0] == 0
    status, _, err = run(capsys, "copy", str(demo_log), url)
    assert status == 0, err
    for command in (["show", "--json"], ["transcript", "--json"], ["show"]):
        assert run(capsys, command[0], url, *command[1:]) == \
            run(capsys, command[0], str(demo_log), *command[1:])
    status, out, err = run(capsys, "verify", url, "--json")
    assert status == 0, err
    from_file = json.loads(run(capsys, "verify", str(demo_log), "--json")[1])
    assert [s["head"] for s in json.loads(out)["sessions"]] == \
        [s["head"] for s in from_file["sessions"]]
