"""``verify_apart`` checks the chain in a child process and reports exactly what ``verify``
reports, on a JSONL file, SQLite and PostgreSQL: on a good log, with a key, for one session
against an anchor that does not hold, and on a file one byte of which was changed. A child
that cannot check says so as a ``LogError``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio

import events.stores.jsonl as jsonl_module

from engine import approve_all
from engine.models import FauxModel, faux_text
from events import JsonlStore, SqliteStore
from events.chainreport import Anchor
from events.errors import LogError
from events.stores import verifyapart
from tests.stores.conformance.backends import postgres_url
from tests.web.webconsole import SID, Tools, deleting

KEY = b"the host's key"


def opener(backend: str, directory: Path) -> Any:
    """How to open one log of ``backend`` in ``directory``: ``(key, read_only) -> store``."""
    if backend == "jsonl":
        return lambda key, read_only: JsonlStore(str(directory / "log.jsonl"), key=key,
                                                 read_only=read_only)
    if backend == "sqlite":
        return lambda key, read_only: SqliteStore(str(directory / "log.db"), key=key,
                                                  read_only=read_only)
    from events.stores.postgres import PostgresStore

    url = postgres_url(directory)
    return lambda key, read_only: PostgresStore(url, key=key)


async def write_log(store: Any) -> None:
    """Two sessions of real calls."""
    from engine import Session

    tools = Tools()
    with store:
        for sid in (SID, "other"):
            model = FauxModel([deleting("a.md"), deleting("b.md"), faux_text("done")])
            async with Session.open(store, model=model, tools=tools.specs, approver=approve_all,
                                    session_id=sid, create=True) as session:
                await session.prompt("go")


@pytest.mark.parametrize("backend", ["jsonl", "sqlite", "postgres"])
@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "keyed"])
async def test_a_check_apart_reports_what_a_check_here_reports(
        tmp_path: Path, key: bytes | None, backend: str) -> None:
    open_log = opener(backend, tmp_path)
    await write_log(open_log(key, False))
    with open_log(key, True) as store:
        here = await store.verify()
        apart = await store.verify_apart()
        assert here.ok and here.records > 20 and here.keyed == (key is not None)
        assert apart == here
        anchor = Anchor(session_id=SID, seq=3, hash="0" * 64)  # not the record's hash
        one = await store.verify(session=SID, anchors=[anchor])
        assert not one.ok
        assert await store.verify_apart(session=SID, anchors=[anchor]) == one


async def test_a_changed_byte_is_the_same_broken_link_apart(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    await write_log(JsonlStore(str(path)))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[7] = lines[7].replace(b'"a.md"', b'"A.md"')  # same length, same JSON: another text
    path.write_bytes(b"".join(lines))
    with JsonlStore(str(path), read_only=True) as store:
        here = await store.verify()
        assert here.broken is not None and here.broken.line == 8
        assert await store.verify_apart() == here


async def test_a_child_that_cannot_check_is_a_log_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "log.jsonl"
    await write_log(JsonlStore(str(path)))
    monkeypatch.setattr(verifyapart, "_CHILD", "raise SystemExit('no checking here')")
    with JsonlStore(str(path), read_only=True) as store:
        with pytest.raises(LogError, match="exit status 1.*no checking here"):
            await store.verify_apart()


async def test_a_check_in_process_leaves_the_loop_to_other_tasks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check waits until a task of the loop lets it go: on the loop, it never would.
    path = tmp_path / "log.jsonl"
    await write_log(JsonlStore(str(path)))
    release = threading.Event()
    check = jsonl_module.verify_jsonl

    def held(*args: Any, **kwargs: Any) -> Any:
        if not release.wait(30):
            raise AssertionError("no task of the loop ran while the check ran")
        return check(*args, **kwargs)

    monkeypatch.setattr(jsonl_module, "verify_jsonl", held)
    async def let_go() -> None:
        release.set()

    with JsonlStore(str(path), read_only=True) as store:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(let_go)
            assert (await store.verify()).ok
