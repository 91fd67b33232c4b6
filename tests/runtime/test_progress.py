"""Progress flows up: a nested call's updates reach its parent as they are recorded, the
parent may forward them as its own, and the host hears every call's, live.

The seed's nested ``onUpdate`` row: ``review_diff``'s children report progress, and the parent
(``ctx.execute_tool(..., on_progress=...)``) and the host (``session.on_progress``,
``session.follow()``) each see every update, in order, with the reporting call's id.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
from conftest import SESSION_ID, counting_clock, events_of, run_session
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import PROPERTY

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.core.lifecycle import LifecycleError
from engine.core.reducers import fold
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import MemoryStore
from events.codec import decode_record, encode_record
from events.types import Record, ToolCallCompleted, ToolCallFailed, ToolProgress

SAFE = Annotations(read_only=True, open_world=False)


def reporting(name: str, count: int) -> Any:
    """A tool that reports ``count`` updates, yielding to the scheduler between them."""

    @tool(name=name, annotations=SAFE)
    async def body(call: Any, ctx: Any) -> ToolResult:
        for step in range(count):
            ctx.report_progress(f"{name} {step + 1}/{count}", {"step": step + 1})
            await trio.lowlevel.checkpoint()
        return ToolResult(content=[text(f"{name} done")])

    return body


def seen(update: ToolProgress) -> tuple[str, str | None, str | None]:
    """An update as the tests compare it: whose record, the message, where it came from."""
    return (update.call_id, update.message, update.source)


def progress_records(records: Any) -> list[tuple[str, str | None, str | None]]:
    return [seen(event) for event in events_of(records, ToolProgress)]


# -- the seed's row -------------------------------------------------------------------------


async def test_review_diffs_children_report_and_parent_and_host_each_see_every_update() -> None:
    parent_heard: list[tuple[str, str | None, str | None]] = []
    host_heard: list[tuple[str, str | None, str | None]] = []
    followed: list[tuple[str, str | None, str | None]] = []

    @tool(annotations=SAFE)
    async def review_diff(call: Any, ctx: Any) -> ToolResult:
        """Run the checks and list failing tests."""

        def on_update(update: ToolProgress) -> None:
            parent_heard.append(seen(update))
            ctx.forward_progress(update)  # as the seed passes onUpdate down

        checks = await ctx.execute_tool("run_checks", {}, on_progress=on_update)
        tests = await ctx.execute_tool("failing_tests", {}, on_progress=on_update)
        return ToolResult(content=[text(f"{checks.result.text}; {tests.result.text}")])

    store = MemoryStore()
    model = FauxModel([faux_tool_call("review_diff", {}), faux_text("reviewed")])
    tools = [review_diff, reporting("run_checks", 3), reporting("failing_tests", 2)]

    async def follow(session: Session) -> None:
        async for record in session.follow():  # until the session closes
            if isinstance(record.event, ToolProgress):
                followed.append(seen(record.event))

    async with trio.open_nursery() as nursery:
        async with Session.open(store, model=model, tools=tools, approver=approve_all,
                                session_id=SESSION_ID, create=True,
                                clock=counting_clock()) as session:
            session.on_progress(lambda update: host_heard.append(seen(update)))
            nursery.start_soon(follow, session)
            await session.prompt("review")
            calls = session.calls
            assert calls["1.0"].progress_count == 5
            assert calls["1.0/0"].progress_count == 3 and calls["1.0/1"].progress_count == 2

    children = [("1.0/0", f"run_checks {n}/3", None) for n in (1, 2, 3)] + [
        ("1.0/1", f"failing_tests {n}/2", None) for n in (1, 2)]
    assert parent_heard == children
    # every child's record, each followed at once by the parent's forwarded one
    forwarded = [("1.0", message, child) for child, message, _ in children]
    interleaved = [update for pair in zip(children, forwarded) for update in pair]
    records = await store.read(SESSION_ID)
    assert progress_records(records) == interleaved
    assert host_heard == interleaved
    assert followed == interleaved
    check_log(records, closed=True)


async def test_a_parent_that_only_listens_records_nothing_and_the_host_sees_the_children() -> None:
    heard: list[Any] = []

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("child", {}, on_progress=heard.append)
        return ToolResult(content=[text(outcome.result.text)])

    state, records, _ = await run_session(
        [parent, reporting("child", 3)],
        [faux_tool_call("parent", {}), faux_text("ok")], approver=approve_all)
    assert [(u.call_id, u.data) for u in heard] == [("1.0/0", {"step": n}) for n in (1, 2, 3)]
    assert state.calls["1.0"].progress_count == 0
    assert [u.call_id for u in events_of(records, ToolProgress)] == ["1.0/0"] * 3


async def test_a_forwarded_update_names_the_call_that_first_reported_it_at_any_depth() -> None:
    @tool(annotations=SAFE)
    async def middle(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("leaf", {}, on_progress=ctx.forward_progress)
        return ToolResult(content=[text("middle")])

    @tool(annotations=SAFE)
    async def top(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("starting")
        await ctx.execute_tool("middle", {}, on_progress=ctx.forward_progress)
        return ToolResult(content=[text("top")])

    _, records, _ = await run_session(
        [top, middle, reporting("leaf", 2)],
        [faux_tool_call("top", {}), faux_text("ok")], approver=approve_all)
    assert progress_records(records) == [
        ("1.0", "starting", None),
        ("1.0/0/0", "leaf 1/2", None), ("1.0/0", "leaf 1/2", "1.0/0/0"),
        ("1.0", "leaf 1/2", "1.0/0/0"),
        ("1.0/0/0", "leaf 2/2", None), ("1.0/0", "leaf 2/2", "1.0/0/0"),
        ("1.0", "leaf 2/2", "1.0/0/0"),
    ]
    check_log(records, closed=True)


async def test_a_host_call_hears_its_own_updates_and_what_it_forwards() -> None:
    heard: list[Any] = []

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("mine")
        await ctx.execute_tool("child", {}, on_progress=ctx.forward_progress)
        await ctx.execute_tool("child", {})  # not forwarded: the host call hears nothing of it
        return ToolResult(content=[text("done")])

    async with Session.open(MemoryStore(), tools=[parent, reporting("child", 1)],
                            approver=approve_all) as session:
        outcome = await session.call_tool("parent", {}, on_progress=heard.append)
    assert not outcome.is_error
    assert [seen(u) for u in heard] == [("h0", "mine", None), ("h0", "child 1/1", "h0/0")]


# -- what a listener gets, and what it may not do ---------------------------------------------


async def test_a_listener_gets_a_copy_and_changing_it_changes_nothing_in_the_log() -> None:
    def spoil(update: ToolProgress) -> None:
        update.data["step"] = "spoiled"

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("child", {}, on_progress=spoil)
        return ToolResult(content=[text("done")])

    async with Session.open(MemoryStore(), tools=[parent, reporting("child", 2)],
                            approver=approve_all) as session:
        session.on_progress(spoil)
        await session.call_tool("parent", {})
        records = session.records
    assert [u.data for u in events_of(records, ToolProgress)] == [{"step": 1}, {"step": 2}]


async def test_a_parents_listener_that_raises_fails_the_parent_not_the_child() -> None:
    calls: list[str | None] = []

    def broken(update: ToolProgress) -> None:
        calls.append(update.message)
        raise KeyError("the parent's own bug")

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("child", {}, on_progress=broken)
        return ToolResult(content=[text("never")])

    state, records, _ = await run_session(
        [parent, reporting("child", 3)],
        [faux_tool_call("parent", {}), faux_text("ok")], approver=approve_all)
    assert calls == ["child 1/3"]  # it heard nothing after it raised
    assert isinstance(state.calls["1.0/0"].terminal, ToolCallCompleted)
    assert state.calls["1.0/0"].progress_count == 3
    failed = state.calls["1.0"].terminal
    assert isinstance(failed, ToolCallFailed) and failed.kind == "raised"
    assert failed.error is not None and failed.error.type == "KeyError"
    check_log(records, closed=True)


async def test_a_host_calls_listener_that_raises_is_raised_once_the_call_has_ended() -> None:
    def broken(update: ToolProgress) -> None:
        raise ValueError("the host's bug")

    async with Session.open(MemoryStore(), tools=[reporting("child", 2)],
                            approver=approve_all) as session:
        with pytest.raises(ValueError, match="the host's bug"):
            await session.call_tool("child", {}, on_progress=broken)
        view = session.calls["h0"]
        assert isinstance(view.terminal, ToolCallCompleted) and view.progress_count == 2


async def test_a_session_handler_that_raises_is_removed_and_logged_and_the_tool_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    broken_calls: list[str] = []
    good: list[str] = []

    def broken(update: ToolProgress) -> None:
        broken_calls.append(update.call_id)
        raise RuntimeError("the host's handler failed")

    async with Session.open(MemoryStore(), tools=[reporting("child", 3)],
                            approver=approve_all) as session:
        session.on_progress(broken)
        session.on_progress(lambda update: good.append(update.call_id))
        with caplog.at_level(logging.ERROR, logger="engine.progress"):
            outcome = await session.call_tool("child", {})
    assert not outcome.is_error
    assert broken_calls == ["h0"] and good == ["h0", "h0", "h0"]
    assert [r.name for r in caplog.records] == ["engine.progress"]
    assert "removed" in caplog.records[0].getMessage()


async def test_a_listener_that_is_not_a_plain_function_is_refused_before_anything_is_recorded(
        ) -> None:
    async def later(update: ToolProgress) -> None:
        pass

    refusals: list[str] = []

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        for given in ("x", later):
            try:
                await ctx.execute_tool("child", {}, on_progress=given)
            except TypeError as exc:
                refusals.append(str(exc))
        return ToolResult(content=[text("done")])

    async with Session.open(MemoryStore(), tools=[parent, reporting("child", 1)],
                            approver=approve_all) as session:
        before = len(session.records)
        with pytest.raises(TypeError, match="plain function"):
            session.on_progress(later)
        with pytest.raises(TypeError, match="plain function"):
            await session.call_tool("child", {}, on_progress=later)
        assert len(session.records) == before  # nothing was recorded
        await session.call_tool("parent", {})
        assert session.state.children("h0") == ()  # neither request was recorded
    assert "not str" in refusals[0] and "memory channel" in refusals[1]


async def test_a_lambda_that_returns_a_coroutine_is_the_listeners_error() -> None:
    async def later(update: ToolProgress) -> None:
        pass

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("child", {}, on_progress=lambda update: later(update))
        return ToolResult(content=[text("never")])

    async with Session.open(MemoryStore(), tools=[parent, reporting("child", 1)],
                            approver=approve_all) as session:
        outcome = await session.call_tool("parent", {})
        assert outcome.is_error and "synchronously" in outcome.result.text
        assert isinstance(session.calls["h0/0"].terminal, ToolCallCompleted)


async def test_only_a_nested_calls_update_may_be_forwarded() -> None:
    problems: list[str] = []

    @tool(annotations=SAFE)
    async def forger(call: Any, ctx: Any) -> ToolResult:
        for update in (ToolProgress(call_id="h9", message="not mine"),
                       ToolProgress(call_id=ctx.call_id, message="my own"),
                       ToolProgress(call_id=f"{ctx.call_id}/7", message="never made")):
            try:
                ctx.forward_progress(update)
            except ValueError as exc:
                problems.append(str(exc))
        with pytest.raises(TypeError, match="ToolProgress"):
            ctx.forward_progress("an update")
        return ToolResult(content=[text("done")])

    async with Session.open(MemoryStore(), tools=[forger], approver=approve_all) as session:
        await session.call_tool("forger", {})
        assert session.calls["h0"].progress_count == 0
    assert len(problems) == 3 and all("nested calls only" in p for p in problems)


async def test_progress_of_a_nested_call_answered_from_the_log_is_not_heard_again() -> None:
    """A body run again after a restart gets a recorded child's outcome from the log: that
    child does not run, so nothing is reported again (its parent forwarded what it heard in
    the first run, and the log keeps it)."""
    from engine.testing.tools import BodyRuns

    runs = BodyRuns()
    heard: list[Any] = []
    gate = trio.Event()

    @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=True))
    async def parent(call: Any, ctx: Any) -> ToolResult:
        runs.record(call)
        await ctx.execute_tool("child", {}, on_progress=heard.append)
        if runs[call.call_id] == 1:
            gate.set()
            await trio.sleep_forever()  # the first process stops here
        return ToolResult(content=[text("done")])

    store = MemoryStore()
    tools = [parent, reporting("child", 2)]
    async with trio.open_nursery() as nursery:
        async with Session.open(store, tools=tools, approver=approve_all,
                                session_id=SESSION_ID, create=True) as session:
            async def first() -> None:
                with pytest.raises(RuntimeError):
                    await session.call_tool("parent", {})
            nursery.start_soon(first)
            await gate.wait()
    assert len(heard) == 2
    async with Session.open(store, tools=tools, approver=approve_all,
                            session_id=SESSION_ID) as session:
        outcome = await session.resume_call("h0")
    assert not outcome.is_error and len(heard) == 2


async def test_progress_and_total_are_finite_numbers_recorded_and_forwarded_as_given() -> None:
    refused: list[str] = []

    @tool(annotations=SAFE)
    async def child(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("half", progress=1, total=2.0)
        for bad in ({"progress": True}, {"progress": "1"}, {"total": float("nan")},
                    {"progress": float("inf")}):
            try:
                ctx.report_progress("bad", **bad)
            except (TypeError, ValueError) as exc:
                refused.append(f"{type(exc).__name__}: {exc}")
        return ToolResult(content=[text("done")])

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("child", {}, on_progress=ctx.forward_progress)
        return ToolResult(content=[text("done")])

    async with Session.open(MemoryStore(), tools=[parent, child],
                            approver=approve_all) as session:
        await session.call_tool("parent", {})
        updates = events_of(session.records, ToolProgress)
    assert [(u.call_id, u.progress, u.total) for u in updates] == [
        ("h0/0", 1, 2.0), ("h0", 1, 2.0)]
    assert refused == [
        "TypeError: report_progress(progress=...) takes a number (an int or a float), not bool",
        "TypeError: report_progress(progress=...) takes a number (an int or a float), not str",
        "ValueError: report_progress(total=...) takes a finite number, not nan",
        "ValueError: report_progress(progress=...) takes a finite number, not inf"]


# -- the log ----------------------------------------------------------------------------------


def test_an_update_without_a_source_is_the_line_an_older_toolledger_wrote() -> None:
    own = Record(session_id="s", seq=1, time=0.0,
                 event=ToolProgress(call_id="1.0", message="m", data={"n": 1}))
    assert encode_record(own)["data"] == {"call_id": "1.0", "message": "m", "data": {"n": 1}}
    forwarded = Record(session_id="s", seq=2, time=0.0,
                       event=ToolProgress(call_id="1.0", message="m", source="1.0/0"))
    assert encode_record(forwarded)["data"]["source"] == "1.0/0"
    assert decode_record(encode_record(forwarded)) == forwarded
    assert decode_record(encode_record(own)).event.source is None


async def test_a_log_whose_forwarded_update_names_no_nested_call_is_refused() -> None:
    _, records, _ = await run_session(
        [reporting("child", 1)], [faux_tool_call("child", {}), faux_text("ok")],
        approver=approve_all)
    at = next(i for i, r in enumerate(records) if isinstance(r.event, ToolProgress))
    for source in ("1.1", "1.0/0", "1.0"):
        forged = list(records)
        event = forged[at].event
        forged[at] = Record(session_id=SESSION_ID, seq=forged[at].seq, time=forged[at].time,
                            event=ToolProgress(call_id=event.call_id, message=event.message,
                                               source=source))
        with pytest.raises(LifecycleError, match="not a call nested under it"):
            fold(forged)


# -- invariants ---------------------------------------------------------------------------------


def tree_tools(shape: dict[str, Any], parent_heard: dict[str, list[Any]]) -> list[Any]:
    """The tools of a drawn tree: each node reports its updates, then calls its children in
    order, forwarding the updates of those marked so, and records what it heard."""
    specs = []
    for name, node in shape.items():
        def make(name: str, node: dict[str, Any]) -> Any:
            @tool(name=name, annotations=SAFE)
            async def body(call: Any, ctx: Any) -> ToolResult:
                for step in range(node["reports"]):
                    ctx.report_progress(f"{name} {step}")
                    await trio.lowlevel.checkpoint()

                def hear(update: ToolProgress) -> None:
                    parent_heard.setdefault(call.call_id, []).append(seen(update))

                def hear_and_forward(update: ToolProgress) -> None:
                    hear(update)
                    ctx.forward_progress(update)

                for child, forward in node["children"]:
                    await ctx.execute_tool(child, {},
                                           on_progress=hear_and_forward if forward else hear)
                return ToolResult(content=[text(name)])
            return body
        specs.append(make(name, node))
    return specs


@st.composite
def call_trees(draw: st.DrawFn) -> dict[str, Any]:
    """Tools t0..tn where t_i may call later ones (so the tree is finite), each reporting a few
    updates and forwarding some children's."""
    size = draw(st.integers(1, 5))
    shape: dict[str, Any] = {}
    for index in range(size):
        later = [f"t{j}" for j in range(index + 1, size)]
        children = draw(st.lists(st.tuples(st.sampled_from(later), st.booleans()),
                                 max_size=2)) if later else []
        shape[f"t{index}"] = {"reports": draw(st.integers(0, 3)), "children": children}
    return shape


@PROPERTY
@given(shape=call_trees(), parallel=st.booleans())
def test_every_update_reaches_the_host_in_log_order_and_each_parent_its_childs(
        shape: dict[str, Any], parallel: bool) -> None:
    async def main() -> None:
        parent_heard: dict[str, list[Any]] = {}
        host_heard: list[Any] = []
        store = MemoryStore()
        calls = [faux_tool_call("t0", {})] * (2 if parallel else 1)
        model = FauxModel([calls if parallel else calls[0], faux_text("done")])
        async with Session.open(store, model=model, tools=tree_tools(shape, parent_heard),
                                approver=approve_all, session_id=SESSION_ID, create=True,
                                clock=counting_clock()) as session:
            session.on_progress(lambda update: host_heard.append(seen(update)))
            await session.prompt("go")
        records = await store.read(SESSION_ID)
        check_log(records, closed=True)
        updates = progress_records(records)
        assert host_heard == updates  # every update, in the log's order
        state = fold(records)
        for call_id, view in state.calls.items():  # each parent heard exactly its children's
            expected = [u for u in updates if state.calls[u[0]].parent_id == call_id]
            assert parent_heard.get(call_id, []) == expected
            assert view.progress_count == sum(1 for u in updates if u[0] == call_id)
        open_calls: set[str] = set()
        for record in records:  # every update's call runs when it is written
            event = record.event
            if type(event).__name__ == "ToolExecutionStarted":
                open_calls.add(event.call_id)
            elif isinstance(event, (ToolCallCompleted, ToolCallFailed)):
                open_calls.discard(event.call_id)
            elif isinstance(event, ToolProgress):
                assert event.call_id in open_calls
                if event.source is not None:  # from a call below it, which runs too
                    assert event.source.startswith(event.call_id + "/")
                    assert event.source in open_calls

    trio.run(main)
