"""A tool that recurses through ``ctx.execute_tool`` forever meets the depth limit: one level
past ``max_depth`` every call ends as ``depth_limit`` without running, asking a handler or the
approver, and every call above it ends normally.

tests/test_nested.py checks one chain of self-calls. Here Hypothesis draws the shape: the
limit, how many calls each level makes (one after another, or all at once in a nursery), self-
or mutual recursion, a tool that needs approval, and a tool that keeps calling after it was
refused. The counts follow from the shape: with fan-out F and limit D, levels 0..D run
``F**d`` bodies each and level D + 1 holds ``F**(D + 1)`` refused calls.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio
from hypothesis import assume, given
from hypothesis import strategies as st
from trio.testing import MockClock

from engine import (
    Annotations,
    ApprovalRequest,
    Session,
    ToolCallEvent,
    ToolResult,
    ToolSpec,
    text,
    tool,
)
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.reducers import ToolResultEntry
from events import MemoryStore
from events.types import ToolCallFailed, ToolCallRequested
from tests.faults.checks import DEADLOCK, SAFE, assert_consistent


class Recursion:
    """Tools ``ping`` (and ``pong``, for mutual recursion) that call the next level ``fanout``
    times, together or one after another, then ``retries`` more times once refused."""

    def __init__(self, *, fanout: int, parallel: bool, mutual: bool, retries: int,
                 dangerous: bool) -> None:
        self.fanout = fanout
        self.parallel = parallel
        self.mutual = mutual
        self.retries = retries
        self.bodies: Counter[int] = Counter()  # depth -> bodies run
        self.refusals_seen = 0
        annotations = Annotations(destructive=True) if dangerous else SAFE
        self.specs: list[ToolSpec] = [
            tool(name=name, annotations=annotations)(self._body(name))
            for name in (("ping", "pong") if mutual else ("ping",))
        ]

    def _body(self, name: str) -> Any:
        async def body(call: Any, ctx: Any) -> ToolResult:
            self.bodies[call.call_id.count("/")] += 1
            target = ("pong" if name == "ping" else "ping") if self.mutual else name
            errors: list[bool] = []

            async def one() -> None:
                outcome = await ctx.execute_tool(target, {})
                errors.append(outcome.is_error)
                if outcome.is_error:
                    self.refusals_seen += 1
                    for _ in range(self.retries):  # stubborn: try again, and again
                        again = await ctx.execute_tool(target, {})
                        assert again.is_error
                        self.refusals_seen += 1

            if self.parallel:
                async with trio.open_nursery() as nursery:
                    for _ in range(self.fanout):
                        nursery.start_soon(one)
            else:
                for _ in range(self.fanout):
                    await one()
            return ToolResult(content=[text(f"{name} done")],
                              structured_content={"errors": errors})
        return body


async def run(recursion: Recursion, max_depth: int) -> tuple[Any, list[Any], int, int]:
    store = MemoryStore()
    asked: list[str] = []
    judged: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.call_id)
        return True

    def handler(event: ToolCallEvent) -> None:
        judged.append(event.call_id)

    model = FauxModel([faux_tool_call("ping"), faux_text("done")])
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=model, tools=recursion.specs, approver=approver,
                                max_depth=max_depth, session_id="s", create=True) as session:
            session.on_tool_call(handler)
            result = await session.prompt("go")
            assert result.stop == "end_turn" and result.text == "done"
    state = await assert_consistent(store, "s", session.state)
    records = await store.read("s")
    return state, records, len(asked), len(judged)


@given(
    max_depth=st.integers(0, 5),
    fanout=st.integers(1, 3),
    parallel=st.booleans(),
    mutual=st.booleans(),
    retries=st.integers(0, 2),
    dangerous=st.booleans(),
)
def test_recursion_of_any_shape_meets_the_depth_limit(
    max_depth: int, fanout: int, parallel: bool, mutual: bool, retries: int, dangerous: bool
) -> None:
    assume(fanout ** (max_depth + 1) <= 256)
    recursion = Recursion(fanout=fanout, parallel=parallel, mutual=mutual, retries=retries,
                          dangerous=dangerous)
    state, records, asked, judged = trio.run(run, recursion, max_depth,
                                             clock=MockClock(autojump_threshold=0))

    refused_level = fanout ** (max_depth + 1)
    refused = refused_level * (1 + retries)
    ran = sum(fanout ** d for d in range(max_depth + 1))
    assert dict(recursion.bodies) == {d: fanout ** d for d in range(max_depth + 1)}
    assert recursion.refusals_seen == refused

    requested = [r.event for r in records if isinstance(r.event, ToolCallRequested)]
    assert len(requested) == ran + refused
    limit_failures = [r.event for r in records
                      if isinstance(r.event, ToolCallFailed) and r.event.kind == "depth_limit"]
    assert len(limit_failures) == refused
    assert {e.call_id.count("/") for e in limit_failures} == {max_depth + 1}
    for failure in limit_failures:
        view = state.calls[failure.call_id]
        assert not view.started and view.verdict is None and view.result.is_error
    # refused calls never reach a handler or the approver; every other call does
    assert judged == ran
    assert asked == (ran if dangerous else 0)
    for call_id, view in state.calls.items():
        if call_id.count("/") <= max_depth:
            assert view.status == "completed", call_id
    assert [e.call_id for e in state.transcript if isinstance(e, ToolResultEntry)] == ["1.0"]
    if mutual:  # the names alternate down the tree
        for call_id, view in state.calls.items():
            assert view.name == ("ping" if call_id.count("/") % 2 == 0 else "pong")


async def test_a_recursing_tool_with_a_timeout_meets_the_limit_before_its_deadline(
    autojump_clock: Any,
) -> None:
    @tool(annotations=SAFE, timeout=1_000)
    async def dive(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("dive", {})
        return ToolResult(content=[text("up")], structured_content={"error": outcome.is_error})

    store = MemoryStore()
    with trio.fail_after(DEADLOCK):
        async with Session.open(store, model=FauxModel([faux_tool_call("dive"), faux_text("ok")]),
                                tools=[dive], max_depth=3, session_id="s", create=True) as session:
            await session.prompt("go")
    state = await assert_consistent(store, "s", session.state)
    assert [state.calls[c].status for c in ("1.0", "1.0/0", "1.0/0/0", "1.0/0/0/0")] == [
        "completed"] * 4
    refused = state.calls["1.0/0/0/0/0"].outcome
    assert isinstance(refused, ToolCallFailed) and refused.kind == "depth_limit"
