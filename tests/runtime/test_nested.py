"""Nested calls through whole sessions: ``ctx.execute_tool`` inside a running tool.

Every test runs a real Session (FauxModel, MemoryStore) and reads what happened from the
transcript, the call tree and the recorded events.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from conftest import call_events, events_of, run_session

from engine import (
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    Block,
    Session,
    ToolCallDraft,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import (
    TERMINAL_EVENTS,
    ApprovalRequested,
    PolicyDecided,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
)

SAFE = Annotations(read_only=True, open_world=False)
DANGEROUS = Annotations(destructive=True)


def tool_results(state: Any) -> list[ToolResultEntry]:
    return [entry for entry in state.transcript if isinstance(entry, ToolResultEntry)]


def terminal(records: Any, call_id: str) -> Any:
    ends = [e for e in call_events(records, call_id) if isinstance(e, TERMINAL_EVENTS)]
    assert len(ends) == 1, f"call {call_id} has {len(ends)} terminal events"
    return ends[0]


def assert_all_closed(state: Any, records: Any) -> None:
    assert state.open_calls == ()
    for request in events_of(records, ToolCallRequested):
        terminal(records, request.call_id)


# -- the reference scenario ---------------------------------------------------------------


async def test_reference_scenario_review_diff_calls_two_tools() -> None:
    @tool(annotations=SAFE)
    async def run_checks(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("checks ok")])

    @tool(annotations=SAFE)
    async def failing_tests(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("2 failing")],
                          structured_content={"failing": ["test_a", "test_b"]})

    @tool(annotations=SAFE)
    async def review_diff(call: Any, ctx: Any) -> ToolResult:
        checks = await ctx.execute_tool("run_checks", {})
        failing = await ctx.execute_tool("failing_tests", {})
        return ToolResult(
            content=[text(f"{checks.result.text}; {failing.result.text}")],
            structured_content={"checks_id": checks.call_id,
                                "failing": failing.structured_content["failing"]},
        )

    seen: list[tuple[str, str, str | None]] = []

    def spy(draft: ToolCallDraft) -> None:
        seen.append((draft.name, draft.call_id, draft.parent_id))

    state, records, model = await run_session(
        [review_diff, run_checks, failing_tests],
        [faux_tool_call("review_diff"), faux_text("done")],
        on_tool_call=[spy],
    )
    model.assert_complete()

    assert [name for name, _, _ in seen] == ["review_diff", "run_checks", "failing_tests"]
    assert seen[1:] == [("run_checks", "1.0/0", "1.0"), ("failing_tests", "1.0/1", "1.0")]

    results = tool_results(state)
    assert len(results) == 1
    assert results[0].call_id == "1.0" and results[0].name == "review_diff"
    assert results[0].result.text == "checks ok; 2 failing"
    # the parent read the nested call's structured content back
    assert results[0].result.structured_content == {
        "checks_id": "1.0/0", "failing": ["test_a", "test_b"]}

    requests = events_of(records, ToolCallRequested)
    assert [r.call_id for r in requests] == ["1.0", "1.0/0", "1.0/1"]
    nested = [r for r in requests if r.parent_id == "1.0"]
    assert [(r.call_id, r.name, r.origin) for r in nested] == [
        ("1.0/0", "run_checks", "nested"), ("1.0/1", "failing_tests", "nested")]
    assert state.children("1.0") == ("1.0/0", "1.0/1")
    assert {c.status for c in state.calls.values()} == {"completed"}
    assert_all_closed(state, records)
    # the nested calls ended before their parent did
    order = [r.event.call_id for r in records if isinstance(r.event, ToolCallCompleted)]
    assert order == ["1.0/0", "1.0/1", "1.0"]


# -- a nested call never raises -------------------------------------------------------------


@tool(annotations=SAFE,
      input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
async def needs_int(call: Any, ctx: Any) -> ToolResult:
    return ToolResult(content=[text("fine")])


@tool(annotations=SAFE)
async def explodes(call: Any, ctx: Any) -> ToolResult:
    raise RuntimeError("kaboom")


@tool(annotations=SAFE,
      output_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
async def bad_output(call: Any, ctx: Any) -> ToolResult:
    return ToolResult(content=[text("x")], structured_content={"n": "not a number"})


@tool(annotations=DANGEROUS)
async def wipe(call: Any, ctx: Any) -> ToolResult:
    return ToolResult(content=[text("wiped")])


@tool(annotations=SAFE)
async def blocked_one(call: Any, ctx: Any) -> ToolResult:
    return ToolResult(content=[text("ran")])


def block_blocked_one(draft: ToolCallDraft) -> Block | None:
    return Block(reason="not today") if draft.name == "blocked_one" else None


FAILURES = [
    ("unknown tool", "no_such_tool", {}, ToolCallFailed, "unavailable"),
    ("invalid arguments", "needs_int", {"n": "seven"}, ToolCallFailed, "invalid_arguments"),
    ("not JSON arguments", "needs_int", {"n": {1, 2}}, ToolCallFailed, "invalid_arguments"),
    ("blocked by a handler", "blocked_one", {}, None, None),
    ("denied by the approver", "wipe", {}, ToolCallDenied, None),
    ("raises", "explodes", {}, ToolCallFailed, "raised"),
    ("invalid output", "bad_output", {}, ToolCallFailed, "invalid_output"),
]


@pytest.mark.parametrize("label,target,arguments,end,kind", FAILURES,
                         ids=[f[0] for f in FAILURES])
async def test_nested_failure_is_an_error_outcome(
    label: str, target: str, arguments: Any, end: Any, kind: str | None
) -> None:
    after: list[str] = []

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool(target, arguments)
        after.append("parent went on")
        return ToolResult(content=[text("parent done")],
                          structured_content={"is_error": outcome.is_error,
                                              "text": outcome.result.text,
                                              "id": outcome.call_id})

    state, records, _ = await run_session(
        [parent, needs_int, explodes, bad_output, wipe, blocked_one],
        [faux_tool_call("parent"), faux_text("done")],
        on_tool_call=[block_blocked_one],
        # the default approver refuses: "wipe" is denied
    )
    assert after == ["parent went on"]
    top = state.calls["1.0"]
    assert top.status == "completed"
    assert top.result is not None and not top.result.is_error
    assert top.result.structured_content["is_error"] is True
    assert top.result.structured_content["id"] == "1.0/0"
    child = state.calls["1.0/0"]
    assert child.parent_id == "1.0" and child.result is not None and child.result.is_error
    assert top.result.structured_content["text"] == child.result.text
    ending = terminal(records, "1.0/0")
    if end is not None:
        assert isinstance(ending, end)
    else:
        assert child.status == "blocked"
    if kind is not None:
        assert ending.kind == kind
    assert_all_closed(state, records)
    assert len(tool_results(state)) == 1


# -- the depth limit ------------------------------------------------------------------------


@tool(annotations=SAFE)
async def recurse(call: Any, ctx: Any) -> ToolResult:
    outcome = await ctx.execute_tool("recurse", {})
    return ToolResult(content=[text("level done")],
                      structured_content={"inner_error": outcome.is_error})


@pytest.mark.parametrize("max_depth", [None, 2, 0])
async def test_recursion_stops_at_the_depth_limit(max_depth: int | None) -> None:
    kwargs: dict[str, Any] = {} if max_depth is None else {"max_depth": max_depth}
    limit = 8 if max_depth is None else max_depth
    state, records, _ = await run_session(
        [recurse], [faux_tool_call("recurse"), faux_text("done")], **kwargs)

    requested = [r.call_id for r in events_of(records, ToolCallRequested)]
    # depth 0 (the model's call) .. limit ran; depth limit + 1 was refused
    assert len(requested) == limit + 2
    deepest = requested[-1]
    assert deepest.count("/") == limit + 1
    ending = terminal(records, deepest)
    assert isinstance(ending, ToolCallFailed) and ending.kind == "depth_limit"
    assert state.calls[deepest].result is not None and state.calls[deepest].result.is_error
    for call_id in requested[:-1]:
        view = state.calls[call_id]
        assert view.status == "completed", call_id
        assert view.started
    # only the level right above the refused call saw an error outcome
    parent_of_deepest = state.calls[requested[-2]]
    assert parent_of_deepest.result is not None
    assert parent_of_deepest.result.structured_content == {"inner_error": True}
    if limit >= 1:
        assert state.calls[requested[0]].result.structured_content == {"inner_error": False}
    assert not state.calls[deepest].started
    assert_all_closed(state, records)
    assert len(tool_results(state)) == 1


# -- nested calls pass the handlers and the policy -----------------------------------------------


async def test_nested_destructive_call_asks_the_approver_with_its_ids() -> None:
    asked: list[ApprovalRequest] = []
    ran: list[str] = []

    @tool(annotations=DANGEROUS)
    async def drop_table(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        return ToolResult(content=[text("dropped")])

    @tool(annotations=SAFE)
    async def migrate(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("drop_table", {"table": "t"})
        return ToolResult(content=[text(outcome.result.text)])

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    state, records, _ = await run_session(
        [migrate, drop_table], [faux_tool_call("migrate"), faux_text("done")],
        approver=approver)

    assert [(a.call_id, a.parent_id, a.origin, a.name) for a in asked] == [
        ("1.0/0", "1.0", "nested", "drop_table")]
    assert asked[0].arguments == {"table": "t"}
    assert [e.call_id for e in events_of(records, ApprovalRequested)] == ["1.0/0"]
    assert ran == ["1.0/0"]
    assert state.calls["1.0"].result is not None
    assert state.calls["1.0"].result.text == "dropped"


async def test_nested_call_denied_by_approver_reads_not_approved() -> None:
    ran: list[str] = []

    @tool(annotations=DANGEROUS)
    async def drop_table(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        return ToolResult(content=[text("dropped")])

    @tool(annotations=SAFE)
    async def migrate(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("drop_table", {})
        return ToolResult(content=[text(outcome.result.text)],
                          structured_content={"is_error": outcome.is_error})

    async def refuse(request: ApprovalRequest) -> bool:
        return False

    state, records, _ = await run_session(
        [migrate, drop_table], [faux_tool_call("migrate"), faux_text("done")], approver=refuse)
    assert ran == []
    assert isinstance(terminal(records, "1.0/0"), ToolCallDenied)
    assert state.calls["1.0"].result is not None
    assert state.calls["1.0"].result.text == "drop_table was not approved"
    assert state.calls["1.0"].result.structured_content == {"is_error": True}


async def test_session_grant_for_a_top_level_call_governs_a_later_nested_call() -> None:
    asked: list[str] = []
    ran: list[str] = []

    @tool(annotations=DANGEROUS)
    async def deploy(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        return ToolResult(content=[text("deployed")])

    @tool(annotations=SAFE)
    async def release(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("deploy", {})
        return ToolResult(content=[text(outcome.result.text)])

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request.call_id)
        return ApprovalAnswer(granted=True, scope="session")

    state, records, _ = await run_session(
        [deploy, release],
        [faux_tool_call("deploy"), faux_tool_call("release"), faux_text("done")],
        approver=approver)

    assert asked == ["1.0"]
    assert ran == ["1.0", "2.0/0"]
    verdict = events_of(records, PolicyDecided, "2.0/0")
    assert [v.decision for v in verdict] == ["allow"]
    assert events_of(records, ApprovalRequested, "2.0/0") == []
    assert state.calls["2.0"].result is not None and state.calls["2.0"].result.text == "deployed"


async def test_nested_calls_pass_tool_result_handlers() -> None:
    @tool(annotations=SAFE)
    async def leaf(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("raw")], structured_content={"v": 1})

    @tool(annotations=SAFE)
    async def root(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("leaf", {})
        return ToolResult(content=[text(outcome.result.text)],
                          structured_content={"seen": outcome.structured_content})

    from engine import ResultPatch, ToolResultDraft

    def patch_leaf(draft: ToolResultDraft) -> ResultPatch | None:
        if draft.name == "leaf":
            return ResultPatch(content=["patched"], structured_content={"v": 2})
        return None

    state, records, _ = await run_session(
        [root, leaf], [faux_tool_call("root"), faux_text("done")], on_tool_result=[patch_leaf])
    assert state.calls["1.0"].result is not None
    assert state.calls["1.0"].result.text == "patched"
    assert state.calls["1.0"].result.structured_content == {"seen": {"v": 2}}
    leaf_end = terminal(records, "1.0/0")
    assert isinstance(leaf_end, ToolCallCompleted)
    assert leaf_end.returned is not None and leaf_end.returned.structured_content == {"v": 1}


async def test_parent_changing_a_nested_outcome_does_not_change_the_log() -> None:
    @tool(annotations=SAFE)
    async def leaf(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("leaf")], structured_content={"items": [1, 2]})

    @tool(annotations=SAFE)
    async def root(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("leaf", {})
        outcome.structured_content["items"].append(99)  # the parent edits what it was given
        return ToolResult(content=[text("root")])

    state, records, _ = await run_session(
        [root, leaf], [faux_tool_call("root"), faux_text("done")])
    leaf_end = terminal(records, "1.0/0")
    assert leaf_end.result.structured_content == {"items": [1, 2]}
    assert state.calls["1.0/0"].result is not None
    assert state.calls["1.0/0"].result.structured_content == {"items": [1, 2]}


async def test_nested_call_of_an_approved_parent_still_needs_its_own_approval() -> None:
    asked: list[str] = []

    @tool(annotations=DANGEROUS)
    async def rm(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("removed")])

    @tool(annotations=DANGEROUS)
    async def outer(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("rm", {})
        return ToolResult(content=[text(outcome.result.text)])

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.call_id)
        return request.call_id == "1.0"  # approve the parent only, once

    state, records, _ = await run_session(
        [outer, rm], [faux_tool_call("outer"), faux_text("done")], approver=approver)
    assert asked == ["1.0", "1.0/0"]
    assert state.calls["1.0/0"].status == "denied"
    assert state.calls["1.0"].result is not None
    assert state.calls["1.0"].result.text == "rm was not approved"
    assert_all_closed(state, records)


async def test_session_goes_on_after_nested_failures() -> None:
    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        a = await ctx.execute_tool("explodes", {})
        b = await ctx.execute_tool("no_such_tool", {})
        return ToolResult(content=[text(f"{a.is_error} {b.is_error}")])

    state, records, model = await run_session(
        [parent, explodes], [faux_tool_call("parent"), faux_tool_call("parent"), faux_text("ok")],
        approver=approve_all)
    model.assert_complete()
    assert len(model.requests) == 3
    assert [e.result.text for e in tool_results(state)] == ["True True", "True True"]
    assert sorted(state.calls) == ["1.0", "1.0/0", "1.0/1", "2.0", "2.0/0", "2.0/1"]
    assert_all_closed(state, records)


async def test_a_nested_call_is_gated_and_run_with_the_tool_registered_when_it_is_asked_for(
) -> None:
    # a body that runs on while the host registers a new version of a tool: its next nested
    # call of that tool is judged with the new version's annotations (the ones the log shows
    # registered before the request), and runs the new version's body
    @tool(annotations=SAFE)
    async def note(call: Any, ctx: Any) -> ToolResult:
        """First version: read-only."""
        return ToolResult(content=[text("old note")])

    async def new_body(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("new note")])

    go_on = trio.Event()
    waiting = trio.Event()

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        waiting.set()
        await go_on.wait()
        outcome = await ctx.execute_tool("note", {})
        return ToolResult(content=[text(outcome.result.text)])

    asked: list[tuple[str, Annotations]] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append((request.call_id, request.annotations))
        return True

    store = MemoryStore()
    async with Session.open(store, model=FauxModel([]), tools=[parent, note],
                            approver=approver) as session:
        async with trio.open_nursery() as nursery:
            outcomes: list[Any] = []

            async def host() -> None:
                outcomes.append(await session.call_tool("parent", {}))

            nursery.start_soon(host)
            await waiting.wait()
            await session.register(attrs.evolve(note, annotations=DANGEROUS, execute=new_body))
            go_on.set()
        [outcome] = outcomes
        assert outcome.result.text == "new note"
        [decided] = [e for e in call_events(session.records, "h0/0")
                     if isinstance(e, PolicyDecided)]
        assert decided.decision == "ask"
        assert asked == [("h0/0", DANGEROUS)]
        check_log(await store.read(session.session_id), state=session.state, closed=True)


async def test_the_policy_judges_with_the_version_registered_while_a_handler_waited() -> None:
    @tool(annotations=SAFE)
    async def note(call: Any, ctx: Any) -> ToolResult:
        """Read-only, at first."""
        return ToolResult(content=[text("note")])

    go_on = trio.Event()
    waiting = trio.Event()

    async def slow_guard(draft: ToolCallDraft) -> None:
        waiting.set()
        await go_on.wait()

    store = MemoryStore()
    async with Session.open(store, model=FauxModel([]), tools=[note],
                            approver=approve_all) as session:
        session.on_tool_call(slow_guard)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "note", {})
            await waiting.wait()
            await session.register(attrs.evolve(note, annotations=DANGEROUS))
            go_on.set()
        [decided] = [e for e in call_events(session.records, "h0")
                     if isinstance(e, PolicyDecided)]
        assert decided.decision == "ask"
        check_log(await store.read(session.session_id), state=session.state, closed=True)
