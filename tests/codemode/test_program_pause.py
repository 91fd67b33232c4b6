"""A program whose calls wait for a person stops with its state recorded, its sandbox released,
and the session paused; resume() goes on from the recorded state, exactly once, and refuses a
state that is not the one recorded."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from engine import LATER, Annotations, Session, ToolContext, at_once, deny_all, fold, tool
from engine.codemode import CODE_TOOL, code_tool
from engine.codemode import program as program_module
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from engine.testing.invariants import check_log
from events import JsonlStore, MemoryStore, UnverifiedRecordError
from events.types import ProgramSuspended, Record

from codemode_tools import CODEMODE, RAN

pytest.importorskip("pydantic_monty")

GATHER = """\
import asyncio
first = double(n=1)['double']
print("first", first)
second, wiped = await asyncio.gather(double_async(n=2), wipe_async(path="x"))
[first, second['double'], wiped]
"""


async def later(request: Any) -> Any:
    return LATER


def model() -> FauxModel:
    return FauxModel([faux_tool_call(CODE_TOOL, {"code": GATHER}), faux_text("done")])


async def open_session(store: MemoryStore, session_id: str | None = None,
                       script: FauxModel | None = None) -> Any:
    return Session.open(store, model=script or model(), tools=[*CODEMODE, code_tool()],
                        approver=later, **({"session_id": session_id} if session_id else {}))


def suspensions(records: list[Record]) -> list[ProgramSuspended]:
    return [r.event for r in records if isinstance(r.event, ProgramSuspended)]


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The call ids whose recorded state was loaded."""
    loaded: list[str] = []
    checked = program_module.state_bytes

    def spy(event: ProgramSuspended, release: str) -> bytes:
        loaded.append(event.call_id)
        return checked(event, release)

    monkeypatch.setattr(program_module, "state_bytes", spy)
    return loaded


async def paused_mid_gather() -> tuple[MemoryStore, str, list[Record]]:
    store = MemoryStore()
    RAN.clear()
    async with await open_session(store) as session:
        await session.activate(["double", "wipe"])
        result = await session.prompt("go")
        assert result.stop == "paused"
        [request] = result.pending
        assert request.name == "wipe" and request.parent_id == "1.0"
        records = await store.read(session.session_id)
        check_log(records, state=session.state, transcript=session.transcript, closed=False)
        return store, session.session_id, records


async def test_a_program_waiting_only_for_an_approval_stops_with_its_state_recorded() -> None:
    _, _, records = await paused_mid_gather()
    [state] = suspensions(records)
    # the write waits for its approval; the gathered read is done, its answer in the log
    assert state.call_id == "1.0" and sorted(state.waits_for) == ["1.0/1", "1.0/2"]
    assert len(state.program_calls) == 2 and state.printed == "first 2\n"
    assert state.sandbox.startswith("pydantic-monty ")
    projection = fold(records)
    assert projection.calls["1.0"].status == "running"  # no terminal event: it goes on
    assert projection.pending_approvals == ("1.0/2",)
    assert RAN == {"double 1": 1, "double 2": 1}


@pytest.mark.parametrize("granted", [True, False])
async def test_resume_goes_on_from_the_recorded_state_and_runs_each_call_once(
        granted: bool, loads: list[str]) -> None:
    store, sid, _ = await paused_mid_gather()
    async with await open_session(store, sid, FauxModel([faux_text("done")])) as session:
        await session.resolve_approval("1.0/2", granted)
        result = await session.resume()
        assert result.stop == "end_turn" and result.text == "done"
        top = session.calls["1.0"]
        records = await store.read(sid)
        check_log(records, state=session.state, transcript=session.transcript, closed=True)
    assert loads == ["1.0"]
    if granted:
        assert top.status == "completed"
        assert top.result.structured_content == {"result": [2, 4, "wiped x"],
                                                 "printed": "first 2\n"}
        assert RAN == {"double 1": 1, "double 2": 1, "wipe x": 1}
    else:  # the denial is a PermissionError in the program, which it does not catch
        assert top.result.is_error and top.result.structured_content["error"] == "raised"
        assert "PermissionError" in top.result.structured_content["message"]
        assert top.result.structured_content["printed"] == "first 2\n"
        assert RAN == {"double 1": 1, "double 2": 1}


async def test_a_sync_call_waiting_for_an_approval_stops_the_program_too(
        loads: list[str]) -> None:
    code = "a = wipe(path='y')\nb = double(n=5)['double']\n[a, b]"
    store = MemoryStore()
    RAN.clear()
    script = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
    async with await open_session(store, script=script) as session:
        await session.activate(["double", "wipe"])
        assert (await session.prompt("go")).stop == "paused"
        [state] = suspensions(await store.read(session.session_id))
        assert state.waits_for == ("1.0/0",)
        await session.resolve_approval("1.0/0", True)
        assert (await session.resume()).stop == "end_turn"
        assert session.calls["1.0"].result.structured_content["result"] == ["wiped y", 10]
    assert loads == ["1.0"] and RAN == {"wipe y": 1, "double 5": 1}


async def test_a_program_pauses_again_for_a_later_call_and_goes_on_from_the_newest_state(
        loads: list[str]) -> None:
    code = "a = wipe(path='1')\nb = double(n=1)['double']\nc = wipe(path='2')\n[a, b, c]"
    store = MemoryStore()
    RAN.clear()
    script = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
    async with await open_session(store, script=script) as session:
        await session.activate(["double", "wipe"])
        assert (await session.prompt("go")).stop == "paused"
        await session.resolve_approval("1.0/0", True)
        assert (await session.resume()).stop == "paused"
        await session.resolve_approval("1.0/2", True)
        assert (await session.resume()).stop == "end_turn"
        assert session.calls["1.0"].result.structured_content["result"] == [
            "wiped 1", 2, "wiped 2"]
        states = suspensions(await store.read(session.session_id))
    assert [s.waits_for for s in states] == [("1.0/0",), ("1.0/2",)]
    assert loads == ["1.0", "1.0"]
    assert RAN == {"wipe 1": 1, "double 1": 1, "wipe 2": 1}


async def test_resume_after_the_program_ended_runs_nothing_again(loads: list[str]) -> None:
    store, sid, _ = await paused_mid_gather()
    async with await open_session(store, sid, FauxModel([faux_text("done")])) as session:
        await session.resolve_approval("1.0/2", True)
        await session.resume()
    ran = dict(RAN)
    async with await open_session(store, sid, FauxModel([])) as session:
        result = await session.resume()
        assert result.stop == "end_turn" and session.calls["1.0"].status == "completed"
    assert RAN == ran and loads == ["1.0"]


async def test_a_state_that_does_not_match_its_hash_is_refused_and_nothing_runs() -> None:
    store, sid, records = await paused_mid_gather()
    [state] = suspensions(records)
    changed = bytearray(base64.b64decode(state.state))
    changed[len(changed) // 2] ^= 0xFF
    forged = attrs.evolve(state, state=base64.b64encode(bytes(changed)).decode())
    # the same log with the state changed and its hash left (a store without a key, whose
    # lines were rewritten): the chain is a store's, the hash the record's own
    copy = MemoryStore()
    await copy.append(sid, [attrs.evolve(r, event=forged) if r.event is state else r
                            for r in records], expected_seq=0)
    async with await open_session(copy, sid, FauxModel([faux_text("done")])) as session:
        await session.resolve_approval("1.0/2", True)
        result = await session.resume()
        top = session.calls["1.0"]
    assert result.stop == "end_turn"
    assert top.result.is_error and top.result.structured_content["error"] == "refused"
    assert "does not match its recorded hash" in top.result.text
    assert session.calls["1.0/2"].status == "cancelled"  # the granted write never ran
    assert RAN == {"double 1": 1, "double 2": 1}


async def test_a_state_from_another_sandbox_release_is_refused() -> None:
    store, sid, records = await paused_mid_gather()
    [state] = suspensions(records)
    other = attrs.evolve(state, sandbox="pydantic-monty 0.0.1")
    copy = MemoryStore()
    await copy.append(sid, [attrs.evolve(r, event=other) if r.event is state else r
                            for r in records], expected_seq=0)
    async with await open_session(copy, sid, FauxModel([faux_text("done")])) as session:
        await session.resolve_approval("1.0/2", True)
        await session.resume()
        assert "made by pydantic-monty 0.0.1" in session.calls["1.0"].result.text
    assert "wipe x" not in RAN


async def test_a_state_naming_a_call_not_its_own_is_an_inconsistent_log() -> None:
    _, _, records = await paused_mid_gather()
    [state] = suspensions(records)
    with pytest.raises(ValueError, match="not a call nested under it"):
        fold([attrs.evolve(r, event=attrs.evolve(state, waits_for=("1.0/9", "1.0/2")))
              if r.event is state else r for r in records])


@pytest.mark.parametrize("granted", [True, False])
async def test_replay_reproduces_a_program_that_paused_and_went_on(granted: bool) -> None:
    store, sid, _ = await paused_mid_gather()
    async with await open_session(store, sid, FauxModel([faux_text("done")])) as session:
        await session.resolve_approval("1.0/2", granted)
        await session.resume()
    records = list(await store.read(sid))
    RAN.clear()
    report = await redrive(records, tools=[*CODEMODE, code_tool()])
    assert report.ok, [d.describe() for d in report.divergences]
    assert sum(RAN.values()) == 0  # answered from the log


async def test_a_changed_state_in_a_keyed_log_is_refused_when_the_session_is_read(
        tmp_path: Path) -> None:
    key = b"pause-test-key-0123456789abcdefgh"
    path = tmp_path / "log.jsonl"
    RAN.clear()
    with JsonlStore(path, key=key) as store:
        async with Session.open(store, model=model(), tools=[*CODEMODE, code_tool()],
                                approver=later) as session:
            await session.activate(["double", "wipe"])
            assert (await session.prompt("go")).stop == "paused"
    lines = path.read_text().splitlines()
    [at] = [i for i, line in enumerate(lines) if '"program_suspended"' in line]
    record = json.loads(lines[at])
    state = record["data"]["state"]
    data = bytearray(base64.b64decode(state))
    data[-1] ^= 0x01
    record["data"]["state"] = base64.b64encode(bytes(data)).decode()
    record["data"]["sha256"] = hashlib.sha256(bytes(data)).hexdigest()  # consistent
    lines[at] = json.dumps(record, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    # the record is refused where the store reads it, before any session opens on it
    with pytest.raises(UnverifiedRecordError, match="HMAC does not match"):
        JsonlStore(path, key=key)
    assert "wipe x" not in RAN


async def test_an_approval_answered_while_other_calls_run_lets_the_program_go_on() -> None:
    """The write's approval is pending while the gathered read still runs: answered then, the
    program never stops, and the prompt ends without a pause."""
    release = trio.Event()

    @tool(annotations=Annotations(read_only=True, open_world=False), exposure="codemode")
    async def slow() -> str:
        """Waits for the test."""
        await release.wait()
        return "slow done"

    code = ("import asyncio\n"
            "await asyncio.gather(slow_async(), wipe_async(path='z'))")
    store = MemoryStore()
    RAN.clear()
    script = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
    async with Session.open(store, model=script, tools=[*CODEMODE, slow, code_tool()],
                            approver=later) as session:
        await session.activate(["slow", "wipe"])
        async with trio.open_nursery() as nursery:
            async def host() -> None:
                [request] = await session.wait_pending_approvals()
                await session.resolve_approval(request.call_id, True)
                release.set()
            nursery.start_soon(host)
            result = await session.prompt("go")
        assert result.stop == "end_turn"
        assert session.calls["1.0"].result.structured_content["result"] == [
            "slow done", "wiped z"]
        assert suspensions(await store.read(session.session_id)) == []
    assert RAN == {"wipe z": 1}


async def test_a_session_reopened_with_an_approver_that_answers_at_once_goes_on_from_the_state(
        loads: list[str]) -> None:
    """The write still waits when the session is reopened with an approver that never says
    later: the program goes on from its recorded state all the same, and the call waits in
    this process for the host's answer, as a nested call of any tool does."""
    store, sid, _ = await paused_mid_gather()
    async with Session.open(store, model=FauxModel([faux_text("done")]),
                            tools=[*CODEMODE, code_tool()], approver=at_once(deny_all),
                            session_id=sid) as session:
        async with trio.open_nursery() as nursery:
            async def host() -> None:
                [request] = await session.wait_pending_approvals()
                await session.resolve_approval(request.call_id, True)
            nursery.start_soon(host)
            result = await session.resume()
        assert result.stop == "end_turn"
        assert session.calls["1.0"].result.structured_content["result"] == [2, 4, "wiped x"]
    assert loads == ["1.0"]
    assert RAN == {"double 1": 1, "double 2": 1, "wipe x": 1}


async def test_a_call_waiting_deeper_keeps_the_program_waiting_and_a_restart_runs_it_again(
        loads: list[str]) -> None:
    """A tool the program called waits for its own nested call's approval: that body is
    running Python, which no dump holds, so no state is recorded; after the process stops, the
    program runs again from its source, its calls answered from the log."""
    @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=True),
          exposure="codemode")
    async def outer(ctx: ToolContext) -> str:
        """Wipes w, through a nested call."""
        RAN["outer"] += 1
        return (await ctx.execute_tool("wipe", {"path": "w"})).result.text

    tools = [*CODEMODE, outer, code_tool()]
    code = "a = double(n=1)['double']\nb = outer()\n[a, b]"
    store = MemoryStore()
    RAN.clear()
    script = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
    async with Session.open(store, model=script, tools=tools, approver=later) as session:
        sid = session.session_id
        await session.activate(["double", "wipe", "outer"])
        result = await session.prompt("go")
        assert result.stop == "paused" and [r.call_id for r in result.pending] == ["1.0/1/0"]
    assert suspensions(await store.read(sid)) == []
    async with Session.open(store, model=script, tools=tools, approver=later,
                            session_id=sid) as session:
        await session.resolve_approval("1.0/1/0", True)
        assert (await session.resume()).stop == "end_turn"
        assert session.calls["1.0"].result.structured_content["result"] == [2, "wiped w"]
    assert loads == []
    assert RAN == {"double 1": 1, "outer": 2, "wipe w": 1}  # the idempotent body ran again
