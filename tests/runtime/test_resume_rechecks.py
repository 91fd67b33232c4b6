"""What is checked again when a session is reopened: deny rules before any body runs, and the
tool a pending call needs being there at all. The log's earlier verdicts never outrank today's
"never"; a missing tool never breaks the session."""

from __future__ import annotations

from typing import Any

import trio

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    PolicyRules,
    Session,
    ToolResult,
    approve_all,
    fold,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.runtime.fork import fork
from events import MemoryStore
from events.types import PolicyDecided, ToolCallDenied, ToolCallFailed

SID = "s"
SAFE = Annotations(read_only=True, open_world=False)


async def later(request: ApprovalRequest) -> Any:
    return LATER


class Tools:
    """``rm_rf`` is destructive (it asks); ``nest`` is idempotent and asks for ``rm_rf``."""

    def __init__(self) -> None:
        self.runs: list[str] = []

        @tool(annotations=Annotations(destructive=True))
        async def rm_rf(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(f"rm_rf {call.call_id}")
            return ToolResult(content=[text("gone")])

        @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=True))
        async def nest(call: Any, ctx: Any) -> ToolResult:
            self.runs.append(f"nest {call.call_id}")
            outcome = await ctx.execute_tool("rm_rf", {})
            return ToolResult(content=[text(f"nest saw: {outcome.result.text}")])

        self.rm_rf, self.nest = rm_rf, nest


def results(session: Session) -> list[tuple[str, str]]:
    return [(e.call_id, e.result.text) for e in session.transcript
            if isinstance(e, ToolResultEntry)]


async def paused_on(store: MemoryStore, name: str) -> None:
    """A first process: the model calls ``name``, which waits for an approval; it stops."""
    tools = Tools()
    async with Session.open(store, model=FauxModel([faux_tool_call(name)]),
                            tools=[tools.rm_rf, tools.nest], approver=later,
                            session_id=SID, create=True) as session:
        assert (await session.prompt("go")).stop == "paused"


# -- deny rules are checked again before any body runs -----------------------------------------


async def test_a_deny_rule_given_at_reopen_stops_an_approved_call_before_it_runs() -> None:
    store = MemoryStore()
    await paused_on(store, "rm_rf")
    tools = Tools()
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=[tools.rm_rf],
                            approver=approve_all, rules=PolicyRules(deny=["rm_*"]),
                            session_id=SID, create=True) as session:
        await session.resolve_approval("1.0", True)
        assert (await session.resume()).stop == "end_turn"
        assert tools.runs == []  # deny beats the human's approval given before the rule
        terminal = session.calls["1.0"].terminal
        assert isinstance(terminal, ToolCallDenied)
        assert terminal.by == "policy" and terminal.rule == "rm_*"
        assert results(session) == [("1.0", "rm_rf was denied: denied by the rule 'rm_*'")]
    assert fold(await store.read(SID)).snapshot() == session.state.snapshot()


async def test_a_deny_rule_given_at_reopen_stops_a_call_the_log_allowed() -> None:
    store = MemoryStore()
    tools = Tools()
    async with Session.open(store, model=FauxModel([faux_tool_call("rm_rf"), faux_text("ok")]),
                            tools=[tools.rm_rf], approver=approve_all,
                            rules=PolicyRules(allow=["rm_rf"]), session_id=SID, create=True) as session:
        await session.prompt("go")
    records = await store.read(SID)
    [allowed] = [r.seq for r in records if isinstance(r.event, PolicyDecided)]
    # the process stopped right after the policy allowed it: nothing started yet
    cut = await fork(store, SID, at=allowed, new_session_id="cut")
    tools = Tools()
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=[tools.rm_rf],
                            rules=PolicyRules(allow=["rm_rf"], deny=["rm_*"]),
                            session_id=cut, create=True) as session:
        await session.resume()
        assert tools.runs == []
        terminal = session.calls["1.0"].terminal
        assert isinstance(terminal, ToolCallDenied) and terminal.rule == "rm_*"


async def test_a_deny_rule_given_at_reopen_stops_an_idempotent_body_from_running_again() -> None:
    store = MemoryStore()
    await paused_on(store, "nest")  # nest's body runs; its nested rm_rf waits for approval
    tools = Tools()
    async with Session.open(store, model=FauxModel([faux_text("ok")]),
                            tools=[tools.rm_rf, tools.nest], approver=approve_all,
                            rules=PolicyRules(deny=["nest"]), session_id=SID, create=True) as session:
        await session.resolve_approval("1.0/0", True)
        await session.resume()
        assert tools.runs == []
        terminal = session.calls["1.0"].terminal
        assert isinstance(terminal, ToolCallDenied) and terminal.rule == "nest"
        assert session.calls["1.0/0"].status == "cancelled"
        assert session.state.open_calls == ()


async def test_the_policy_records_the_rule_that_decided() -> None:
    tools = Tools()
    async with Session.open(MemoryStore(), model=FauxModel([faux_tool_call("rm_rf"),
                                                           faux_text("ok")]),
                            tools=[tools.rm_rf], rules=PolicyRules(deny=["rm_*"]),
                            session_id=SID, create=True) as session:
        await session.prompt("go")
        decision = session.calls["1.0"].policy
        assert decision is not None and decision.decision == "deny" and decision.rule == "rm_*"
        terminal = session.calls["1.0"].terminal
        assert isinstance(terminal, ToolCallDenied) and terminal.rule == "rm_*"


# -- a pending call whose tool this process does not register ------------------------------------


async def test_a_pending_call_whose_tool_is_not_registered_fails_unavailable_when_it_would_run(
) -> None:
    store = MemoryStore()
    await paused_on(store, "rm_rf")
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=[],
                            approver=approve_all, session_id=SID, create=True) as session:
        [pending] = session.pending_approvals()
        assert pending.call_id == "1.0" and pending.name == "rm_rf"
        await session.resolve_approval("1.0", True)
        assert (await session.resume()).stop == "end_turn"
        terminal = session.calls["1.0"].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "unavailable"
        assert "is registered in this process" in terminal.message
        assert "approval was not used" in terminal.message
        assert results(session) == [("1.0", "Tool rm_rf is not available")]
    assert fold(await store.read(SID)).snapshot() == session.state.snapshot()


async def test_a_pending_nested_call_whose_tool_is_not_registered_fails_unavailable() -> None:
    store = MemoryStore()
    await paused_on(store, "nest")
    tools = Tools()
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=[tools.nest],
                            approver=approve_all, session_id=SID, create=True) as session:
        await session.resolve_approval("1.0/0", True)
        await session.resume()
        terminal = session.calls["1.0/0"].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "unavailable"
        assert results(session) == [("1.0", "nest saw: Tool rm_rf is not available")]


async def test_an_ask_left_unasked_for_a_tool_not_registered_does_not_break_the_session() -> None:
    # the process stopped after the policy said ask and before the approver was asked
    store = MemoryStore()
    await paused_on(store, "rm_rf")
    records = await store.read(SID)
    [asked] = [r.seq for r in records if isinstance(r.event, PolicyDecided)]
    cut = await fork(store, SID, at=asked, new_session_id="cut")
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=[],
                            approver=approve_all, session_id=cut, create=True) as session:
        assert (await session.resume()).stop == "end_turn"
        terminal = session.calls["1.0"].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "unavailable"


def test_a_missing_tool_never_escapes_session_open() -> None:
    async def main() -> None:
        store = MemoryStore()
        await paused_on(store, "rm_rf")
        async with Session.open(store, model=FauxModel([faux_text("ok")]),
                                approver=approve_all, session_id=SID, create=True) as session:
            await session.resolve_approval("1.0", True)
            await session.resume()

    trio.run(main)


# -- the rule as a field, backward compatible ----------------------------------------------------


def test_a_decisions_rule_is_a_field_that_older_lines_read_as_none() -> None:
    from events.codec import decode_line, encode_line
    from events.results import error_result
    from events.types import Record

    for event in (PolicyDecided(call_id="1.0", decision="deny", reason="r", rule="rm_*"),
                  ToolCallDenied(call_id="1.0", reason="r", by="policy", rule="rm_*",
                                 result=error_result("x"))):
        line = encode_line(Record(session_id="s", seq=3, time=1.0, event=event))
        assert '"rule":"rm_*"' in line and decode_line(line).event == event
    bare = Record(session_id="s", seq=3, time=1.0,
                  event=PolicyDecided(call_id="1.0", decision="ask", reason="r"))
    line = encode_line(bare)
    assert "rule" not in line  # the line an older toolledger wrote, byte for byte
    decoded = decode_line(line).event
    assert isinstance(decoded, PolicyDecided) and decoded.rule is None
