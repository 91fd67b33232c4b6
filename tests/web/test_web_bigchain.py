"""A long session's chain is checked off the page's path: the page says the check is under
way, and the next page shows its answer."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import trio.testing

from engine.web import chain
from events import SqliteStore
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


async def test_a_long_sqlite_check_leaves_the_loop_to_the_pages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chain, "INLINE", 0)
    release = threading.Event()
    waited: list[bool] = []
    check = SqliteStore._verify

    def held(self: SqliteStore, *args: Any) -> Any:
        # released by the test only if the loop serves pages while the check runs
        waited.append(release.wait(30))
        return check(self, *args)

    with SqliteStore(str(tmp_path / "log.db")) as store:
        await paused(store, deleting())
        monkeypatch.setattr(SqliteStore, "_verify", held)
        async with Console(store) as console:
            assert "checking the chain" in await console.page("/session", id=SID)
            await trio.testing.wait_all_tasks_blocked()  # the check has begun, and waits
            assert "checking the chain" in await console.page("/session", id=SID)
            release.set()
            shown = ""
            with trio.fail_after(60):
                while "chain verified" not in shown:
                    await trio.testing.wait_all_tasks_blocked()
                    shown = await console.page("/session", id=SID)
    assert waited == [True]
