"""A program paused mid-gather for an approval, its state recorded and its process killed, goes
on from that state in another process: each call runs exactly once, on JSONL, SQLite and
PostgreSQL, and the program's answer reaches the model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from engine import fold
from events.stores.urls import open_store
from events.types import ApprovalResolved, ProgramSuspended
from tests.workers.code_worker import KEY

pytest.importorskip("pydantic_monty")

ROOT = Path(__file__).resolve().parents[2]


def worker(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tests.workers.code_worker", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


@pytest.fixture(params=["jsonl", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "jsonl":
        return str(tmp_path / "log.jsonl")
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'log.db'}"
    server: Any = request.getfixturevalue("postgres_server")
    return str(server.url)


def test_a_program_paused_for_an_approval_resumes_in_another_process_exactly_once(
        store_url: str, tmp_path: Path) -> None:
    session_id, side = f"code-{uuid.uuid4().hex[:8]}", tmp_path / "side"
    paused = worker("pause", store_url, session_id, str(side))
    assert paused.returncode == -9, paused.stderr  # killed, as a crash would
    assert paused.stdout.strip() == "PAUSED"
    assert sorted(side.read_text().splitlines()) == ["fetch 1", "fetch 2"]  # no write yet

    resumed = worker("resume", store_url, session_id, str(side))
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout.strip().splitlines()[-1])
    # every body ran once: the reads were answered from the log, the write ran after approval
    assert sorted(side.read_text().splitlines()) == ["fetch 1", "fetch 2", "store hello"]
    assert report["loaded"] == ["1.0"]  # it went on from the recorded state
    assert report["statuses"] == {"1.0": "completed", "1.0/0": "completed",
                                  "1.0/1": "completed", "1.0/2": "completed"}
    assert report["answer"].startswith(
        "the program said: Result: [\"item 1\", \"item 2\", \"stored hello\"]")

    async def read() -> list[Any]:
        with open_store(store_url, key=KEY) as store:  # verified: chain and HMAC
            return await store.read(session_id)

    records = trio.run(read)
    state = fold(records)
    assert state.open_calls == () and state.pending_approvals == ()
    [resolved] = [r.event for r in records if isinstance(r.event, ApprovalResolved)]
    assert resolved.call_id == "1.0/2" and resolved.granted
    # the state the killed process recorded: the write waited, the gathered read had ended
    [suspended] = [r.event for r in records if isinstance(r.event, ProgramSuspended)]
    assert suspended.call_id == "1.0" and sorted(suspended.waits_for) == ["1.0/1", "1.0/2"]
    assert [type(r.event).__name__ for r in records].count("ToolExecutionStarted") == 5
