"""Who may read a log: a store creates its files owner-only (0600), whatever the process's
umask, and leaves the mode of a file that was already there alone.

The files a store makes beside a log take the log's own mode: SQLite's ``-wal`` and ``-shm``
(SQLite's rule), the claim lock files and their folder (ours). So a log the store created
keeps everything about it owner-only, and a log its owner opened to a group stays usable by
that group. The commands that write logs (``copy``, ``fork --into``) create them through the
same store code.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from engine import Session
from engine.cli import main
from engine.models import FauxModel, faux_text
from events.stores import JsonlStore, SqliteStore
from events.stores.locks import claim_file

from tests.stores.conformance.backends import recs

UMASKS = [0o022, 0o000, 0o277]


@pytest.fixture(params=UMASKS, ids=lambda umask: f"umask {umask:03o}")
def umask(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[int]:
    """The process's umask, set to a permissive (or an odd) one for the test, once its
    ``tmp_path`` is made."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def modes(folder: Path) -> dict[str, int]:
    """The mode of everything in ``folder``, by its path relative to it."""
    return {str(path.relative_to(folder)): mode(path) for path in sorted(folder.rglob("*"))}


def append(store: JsonlStore | SqliteStore) -> None:
    trio.run(store.append, "s", recs("s", 1, 2), 0)


def test_a_new_jsonl_log_is_owner_only(umask: int, tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    with JsonlStore(log) as store:
        append(store)
        store._byte_claims = False  # claim by a lock file, as where there are no OFD locks
        with store.claim("s"):
            assert modes(tmp_path) == {"runs.jsonl": 0o600, "runs.jsonl.owners": 0o700,
                                       f"runs.jsonl.owners/{lock_name('s')}": 0o600}
    assert modes(tmp_path) == {"runs.jsonl": 0o600}


def test_a_new_sqlite_database_and_its_wal_and_shm_are_owner_only(
    umask: int, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    with SqliteStore(db) as store:
        append(store)
        with store.claim("s"):
            assert modes(tmp_path) == {"runs.db": 0o600, "runs.db-shm": 0o600,
                                       "runs.db-wal": 0o600, "runs.db.owners": 0o700,
                                       f"runs.db.owners/{lock_name('s')}": 0o600}
    with SqliteStore(db, durable=True) as store:  # its worker threads' connections too
        trio.run(store.append, "s", recs("s", 3, 3), 2)
        assert set(modes(tmp_path).values()) == {0o600}


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_existing_log_keeps_its_mode_and_what_is_made_beside_it_takes_it(
    kind: str, umask: int, tmp_path: Path
) -> None:
    log = tmp_path / f"runs.{'db' if kind == 'sqlite' else 'jsonl'}"
    log.touch()
    os.chmod(log, 0o640)  # its owner shares it with a group
    opened = SqliteStore(log) if kind == "sqlite" else JsonlStore(log)
    with opened as store:
        append(store)
        with claim_file(str(log), "s"):
            made = {name: value for name, value in modes(tmp_path).items() if name != log.name}
            assert mode(log) == 0o640
            assert made[f"{log.name}.owners"] == 0o750
            assert set(made.values()) == {0o640, 0o750}
    assert mode(log) == 0o640


def test_the_commands_that_write_logs_create_them_owner_only(
    umask: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source.jsonl"

    async def session() -> None:
        with JsonlStore(source) as store:
            async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="s",
                                    create=True) as opened:
                await opened.prompt("hello")

    trio.run(session)
    os.chmod(source, 0o644)  # a log someone made readable: its copies are not
    assert main(["copy", str(source), str(tmp_path / "copy.jsonl")]) == 0
    assert main(["copy", str(source), f"sqlite:///{tmp_path}/copy.db"]) == 0
    assert main(["fork", str(source), "--at", "1", "--into", str(tmp_path / "fork.jsonl")]) == 0
    assert main(["fork", str(source), "--at", "1", "--into",
                 f"sqlite:///{tmp_path}/fork.db"]) == 0
    capsys.readouterr()
    assert modes(tmp_path) == {"copy.db": 0o600, "copy.jsonl": 0o600, "fork.db": 0o600,
                               "fork.jsonl": 0o600, "source.jsonl": 0o644}


def lock_name(session_id: str) -> str:
    import hashlib

    return hashlib.sha256(session_id.encode()).hexdigest()[:32] + ".lock"
