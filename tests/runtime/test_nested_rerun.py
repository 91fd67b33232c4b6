"""A body that runs again after a restart: each nested call it asks for is answered by the
recorded call that is the same call (tool name and arguments), never by another one."""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st
from strategies import json_values

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
from engine.core.nested import Match, NestedCalls, first_difference
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import ToolCallFailed, ToolCallRequested

SID = "s"
RERUN = Annotations(read_only=True, open_world=False, idempotent=True)


async def later(request: ApprovalRequest) -> Any:
    return LATER


def results(session: Session) -> list[tuple[str, str]]:
    return [(e.call_id, e.result.text) for e in session.transcript
            if isinstance(e, ToolResultEntry)]


class Payments:
    """``pay`` sends money to ``self.payee``, then asks for a review that waits for approval."""

    def __init__(self, payee: str) -> None:
        self.payee = payee
        self.sent: list[str] = []
        self.seen: list[str] = []

        @tool(annotations=Annotations(destructive=True))
        async def send_money(call: Any, ctx: Any) -> ToolResult:
            self.sent.append(call.arguments["to"])
            return ToolResult(content=[text(f"sent to {call.arguments['to']}")])

        @tool(annotations=Annotations(destructive=True))
        async def review(call: Any, ctx: Any) -> ToolResult:
            return ToolResult(content=[text("reviewed")])

        @tool(annotations=RERUN)
        async def pay(call: Any, ctx: Any) -> ToolResult:
            sent = await ctx.execute_tool("send_money", {"to": self.payee})
            self.seen.append(sent.result.text)
            reviewed = await ctx.execute_tool("review", {})
            return ToolResult(content=[text(f"{sent.result.text}; {reviewed.result.text}")])

        self.specs = [send_money, review, pay]


async def test_a_rerun_body_asking_other_arguments_gets_a_mismatch_not_the_recorded_result(
) -> None:
    store = MemoryStore()
    rules = PolicyRules(allow=["send_money"])
    first = Payments("alice")
    async with Session.open(store, model=FauxModel([faux_tool_call("pay")]), tools=first.specs,
                            approver=later, rules=rules, session_id=SID, create=True) as session:
        assert (await session.prompt("go")).stop == "paused"  # review waits
    assert first.sent == ["alice"]

    second = Payments("bob")  # the body now asks for something else
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=second.specs,
                            approver=later, rules=rules, session_id=SID, create=True) as session:
        await session.resolve_approval("1.0/1", True)
        await session.resume()
        assert second.sent == []  # bob was not paid, and alice's payment was not handed over
        [seen] = second.seen
        assert "sent to alice" not in seen
        assert "alice" in seen and "bob" in seen and "$.to" in seen
        mismatched = [r.event for r in session.records if isinstance(r.event, ToolCallRequested)
                      and r.event.arguments == {"to": "bob"}]
        assert [e.call_id for e in mismatched] == ["1.0/2"]  # recorded, under a new id
        terminal = session.calls["1.0/2"].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "mismatch"
        assert "1.0/0" in terminal.message
        assert results(session) == [("1.0", f"{seen}; reviewed")]
    assert fold(await store.read(SID)).snapshot() == session.state.snapshot()


class Stamps:
    """``fan`` asks for ``stamp`` n=1 and n=2 concurrently; ``first`` decides which asks first.
    ``stamp`` waits for approval, so the first run stops with both recorded and pending."""

    def __init__(self, first: int) -> None:
        self.first = first
        self.stamped: list[int] = []

        @tool(annotations=Annotations(destructive=True))
        async def stamp(call: Any, ctx: Any) -> ToolResult:
            self.stamped.append(call.arguments["n"])
            return ToolResult(content=[text(f"stamp {call.arguments['n']}")])

        @tool(annotations=RERUN)
        async def fan(call: Any, ctx: Any) -> ToolResult:
            seen: dict[int, str] = {}

            async def child(n: int) -> None:
                for _ in range(0 if n == self.first else 3):
                    await trio.lowlevel.checkpoint()
                seen[n] = (await ctx.execute_tool("stamp", {"n": n})).result.text

            async with trio.open_nursery() as nursery:
                nursery.start_soon(child, 1)
                nursery.start_soon(child, 2)
            return ToolResult(content=[text(f"1 got {seen[1]!r}, 2 got {seen[2]!r}")])

        self.specs = [stamp, fan]


async def test_concurrent_nested_calls_get_their_own_results_whatever_order_they_ask_in(
) -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_tool_call("fan")]),
                            tools=Stamps(first=1).specs, approver=later,
                            session_id=SID, create=True) as session:
        assert (await session.prompt("go")).stop == "paused"
        assert session.calls["1.0/0"].arguments == {"n": 1}

    again = Stamps(first=2)  # this time n=2 asks first
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=again.specs,
                            approver=approve_all, session_id=SID, create=True) as session:
        for request in session.pending_approvals():
            await session.resolve_approval(request.call_id, True)
        await session.resume()
        assert sorted(again.stamped) == [1, 2]
        assert results(session) == [("1.0", "1 got 'stamp 1', 2 got 'stamp 2'")]
        assert sorted(session.calls) == ["1.0", "1.0/0", "1.0/1"]  # no call was added


class Repeats:
    """``twice`` asks ``count`` with the same arguments twice, then for a review."""

    def __init__(self) -> None:
        self.counted = 0

        @tool(annotations=Annotations(read_only=True, open_world=False))
        async def count(call: Any, ctx: Any) -> ToolResult:
            self.counted += 1
            return ToolResult(content=[text(f"count run {self.counted}")])

        @tool(annotations=Annotations(destructive=True))
        async def review(call: Any, ctx: Any) -> ToolResult:
            return ToolResult(content=[text("reviewed")])

        @tool(annotations=RERUN)
        async def twice(call: Any, ctx: Any) -> ToolResult:
            a = await ctx.execute_tool("count", {"x": 1})
            b = await ctx.execute_tool("count", {"x": 1})
            await ctx.execute_tool("review", {})
            return ToolResult(content=[text(f"{a.call_id}={a.result.text}, "
                                            f"{b.call_id}={b.result.text}")])

        self.specs = [count, review, twice]


async def test_identical_nested_calls_are_answered_from_the_log_in_the_order_recorded() -> None:
    store = MemoryStore()
    first = Repeats()
    async with Session.open(store, model=FauxModel([faux_tool_call("twice")]),
                            tools=first.specs, approver=later, session_id=SID, create=True) as session:
        await session.prompt("go")
    assert first.counted == 2
    second = Repeats()
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=second.specs,
                            approver=approve_all, session_id=SID, create=True) as session:
        await session.resolve_approval("1.0/2", True)
        await session.resume()
        assert second.counted == 0  # never run twice
        assert results(session) == [("1.0", "1.0/0=count run 1, 1.0/1=count run 2")]


def test_a_match_is_by_name_and_canonical_arguments_in_recorded_order() -> None:
    nested = NestedCalls("1.0", [("1.0/0", "f", {"a": 1, "b": 2}), ("1.0/1", "f", {"a": 1}),
                                 ("1.0/2", "f", {"b": 2, "a": 1})])
    assert nested.match("f", {"b": 2, "a": 1}).call_id == "1.0/0"
    assert nested.match("g", {"a": 1}).call_id == "1.0/3"  # another tool: new
    mismatch = nested.match("f", {"a": 2})
    assert mismatch.call_id == "1.0/4" and mismatch.differs_from == "1.0/1"
    assert nested.match("f", {"a": 1, "b": 2}).call_id == "1.0/2"
    assert nested.match("f", {"a": 1}).call_id == "1.0/1"
    assert not nested.match("f", {"a": 1}).recorded  # all answered: new


@given(st.lists(st.tuples(st.sampled_from(["f", "g"]), json_values), max_size=6),
       st.lists(st.tuples(st.sampled_from(["f", "g"]), json_values), max_size=3))
def test_a_new_call_is_what_a_match_would_be_once_no_recorded_call_is_left(
    requests: list[tuple[str, Any]], recorded: list[tuple[str, Any]]
) -> None:
    # two runs of one body asking the same things, one by new_call() where it answers, one
    # by match() alone: the same ids, and new_call() answers only once nothing recorded is
    # left to match
    log = [(f"1.0/{i}", name, arguments) for i, (name, arguments) in enumerate(recorded)]
    quick, reference = NestedCalls("1.0", log), NestedCalls("1.0", log)
    for name, arguments in requests:
        left = bool(reference.unanswered())
        new = quick.new_call()
        match = reference.match(name, arguments)
        assert (new is None) == left
        if new is None:
            new_match = quick.match(name, arguments)
            assert new_match == match
        else:
            assert match is not None and match == Match(call_id=new)


def test_the_first_difference_is_named_by_its_path() -> None:
    assert first_difference({"to": "alice"}, {"to": "bob"}) == 'at $.to: "alice" then, "bob" now'
    assert first_difference({"a": [1, 2]}, {"a": [1, 3]}) == "at $.a[1]: 2 then, 3 now"
    assert first_difference({"a": 1}, {}) == "at $.a: 1 then, absent now"
    assert first_difference([1], [1, 2]) == "at $: 1 items then, 2 now"
    deep: Any = "x"
    other: Any = "y"
    for _ in range(5_000):
        deep, other = [deep], [other]
    assert first_difference(deep, other).endswith('"x" then, "y" now')


async def test_a_recorded_nested_call_the_rerun_body_no_longer_asks_for_is_cancelled() -> None:
    store = MemoryStore()
    first = Payments("alice")
    async with Session.open(store, model=FauxModel([faux_tool_call("pay")]), tools=first.specs,
                            approver=later, rules=PolicyRules(allow=["send_money"]),
                            session_id=SID, create=True) as session:
        await session.prompt("go")  # review (1.0/1) waits for approval

    @tool(name="pay", annotations=RERUN)
    async def pay(call: Any, ctx: Any) -> ToolResult:  # this version asks for nothing
        return ToolResult(content=[text("paid nobody")])

    second = Payments("alice")
    tools = [spec for spec in second.specs if spec.name != "pay"] + [pay]
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=tools,
                            approver=approve_all, session_id=SID, create=True) as session:
        assert (await session.resume()).stop == "end_turn"
        assert session.calls["1.0/1"].status == "cancelled"
        assert session.state.open_calls == () and session.state.pending_approvals == ()
        assert results(session) == [("1.0", "paid nobody")]
