"""A long session's chain is checked off the page's path: the page says the check is under
way, and the next page shows its answer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio.testing

import events.stores.jsonl as jsonl_module
from engine.web import chain
from events import JsonlStore, SqliteStore
from events.stores import verifyapart
from tests.web.webconsole import SID, Console, deleting, paused


async def verified(console: Console, path: str, **query: str) -> str:
    """The page at ``path`` once it says the chain is verified: the check runs elsewhere (a
    child process), so look again whenever the console waits, until it says so."""
    with trio.fail_after(60):
        while True:
            await trio.testing.wait_all_tasks_blocked()
            shown = await console.page(path, **query)
            if "chain verified" in shown:
                return shown


# The list of a big JSONL file is here too: a check of any session of a JSONL file reads the
# whole file, so a big file with a short session (or a long one read only in part so far) is
# no check to make on the page's path (it was, and the list of a 190 MB log took 5 s).
@pytest.mark.parametrize("backend, limit, path", [
    ("sqlite", "INLINE", "/session"),  # every session counts as long
    ("jsonl", "INLINE_BYTES", "/"),  # the file counts as big
])
async def test_a_long_check_runs_behind_the_page_and_the_next_page_shows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, limit: str,
        path: str) -> None:
    monkeypatch.setattr(chain, limit, 0)
    store = (JsonlStore(str(tmp_path / "log.jsonl")) if backend == "jsonl"
             else SqliteStore(str(tmp_path / "log.db")))
    query = {"id": SID} if path == "/session" else {}
    with store:
        await paused(store, deleting())
        async with Console(store) as console:
            first = await console.page(path, **query)
            assert "checking the chain (up to record" in first
            assert "chain verified" not in first
            second = await verified(console, path, **query)
            assert "checking the chain" not in second


@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
async def test_a_long_check_runs_in_a_child_process_while_pages_are_served(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    monkeypatch.setattr(chain, "INLINE", 0)
    monkeypatch.setattr(chain, "INLINE_BYTES", 0)
    # the child waits, before it checks, until the test writes to this pipe
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    monkeypatch.setattr(verifyapart, "_CHILD", f"open({gate!r}).read(); " + verifyapart._CHILD)

    def not_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the long check ran in the console's process")

    monkeypatch.setattr(SqliteStore, "_verify", not_here)
    monkeypatch.setattr(jsonl_module, "verify_jsonl", not_here)
    store = (JsonlStore(str(tmp_path / "log.jsonl")) if backend == "jsonl"
             else SqliteStore(str(tmp_path / "log.db")))
    with store:
        await paused(store, deleting())
        async with Console(store) as console:
            assert "checking the chain" in await console.page("/session", id=SID)
            # the check waits in its child; the console serves pages all the same
            assert "checking the chain" in await console.page("/session", id=SID)
            assert "Sessions" in await console.page("/")

            def release() -> None:
                with open(gate, "w") as pipe:
                    pipe.write("go")

            await trio.to_thread.run_sync(release)
            await verified(console, "/session", id=SID)
