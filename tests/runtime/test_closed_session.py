"""A session that has closed never writes again.

When ``Session.open``'s block ends, the session lets go of its claim on the store: another
block (or process) may own the session from then on. So whatever the host still holds of the
closed session (the object, a task outside the block) must not write to its log:

- every change the host makes (``register``, ``set_system_prompt``, ``set_active_tools``,
  ``activate``, ``resolve_approval``, the handlers) is refused with a ``RuntimeError`` that
  says to open the session again, before anything is recorded, and the store's claim is free
  for the block that does;
- a host call running in a task outside the block is stopped with it, and what it recorded is
  written before the block has ended: also when its body ended just as the block did, and
  when its write waits for the store;
- a write another task has begun is finished before the block has ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from engine import LATER, Annotations, ApprovalRequest, Session, ToolResult, text, tool
from engine.core.toolcontext import CallOutcome
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import JsonlStore, MemoryStore
from events.stores import EventStore
from events.stores.base import Claim
from events.types import Record

SAFE = Annotations(read_only=True, open_world=False)
SID = "s"


@tool(annotations=SAFE)
async def listed(call: Any, ctx: Any) -> ToolResult:
    """A tool registered when the session opens."""
    return ToolResult(content=[text("listed")])


@tool(annotations=SAFE, exposure="deferred")
async def deferred(call: Any, ctx: Any) -> ToolResult:
    """A tool registered when the session opens, active only once activated."""
    return ToolResult(content=[text("deferred")])


@tool(annotations=SAFE)
async def added(call: Any, ctx: Any) -> ToolResult:
    """A tool registered later."""
    return ToolResult(content=[text("added")])


@tool()  # the policy asks about it
async def risky(call: Any, ctx: Any) -> ToolResult:
    """Needs approval."""
    return ToolResult(content=[text("risky")])


async def later(request: ApprovalRequest) -> Any:
    return LATER


def handler(*_: Any) -> None:
    return None


#: each change the host may make of a session, made as a host would
CHANGES: dict[str, Callable[[Session], Awaitable[object]]] = {
    "register": lambda session: session.register(added),
    "set_system_prompt": lambda session: session.set_system_prompt("be brief"),
    "set_active_tools": lambda session: session.set_active_tools(["listed", "deferred"]),
    "activate": lambda session: session.activate(["deferred"]),
    "resolve_approval": lambda session: session.resolve_approval("1.0", granted=True),
}


async def no_await(value: object) -> object:
    return value


#: the handlers record nothing, but a closed session would never run them
HANDLERS: dict[str, Callable[[Session], Awaitable[object]]] = {
    "on_tool_call": lambda session: no_await(session.on_tool_call(handler)),
    "on_tool_result": lambda session: no_await(session.on_tool_result(handler)),
    # records nothing either; a closed session has nothing more to wait for
    "wait_pending_approvals": lambda session: session.wait_pending_approvals(),
}


def make_store(kind: str, tmp_path: Path) -> EventStore:
    return MemoryStore() if kind == "memory" else JsonlStore(tmp_path / "log.jsonl")


async def snapshot(store: EventStore, tmp_path: Path) -> tuple[list[Record], bytes]:
    """The session's log, record for record, and (for the JSONL store) byte for byte."""
    path = tmp_path / "log.jsonl"
    return await store.read(SID), path.read_bytes() if path.exists() else b""


async def paused_session(store: EventStore) -> Session:
    """A session, closed, whose last prompt paused with call 1.0 waiting for an approval."""
    async with Session.open(store, model=FauxModel([faux_tool_call("risky")]),
                            tools=[listed, deferred, risky], approver=later,
                            session_id=SID, create=True) as session:
        paused = await session.prompt("go")
        assert [request.call_id for request in paused.pending] == ["1.0"]
    return session


@pytest.mark.parametrize("kind", ["memory", "jsonl"])
@pytest.mark.parametrize("change", [*CHANGES, *HANDLERS])
async def test_a_closed_session_refuses_every_change_and_writes_nothing(
    kind: str, change: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    closed = await paused_session(store)
    before = await snapshot(store, tmp_path)

    make = {**CHANGES, **HANDLERS}[change]
    with pytest.raises(RuntimeError, match=r"the session is closed: open it again with "
                                           r"Session\.open\(\)"):
        await make(closed)

    assert await snapshot(store, tmp_path) == before
    assert closed.records == tuple(before[0])  # nothing recorded either

    # the claim is free: the block that opens the session again owns it, and writes
    async with Session.open(store, model=FauxModel([faux_text("done")]),
                            tools=[listed, deferred, risky], approver=later,
                            session_id=SID) as session:
        await make(session)
        if change in CHANGES:
            assert len(session.records) > len(before[0])
        await session.set_system_prompt("written by the new owner")
    records = await store.read(SID)
    assert records[:len(before[0])] == before[0]
    assert records[-1].event.text == "written by the new owner"  # type: ignore[union-attr]
    check_log(records)


# -- work in flight from a task outside the block ------------------------------------------------

class Finishing:
    """A tool whose body waits until the test lets it return."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.finish = trio.Event()

        @tool(annotations=SAFE)
        async def finishing(call: Any, ctx: Any) -> ToolResult:
            self.entered.set()
            await self.finish.wait()
            return ToolResult(content=[text("finished")])

        self.spec = finishing


class WatchedStore(MemoryStore):
    """A store that notes every record written while nobody claims its session (``unowned``:
    written after the block that owned it had ended), and whose writes wait, as a database's
    do: ``waiting`` makes each one first wait for a scheduler turn; ``gate``, while it is
    set and not yet open, makes it wait there (``writing`` says one does)."""

    def __init__(self, *, waiting: bool = False) -> None:
        super().__init__()
        self.waiting = waiting
        self.gate: trio.Event | None = None
        self.writing = trio.Event()
        self.claimed: set[str] = set()
        self.unowned: list[str] = []

    def claim(self, session_id: str) -> Claim:
        inner = super().claim(session_id)
        self.claimed.add(session_id)

        def release() -> None:
            self.claimed.discard(session_id)
            inner.release()

        return Claim(release)

    def append_nowait(self, session_id: str, records: Sequence[Record],
                      expected_seq: int) -> None:
        if self.waiting or self.gate is not None:
            raise trio.WouldBlock  # the session then awaits append()
        self._append(session_id, records, expected_seq)

    async def append(self, session_id: str, records: Sequence[Record],
                     expected_seq: int) -> None:
        if self.gate is not None:
            self.writing.set()
            await self.gate.wait()
        else:
            await trio.lowlevel.checkpoint()
        self._append(session_id, records, expected_seq)

    def _append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        if session_id not in self.claimed:
            self.unowned += [type(record.event).__name__ for record in records]
        super().append_nowait(session_id, records, expected_seq)


async def looks(draft: Any) -> None:
    """A ``tool_result`` handler that waits for something (a checkpoint) before it answers."""
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize("waiting", [False, True], ids=["inline store", "waiting store"])
@pytest.mark.parametrize("handled", [False, True], ids=["ends at once", "a handler waits"])
async def test_a_host_call_whose_body_ends_as_the_block_ends_is_written_before_it_ends(
    waiting: bool, handled: bool
) -> None:
    """The body returns in the same scheduler pass as the block begins to close: the close
    has cancelled the call's scope, but the call's task wakes with the body's return, not
    with the cancellation. The close waits until the call has left its scope and written
    what it recorded, and nothing is written after the block has ended. A call that reaches
    its end without another checkpoint has ended, in the log, and ``call_tool`` returns its
    outcome; one that meets a checkpoint first (a ``tool_result`` handler that waits) is
    stopped there, stays open in the log, and ``call_tool`` raises: ``resume_call`` in a
    reopened session finishes it."""
    store = WatchedStore(waiting=waiting)
    body = Finishing()
    ended: list[object] = []

    async def host_call(session: Session) -> None:
        try:
            ended.append(await session.call_tool("finishing"))
        except RuntimeError as exc:
            ended.append(exc)

    async with trio.open_nursery() as outside:
        async with Session.open(store, model=FauxModel([]), tools=[body.spec],
                                approver=later, session_id=SID, create=True) as session:
            if handled:
                session.on_tool_result(looks)
            outside.start_soon(host_call, session)
            await body.entered.wait()
            body.finish.set()  # the body's task is woken: it runs after the block's closing
    assert store.unowned == []  # nothing was written after the block ended
    written = await store.read(SID)
    check_log(written)
    assert session.records == tuple(written)  # what it recorded is what was written

    [outcome] = ended
    if not handled:
        assert isinstance(outcome, CallOutcome) and not outcome.is_error
        assert session.calls["h0"].status == "completed"
        return
    assert isinstance(outcome, RuntimeError)
    assert "resume_call('h0')" in str(outcome)
    assert session.calls["h0"].status == "running"  # as a stopped process leaves it
    async with Session.open(store, model=FauxModel([]), tools=[body.spec],
                            session_id=SID) as session:
        resumed = await session.resume_call("h0")  # not idempotent: it ends "interrupted"
    assert resumed.is_error and session.calls["h0"].status == "failed"
    assert store.unowned == []
    check_log(await store.read(SID), closed=True)


async def test_a_write_another_task_began_is_finished_before_the_block_ends() -> None:
    """A change made from a task outside the block just before it ends waits for the store;
    the block's end waits for that write, so the claim is let go of only once it is in."""
    store = WatchedStore()
    async with trio.open_nursery() as outside:
        async with Session.open(store, model=FauxModel([]), tools=[listed],
                                session_id=SID, create=True) as session:
            store.gate = trio.Event()
            outside.start_soon(session.set_system_prompt, "be brief")
            await store.writing.wait()  # its write has begun, and waits
            outside.start_soon(open_the_gate_once_all_wait, store.gate)
    assert store.unowned == []
    written = await store.read(SID)
    assert written[-1].event.text == "be brief"  # type: ignore[union-attr]
    check_log(written)


async def open_the_gate_once_all_wait(gate: trio.Event) -> None:
    await trio.testing.wait_all_tasks_blocked()
    gate.set()


@pytest.mark.parametrize("cancelled", [False, True], ids=["block ends", "block cancelled"])
@pytest.mark.parametrize("waiting", [False, True], ids=["inline store", "waiting store"])
async def test_closing_under_a_host_call_from_outside_leaves_it_open_and_writes_nothing_after(
    autojump_clock: Any, cancelled: bool, waiting: bool
) -> None:
    """The host call's body never returns; the block ends, or a host's cancel scope around
    it cancels it. Every round (trio shuffles the tasks it wakes together) writes the same
    log, with the call open, all of it before the block has ended."""
    logs = set()
    for _ in range(8):
        store = WatchedStore(waiting=waiting)
        body = Finishing()
        raised: list[RuntimeError] = []

        async def host_call(session: Session) -> None:
            with pytest.raises(RuntimeError, match="resume_call") as info:
                await session.call_tool("finishing")
            raised.append(info.value)

        with trio.fail_after(60):
            async with trio.open_nursery() as outside:
                with trio.CancelScope() as host:
                    async with Session.open(store, model=FauxModel([]), tools=[body.spec],
                                            session_id=SID, create=True) as session:
                        outside.start_soon(host_call, session)
                        await body.entered.wait()
                        if cancelled:
                            host.cancel()
                            await trio.sleep_forever()
        assert store.unowned == [] and len(raised) == 1
        written = await store.read(SID)
        check_log(written)
        assert session.calls["h0"].status == "running"
        logs.add(tuple(type(record.event).__name__ for record in written))
    assert len(logs) == 1
