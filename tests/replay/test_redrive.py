"""Re-drive replay: run a logged session again, answered from its log, and compare.

The corpus logs (checked in, written by an older toolledger) replay without divergence with
recorded tools, and with their real tools (a fresh demo's log with the demo's, which stream
now); a changed tool, policy or handler shows up at
exactly the calls it changes; random scripted sessions replay exactly, and so does every
prefix of their logs that a stopped process could leave; and the report says so.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from conftest import events_of
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from engine import (
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    Block,
    PolicyRules,
    ToolCallDraft,
    ToolResult,
    approve_all,
    deny_all,
    text,
    tool,
)
from engine.demo import demo_tools, prepare_workspace, run_demo
from engine.models import faux_text, faux_tool_call
from engine.replay import Divergence, ReplayError, ReplayReport, redrive
from events import MemoryStore, Record
from events.modelturns import ModelRequested, ModelResponded
from events.stores import read_jsonl
from events.types import (
    ApprovalResolved,
    AssistantMessage,
    PolicyDecided,
    SessionSettings,
    SessionStarted,
    ToolCallRequested,
    ToolProgress,
    UserMessage,
)
from tests.corpus.scenarios import SCENARIOS, grant_docs_only
from tests.replay.replaying import (
    CORPUS,
    CORPUS_LOGS,
    PROPERTY,
    V2_LOGS,
    corpus,
    explain,
    record_session,
    same_calls,
    virtual,
)
from tests.strategies import SessionScript, counting_clock, run_script, session_scripts


# -- the corpus ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [*(CORPUS / f"{name}.jsonl" for name in CORPUS_LOGS),
                                  *V2_LOGS], ids=lambda p: f"{p.parent.name}/{p.stem}")
async def test_a_corpus_log_replays_with_recorded_tools_without_divergence(path: Path) -> None:
    records = read_jsonl(path)
    report = await redrive(records)
    assert report.ok, explain(report)
    assert report.calls == len({getattr(r.event, "call_id", None) for r in records} - {None})
    # the replay records the settings it ran with, which these logs did not record
    first = report.replayed[0].event
    assert isinstance(first, SessionStarted) and first.settings == SessionSettings(
        max_turns=max_turns_of(records), max_depth=8 if "v1" in str(path) else 2,
        max_argument_bytes=1_000_000, max_result_bytes=4_000_000,
        max_artifact_bytes=4_000_000)  # kept no artifacts, and its replay neither
    replayed = [attrs.evolve(first, settings=None), *report.replayed[1:]]
    # the replay records its model turns, which these logs were written before
    assert [r.event for r in records if not hasattr(r.event, "call_id")] == [
        r if isinstance(r, SessionStarted) else r.event for r in replayed
        if isinstance(r, SessionStarted) or not hasattr(r.event, "call_id")
        and not isinstance(r.event, (ModelRequested, ModelResponded))
    ]


def max_turns_of(records: Sequence[Record]) -> int:
    """The most assistant messages one prompt of the log has."""
    counts = [0]
    for record in records:
        if isinstance(record.event, UserMessage):
            counts.append(0)
        elif isinstance(record.event, AssistantMessage):
            counts[-1] += 1
    return max(counts)


def test_the_scenarios_approver_answers_as_the_corpus_logs_say() -> None:
    """The approver of tests/corpus/scenarios.py, asked again, gives the recorded answers:
    the replay's recorded answers are the ones it would give today."""
    for name in ("reference", "mixed"):
        records = corpus(name)
        requests = {r.event.call_id: r.event for r in records
                    if isinstance(r.event, ToolCallRequested)}
        for resolved in (r.event for r in records if isinstance(r.event, ApprovalResolved)):
            request = requests[resolved.call_id]
            answer = trio.run(grant_docs_only, ApprovalRequest(
                call_id=request.call_id, name=request.name, arguments=request.arguments,
                reason="", annotations=Annotations(), origin=request.origin,
                parent_id=request.parent_id))
            assert (answer.granted, answer.scope, answer.reason) == (
                resolved.granted, resolved.scope, resolved.reason)


@pytest.mark.parametrize("name", ["reference", "mixed"])
async def test_a_scenario_log_replays_with_its_live_tools_without_divergence(name: str) -> None:
    scenario = SCENARIOS[name]
    report = await redrive(corpus(name), tools=scenario.tools, tool_mode="live",
                           unverified=True, handlers=scenario.handlers)
    assert report.ok, explain(report)
    assert report.tool_mode == "live"


@pytest.mark.parametrize("approver", [approve_all, deny_all])
async def test_a_demo_log_replays_with_the_demo_tools_without_divergence(
    approver: Any, tmp_path: Path
) -> None:
    # a fresh one: the tools stream their commands' output, which an older demo's log lacks
    run = await run_demo(tmp_path / "recorded", approver)
    streamed = events_of(run.records, ToolProgress)
    assert streamed and all(u.content or u.source for u in streamed)
    workspace = prepare_workspace(tmp_path / "workspace")
    report = await redrive(list(run.records), tools=demo_tools(workspace), tool_mode="live",
                           unverified=True)
    assert report.ok, explain(report)
    if approver is approve_all:  # the live write_file really wrote the fix
        assert "len(values)\n" in (workspace / "calc.py").read_text()


# -- what a change shows ---------------------------------------------------------------------


async def test_a_tool_that_returns_something_else_diverges_at_exactly_its_call() -> None:
    async def gone(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("gone")])

    scenario = SCENARIOS["mixed"]
    tools = [attrs.evolve(t, execute=gone) if t.name == "delete_file" else t
             for t in scenario.tools]
    report = await redrive(corpus("mixed"), tools=tools, tool_mode="live", unverified=True,
                           handlers=scenario.handlers)
    assert [(d.scope, d.subject) for d in report.divergences] == [
        ("call", "2.0"), ("transcript", "result of 2.0")], explain(report)
    call, entry = report.divergences
    assert (call.kind, call.index, call.event, call.field) == (
        "changed", 5, "tool_call_completed", "result.content[0].text")
    assert (call.recorded, call.now, call.tool) == ("deleted docs/a.md", "gone", "delete_file")
    assert (entry.recorded, entry.now) == ("deleted docs/a.md", "gone")


async def test_a_tool_that_now_fails_diverges_at_its_terminal_event() -> None:
    async def fine(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("fine")])

    scenario = SCENARIOS["mixed"]
    tools = [attrs.evolve(t, execute=fine) if t.name == "explode" else t for t in scenario.tools]
    report = await redrive(corpus("mixed"), tools=tools, tool_mode="live", unverified=True,
                           handlers=scenario.handlers)
    calls = report.by_scope("call")
    assert [(d.subject, d.kind, d.index) for d in calls] == [("1.3", "event", 3)]
    assert calls[0].recorded["type"] == "tool_call_failed"
    assert calls[0].now["type"] == "tool_call_completed"
    assert calls[0].recorded["data"]["error"] == {"type": "RuntimeError", "message": "boom"}


async def test_a_policy_that_now_denies_shows_up_with_recorded_tools() -> None:
    report = await redrive(corpus("mixed"), rules=PolicyRules(deny=["delete_file"]))
    calls = {d.subject: d for d in report.by_scope("call")}
    assert sorted(calls) == ["2.0", "2.2", "3.0"], explain(report)
    assert all(d.index == 1 and d.event == "policy_decided" for d in calls.values())
    assert (calls["2.0"].field, calls["2.0"].recorded, calls["2.0"].now) == ("decision", "ask", "deny")
    assert (calls["3.0"].field, calls["3.0"].now) == ("reason", "denied by the rule 'delete_file'")
    assert {d.subject for d in report.by_scope("transcript")} == {
        "result of 2.0", "result of 2.2", "result of 3.0"}
    assert not report.by_scope("tool") and not report.by_scope("session")


async def test_a_handler_that_now_blocks_shows_up() -> None:
    def no_squares(draft: ToolCallDraft) -> Block | None:
        return Block("no squares today") if draft.name == "square" else None

    report = await redrive(corpus("mixed"), handlers=[*SCENARIOS["mixed"].handlers, no_squares])
    calls = {d.subject: d for d in report.by_scope("call")}
    assert sorted(calls) == ["1.0", "1.1"], explain(report)
    # 1.1 was rewritten by no_tmp first, as recorded; the block comes where the policy did
    assert (calls["1.0"].index, calls["1.1"].index) == (1, 2)
    assert calls["1.1"].now == {"type": "tool_call_blocked", "data": {
        "reason": "no squares today", "by": "test_a_handler_that_now_blocks_shows_up.<locals>."
        "no_squares", "result": {"content": [{"text": "square was blocked: no squares today",
                                              "type": "text"}],
                                 "structured_content": None, "is_error": True}}}


async def test_without_the_recorded_handlers_their_verdicts_are_missed() -> None:
    """``handlers=[]`` is today's (empty) set: the recorded rewrite and block do not happen."""
    report = await redrive(corpus("mixed"), handlers=[])
    calls = {d.subject: d for d in report.by_scope("call")}
    assert sorted(calls) == ["1.1", "2.1"], explain(report)
    assert calls["1.1"].recorded["type"] == "tool_call_rewritten"
    assert calls["2.1"].recorded["type"] == "tool_call_blocked"


async def test_a_changed_declaration_is_reported_and_judged_again_with_recorded_tools() -> None:
    square = next(t for t in SCENARIOS["mixed"].tools if t.name == "square")
    dangerous = attrs.evolve(square, annotations=Annotations(destructive=True))
    report = await redrive(corpus("mixed"), tools=[*SCENARIOS["mixed"].tools[:4], dangerous])
    tools = {d.subject: d for d in report.by_scope("tool")}
    assert tools["square"].kind == "changed"
    assert tools["square"].field == "annotations.read_only"
    assert tools["explode"].kind == "not_given"  # left out: replayed from its declaration
    calls = {d.subject: d for d in report.by_scope("call")}
    # the squares now ask; the replay approver refuses what did not ask then
    assert sorted(calls) == ["1.0", "1.1"], explain(report)
    assert (calls["1.0"].field, calls["1.0"].recorded, calls["1.0"].now) == (
        "decision", "allow", "ask")


async def test_a_tool_that_cannot_be_registered_now_is_reported_not_raised() -> None:
    records = corpus("reference")
    broken = [
        attrs.evolve(r, event=attrs.evolve(r.event, spec=attrs.evolve(
            r.event.spec, input_schema={"type": "object", "prefixItems": []})))
        if getattr(getattr(r.event, "spec", None), "name", None) == "run_checks" else r
        for r in records
    ]
    report = await redrive(broken)
    tool_errors = [d for d in report.by_scope("tool") if d.kind == "error"]
    assert [d.subject for d in tool_errors] == ["run_checks"]
    assert "prefixItems" in tool_errors[0].now
    # the nested call is unavailable now; its parent's recorded body goes on as recorded
    assert [(d.subject, d.index, d.kind) for d in report.by_scope("call")] == [
        ("1.0/0", 1, "event")], explain(report)
    assert report.by_scope("call")[0].now["data"]["kind"] == "unavailable"


async def test_live_mode_without_a_tool_of_the_log_is_an_error_naming_it() -> None:
    with pytest.raises(ReplayError, match="failing_tests"):
        await redrive(corpus("reference"), tools=SCENARIOS["reference"].tools[:2],
                      tool_mode="live", unverified=True)


async def test_an_inconsistent_log_is_refused_naming_the_record() -> None:
    records = corpus("mixed")
    without_answer = [r for r in records if not (isinstance(r.event, ApprovalResolved)
                                                 and r.event.call_id == "2.0")]
    renumbered = [attrs.evolve(r, seq=seq) for seq, r in enumerate(without_answer, start=1)]
    with pytest.raises(ReplayError, match="inconsistent.*record seq"):
        await redrive(renumbered)


async def test_records_of_two_sessions_are_refused() -> None:
    with pytest.raises(ReplayError, match="2 sessions"):
        await redrive([*corpus("reference"), *corpus("mixed")])


# -- random sessions -------------------------------------------------------------------------


@PROPERTY
@given(session_scripts())
def test_a_random_session_replays_exactly_with_recorded_tools(script: SessionScript) -> None:
    run = virtual(run_script, script, MemoryStore())
    harness = script.build()  # today's handlers: the same specs, built anew

    async def again(**setup: Any) -> ReplayReport:
        return await redrive(run.stored_records, clock=counting_clock(), **setup)

    for setup in ({}, {"handlers": harness.call_handlers,
                       "result_handlers": harness.result_handlers,
                       "rules": script.rules, "max_depth": script.max_depth}):
        report: ReplayReport = virtual(lambda: again(**setup))
        assert report.ok, explain(report)
        same_calls(run.stored_records, report.replayed)
        replayed_transcript = [r.event for r in report.replayed
                               if type(r.event).__name__ in ("UserMessage", "AssistantMessage")]
        assert replayed_transcript == [r.event for r in run.stored_records
                                       if type(r.event).__name__ in ("UserMessage",
                                                                     "AssistantMessage")]


class BatchEnds(MemoryStore):
    """A store that remembers where each write ended: where a stopped process leaves a log."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[int] = []

    async def append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        await super().append(session_id, records, expected_seq)
        self.ends.append(records[-1].seq)


@settings(PROPERTY, max_examples=60)
@given(session_scripts(), st.data())
def test_a_log_cut_where_a_write_ended_replays_without_divergence(
    script: SessionScript, data: st.DataObject
) -> None:
    """A process that stopped (or a session that paused) leaves a prefix of the log; the
    replay carries the last batch further, and what the log holds is what it did."""
    store = BatchEnds()
    run = virtual(run_script, script, store)
    cut = data.draw(st.sampled_from(store.ends), label="cut after record")
    prefix = run.stored_records[:cut]

    async def again() -> ReplayReport:
        with trio.fail_after(1_000_000):  # virtual seconds: a replay that hangs fails here
            return await redrive(prefix, clock=counting_clock())

    report: ReplayReport = virtual(again)
    assert report.ok, explain(report)


async def test_a_session_grant_between_siblings_replays_when_a_refused_sequential_tool_was_asked_beside_them(
) -> None:
    """A ``sequential`` tool the gate refused never runs, so its siblings run at once; the
    second sibling's nested call got a session-wide grant the first's then used. The replay
    runs them at once too, and the first's nested call waits for that grant again."""
    second_asked = trio.Event()

    @tool(input_schema={"type": "object"})
    async def shaped(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("shaped")])

    @tool(input_schema={"type": "object"}, execution_mode="sequential")
    async def in_order(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("never runs")])

    @tool(input_schema={"type": "object"})
    async def first(call: Any, ctx: Any) -> ToolResult:
        await second_asked.wait()  # so the grant comes from the second's nested call
        return ToolResult(content=[text((await ctx.execute_tool("shaped", {})).result.content[0].text)])

    @tool(input_schema={"type": "object"})
    async def second(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("shaped", {})
        second_asked.set()
        return ToolResult(content=[text(outcome.result.content[0].text)])

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        if request.name == "in_order":
            return ApprovalAnswer(granted=False)
        return ApprovalAnswer(granted=True, scope="session" if request.name == "shaped" else "once")

    records = await record_session(
        [shaped, in_order, first, second],
        [[faux_tool_call("in_order", {}), faux_tool_call("first", {}),
          faux_tool_call("second", {})], faux_text("done")],
        approver=approver)
    decided = {r.event.call_id: r.event.decision for r in records
               if isinstance(r.event, PolicyDecided)}
    assert decided["1.2/0"] == "ask" and decided["1.1/0"] == "allow"  # the grant, used
    # trio picks either sibling first at random: every replay must wait for the grant
    for _ in range(20):
        report = await redrive(records)
        assert report.ok, explain(report)


# -- the report --------------------------------------------------------------------------------


async def test_the_report_reads_plainly_in_a_pipe_and_as_json() -> None:
    report = await redrive(corpus("mixed"), rules=PolicyRules(deny=["delete_file"]))
    out = io.StringIO()
    Console(file=out, width=100).print(report)
    printed = out.getvalue()
    assert "\x1b[" not in printed
    assert "call 2.0 (delete_file), event 1 policy_decided" in printed
    assert 'recorded: "ask"' in printed and 'now:      "deny"' in printed
    data = json.loads(json.dumps(report.to_json()))
    assert data["ok"] is False and data["session_id"] == "mixed"
    assert {d["subject"] for d in data["divergences"] if d["scope"] == "call"} == {
        "2.0", "2.2", "3.0"}
    first = Divergence(**data["divergences"][0])
    assert first == report.divergences[0]
