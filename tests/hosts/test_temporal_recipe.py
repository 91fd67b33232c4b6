"""The Temporal recipe of docs/hosts.md (engine/hosts/temporal.py), run in temporalio's
ActivityEnvironment (no server): a prompt per activity, a pause answered by a second one, a
retried attempt that resumes without running a completed call twice, heartbeats, and a
cancellation that closes the prompt's calls."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from temporalio.exceptions import CancelledError
from temporalio.testing import ActivityEnvironment

from engine import Annotations, ToolResult, text, tool
from engine.hosts.temporal import Answer, AnswerRequest, PromptRequest, SessionActivities
from engine.models import FauxModel, faux_text, faux_tool_call
from events import SqliteStore
from events.types import Record
from tests.workers import temporal_attempt

SAFE = Annotations(read_only=True, open_world=False)
ROOT = Path(__file__).resolve().parents[2]


def read_log(path: Path, session_id: str) -> list[Record]:
    async def read() -> list[Record]:
        store = SqliteStore(path)
        try:
            return await store.read(session_id)
        finally:
            store.close()

    return trio.run(read)


def statuses(path: Path, session_id: str) -> dict[str, str]:
    from engine import fold
    return {call_id: view.status for call_id, view in fold(read_log(path, session_id))
            .calls.items()}


def test_a_prompt_pauses_and_a_second_activity_answers_and_resumes(tmp_path: Path) -> None:
    @tool(input_schema={"type": "object"}, annotations=Annotations(destructive=True))
    async def delete(call: Any, ctx: Any) -> ToolResult:
        """Needs approval."""
        return ToolResult(content=[text("deleted")])

    model = FauxModel([faux_tool_call("delete", {"path": "a"}), faux_text("gone")])
    path = tmp_path / "sessions.sqlite"
    acts = SessionActivities(lambda: SqliteStore(path), lambda sid: model, [delete])
    env = ActivityEnvironment()

    paused = env.run(acts.run_prompt, PromptRequest(session_id="wf-1", number=1,
                                                    text="delete a"))
    assert paused.stop == "paused" and [p["call_id"] for p in paused.pending] == ["1.0"]
    done = env.run(acts.answer_approvals, AnswerRequest(session_id="wf-1", answers=[
        Answer(call_id="1.0", granted=True)]))
    assert (done.stop, done.text) == ("end_turn", "gone")
    # a retried answer finds nothing pending, and the session has nothing left to do
    again = env.run(acts.answer_approvals, AnswerRequest(session_id="wf-1", answers=[
        Answer(call_id="1.0", granted=True)]))
    assert (again.stop, again.text) == ("end_turn", "gone")
    assert statuses(path, "wf-1") == {"1.0": "completed"}


def test_a_retried_attempt_resumes_and_runs_no_completed_call_twice(tmp_path: Path) -> None:
    # the first attempt's worker is killed in the middle of a tool (a process of its own)
    first = subprocess.run([sys.executable, "-m", "tests.workers.temporal_attempt",
                            str(tmp_path)], capture_output=True, text=True, timeout=120,
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert first.returncode == 3, first.stderr
    beats = [int(line.split()[1]) for line in first.stdout.splitlines()]
    assert beats and beats == sorted(beats)
    path = tmp_path / "sessions.sqlite"
    assert statuses(path, "wf-retried") == {"1.0": "completed", "2.0": "running"}

    # Temporal retries it: the same session, resumed
    model = FauxModel([faux_text("all done")])
    acts = SessionActivities(lambda: SqliteStore(path), lambda sid: model,
                             temporal_attempt.tools(tmp_path))
    retry = ActivityEnvironment()
    retry.info = dataclasses.replace(retry.info, attempt=2, heartbeat_details=[beats[-1]])
    outcome = retry.run(acts.run_prompt, temporal_attempt.REQUEST)
    assert (outcome.stop, outcome.text) == ("end_turn", "all done")
    # the completed charge did not run again; the idempotent lookup did, to its end
    assert (tmp_path / "runs.txt").read_text().split() == ["charge", "lookup", "lookup"]
    assert statuses(path, "wf-retried") == {"1.0": "completed", "2.0": "completed"}
    users = [r for r in read_log(path, "wf-retried") if type(r.event).__name__ == "UserMessage"]
    assert len(users) == 1  # the prompt was sent once
    model.assert_complete()


def test_cancelling_the_activity_cancels_the_prompt_and_records_its_calls(
    tmp_path: Path,
) -> None:
    running: list[bool] = []

    @tool(input_schema={"type": "object"}, annotations=SAFE)
    async def hang(call: Any, ctx: Any) -> ToolResult:
        """Reports that it runs, then waits until cancelled."""
        running.append(True)
        ctx.report_progress("waiting")  # a record: the activity heartbeats
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    model = FauxModel([faux_tool_call("hang", {}), faux_text("never")])
    path = tmp_path / "sessions.sqlite"
    acts = SessionActivities(lambda: SqliteStore(path), lambda sid: model, [hang])
    env = ActivityEnvironment()
    # Temporal cancels the activity once its tool runs (the server learns of a cancellation
    # through a heartbeat's answer: here, at the heartbeat itself)
    env.on_heartbeat = lambda seq: env.cancel() if running else None
    with pytest.raises(CancelledError):
        env.run(acts.run_prompt, PromptRequest(session_id="wf-3", number=1, text="wait"))
    assert statuses(path, "wf-3") == {"1.0": "cancelled"}


def test_the_model_factory_may_open_and_close_a_client_per_activity(tmp_path: Path) -> None:
    """A factory that gives an async context manager: its client is opened in the activity and
    closed when it ends, after the session has closed, once per activity."""
    events: list[str] = []
    model = FauxModel([faux_text("hello"), faux_text("again")])

    @contextlib.asynccontextmanager
    async def opened(session_id: str) -> AsyncIterator[FauxModel]:
        events.append(f"open {session_id}")
        try:
            yield model
        finally:
            events.append(f"close {session_id}")

    path = tmp_path / "sessions.sqlite"
    acts = SessionActivities(lambda: SqliteStore(path), opened, [])
    env = ActivityEnvironment()
    first = env.run(acts.run_prompt, PromptRequest(session_id="wf-3", number=1, text="hi"))
    second = env.run(acts.run_prompt, PromptRequest(session_id="wf-3", number=2, text="hi"))
    assert (first.text, second.text) == ("hello", "again")
    assert events == ["open wf-3", "close wf-3", "open wf-3", "close wf-3"]
