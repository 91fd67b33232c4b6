"""Re-drive replay: run a logged session again, answered from its log, and compare.

The corpus logs (checked in, written by an older toolledger) replay without divergence with
recorded tools, and with their real tools; a changed tool, policy or handler shows up at
exactly the calls it changes; random scripted sessions replay exactly, and so does every
prefix of their logs that a stopped process could leave; sessions that paused, were cancelled
by the host, or whose concurrent calls share a session grant replay as recorded. Then the
``toolledger replay`` command.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rich.console import Console
from trio.testing import MockClock

from engine import (
    LATER,
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    Block,
    PolicyRules,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolSpec,
    approve_all,
    text,
    tool,
)
from engine.cli import build_parser, main
from engine.cli import replay as replay_cli
from engine.demo import demo_tools, prepare_workspace
from engine.models import FauxModel, FauxStep, faux_text, faux_tool_call
from engine.replay import Divergence, ReplayError, ReplayReport, ReplaySetup, redrive
from events import MemoryStore, Record
from events.modelturns import ModelRequested, ModelResponded
from events.stores import read_jsonl
from events.types import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    PolicyDecided,
    SessionSettings,
    SessionStarted,
    ToolCallRequested,
    UserMessage,
)
from tests.corpus.scenarios import SCENARIOS, grant_docs_only
from tests.strategies import SessionScript, counting_clock, run_script, session_scripts

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "v1"
CORPUS_LOGS = ["demo-approve-all", "demo-approve-none", "reference", "mixed"]
#: logs of version 2: failures that name a limit, a type or a path, decisions by host rules
V2_LOGS = sorted((ROOT / "tests" / "corpus" / "v2").glob("*.jsonl"))
SAFE = Annotations(read_only=True, open_world=False)

PROPERTY = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow],
                    phases=[phase for phase in Phase if phase is not Phase.explain])


def corpus(name: str) -> list[Record]:
    """The records of a checked-in corpus log (one session each)."""
    return read_jsonl(CORPUS / f"{name}.jsonl")


def explain(report: ReplayReport) -> str:
    """The report in words, for assertion messages."""
    return "\n".join([*(d.describe() for d in report.divergences), *report.notes])


def virtual(function: Callable[..., Any], *args: Any) -> Any:
    """Run ``function(*args)`` in a fresh trio loop on virtual time."""
    return trio.run(function, *args, clock=MockClock(autojump_threshold=0))


async def record_session(
    tools: Sequence[ToolSpec],
    script: Sequence[FauxStep],
    *,
    approver: Any,
    drive: Callable[[Session], Any] | None = None,
    rules: PolicyRules = PolicyRules(),
) -> list[Record]:
    """Run a scripted session (one prompt, or what ``drive`` does) and return its log."""
    store = MemoryStore()
    async with Session.open(store, model=FauxModel(script), tools=tools, approver=approver,
                            rules=rules, session_id="s",
                            create=True, clock=counting_clock()) as session:
        if drive is None:
            await session.prompt("go")
        else:
            await drive(session)
    return await store.read("s")


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
        max_argument_bytes=1_000_000, max_result_bytes=4_000_000)
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


@pytest.mark.parametrize("name", ["demo-approve-all", "demo-approve-none"])
async def test_a_demo_log_replays_with_the_demo_tools_without_divergence(
    name: str, tmp_path: Path
) -> None:
    workspace = prepare_workspace(tmp_path / "workspace")
    report = await redrive(corpus(name), tools=demo_tools(workspace), tool_mode="live",
                           unverified=True)
    assert report.ok, explain(report)
    if name == "demo-approve-all":  # the live write_file really wrote the fix
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


def same_calls(recorded: Sequence[Record], replayed: Sequence[Record]) -> None:
    """Every call's own events, in order, are the same in both logs (tracebacks aside)."""
    def by_call(records: Sequence[Record]) -> dict[str, list[Any]]:
        calls: dict[str, list[Any]] = {}
        for record in records:
            event = record.event
            call_id = getattr(event, "call_id", None)
            if call_id is not None:
                error = getattr(event, "error", None)
                if error is not None:
                    event = attrs.evolve(event, error=attrs.evolve(error, traceback=""))
                calls.setdefault(call_id, []).append(event)
        return calls

    assert by_call(recorded) == by_call(replayed)


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


# -- pauses, cancellations, concurrency --------------------------------------------------------


@tool(annotations=Annotations(destructive=True))
async def wipe(call: Any, ctx: Any) -> ToolResult:
    """Needs approval."""
    return ToolResult(content=[text("wiped")])


@tool(annotations=SAFE)
async def slow(call: Any, ctx: Any) -> ToolResult:
    """Takes its time."""
    ctx.report_progress("starting")
    await trio.sleep(100)
    return ToolResult(content=[text("slow done")])


@tool(annotations=SAFE)
async def impatient(call: Any, ctx: Any) -> ToolResult:
    """Gives up on ``slow`` after a second (its own cancel scope), then wipes."""
    with trio.move_on_after(1):
        await ctx.execute_tool("slow", {})
    wiped = await ctx.execute_tool("wipe", {})
    return ToolResult(content=[text(f"gave up; {wiped.result.text}")])


@tool(annotations=SAFE)
async def nest(call: Any, ctx: Any) -> ToolResult:
    """Calls ``slow``."""
    await ctx.execute_tool("slow", {})
    return ToolResult(content=[text("nest done")])


@tool(annotations=SAFE, timeout=3)
async def hurried(call: Any, ctx: Any) -> ToolResult:
    """Times out while ``slow`` runs under it."""
    await ctx.execute_tool("slow", {})
    return ToolResult(content=[text("never")])


@tool(annotations=SAFE)
async def wipe_twice(call: Any, ctx: Any) -> ToolResult:
    """Two nested wipes."""
    first = await ctx.execute_tool("wipe", {})
    second = await ctx.execute_tool("wipe", {})
    return ToolResult(content=[text(f"{first.result.text}, {second.result.text}")])


TOOLS = [wipe, slow, impatient, nest, hurried, wipe_twice]


async def replay_ok(records: Sequence[Record], **options: Any) -> ReplayReport:
    """Re-drive with recorded tools; it must match the log, call by call (and not hang: the
    virtual clock jumps to the deadline if nothing else can happen)."""
    with trio.fail_after(1_000_000):
        report = await redrive(records, clock=counting_clock(), **options)
    assert report.ok, explain(report)
    same_calls(records, report.replayed)
    return report


def test_a_session_that_paused_and_resumed_replays_as_recorded() -> None:
    async def later(request: ApprovalRequest) -> Any:
        return LATER

    async def drive(session: Session) -> None:
        result = await session.prompt("go")
        assert [p.call_id for p in result.pending] == ["1.0", "1.3", "1.2/0"]
        await session.resolve_approval("1.0", True)
        await session.resolve_approval("1.3", False, "session", reason="no more")
        result = await session.resume()
        assert [p.call_id for p in result.pending] == ["1.2/0"]
        await session.resolve_approval("1.2/0", True, "session")
        assert (await session.resume()).stop == "end_turn"
        await session.prompt("again")

    async def main() -> None:
        script: list[FauxStep] = [
            [faux_tool_call("wipe"), faux_tool_call("nest"), faux_tool_call("wipe_twice"),
             faux_tool_call("wipe")], faux_text("done"), faux_tool_call("wipe_twice"),
            faux_text("end")]
        records = await record_session(TOOLS, script, approver=later, drive=drive)
        await replay_ok(records)
        # a log that ends paused replays to the same pause
        pending = next(r.seq for r in records if isinstance(r.event, ApprovalResolved))
        report = await replay_ok(records[: pending - 1])
        assert any("paused" in note for note in report.notes)

    virtual(main)


def test_a_prompt_the_host_cancelled_replays_as_recorded() -> None:
    """While an approver waited, and while bodies ran; with a nested call its parent gave
    up on (its own cancel scope) and one its parent's timeout cancelled."""
    async def human(request: ApprovalRequest) -> bool:
        if request.call_id == "2.1":
            await trio.sleep_forever()  # nobody answers; the host gives up
        return True

    async def drive(session: Session) -> None:
        with trio.move_on_after(10):
            await session.prompt("go")
        await session.prompt("again")

    async def main() -> None:
        for second_batch in (["slow", "wipe", "nest"], ["slow", "nest", "hurried"]):
            script: list[FauxStep] = [
                [faux_tool_call("impatient"), faux_tool_call("hurried")],
                [faux_tool_call(name) for name in second_batch],
                faux_text("not reached"), faux_text("after")]
            records = await record_session(TOOLS, script, approver=human, drive=drive)
            reasons = [r.event.reason for r in records if type(r.event).__name__ ==
                       "ToolCallCancelled"]
            assert len(reasons) >= 4 and set(reasons) == {"cancelled"}
            await replay_ok(records)

    virtual(main)


def shared_grant_session(order: str, sequential_now: bool = False) -> Callable[[], Any]:
    """Two top-level calls run at once, each with a nested ``wipe`` that asks; the answers
    are "for the session". ``order`` says which comes first in the recording: the first
    call's grant, or the second call's policy decision (the grant was slow to come)."""
    first_done, first_asked, second_asked = trio.Event(), trio.Event(), trio.Event()

    @tool(annotations=SAFE)
    async def noop(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("nothing")])

    # replayed, nothing waits: the call that makes three nested calls first comes to its
    # wipe last, the other way round from the recording
    busy = "first" if order == "grant first" else "second"

    @tool(annotations=SAFE)
    async def first(call: Any, ctx: Any) -> ToolResult:
        for _ in range(3 if busy == "first" else 0):
            await ctx.execute_tool("noop", {})
        outcome = await ctx.execute_tool("wipe", {})
        first_done.set()
        return ToolResult(content=[text(outcome.result.text)])

    @tool(annotations=SAFE)
    async def second(call: Any, ctx: Any) -> ToolResult:
        await (first_done if order == "grant first" else first_asked).wait()
        for _ in range(3 if busy == "second" else 0):
            await ctx.execute_tool("noop", {})
        outcome = await ctx.execute_tool("wipe", {})
        return ToolResult(content=[text(outcome.result.text)])

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        if request.call_id.startswith("1.0/"):
            first_asked.set()
            if order == "decision first":  # second's wipe is judged before this answer
                await second_asked.wait()
        else:
            second_asked.set()
        return ApprovalAnswer(granted=True, scope="session")

    async def main() -> None:
        records = await record_session(
            [first, second, wipe, noop], [[faux_tool_call("first"), faux_tool_call("second")],
                                          faux_text("done")], approver=approver)
        asked = [r.event.call_id for r in records if isinstance(r.event, ApprovalRequested)]
        assert asked == (["1.0/3"] if order == "grant first" else ["1.0/0", "1.1/3"])
        if not sequential_now:
            await replay_ok(records)
            return
        # today the first tool is sequential: the batch runs one call after the other, so
        # the recorded order between them cannot be kept; the replay says so, and ends
        with trio.fail_after(1_000_000):
            report = await redrive(records, tools=[
                attrs.evolve(first, execution_mode="sequential"), second, wipe, noop])
        assert [(d.scope, d.subject, d.field) for d in report.by_scope("tool")] == [
            ("tool", "first", "execution_mode")]
        assert [d.subject for d in report.by_scope("call")] == ["1.1/3"], explain(report)

    return main


@pytest.mark.parametrize("order", ["grant first", "decision first"])
def test_concurrent_calls_that_share_a_session_grant_replay_in_the_recorded_order(
    order: str,
) -> None:
    """The recorded tools do not sleep, so without keeping the recorded order the other
    nested call would be judged before (or after) the session-wide grant."""
    virtual(shared_grant_session(order))


def test_a_batch_that_runs_one_call_after_another_now_is_not_held_to_the_recorded_order() -> None:
    virtual(shared_grant_session("decision first", sequential_now=True))


def test_values_that_were_not_json_are_rebuilt_so_the_engine_says_the_same() -> None:
    @tool(annotations=SAFE)
    async def sloppy(call: Any, ctx: Any) -> Any:
        kind = call.arguments.get("kind")
        if kind == "set":
            return ToolResult(structured_content={"items": [1, {2, 3}]})
        if kind == "nan":
            return ToolResult(structured_content={"x": float("nan")})
        if kind == "key":
            return ToolResult(structured_content={"a": {1: "one"}})
        if kind == "raw":
            return "just text"
        if kind == "none":
            return None
        outcome = await ctx.execute_tool("wipe", {"when": {"now"}})
        raise KeyError(f"no {outcome.is_error}")

    async def main() -> None:
        kinds = ["set", "nan", "key", "raw", "none", "nested"]
        records = await record_session(
            [sloppy, wipe], [[faux_tool_call("sloppy", {"kind": k}) for k in kinds],
                             faux_text("done")], approver=approve_all)
        failures = [r.event.kind for r in records if type(r.event).__name__ == "ToolCallFailed"]
        assert failures.count("not_serialisable") == 3 and failures.count("invalid_output") == 2
        assert "raised" in failures and "invalid_arguments" in failures
        await replay_ok(records)

    virtual(main)


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


# -- the command -----------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("toolledger: error: ") and "Traceback" not in err
    return lines[0]


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.parametrize("name", CORPUS_LOGS)
def test_replay_command_exits_0_when_nothing_diverged(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    status, out, err = cli(capsys, "replay", str(CORPUS / f"{name}.jsonl"))
    assert (status, err) == (0, "")
    assert "no divergence" in out


def test_replay_command_with_a_setup_that_denies_exits_1_and_prints_the_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, monkeypatch, "deny_deletes", (
        "from engine import PolicyRules\n"
        "from engine.replay import ReplaySetup\n"
        "setup = ReplaySetup(rules=PolicyRules(deny=['delete_file']))\n"))
    log = str(CORPUS / "mixed.jsonl")
    status, out, err = cli(capsys, "replay", log, "--setup", "deny_deletes:setup")
    assert (status, err) == (1, "")
    assert "call 2.0 (delete_file), event 1 policy_decided" in out
    status, out, _ = cli(capsys, "replay", log, "--setup", "deny_deletes:setup", "--json")
    data = json.loads(out)
    assert status == 1 and data["ok"] is False and data["tools"] == "recorded"
    [session] = data["sessions"]
    assert session["session_id"] == "mixed"
    assert {(d["subject"], d["field"]) for d in session["divergences"] if d["scope"] == "call"} \
        == {("2.0", "decision"), ("2.2", "decision"), ("3.0", "reason")}
    status, out, _ = cli(capsys, "replay", log, "--json")
    assert status == 0 and json.loads(out)["ok"] is True


def test_replay_command_runs_live_tools_from_a_setup_function(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, monkeypatch, "demo_live_setup", (
        "import tempfile\n"
        "from engine.demo import demo_tools, prepare_workspace\n"
        "from engine.replay import ReplaySetup\n"
        "def setup():\n"
        f"    workspace = prepare_workspace({str(tmp_path / 'ws')!r})\n"
        "    return ReplaySetup(tools=demo_tools(workspace))\n"))
    status, out, err = cli(capsys, "replay", str(CORPUS / "demo-approve-all.jsonl"),
                           "--tools", "live", "--setup", "demo_live_setup:setup", "--unverified")
    assert (status, err) == (0, ""), out
    assert "live tools" in out and "no divergence" in out
    assert (tmp_path / "ws" / "calc.py").read_text().count("len(values)\n") == 1


def test_replay_command_replays_every_session_of_a_log_or_the_one_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "two.jsonl"
    log.write_text((CORPUS / "reference.jsonl").read_text() + (CORPUS / "mixed.jsonl").read_text())
    status, out, _ = cli(capsys, "replay", str(log), "--json")
    assert status == 0
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["reference", "mixed"]
    status, out, _ = cli(capsys, "replay", str(log), "--session", "mix", "--json")
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["mixed"]


@pytest.mark.parametrize(("setup", "says"), [
    ("no_colon_here", "expected MODULE:NAME"),
    ("no_such_module_for_replay:setup", "no module named 'no_such_module_for_replay'"),
    ("bad_setups:missing", "has no 'missing'"),
    ("bad_setups:number", "is a int, not a ReplaySetup"),
    ("bad_setups:raises", "calling raises() failed: RuntimeError: no workspace"),
    ("broken_setup_module:setup", "importing broken_setup_module failed: SyntaxError"),
])
def test_a_bad_setup_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    setup: str, says: str,
) -> None:
    write_module(tmp_path, monkeypatch, "bad_setups", (
        "number = 3\n"
        "def raises():\n"
        "    raise RuntimeError('no workspace')\n"))
    write_module(tmp_path, monkeypatch, "broken_setup_module", "def (:\n")
    status, out, err = cli(capsys, "replay", str(CORPUS / "reference.jsonl"), "--setup", setup)
    assert status == 1 and out == ""
    line = one_line_error(err)
    assert "--setup" in line and says in line


def test_replay_command_user_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = cli(capsys, "replay", str(tmp_path / "missing.jsonl"))
    assert status == 1 and "missing.jsonl" in one_line_error(err)
    status, _, err = cli(capsys, "replay", str(CORPUS / "reference.jsonl"), "--tools", "live",
                         "--unverified")
    assert status == 1 and "--setup" in one_line_error(err)
    status, _, err = cli(capsys, "replay", str(CORPUS / "reference.jsonl"), "--session", "zzz")
    assert status == 1 and "zzz" in one_line_error(err)


def test_replay_command_help_reads_well(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = cli(capsys, "replay", "--help")
    assert status == 0
    for option in ("--session", "--tools", "--setup", "--json", "Exit status"):
        assert option in out


@pytest.mark.parametrize("terminal", [True, False])
def test_a_long_replay_shows_a_progress_bar_only_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    monkeypatch.setattr(replay_cli, "LONG_REPLAY_RECORDS", 10)
    args = build_parser().parse_args(["replay", str(CORPUS / "mixed.jsonl")])
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=60)
    assert args.run(args, console) == 0
    assert ("replaying" in out.getvalue()) is terminal
    assert "no divergence" in out.getvalue()
