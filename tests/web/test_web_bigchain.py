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


async def test_a_long_check_runs_behind_the_page_and_the_next_page_shows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chain, "INLINE", 0)  # every session counts as long
    with SqliteStore(str(tmp_path / "log.db")) as store:
        await paused(store, deleting())
        async with Console(store) as console:
            first = await console.page("/session", id=SID)
            assert "checking the chain (up to record" in first
            assert "chain verified" not in first
            second = first
            with trio.fail_after(60):  # the check runs in a thread: look again until it ends
                while "chain verified" not in second:
                    await trio.testing.wait_all_tasks_blocked()
                    second = await console.page("/session", id=SID)
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
            shown = ""
            with trio.fail_after(60):
                while "chain verified" not in shown:
                    await trio.testing.wait_all_tasks_blocked()
                    shown = await console.page("/session", id=SID)


async def test_a_big_jsonl_file_is_checked_behind_the_list_however_short_its_sessions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A check of any session of a JSONL file reads the whole file: a big file with a short
    # session (or a long one read only in part so far) is no check to make on the page's path.
    monkeypatch.setattr(chain, "INLINE_BYTES", 0)  # the file counts as big
    with JsonlStore(str(tmp_path / "log.jsonl")) as store:
        await paused(store, deleting())
        async with Console(store) as console:
            listed = await console.page("/")
            assert "checking the chain" in listed and "chain verified" not in listed
            shown = ""
            with trio.fail_after(60):
                while "chain verified" not in shown:
                    await trio.testing.wait_all_tasks_blocked()
                    shown = await console.page("/")
            assert "checking the chain" not in shown
