"""A tool that recurses through ``ctx.execute_tool`` forever meets the depth limit: one level
past ``max_depth`` every call ends as ``depth_limit`` without running, asking a handler or the
approver, and every call above it ends normally.

tests/runtime/test_nested.py checks one chain of self-calls. Here Hypothesis draws the shape: the
limit, how many calls each level makes (one after another, or all at once in a nursery), self-
or mutual recursion, a tool that needs approval, and a tool that keeps calling after it was
refused. The counts follow from the shape: with fan-out F and limit D, levels 0..D run
``F**d`` bodies each and level D + 1 holds ``F**(D + 1)`` refused calls.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from engine import (
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    ResultPatch,
    Rewrite,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolResultDraft,
    ToolSpec,
    text,
    tool,
)
from engine.core.jsonvalues import MAX_DEPTH
from engine.core.limits import MAX_CALL_DEPTH
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import (
    ResultHandlerFailed,
    ToolCallBlocked,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolProgress,
)
from tests.faults.checks import DEADLOCK, SAFE, assert_consistent
from tests.faults.hostile import deep_values, nest


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

    def handler(draft: ToolCallDraft) -> None:
        judged.append(draft.call_id)

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
        assert not view.started and view.policy is None and view.result.is_error
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
    refused = state.calls["1.0/0/0/0/0"].terminal
    assert isinstance(refused, ToolCallFailed) and refused.kind == "depth_limit"


# -- values too deep for any walk, and calls nested as deep as the runtime allows ------------

DEEP_ENTRIES = ("model", "nested", "rewrite", "approver edit", "progress data", "result",
                "patch")


class DeepProbe:
    """A session whose one ``target`` call brings ``value`` in through ``entry``."""

    def __init__(self, entry: str, value: Any) -> None:
        self.entry = entry
        self.value = value
        self.ran: list[str] = []
        self.progress_errors: list[str] = []
        self.nested_error: list[bool] = []
        self.store = MemoryStore()

    def tools(self) -> list[ToolSpec]:
        probe = self

        @tool(annotations=Annotations(destructive=True) if probe.entry == "approver edit"
              else SAFE)
        async def target(call: Any, ctx: Any) -> ToolResult:
            probe.ran.append(call.call_id)
            if probe.entry == "progress data":
                try:
                    ctx.report_progress("deep", probe.value)
                except ValueError as exc:
                    probe.progress_errors.append(str(exc))
            if probe.entry == "result":
                return ToolResult(content=[text("deep")], structured_content={"v": probe.value})
            return ToolResult(content=[text("target done")])

        @tool(annotations=SAFE)
        async def relay(call: Any, ctx: Any) -> ToolResult:
            outcome = await ctx.execute_tool("target", {"v": probe.value})
            probe.nested_error.append(outcome.is_error)
            return ToolResult(content=[text("relayed")])

        return [target, relay]

    async def approver(self, request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=True, arguments={"v": self.value})

    def rewrite(self, draft: ToolCallDraft) -> Rewrite | None:
        return Rewrite({"v": self.value}) if self.entry == "rewrite" else None

    def patch(self, draft: ToolResultDraft) -> ResultPatch | None:
        return ResultPatch(structured_content=self.value) if self.entry == "patch" else None

    async def run(self) -> list[Any]:
        first = {"model": faux_tool_call("target", {"v": self.value}),
                 "nested": faux_tool_call("relay")}.get(self.entry, faux_tool_call("target"))
        model = FauxModel([first, faux_text("done"), faux_text("again")])
        with trio.fail_after(DEADLOCK):
            async with Session.open(self.store, model=model, tools=self.tools(),
                                    approver=self.approver, session_id="s", create=True) as session:
                session.on_tool_call(self.rewrite)
                session.on_tool_result(self.patch)
                assert (await session.prompt("go")).text == "done"
                assert (await session.prompt("again")).text == "again"  # it goes on
        await assert_consistent(self.store, "s", session.state)
        return [r.event for r in await self.store.read("s")]


def ending_of(events: list[Any], call_id: str) -> Any:
    return [e for e in events if getattr(e, "call_id", None) == call_id][-1]


@settings(max_examples=25)
@given(entry=st.sampled_from(DEEP_ENTRIES), value=deep_values())
def test_a_value_too_deep_fails_its_call_and_the_session_goes_on(entry: str, value: Any) -> None:
    probe = DeepProbe(entry, value)
    events = trio.run(probe.run)
    target = "1.0/0" if entry == "nested" else "1.0"
    ending = ending_of(events, target)
    if entry in ("model", "nested"):
        assert isinstance(ending, ToolCallFailed) and ending.kind == "invalid_arguments", ending
        # the model (or the parent) is told what was wrong, not that null is not an object
        assert "not JSON" in ending.result.text and "deep" in ending.result.text, ending
        assert ending.detail is not None and ending.detail.problem == "depth", ending
        assert probe.ran == []
        if entry == "nested":
            assert probe.nested_error == [True]
            assert isinstance(ending_of(events, "1.0"), ToolCallCompleted)
    elif entry in ("rewrite", "approver edit"):
        assert isinstance(ending, (ToolCallBlocked, ToolCallDenied)), ending
        assert probe.ran == []
    elif entry == "progress data":
        assert len(probe.progress_errors) == 1 and "levels deep" in probe.progress_errors[0]
        assert not any(isinstance(e, ToolProgress) for e in events)
        assert isinstance(ending, ToolCallCompleted)
    elif entry == "result":
        assert isinstance(ending, ToolCallFailed) and ending.kind == "not_serialisable"
        assert "levels deep" in ending.message
    else:  # patch: the handler's failure is recorded; the result it wanted to change stands
        [failed] = [e for e in events if isinstance(e, ResultHandlerFailed)]
        assert "levels deep" in failed.error.message
        assert isinstance(ending, ToolCallCompleted) and ending.result.text == "target done"


def test_metadata_too_deep_is_refused_before_anything_is_written() -> None:
    async def main() -> None:
        store = MemoryStore()
        with pytest.raises(ValueError, match="levels deep"):
            async with Session.open(store, model=FauxModel([faux_text("x")]), session_id="s", create=True,
                                    metadata={"m": nest(5_000)}):
                pass  # pragma: no cover
        assert await store.read("s") == []

    trio.run(main)


def test_a_max_depth_past_what_the_runtime_can_do_is_refused() -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match=f"at most {MAX_CALL_DEPTH}"):
            async with Session.open(MemoryStore(), model=FauxModel([faux_text("x")]),
                                    max_depth=MAX_CALL_DEPTH + 1):
                pass  # pragma: no cover

    trio.run(main)


def test_the_deepest_calls_carry_the_deepest_values_with_room_to_spare() -> None:
    """The limits measured together: a tool recursing to the deepest nesting ``max_depth``
    allows, where every level passes on arguments, reports progress and returns structured
    content as deep as JSON may be (checked against a recursive output schema), under a host
    that already spends ``HOST_FRAMES`` of the interpreter's stack. Every call ends normally,
    and the refused level below the deepest ends as ``depth_limit``."""
    host_frames = 200  # about 240 fit (docs/concepts.md, "Depth limits")
    deepest = nest(MAX_DEPTH - 2, "mixed")  # inside {"v": ...}: MAX_DEPTH levels in all
    tree = {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/tree"}},
                      {"type": "object", "additionalProperties": {"$ref": "#/$defs/tree"}},
                      {"type": "integer"}]}
    schema = {"type": "object", "properties": {"v": {"$ref": "#/$defs/tree"}},
              "$defs": {"tree": tree}}

    @tool(annotations=SAFE, input_schema=schema, output_schema=schema)
    async def dive(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("down", {"v": deepest})
        await ctx.execute_tool("dive", {"v": deepest})
        return ToolResult(content=[text("up")], structured_content={"v": deepest})

    async def main() -> Any:
        store = MemoryStore()
        model = FauxModel([faux_tool_call("dive", {"v": deepest}), faux_text("ok")])
        async with Session.open(store, model=model, tools=[dive], max_depth=MAX_CALL_DEPTH,
                                session_id="s", create=True) as session:
            assert (await session.prompt("go")).text == "ok"
        return await assert_consistent(store, "s", session.state)

    def under_a_deep_host(frames: int) -> Any:
        if frames:
            return under_a_deep_host(frames - 1)
        return trio.run(main)

    state = under_a_deep_host(host_frames)
    statuses = Counter(view.status for view in state.calls.values())
    assert statuses == Counter({"completed": MAX_CALL_DEPTH + 1, "failed": 1})
    refused = next(v for v in state.calls.values() if v.status == "failed").terminal
    assert refused.kind == "depth_limit"
