"""The steps of the DBOS session workflow (engine/hosts/dbos.py), run twice as DBOS may run
them (its steps are at least once): the log makes the second run change nothing that the
first did. In one process, on SQLite; the fleet test runs them under DBOS on PostgreSQL."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import trio

pytest.importorskip("dbos")

from engine import fold  # noqa: E402
from engine.hosts import dbos as host  # noqa: E402
from events import SqliteStore  # noqa: E402
from events.callevents import ApprovalResolved  # noqa: E402
from events.types import Record, UserMessage  # noqa: E402
from tests.workers.fleet_worker import FleetModel, tools  # noqa: E402


def read(path: Path, session_id: str) -> list[Record]:
    async def go() -> list[Record]:
        store = SqliteStore(path)
        try:
            return await store.read(session_id)
        finally:
            store.close()

    return trio.run(go)


def test_each_step_run_twice_changes_the_log_once(tmp_path: Path) -> None:
    path, runs = tmp_path / "log.sqlite", tmp_path / "runs"
    runs.mkdir()
    worker = host.SessionWorker(lambda: SqliteStore(path), lambda session_id: FleetModel(),
                                tools(runs))

    def step(make: Any) -> dict[str, Any]:
        return worker.run("s", make)

    prompt = functools.partial(host.prompt_or_resume, "go")
    first = step(prompt)
    assert first["stop"] == "paused" and [p["call_id"] for p in first["pending"]] == ["1.0"]
    assert step(prompt) == first  # run again: resumed, not prompted twice
    # an answer for a call not asked yet, or not pending, is skipped
    early = [{"call_id": "2.0", "granted": True}]
    assert step(functools.partial(host.apply_answers, early)) == first
    grant = [{"call_id": "1.0", "granted": True}, {"call_id": "1.0", "granted": False}]
    second = step(functools.partial(host.apply_answers, grant))
    assert [p["call_id"] for p in second["pending"]] == ["2.0"]
    assert step(functools.partial(host.apply_answers, grant)) == second
    last = step(functools.partial(host.apply_answers, early))
    assert (last["stop"], last["text"]) == ("end_turn", "done")
    assert step(functools.partial(host.apply_answers, early)) == last

    records = read(path, "s")
    assert sum(isinstance(r.event, UserMessage) for r in records) == 1
    assert [(r.event.call_id, r.event.granted) for r in records
            if isinstance(r.event, ApprovalResolved)] == [("1.0", True), ("2.0", True)]
    assert {c: v.status for c, v in fold(records).calls.items()} == {
        "1.0": "completed", "1.1": "completed", "2.0": "completed"}
    assert sorted(p.name.split("+")[1] for p in runs.iterdir()) == ["1.0", "1.1", "2.0"]


def test_a_step_in_a_process_without_a_worker_says_what_to_call() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(host, "_worker", None)
        with pytest.raises(RuntimeError, match=r"SessionWorker\(.*\)\.install\(\)"):
            host._installed()


def test_take_over_of_no_worker_asks_nothing() -> None:
    class NoClient:
        def list_workflows(self, **kwargs: Any) -> Any:
            raise AssertionError("nothing to ask")

    assert host.take_over(NoClient(), []) == []  # type: ignore[arg-type]
