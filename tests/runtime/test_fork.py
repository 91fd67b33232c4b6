"""Fork: a new session from a prefix of an old one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from engine import Session, approve_all, fold
from engine.cli import main
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.runtime.fork import fork
from events import JsonlStore, MemoryStore, SessionInUse
from events.types import AssistantMessage, SessionStarted
from tests.corpus.scenarios import SCENARIOS

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "v1"


def seq_of(records: list[Any], kind: type, nth: int = 0) -> int:
    return [r.seq for r in records if isinstance(r.event, kind)][nth]


async def test_a_fork_replays_a_different_answer_from_the_same_start() -> None:
    scenario = SCENARIOS["reference"]
    store = MemoryStore()
    async with Session.open(store, model=FauxModel(scenario.script()), tools=scenario.tools,
                            approver=approve_all, session_id="old", create=True) as session:
        await session.prompt("review please")
    old = await store.read("old")
    # keep everything up to the user's message: the model has not answered yet
    at = seq_of(old, AssistantMessage) - 1
    new_id = await fork(store, "old", at=at, new_session_id="new")
    forked = await store.read(new_id)
    assert [r.event for r in forked[1:]] == [r.event for r in old[1:at]]
    start = forked[0].event
    assert isinstance(start, SessionStarted)
    assert start.metadata["forked_from"] == {"session_id": "old", "seq": at}

    model = FauxModel([faux_tool_call("run_checks"), faux_text("checked only")])
    async with Session.open(store, model=model, tools=scenario.tools, approver=approve_all,
                            session_id=new_id) as session:
        result = await session.resume()
        assert result.text == "checked only"
        assert [e.name for e in session.transcript if isinstance(e, ToolResultEntry)] == [
            "run_checks"]
    assert await store.read("old") == old  # the old session is unchanged


async def test_a_fork_cut_inside_a_call_continues_it_as_after_a_restart() -> None:
    scenario = SCENARIOS["reference"]
    store = MemoryStore()
    async with Session.open(store, model=FauxModel(scenario.script()), tools=scenario.tools,
                            approver=approve_all, session_id="old", create=True) as session:
        await session.prompt("review please")
    old = await store.read("old")
    started = [r.seq for r in old if type(r.event).__name__ == "ToolExecutionStarted"][0]
    new_id = await fork(store, "old", at=started)
    async with Session.open(store, model=FauxModel([faux_text("after")]), tools=scenario.tools,
                            approver=approve_all, session_id=new_id) as session:
        await session.resume()
        # review_diff is not idempotent: the fork ends it as interrupted, and the model is told
        assert session.calls["1.0"].status == "failed"
        assert "interrupted" in (session.calls["1.0"].result.text or "")
        assert session.state.open_calls == ()


@pytest.mark.parametrize("at", [0, 10_000])
async def test_fork_refuses_a_seq_outside_the_session(at: int) -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="old",
                            create=True) as s:
        await s.prompt("hello")
    with pytest.raises(ValueError, match="--at must be a seq"):
        await fork(store, "old", at=at)


async def test_fork_refuses_a_taken_id_and_an_unknown_session() -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="old",
                            create=True) as s:
        await s.prompt("hello")
    with pytest.raises(ValueError, match="already exists"):
        await fork(store, "old", at=1, new_session_id="old")
    with pytest.raises(ValueError, match="no session"):
        await fork(store, "nope", at=1)


def test_the_fork_command_writes_a_session_that_show_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "mixed.jsonl"
    shutil.copy(CORPUS / "mixed.jsonl", log)
    assert main(["fork", str(log), "--at", "12", "--id", "what-if", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"session_id": "what-if", "log": str(log),
                   "forked_from": {"session_id": "mixed", "seq": 12}}
    with JsonlStore(log) as store:
        records = trio.run(store.read, "what-if")
    assert len(records) == 12 and fold(records).session_id == "what-if"
    assert main(["show", str(log), "--session", "what-if"]) == 0
    assert main(["fork", str(log), "--at", "3"]) == 1  # two sessions now: which one?
    assert "--session" in capsys.readouterr().err


HOLD = """
import sys
from events import JsonlStore
with JsonlStore(sys.argv[1]) as store, store.claim(sys.argv[2]):
    print("HELD", flush=True)
    sys.stdin.readline()
"""


def test_the_fork_command_refuses_a_target_session_another_process_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, into = tmp_path / "mixed.jsonl", tmp_path / "into.jsonl"
    shutil.copy(CORPUS / "mixed.jsonl", log)
    into.touch()
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(into), "what-if"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "HELD"  # claimed, nothing written yet
        argv = ["fork", str(log), "--at", "12", "--into", str(into), "--id", "what-if"]
        assert main(argv) == 1
        [line] = capsys.readouterr().err.strip().splitlines()
        assert "'what-if' is in use" in line and "held by" in line and "Nothing was forked" in line
        assert into.read_bytes() == b""  # the holder's session was not written to
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
        assert main(argv) == 0  # free once the holder is gone
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.parametrize("into", [False, True])
async def test_fork_claims_its_new_session_while_it_writes_it(into: bool) -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_text("hi")]), session_id="old",
                            create=True) as s:
        await s.prompt("hello")
    target = MemoryStore() if into else store
    with target.claim("new"):  # another writer owns "new", and has not written yet
        with pytest.raises(SessionInUse, match="'new' is in use"):
            await fork(store, "old", at=1, new_session_id="new", into=target)
        assert await target.last_seq("new") == 0
    assert await fork(store, "old", at=1, new_session_id="new", into=target) == "new"
    with target.claim("new"):  # the fork let go of it
        pass
