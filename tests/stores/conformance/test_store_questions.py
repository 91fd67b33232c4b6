"""A tool's question paused in one process is answered and resumed in another, from the log
alone, exactly once: on every store whose log outlives its process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import trio

from events.types import QuestionAnswered, QuestionAsked, ToolExecutionStarted
from tests.stores.conformance import questioning
from tests.stores.conformance.backends import SHARED, reopen

ROOT = Path(__file__).resolve().parents[3]


def in_another_process(kind: str, directory: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tests.stores.conformance.questioning", kind,
                           str(directory)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", SHARED)
def test_a_question_paused_in_one_process_is_answered_in_another_exactly_once(
    kind: str, tmp_path: Path,
) -> None:
    assert trio.run(questioning.pause, kind, tmp_path) == ["1.0", "1.0/0"]
    second = in_another_process(kind, tmp_path)
    # the question was pending in the log; its answer reached the body that ran again, and
    # the second process's asker was never asked
    assert second == {"waiting": ["1.0/0#1"], "stop": "end_turn", "runs": ["1.0", "1.0/0"],
                      "asked": [], "result": "released main"}
    third = in_another_process(kind, tmp_path)
    assert third == {"waiting": [], "stop": "end_turn", "runs": [], "asked": [],
                     "result": "released main"}  # nothing runs again
    with closing(reopen(kind, tmp_path)) as store:
        events = [r.event for r in trio.run(store.read, questioning.SID)]
    assert [(e.question_id, e.message) for e in events if isinstance(e, QuestionAsked)] == [
        ("1.0/0#1", "Which branch?")]
    [answer] = [e for e in events if isinstance(e, QuestionAnswered)]
    assert (answer.action, answer.content, answer.later) == ("accept", {"branch": "main"}, True)
    started = [e.call_id for e in events if isinstance(e, ToolExecutionStarted)]
    assert started == ["1.0", "1.0/0", "1.0", "1.0/0"]  # each body ran again once
