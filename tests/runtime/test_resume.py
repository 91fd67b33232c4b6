"""Pausing for approval, resuming (in this process and in another one), and re-entering calls
that a stopped process left without a result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    Session,
    ToolResult,
    fold,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.runtime.fork import fork
from engine.runtime.recorder import SessionBroken
from events import JsonlStore, MemoryStore
from events.stores.jsonl import verify_jsonl
from events.types import (
    ApprovalResolved,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallRewritten,
    ToolExecutionStarted,
)

ROOT = Path(__file__).resolve().parents[2]
SID = "s"
SAFE = Annotations(read_only=True, open_world=False)


class Tools:
    """Tools that count their runs: ``danger`` asks, ``safe`` does not, ``parent`` makes a
    nested call to ``danger``."""

    def __init__(self, *, idempotent_parent: bool = False) -> None:
        self.runs: list[str] = []

        @tool(input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
              annotations=Annotations(destructive=True))
        async def danger(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(f"danger {call.call_id} {call.arguments}")
            return ToolResult(content=[text(f"danger {call.arguments.get('n')}")])

        @tool(annotations=SAFE)
        async def safe(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(f"safe {call.call_id}")
            return ToolResult(content=[text("safe")])

        @tool(annotations=Annotations(read_only=True, open_world=False,
                                      idempotent=idempotent_parent))
        async def parent(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(f"parent {call.call_id}")
            outcome = await ctx.execute_tool("danger", {"n": 1})
            return ToolResult(content=[text(f"parent saw: {outcome.result.text}")])

        self.specs = [danger, safe, parent]


async def later(request: ApprovalRequest) -> Any:
    return LATER


def results(session: Session) -> list[tuple[str, str]]:
    return [(e.call_id, e.result.text) for e in session.transcript if isinstance(e, ToolResultEntry)]


async def test_a_batch_pauses_with_every_approval_it_needs_pending_and_resumes() -> None:
    tools = Tools()
    model = FauxModel([
        [faux_tool_call("danger", {"n": 0}), faux_tool_call("safe"), faux_tool_call("danger", {"n": 2})],
        faux_text("done"),
    ])
    store = MemoryStore()
    async with Session.open(store, model=model, tools=tools.specs, approver=later,
                            session_id=SID, create=True) as session:
        paused = await session.prompt("go")
        assert paused.stop == "paused"
        assert [r.call_id for r in paused.pending] == ["1.0", "1.2"]
        assert paused.pending[0].name == "danger" and paused.pending[0].arguments == {"n": 0}
        assert tools.runs == ["safe 1.1"]  # the allowed sibling ran
        assert results(session) == []  # 1.1's result waits behind 1.0: the assistant's order
        assert len(model.requests) == 1

        with pytest.raises(RuntimeError, match="paused"):
            await session.prompt("another question")

        await session.resolve_approval("1.0", True)
        await session.resolve_approval("1.2", False, reason="not today")
        with pytest.raises(ValueError, match="not waiting for an approval"):
            await session.resolve_approval("1.2", True)  # one resolution per request
        assert tools.runs == ["safe 1.1"]  # top-level calls run at resume, not before

        done = await session.resume()
        assert done.stop == "end_turn" and done.text == "done"
        assert tools.runs == ["safe 1.1", "danger 1.0 {'n': 0}"]
        assert results(session) == [("1.0", "danger 0"), ("1.1", "safe"),
                                    ("1.2", "danger was not approved: not today")]
        # the model saw all three results before its next turn
        assert len(model.requests[1].transcript) == 5
        model.assert_complete()
    assert fold(await store.read(SID)).snapshot() == session.state.snapshot()


async def test_a_nested_call_waits_in_its_parent_and_goes_on_when_answered() -> None:
    tools = Tools()
    model = FauxModel([faux_tool_call("parent"), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=tools.specs, approver=later,
                            session_id=SID, create=True) as session:
        paused = await session.prompt("go")
        assert paused.stop == "paused"
        assert [(r.call_id, r.parent_id) for r in paused.pending] == [("1.0/0", "1.0")]
        assert session.calls["1.0"].status == "running"  # parked, in the session's nursery
        await session.resolve_approval("1.0/0", True)
        done = await session.resume()
        assert done.stop == "end_turn"
        assert tools.runs == ["parent 1.0", "danger 1.0/0 {'n': 1}"]
        assert results(session) == [("1.0", "parent saw: danger 1")]


async def test_an_approvers_edit_at_resolution_is_a_validated_rewrite() -> None:
    tools = Tools()
    model = FauxModel([[faux_tool_call("danger", {"n": 1}), faux_tool_call("danger", {"n": 2})],
                       faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=tools.specs, approver=later,
                            session_id=SID, create=True) as session:
        await session.prompt("go")
        await session.resolve_approval("1.0", True, arguments={"n": 10})
        await session.resolve_approval("1.1", True, arguments={"n": "ten"})
        await session.resume()
        rewrites = [r.event for r in session.records if isinstance(r.event, ToolCallRewritten)]
        assert [(e.call_id, e.arguments, e.by) for e in rewrites] == [
            ("1.0", {"n": 10}, "approver"), ("1.1", {"n": "ten"}, "approver")]
        assert tools.runs == ["danger 1.0 {'n': 10}"]
        failed = session.calls["1.1"].terminal
        assert isinstance(failed, ToolCallFailed) and failed.kind == "invalid_arguments"


async def test_a_session_grant_given_at_resolution_governs_later_calls() -> None:
    tools = Tools()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> Any:
        asked.append(request.call_id)
        return LATER

    model = FauxModel([faux_tool_call("danger", {"n": 1}), faux_tool_call("danger", {"n": 2}),
                       faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=tools.specs, approver=approver,
                            session_id=SID, create=True) as session:
        await session.prompt("go")
        await session.resolve_approval("1.0", True, scope="session")
        assert (await session.resume()).stop == "end_turn"
        assert asked == ["1.0"]  # 2.0 was allowed by the grant, not asked
        assert tools.runs == ["danger 1.0 {'n': 1}", "danger 2.0 {'n': 2}"]


async def test_resume_with_nothing_to_do_returns_without_asking_the_model() -> None:
    model = FauxModel([faux_text("hi")])
    async with Session.open(MemoryStore(), model=model, session_id=SID, create=True) as session:
        await session.prompt("hello")
        again = await session.resume()
        assert again.stop == "end_turn" and again.turns == 0 and again.text == "hi"
        assert len(model.requests) == 1


async def test_closing_a_session_with_a_parked_call_leaves_it_resumable() -> None:
    store = MemoryStore()
    first = Tools(idempotent_parent=True)
    async with Session.open(store, model=FauxModel([faux_tool_call("parent")]),
                            tools=first.specs, approver=later, session_id=SID,
                            create=True) as session:
        assert (await session.prompt("go")).stop == "paused"
    # the close recorded nothing about the parked calls: the log reads as a stopped process
    state = fold(await store.read(SID))
    assert state.calls["1.0"].status == "running" and state.calls["1.0/0"].status == "awaiting"

    second = Tools(idempotent_parent=True)
    model = FauxModel([faux_text("done")])
    async with Session.open(store, model=model, tools=second.specs, approver=later,
                            session_id=SID, create=True) as session:
        assert [r.call_id for r in session.pending_approvals()] == ["1.0/0"]
        await session.resolve_approval("1.0/0", True)
        assert (await session.resume()).stop == "end_turn"
        # the idempotent parent ran again; its nested call ran once, answered by id
        assert second.runs == ["parent 1.0", "danger 1.0/0 {'n': 1}"]
        assert results(session) == [("1.0", "parent saw: danger 1")]
        started = [r.event.call_id for r in session.records
                   if isinstance(r.event, ToolExecutionStarted)]
        assert started == ["1.0", "1.0", "1.0/0"]  # every run of a body is on the record


async def test_a_non_idempotent_parent_left_running_ends_interrupted_and_the_model_is_told() -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_tool_call("parent")]),
                            tools=Tools().specs, approver=later, session_id=SID,
                            create=True) as session:
        await session.prompt("go")
    tools = Tools()
    model = FauxModel([faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, approver=later,
                            session_id=SID, create=True) as session:
        assert (await session.resume()).stop == "end_turn"
        assert tools.runs == []
        terminal = session.calls["1.0"].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "interrupted"
        assert session.calls["1.0/0"].status == "cancelled"
        assert session.state.open_calls == ()
        seen = model.requests[0].transcript[-1]
        assert isinstance(seen, ToolResultEntry) and "interrupted" in seen.result.text


ANSWERED_BEFORE_CLOSE = {
    # what the model asks for, and the call that waits for the host's answer
    "top-level": ([faux_tool_call("danger", {"n": 1})], "1.0"),
    "nested": ([faux_tool_call("parent")], "1.0/0"),
}


@pytest.mark.parametrize("reopen", ["the same store", "a new store on the file"])
@pytest.mark.parametrize("where", list(ANSWERED_BEFORE_CLOSE))
async def test_an_answer_given_before_the_close_is_honoured_by_the_next_resume_exactly_once(
    tmp_path: Path, where: str, reopen: str
) -> None:
    asks, waiting = ANSWERED_BEFORE_CLOSE[where]
    log = tmp_path / "log.jsonl"
    store = JsonlStore(log)
    tools = Tools(idempotent_parent=True)
    async with Session.open(store, model=FauxModel(asks), tools=tools.specs, approver=later,
                            session_id=SID, create=True) as session:
        assert (await session.prompt("go")).stop == "paused"
        await session.resolve_approval(waiting, True)
        # the block ends at once: resume() comes in the next session

    if reopen != "the same store":
        store.close()
        store = JsonlStore(log)  # what another process opens
    model = FauxModel([faux_text("done")])
    async with Session.open(store, model=model, tools=tools.specs, approver=later,
                            session_id=SID) as session:
        assert session.pending_approvals() == ()  # answered: nothing asks the host again
        assert (await session.resume()).stop == "end_turn"
    store.close()
    danger = [run for run in tools.runs if run.startswith("danger")]
    assert danger == [f"danger {waiting} {{'n': 1}}"]  # the answer was used, once
    assert session.calls[waiting].status == "completed"
    assert session.state.open_calls == ()
    expected = "parent saw: danger 1" if where == "nested" else "danger 1"
    assert results(session) == [("1.0", expected)]


async def test_an_answered_nested_call_whose_parent_cannot_run_again_is_closed_unrun() -> None:
    store = MemoryStore()
    tools = Tools()  # the parent is not idempotent: its body cannot run again after a close
    async with Session.open(store, model=FauxModel([faux_tool_call("parent")]),
                            tools=tools.specs, approver=later, session_id=SID,
                            create=True) as session:
        await session.prompt("go")
        await session.resolve_approval("1.0/0", True)
    # the body of the answered call never began: the log does not say it did
    state = fold(await store.read(SID))
    assert state.calls["1.0/0"].status == "allowed"
    async with Session.open(store, model=FauxModel([faux_text("done")]), tools=tools.specs,
                            approver=later, session_id=SID) as session:
        await session.resume()
    assert tools.runs == ["parent 1.0"]  # danger never ran
    terminal = session.calls["1.0"].terminal
    assert isinstance(terminal, ToolCallFailed) and terminal.kind == "interrupted"
    assert session.calls["1.0/0"].status == "cancelled"


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


class Racing(MemoryStore):
    """Another writer that appends a ``tool_execution_started`` to session ``"cut"`` just
    before this one writes there: what a second process re-entering the same call at the same
    time would do."""

    def append_nowait(self, session_id: str, records: Any, expected_seq: int) -> None:
        if session_id == "cut" and records and isinstance(records[0].event,
                                                          ToolExecutionStarted):
            other = attrs.evolve(records[0], time=records[0].time + 1)
            super().append_nowait(session_id, [other], expected_seq)
        super().append_nowait(session_id, records, expected_seq)


async def test_a_rerun_records_its_start_before_the_body_so_a_racing_writer_conflicts() -> None:
    runs: list[str] = []

    @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=True))
    async def step(call: Any, ctx: Any) -> ToolResult:
        runs.append(call.call_id)
        return ToolResult(content=[text("done")])

    store = Racing()
    async with Session.open(store, model=FauxModel([faux_tool_call("step"), faux_text("ok")]),
                            tools=[step], session_id="s", create=True) as session:
        await session.prompt("go")
    started = next(r.seq for r in session.records if isinstance(r.event, ToolExecutionStarted))
    await fork(store, "s", at=started, new_session_id="cut")  # as if the body never returned
    runs.clear()

    with pytest.raises(BaseException) as raised:  # the session stops: its log is not its own
        async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=[step],
                                session_id="cut") as session:
            await session.resume()
    # (the resume and the block's last flush may each report it: every one is the conflict)
    broken = leaves(raised.value)
    assert broken and all(isinstance(exc, SessionBroken)
                          and "another writer appended first" in str(exc) for exc in broken)
    assert runs == []  # the racing writer got there first: no second execution
    [first, other] = (await store.read("cut"))[started - 1:]
    assert isinstance(first.event, ToolExecutionStarted) and other.event == first.event


async def test_cancelling_a_paused_session_closes_the_pending_calls() -> None:
    tools = Tools()
    async with Session.open(MemoryStore(), model=FauxModel([faux_tool_call("parent")]),
                            tools=tools.specs, approver=later, session_id=SID,
                            create=True) as session:
        await session.prompt("go")
        with trio.CancelScope() as scope:
            scope.cancel()
            await session.resume()
        assert session.state.open_calls == ()
        assert session.calls["1.0/0"].status == "cancelled"
        assert session.calls["1.0"].status == "cancelled"


# -- across processes -------------------------------------------------------------------------


def worker(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "tests.workers.session_worker", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)


def finish(*args: str, status: int = 0, proc: subprocess.Popen[str] | None = None,
           stdin: str | None = None) -> dict[str, Any]:
    proc = proc if proc is not None else worker(*args)
    out, _ = proc.communicate(stdin, timeout=60)
    assert proc.returncode == status, out
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return report


def stored(log: Path) -> list[Any]:
    with JsonlStore(log) as store:
        return trio.run(store.read, "worker-session")


def test_a_session_paused_in_one_process_is_finished_by_another(tmp_path: Path) -> None:
    log, side = tmp_path / "log.jsonl", tmp_path / "side"
    first = finish("pause", str(log), str(side))
    assert first["stop"] == "paused" and first["pending"] == ["1.0"]
    assert not side.exists()  # nothing ran before the approval
    second = finish("resume", str(log), str(side))
    assert second["stop"] == "end_turn" and second["statuses"] == {"1.0": "completed"}
    assert side.read_text().splitlines() == ["write_note 1.0 hello"]  # ran exactly once
    records = stored(log)
    [resolved] = [r.event for r in records if isinstance(r.event, ApprovalResolved)]
    assert resolved.granted
    state = fold(records)
    assert state.open_calls == () and state.pending_approvals == ()
    chain = verify_jsonl(log)  # both processes wrote one unbroken chain
    assert chain.ok and chain.chained == len(records) and chain.unchained == 0


@pytest.mark.parametrize("flavour, status, runs", [
    ("idempotent", "completed", 2),
    ("plain", "failed", 1),
])
def test_a_call_killed_mid_body_reruns_only_if_idempotent(
    tmp_path: Path, flavour: str, status: str, runs: int
) -> None:
    log, side = tmp_path / "log.jsonl", tmp_path / "side"
    proc = worker("hang", str(log), str(side), flavour)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "STARTED"  # the body is running now
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    report = finish("finish", str(log), str(side), flavour)
    assert report["statuses"] == {"1.0": status}
    assert side.read_text().splitlines() == ["slow_step 1.0"] * runs
    state = fold(stored(log))
    terminal = state.calls["1.0"].terminal
    if flavour == "plain":
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "interrupted"
    assert state.open_calls == ()
    assert verify_jsonl(log).ok


@pytest.mark.parametrize("flavour", ["idempotent", "plain"])
def test_a_second_process_cannot_take_over_a_session_whose_body_still_runs(
    tmp_path: Path, flavour: str
) -> None:
    log, side = tmp_path / "log.jsonl", tmp_path / "side"
    first = worker("hold", str(log), str(side), flavour)
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "STARTED"  # the body runs, and waits for us
        refused = finish("finish", str(log), str(side), flavour, status=3)
        assert refused["error"] == "SessionInUse"
        assert "'worker-session' is in use" in refused["message"]
        assert side.read_text().splitlines() == ["slow_step 1.0"]  # not run a second time
        done = finish(proc=first, stdin="go on\n")  # the owner finishes its own call
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert done["stop"] == "end_turn" and done["statuses"] == {"1.0": "completed"}
    state = fold(stored(log))
    assert isinstance(state.calls["1.0"].terminal, ToolCallCompleted)
    assert state.open_calls == () and verify_jsonl(log).ok
    after = finish("finish", str(log), str(side), flavour)  # closed: anyone may open it now
    assert after["stop"] == "end_turn" and side.read_text().splitlines() == ["slow_step 1.0"]


def test_an_exception_in_the_hosts_block_comes_out_as_itself() -> None:
    # the session keeps a nursery for its calls; that must not wrap the host's own errors
    async def main() -> None:
        async with Session.open(MemoryStore(), model=FauxModel([])):
            raise KeyError("the host's own")

    with pytest.raises(KeyError, match="the host's own"):
        trio.run(main)
